import fs from 'node:fs';
import Docker from 'dockerode';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDockerLauncher } from '../../src/launch/docker/launcher.js';
import { installationId } from '../../src/main.js';
import { POOLED } from '../../src/plan/pool.js';
import { execFileSync } from 'node:child_process';
import { RUNTIME, testHome, type TestHome } from '../helpers.js';
import { pidAt } from '../helpers/pid-at.js';

/**
 * The pre-started pool on the real engine (runs/prestart-pool.ts): a container started before its
 * tenant is known takes the tenant's workspace by late mounts (native/berth-mount.c) and is from
 * then on that tenant's warm container; the pool refills. Under gVisor a sandbox does not see
 * a mount made after its start over a bind's root (its gofer holds that directory open): there the
 * pool stays empty and runs start as before.
 */
let h: TestHome;
const run = (user: string, message: string, opts: { session?: string; level?: 'low' | 'medium' | 'high' } = {}) =>
  h.berth.runner.run({ project: 'p', tenantKey: user, message, sessionId: opts.session, level: opts.level });

/** Project p's waiting pool containers (labelled POOLED, never claimed by a message yet, and in the pool: its gauge counts them). */
async function waiting(claimed: Set<string>): Promise<string[]> {
  const gauge = (await h.berth.metrics.registry.getSingleMetric('berth_pool_containers')?.get())?.values[0]?.value ?? 0;
  // The gauge counts every project's; project p's are returned.
  const pooled = (await h.berth.runner.listContainers()).filter(
    (c) => c.workspace === POOLED && c.state === 'running' && !claimed.has(c.id),
  );
  return pooled.length === gauge ? pooled.filter((c) => c.project === 'p').map((c) => c.id) : [];
}

async function until<T>(what: string, probe: () => Promise<T | undefined>, ms = 30_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const got = await probe();
    if (got !== undefined) return got;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

beforeAll(() => {
  h = testHome({ warm: true, pool: undefined, config: 'runs: { warm_idle_seconds: 60, pool: 1, pool_max: 1 }\n' }); // a fixed size: which one waits is known
  h.create({ name: 'p', workspace_isolation: true, limits: { timeout_seconds: 10 } });
  fs.writeFileSync(join(h.berth.store.get('p').paths.dir, 'RULES.md'), 'house rules\n');
});
afterAll(async () => {
  await h[Symbol.asyncDispose]();
});

describe.runIf(RUNTIME !== 'runsc')('the pre-started pool (runc)', () => {
  const claimed = new Set<string>();

  it("a new person's first message runs in a container started before they wrote: their workspace alone, mounted into it", async () => {
    await h.berth.admin.updateProject('p', { protected_paths: ['RULES.md'] });
    // The first session of this shape starts its container as before, and teaches the pool the shape.
    const alice = await run('web:alice', 'echo alice-was-here > mine.txt; ls /workspace');
    expect(alice.exitCode, alice.stderr).toBe(0);
    claimed.add(alice.containerId);
    const [ready] = await until('a pre-started container', async () => {
      const ids = await waiting(claimed);
      return ids.length ? ids : undefined;
    });
    const { Mounts, Config } = await new Docker().getContainer(ready as string).inspect();
    // Started with berth's blank stand-ins: nothing of any tenant, no environment of one.
    expect(Mounts.filter((m) => m.Type === 'bind').every((m) => m.Source.includes('/pool/'))).toBe(true);
    expect((Config.Env ?? []).filter((e) => e.startsWith('BERTH_'))).toEqual([]);

    const bob = await run(
      'web:bob',
      'id -u; pwd; echo "$BERTH_RUN"; ls -a /workspace; cat RULES.md; (echo x > RULES.md) 2>&1 || echo refused; echo bob > mine.txt; cat mine.txt',
    );
    expect(bob.exitCode, bob.stderr).toBe(0);
    expect(bob.containerId).toBe(ready);
    expect(bob.warm).toBe(false);
    claimed.add(bob.containerId);
    const lines = bob.stdout.trim().split('\n');
    expect(lines.slice(0, 3)).toEqual(['10001', '/workspace', bob.runId]);
    expect(bob.stdout).not.toContain('alice-was-here');
    expect(bob.stdout).toContain('house rules');
    expect(bob.stdout).toMatch(/Read-only file system/);
    expect(lines.at(-1)).toBe('bob');
    // His file is in his workspace on the host, and alice's is untouched.
    const workspaces = h.berth.store.get('p').paths.workspacesDir;
    const files = fs.readdirSync(workspaces).map((id) => fs.readFileSync(join(workspaces, id, 'mine.txt'), 'utf8').trim());
    expect(files.sort()).toEqual(['alice-was-here', 'bob']);
  });

  it("the claimed container is the person's warm container from then on; the pool refills with a new one", async () => {
    const again = await run('web:bob', 'cat mine.txt');
    expect(again.warm).toBe(true);
    expect(claimed.has(again.containerId)).toBe(true);
    const next = await until('the pool refilled', async () => {
      const ids = await waiting(claimed);
      return ids.length ? ids[0] : undefined;
    });
    expect(claimed.has(next)).toBe(false);
    const carol = await run('web:carol', 'ls /workspace; cat mine.txt 2>&1 || echo none');
    expect(carol.containerId).toBe(next);
    claimed.add(carol.containerId);
    expect(carol.stdout).toContain('none');
    expect(carol.stdout).not.toMatch(/alice-was-here|bob/);
  });

  it('a claim creates and starts no container: the message runs in the one that waited', async () => {
    const next = await until('the pool refilled', async () => {
      const ids = await waiting(claimed);
      return ids.length ? ids[0] : undefined;
    });
    const dave = await run('web:dave', 'true');
    expect(dave.containerId).toBe(next);
    // How fast a claim is (~10-20 ms of attach here) is bench/first-message.ts's to measure.
    const created = (await new Docker().listContainers({ all: true, filters: { label: ['berth.project=p'] } })).filter(
      (c) => c.Id === dave.containerId,
    );
    expect(created[0]?.Names[0]).toMatch(/^\/berth-claimed\./);
  });
});

/** A container's mount table as its first process sees it. */
const mountTable = async (id: string) =>
  fs.readFileSync(`/proc/${(await new Docker().getContainer(id).inspect()).State.Pid}/mountinfo`, 'utf8');

describe.runIf(RUNTIME !== 'runsc')('the pre-started pool against PID reuse and swapped mounts (outside attack 4, H1)', () => {
  it("waiting containers removed behind berth's back, their numbers taken by another tenant's container: the next new person gets a fresh container, and no foreign mount appears anywhere", async () => {
    // The victim's container has the same mount targets as p's (the report's two projects both protect a file).
    h.create({ name: 'vp', workspace_isolation: true, limits: { timeout_seconds: 10 } });
    fs.writeFileSync(join(h.berth.store.get('vp').paths.dir, 'RULES.md'), 'victim rules\n');
    await h.berth.admin.updateProject('vp', { protected_paths: ['RULES.md'] });
    const victim = await h.berth.runner.run({
      project: 'vp',
      tenantKey: 'web:victim',
      sessionId: 's-v1',
      message: 'echo VICTIM-PRIVATE > victim-file.txt',
    });
    expect(victim.exitCode, victim.stderr).toBe(0);
    const victimPid = (await new Docker().getContainer(victim.containerId).inspect()).State.Pid;
    const victimTable = await mountTable(victim.containerId);
    const pooled = await until('a pre-started container', async () => {
      const ids = await waiting(new Set((await h.berth.runner.listContainers('p')).filter((c) => c.workspace !== POOLED).map((c) => c.id)));
      return ids.length ? ids : undefined;
    });
    const pids = await Promise.all(pooled.map(async (id) => (await new Docker().getContainer(id).inspect()).State.Pid));
    // Another process removes them (an operator's docker rm, another berth); processes of the victim's container take their numbers.
    await Promise.all(pooled.map((id) => new Docker().getContainer(id).remove({ force: true })));
    const squatters = await Promise.all(pids.map((pid) => pidAt(pid, victimPid)));
    try {
      const newcomer = await run('web:newcomer', 'echo NEWCOMER > mine.txt; cat mine.txt; ls /workspace');
      expect(newcomer.exitCode, newcomer.stderr).toBe(0);
      expect(newcomer.stdout).toContain('NEWCOMER');
      expect(newcomer.stdout).not.toContain('victim-file.txt');
      expect(pooled).not.toContain(newcomer.containerId);
      // The victim's container shows its own mounts alone; its next message sees its own workspace.
      expect(await mountTable(victim.containerId)).toBe(victimTable);
      const again = await h.berth.runner.run({
        project: 'vp',
        tenantKey: 'web:victim',
        sessionId: 's-v1',
        message: 'ls /workspace; cat victim-file.txt',
      });
      expect(again.stdout).toContain('VICTIM-PRIVATE');
      expect(again.stdout).not.toContain('mine.txt');
      expect(again.warm).toBe(true);
      const pWorkspaces = h.berth.store.get('p').paths.workspacesDir;
      expect(await mountTable(again.containerId)).not.toContain(pWorkspaces);
    } finally {
      for (const s of squatters) s.kill();
    }
  });

  it('a claimed container is told from a waiting one by any process: its engine name carries the workspace and run it took', async () => {
    const next = await until('the pool refilled', async () => {
      const ids = await waiting(new Set((await h.berth.runner.listContainers('p')).filter((c) => c.workspace !== POOLED).map((c) => c.id)));
      return ids.length ? ids[0] : undefined;
    });
    const erin = await run('web:erin', 'true');
    expect(erin.containerId).toBe(next);
    const listed = await new Docker().listContainers({ filters: { id: [erin.containerId] } });
    expect(listed[0]?.Names).toEqual([expect.stringMatching(new RegExp(`^/berth-claimed\\.[0-9a-f]{32}\\.${erin.runId}$`))]);
    // A launcher with no memory of the claim (another process) lists it with erin's workspace, not as waiting.
    const other = await createDockerLauncher().listManaged({ installation: installationId(h.home), project: 'p' });
    const seen = other.find((c) => c.id === erin.containerId);
    expect(seen?.workspace).toMatch(/^[0-9a-f]{32}$/);
    expect(seen?.run).toBe(erin.runId);
  });

  it("a warm container whose workspace mount was swapped behind berth's back is not used again: the next message gets a new container with its own workspace", async () => {
    const first = await run('web:frank', 'echo FRANK > frank.txt', { session: 's-frank' });
    expect(first.exitCode, first.stderr).toBe(0);
    const pid = (await new Docker().getContainer(first.containerId).inspect()).State.Pid;
    // Something else at /workspace (here an empty filesystem, mounted by root from the host's side).
    execFileSync('nsenter', ['-t', String(pid), '-m', 'mount', '-t', 'tmpfs', 'none', '/workspace']);
    const second = await run('web:frank', 'ls /workspace; cat frank.txt', { session: 's-frank' });
    expect(second.exitCode, second.stderr).toBe(0);
    expect(second.stdout).toContain('FRANK');
    expect(second.warm).toBe(false);
    expect(second.containerId).not.toBe(first.containerId);
  });
});

describe.runIf(RUNTIME === 'runsc')('the pre-started pool under gVisor', () => {
  it('keeps no containers: a sandbox does not see a late mount over a bind, so runs start as before', async () => {
    const first = await run('web:alice', 'true');
    const second = await run('web:bob', 'true');
    expect([first.exitCode, second.exitCode]).toEqual([0, 0]);
    await new Promise((r) => setTimeout(r, 1500));
    expect(await waiting(new Set())).toEqual([]);
  });
});
