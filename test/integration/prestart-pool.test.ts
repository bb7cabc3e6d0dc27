import fs from 'node:fs';
import Docker from 'dockerode';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { POOLED } from '../../src/plan/pool.js';
import { RUNTIME, testHome, type TestHome } from '../helpers.js';

/**
 * The pre-started pool on the real engine (runs/prestart-pool.ts): a container started before its
 * tenant is known takes the tenant's workspace by late mounts (native/berth-mount.c) and is from
 * then on that tenant's warm container; the pool refills. Under gVisor a sandbox does not see
 * mounts made after its start: there the pool stays empty and runs start as before.
 */
let h: TestHome;
const run = (user: string, message: string, opts: { session?: string; level?: 'low' | 'medium' | 'high' } = {}) =>
  h.berth.runner.run({ project: 'p', tenantKey: user, message, sessionId: opts.session, level: opts.level });

/** The pool's waiting containers (labelled POOLED, never claimed by a message yet, and in the pool: its gauge counts them). */
async function waiting(claimed: Set<string>): Promise<string[]> {
  const gauge = (await h.berth.metrics.registry.getSingleMetric('berth_pool_containers')?.get())?.values[0]?.value ?? 0;
  const all = await h.berth.runner.listContainers('p');
  const ids = all.filter((c) => c.workspace === POOLED && c.state === 'running' && !claimed.has(c.id)).map((c) => c.id);
  return ids.length === gauge ? ids : [];
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
  h = testHome({ warm: true, pool: undefined, config: 'runs: { warm_idle_seconds: 60, pool: 1 }\n' });
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

    const bob = await run('web:bob', 'id -u; pwd; echo "$BERTH_RUN"; ls -a /workspace; cat RULES.md; (echo x > RULES.md) 2>&1 || echo refused; echo bob > mine.txt; cat mine.txt');
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

  it('a claim is about as fast as an exec: no container is created or started for it', async () => {
    const next = await until('the pool refilled', async () => {
      const ids = await waiting(claimed);
      return ids.length ? ids[0] : undefined;
    });
    const dave = await run('web:dave', 'true');
    expect(dave.containerId).toBe(next);
    // createMs 0: nothing created; startMs is the attach (~10-20 ms here).
    expect(dave.timings.createMs).toBeLessThan(80);
    expect(dave.timings.startMs).toBeLessThan(500);
  });
});

describe.runIf(RUNTIME === 'runsc')('the pre-started pool under gVisor', () => {
  it('keeps no containers: a sandbox does not see late mounts, so runs start as before', async () => {
    const first = await run('web:alice', 'true');
    const second = await run('web:bob', 'true');
    expect([first.exitCode, second.exitCode]).toEqual([0, 0]);
    await new Promise((r) => setTimeout(r, 1500));
    expect(await waiting(new Set())).toEqual([]);
  });
});
