import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createDockerLauncher } from '../../src/launch/docker/launcher.js';
import type { Launcher } from '../../src/launch/launcher.js';
import { createBerth } from '../../src/main.js';
import { runVerify } from '../../src/cli/verify.js';
import { cli, cliAsync } from '../helpers.js';
import { startWeakeningProxy } from '../fakes/weakening-docker-proxy.js';

/** `berth verify` on this host: every check holds, nothing is left behind — and a weakened engine is caught. */
const homes: string[] = [];
const home = () => {
  const h = fs.realpathSync(fs.mkdtempSync(join(os.tmpdir(), 'berth-verify-')));
  homes.push(h);
  return h;
};
afterAll(() => {
  for (const h of homes) fs.rmSync(h, { recursive: true, force: true });
});

const ATTACKS = [
  "neighbour's workspace",
  'protected path',
  'symlinked mount source',
  'network',
  'host environment',
  'privileges',
  'Docker socket',
  'gateway escapes',
  'model key',
];
const CONFINEMENT = [
  'runtime',
  'seccomp',
  'capabilities',
  'LSM label',
  'pid namespace',
  'IPC namespace',
  'pids limit',
  'memory limit',
  'engine settings',
];

describe('berth verify', () => {
  it('attacks a throw-away project on the real engine: every check holds, and it cleans up after itself', async () => {
    const berth = createBerth({ home: home(), logLevel: 'silent' });
    const checks = await runVerify(berth);
    expect(checks.map((c) => c.name)).toEqual([...ATTACKS, ...CONFINEMENT]);
    expect(checks.filter((c) => c.status !== 'ok')).toEqual([]);
    expect(berth.store.names()).toEqual([]);
    expect(await berth.runner.listContainers()).toEqual([]);
  });

  it('--runtime runsc: every check holds under gVisor, and the runtime check proves the sentry answered; runc says the host kernel', () => {
    const h = home();
    fs.writeFileSync(join(h, 'berth.yaml'), 'runtimes: [runc, runsc]\n');
    const gvisor = cli(['--home', h, 'verify', '--runtime', 'runsc']);
    expect(gvisor.code, gvisor.stdout).toBe(0);
    expect(gvisor.stdout).toMatch(/^ok\s+runtime\s+the planned runtime answers inside: runsc: gVisor's kernel \(4\.4\.0\)/m);
    const runc = cli(['--home', h, 'verify']);
    expect(runc.code, runc.stdout).toBe(0);
    expect(runc.stdout).toContain(`runc: the host's kernel (${os.release()})`);
    // A runtime berth.yaml does not offer is refused before anything starts.
    const refused = cli(['--home', home(), 'verify', '--runtime', 'runsc']);
    expect(refused.code).toBe(1);
    expect(refused.stdout).toContain('RUNTIME_MISSING');
  });

  it('"berth verify --json" as an operator runs it: ok, exit 0, every check named', () => {
    const r = cli(['--home', home(), 'verify', '--json']);
    expect(r.code, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout) as { ok: boolean; checks: Array<{ status: string }> };
    expect(out.ok).toBe(true);
    expect(out.checks).toHaveLength(ATTACKS.length + CONFINEMENT.length);
  });

  it('reports an escape when the engine gives containers a network (a weakened host)', async () => {
    const real = createDockerLauncher();
    // What a bad engine upgrade or a patched launcher could do: a network berth did not plan.
    const weakened: Launcher = { ...real, run: (plan, opts) => real.run({ ...plan, network: 'bridge' as 'none' }, opts) };
    const berth = createBerth({ home: home(), logLevel: 'silent', launcher: weakened });
    const checks = await runVerify(berth);
    expect(checks.find((c) => c.name === 'network')).toMatchObject({ status: 'escape', detail: expect.stringContaining('eth0') });
    // The engine's own record says so too: each container's inspect against the plan it was made from.
    expect(checks.find((c) => c.name === 'engine settings')).toMatchObject({
      status: 'escape',
      detail: expect.stringContaining('NetworkMode "bridge" (planned "none")'),
    });
    expect(checks.filter((c) => c.name !== 'network' && c.name !== 'engine settings').every((c) => c.status === 'ok')).toBe(true);
  });

  it('through a Docker-socket proxy that weakens every container create, verify exits non-zero and names each weakening (M3)', async () => {
    const h = home();
    await using proxy = await startWeakeningProxy(join(h, 'weak.sock'));
    // spawn, not spawnSync: the proxy answers from this process.
    const r = await cliAsync(['--home', h, 'verify', '--json'], { DOCKER_HOST: proxy.dockerHost });
    expect(proxy.weakened()).toBeGreaterThan(0);
    expect(r.code, r.stdout + r.stderr).not.toBe(0);
    const out = JSON.parse(r.stdout) as { ok: boolean; checks: Array<{ name: string; status: string; detail: string }> };
    expect(out.ok).toBe(false);
    const failed = Object.fromEntries(out.checks.filter((c) => c.status !== 'ok').map((c) => [c.name, c.detail]));
    expect(Object.keys(failed)).toEqual(
      expect.arrayContaining(['seccomp', 'pid namespace', 'IPC namespace', 'pids limit', 'memory limit', 'engine settings']),
    );
    expect(failed.setup).toBeUndefined(); // the weakened containers ran: this is what a tenant would get
    expect(failed.seccomp).toMatch(/Seccomp: 0/);
    expect(failed['pid namespace']).toMatch(/host's pid namespace/);
    expect(failed['IPC namespace']).toMatch(/host's IPC namespace/);
    expect(failed['pids limit']).toMatch(/pids\.max max/);
    expect(failed['memory limit']).toMatch(/no memory limit/);
    for (const named of ['seccomp=unconfined', 'apparmor=unconfined', 'PidsLimit', 'Memory', 'NanoCpus', 'PidMode host', 'IpcMode host'])
      expect(failed['engine settings']).toContain(named);
    expect(failed['engine settings']).not.toContain('could not inspect');
    // AppArmor: a failure where this kernel has it in force, a note where it has none.
    const apparmor = '/sys/module/apparmor/parameters/enabled';
    const lsm = out.checks.find((c) => c.name === 'LSM label');
    if (fs.existsSync(apparmor) && fs.readFileSync(apparmor, 'utf8').trim() === 'Y')
      expect(lsm).toMatchObject({ status: 'escape', detail: expect.stringContaining('unconfined') });
    else expect(lsm).toMatchObject({ status: 'ok', detail: expect.stringMatching(/^note: /) });
    // The attacks themselves still held (the weakenings are the kernel's side), and nothing is left.
    expect(out.checks.filter((c) => ATTACKS.includes(c.name)).every((c) => c.status === 'ok')).toBe(true);
    expect(await createBerth({ home: h, logLevel: 'silent' }).runner.listContainers()).toEqual([]);
  });
});
