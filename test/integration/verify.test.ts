import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createDockerEngine, type Engine } from '../../src/launch/docker.js';
import { createBerth } from '../../src/main.js';
import { runVerify } from '../../src/verify.js';
import { cli } from '../helpers.js';

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

describe('berth verify', () => {
  it('attacks a throw-away project on the real engine: every check holds, and it cleans up after itself', async () => {
    const berth = createBerth({ home: home(), logLevel: 'silent' });
    const checks = await runVerify(berth);
    expect(checks.map((c) => c.name)).toEqual(["neighbour's workspace", 'protected path', 'symlinked mount source', 'network', 'host environment', 'privileges', 'Docker socket', 'gateway escapes', 'model key']);
    expect(checks.filter((c) => c.status !== 'ok')).toEqual([]);
    expect(berth.store.names()).toEqual([]);
    expect(await berth.runner.listContainers()).toEqual([]);
  });

  it('"berth verify --json" as an operator runs it: ok, exit 0, every check named', () => {
    const r = cli(['--home', home(), 'verify', '--json']);
    expect(r.code, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout) as { ok: boolean; checks: Array<{ status: string }> };
    expect(out.ok).toBe(true);
    expect(out.checks).toHaveLength(9);
  });

  it('reports an escape when the engine gives containers a network (a weakened host)', async () => {
    const real = createDockerEngine();
    // What a bad engine upgrade or a patched launcher could do: a network berth did not plan.
    const weakened: Engine = { ...real, run: (plan, opts) => real.run({ ...plan, network: 'bridge' as 'none' }, opts) };
    const berth = createBerth({ home: home(), logLevel: 'silent', engine: weakened });
    const checks = await runVerify(berth);
    expect(checks.find((c) => c.name === 'network')).toMatchObject({ status: 'escape', detail: expect.stringContaining('eth0') });
    expect(checks.filter((c) => c.name !== 'network').every((c) => c.status === 'ok')).toBe(true);
  });
});
