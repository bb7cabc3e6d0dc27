import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testHome, type TestHome } from '../helpers.js';

/**
 * outside-attack-3 H2 and L6 through the runner, on the real engine: a session's warm container
 * is kept only if the message left nothing behind — no IPC object in its namespace, no stopped
 * relay — and one tenant keeps at most `runs.warm_per_tenant` of them.
 */
let h: TestHome;
const run = (user: string, message: string, opts: { session?: string; level?: 'low' | 'medium' | 'high' } = {}) =>
  h.berth.runner.run({ project: 'w', tenantKey: user, message, sessionId: opts.session, level: opts.level });
const containers = async () => (await h.berth.runner.listContainers('w')).map((c) => c.id);

/** test/fixtures/ipc-probe.c, built static into the tenant's workspace (a tenant uploads the same in six messages). */
async function uploadIpcProbe(user: string): Promise<void> {
  const first = await run(user, 'true', { session: `upload-${user.replace(/\W/g, '')}` });
  const dir = join(h.berth.store.get('w').paths.workspacesDir, first.workspaceId);
  execFileSync('gcc', ['-static', '-O2', '-o', join(dir, 'ipc-probe'), join(import.meta.dirname, '..', 'fixtures', 'ipc-probe.c')]);
}

beforeAll(() => {
  h = testHome({ warm: true, config: 'runs: { warm_idle_seconds: 60 }\n' });
  h.create({ name: 'w', workspace_isolation: true, limits: { timeout_seconds: 10 } });
});
afterAll(async () => {
  await h[Symbol.asyncDispose]();
});

describe('warm containers: IPC leftovers, stopped relays, the per-tenant cap', () => {
  it('a message that leaves SysV message queues: the next message of the session gets a new container, the old one is gone', async () => {
    await uploadIpcProbe('web:alice');
    const first = await run('web:alice', 'true', { session: 'pin' });
    const pinned = await run('web:alice', './ipc-probe msgq 16; ./ipc-probe shm 30', { session: 'pin' });
    expect(pinned.warm).toBe(true);
    expect(pinned.containerId).toBe(first.containerId);
    expect(pinned.stdout).toBe('msgq 16 queues 32 messages 262144 bytes\nshm 30 MiB\n');
    const next = await run('web:alice', 'cat /proc/sysvipc/msg /proc/sysvipc/shm | wc -l', { session: 'pin' });
    expect(next.warm).toBe(false);
    expect(next.containerId).not.toBe(pinned.containerId);
    expect(next.stdout.trim()).toBe('2'); // the headers only: a new IPC namespace
    expect(await containers()).not.toContain(pinned.containerId);
  });

  it('a POSIX message queue left in /dev/mqueue is a leftover too', async () => {
    await uploadIpcProbe('web:bea');
    await run('web:bea', 'true', { session: 'mq' });
    const left = await run('web:bea', './ipc-probe mq /q1', { session: 'mq' });
    expect(left.stdout).toMatch(/^mq \d+ messages\n$/);
    const next = await run('web:bea', 'ls /dev/mqueue', { session: 'mq' });
    expect(next.warm).toBe(false);
    expect(next.stdout).toBe('');
  });

  it('every container, cold or warm, runs with the IPC sysctls', async () => {
    const read =
      'cat /proc/sys/kernel/msgmni /proc/sys/kernel/msgmnb /proc/sys/kernel/shmmax /proc/sys/kernel/shmall /proc/sys/kernel/shmmni /proc/sys/kernel/sem';
    const cold = await run('web:cy', read, { session: 'sysctl' });
    const warm = await run('web:cy', read, { session: 'sysctl' });
    expect(warm.warm).toBe(true);
    for (const o of [cold, warm]) expect(o.stdout).toBe('16\n16384\n67108864\n16384\n16\n250\t4000\t32\t16\n');
  });

  it('a message that stops the relay (SIGSTOP): the next message is not warm, and its new relay runs', async () => {
    // medium (the default level): the egress relay runs beside the keep-alive.
    const first = await run('web:frank', 'true', { session: 'tamper' });
    const stop = await run(
      'web:frank',
      'kill -STOP $(pidof berth-bridge | tr " " "\\n" | grep -v "^1$"); sleep 0.2; ps -o stat,comm | grep berth-bridge | sort',
      { session: 'tamper' },
    );
    expect(stop.containerId).toBe(first.containerId);
    expect(stop.stdout).toMatch(/^T\s+berth-bridge$/m);
    const next = await run('web:frank', 'ps -o stat,comm | grep berth-bridge | grep -c "^T" || true', { session: 'tamper' });
    expect(next.warm).toBe(false);
    expect(next.containerId).not.toBe(stop.containerId);
    expect(next.stdout.trim()).toBe('0');
  });

  it("one tenant keeps at most warm_per_tenant (default 4) warm containers: its least recently used goes, never another tenant's", async () => {
    const bob = await run('web:bob', 'true', { session: 'b1' });
    const gil: string[] = [];
    for (const s of ['g1', 'g2', 'g3', 'g4', 'g5']) gil.push((await run('web:gil', 'true', { session: s })).containerId);
    // g1 was used longest ago: removed when g5's container went back to the pool.
    for (let i = 0; i < 50 && (await containers()).includes(gil[0]!); i++) await new Promise((r) => setTimeout(r, 100));
    const live = await containers();
    expect(live).not.toContain(gil[0]);
    for (const id of gil.slice(1)) expect(live).toContain(id);
    expect(live).toContain(bob.containerId);
    // Using g2 makes g3 the least recently used.
    expect((await run('web:gil', 'true', { session: 'g2' })).warm).toBe(true);
    const again = await run('web:gil', 'true', { session: 'g1' });
    expect(again.warm).toBe(false);
    for (let i = 0; i < 50 && (await containers()).includes(gil[2]!); i++) await new Promise((r) => setTimeout(r, 100));
    expect(await containers()).not.toContain(gil[2]);
    expect((await run('web:bob', 'true', { session: 'b1' })).warm).toBe(true);

    // berth.yaml sets it: 2 now; the next return to the pool trims gil to 2.
    fs.writeFileSync(join(h.home, 'berth.yaml'), 'runs: { warm_idle_seconds: 60, warm_per_tenant: 2 }\n');
    await run('web:gil', 'true', { session: 'g5' });
    for (let i = 0; i < 50 && (await h.berth.runner.listContainers('w')).filter((c) => c.workspace === again.workspaceId).length > 2; i++)
      await new Promise((r) => setTimeout(r, 100));
    const gils = (await h.berth.runner.listContainers('w')).filter((c) => c.workspace === again.workspaceId).map((c) => c.id);
    expect(gils).toHaveLength(2);
    expect(gils).toContain(again.containerId); // g1, used just before g5
    expect((await run('web:bob', 'true', { session: 'b1' })).warm).toBe(true);
  });
});
