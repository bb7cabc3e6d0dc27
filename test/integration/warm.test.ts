import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import Docker from 'dockerode';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createBerth } from '../../src/main.js';
import { RUNTIME, testConfig, testHome, type TestHome } from '../helpers.js';
import { until } from '../helpers/until.js';

/** Warm session containers on the real engine: reuse, recycling, reaping, one session per container. */
let h: TestHome;
const run = (user: string, message: string, opts: { session?: string; level?: 'low' | 'medium' | 'high' } = {}) =>
  h.berth.runner.run({ project: 'w', tenantKey: user, message, sessionId: opts.session, level: opts.level });

beforeAll(() => {
  h = testHome({ warm: true, config: 'runs: { warm_idle_seconds: 60 }\n' });
  h.create({ name: 'w', workspace_isolation: true, limits: { timeout_seconds: 3 } });
});
afterAll(async () => {
  await h[Symbol.asyncDispose]();
});

describe('warm session containers', () => {
  it("a session's second message is an exec into its container: same user, cwd, env and limits; /tmp kept", async () => {
    // gVisor shows no cgroup files inside: the pids line is then "unseen" both times.
    const probe =
      'id -u; pwd; echo "$BERTH_RUN"; cat /sys/fs/cgroup/pids/pids.max 2>/dev/null || echo unseen; cat /tmp/mark 2>/dev/null || echo none; echo here > /tmp/mark';
    const first = await run('web:alice', probe);
    const second = await run('web:alice', probe);
    expect(first.warm).toBe(false);
    expect(second.warm).toBe(true);
    expect(second.containerId).toBe(first.containerId);
    const [uid1, cwd1, run1, pids1, mark1] = first.stdout.trim().split('\n');
    const [uid2, cwd2, run2, pids2, mark2] = second.stdout.trim().split('\n');
    expect([uid2, cwd2, pids2]).toEqual([uid1, cwd1, pids1]);
    expect(uid1).toBe('10001');
    expect(pids1 === 'unseen').toBe(RUNTIME === 'runsc');
    expect([run1, run2]).toEqual([first.runId, second.runId]); // each message is its own run
    expect([mark1, mark2]).toEqual(['none', 'here']);
    // Faster: no container to create and start.
    expect(second.timings.totalMs).toBeLessThan(first.timings.totalMs);
  });

  it('one container serves one session of one tenant, never another', async () => {
    const a = await run('web:alice', 'hostname');
    const other = await run('web:alice', 'hostname; cat /tmp/mark 2>/dev/null || echo none', { session: 'second' });
    const bob = await run('web:bob', 'hostname; cat /tmp/mark 2>/dev/null || echo none; ls /workspace');
    expect(new Set([a.containerId, other.containerId, bob.containerId]).size).toBe(3);
    expect(other.stdout).toContain('none');
    expect(bob.stdout).toContain('none');
    const workspaces = await h.berth.runner.listContainers('w');
    expect(new Set(workspaces.map((c) => c.workspace)).size).toBe(2); // alice's two sessions share her workspace, bob has his
  });

  it('any change to the plan recycles the container: level, limits, protected paths', async () => {
    const base = await run('web:carol', 'true');
    const same = await run('web:carol', 'true');
    expect(same.containerId).toBe(base.containerId);
    const level = await run('web:carol', 'true', { level: 'low' }); // medium → low: no egress socket
    expect(level.warm).toBe(false);
    expect(level.containerId).not.toBe(base.containerId);
    await h.berth.admin.updateProject('w', { limits: { timeout_seconds: 3, memory_mb: 256 } });
    const limits = await run('web:carol', 'cat /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null || echo unseen', { level: 'low' });
    expect(limits.containerId).not.toBe(level.containerId);
    // The engine's record; and from inside, where the runtime shows it (runc does, gVisor does not).
    const { HostConfig } = await new Docker().getContainer(limits.containerId).inspect();
    expect(HostConfig.Memory).toBe(256 * 1024 * 1024);
    expect(limits.stdout.trim()).toBe(RUNTIME === 'runsc' ? 'unseen' : String(256 * 1024 * 1024));
    fs.writeFileSync(join(h.berth.store.get('w').paths.dir, 'RULES.md'), 'v1\n');
    await h.berth.admin.updateProject('w', { protected_paths: ['RULES.md'] });
    const prot = await run('web:carol', 'cat RULES.md; echo x > RULES.md 2>&1 || echo refused', { level: 'low' });
    expect(prot.containerId).not.toBe(limits.containerId);
    expect(prot.stdout).toContain('refused');
    // The replaced containers are gone, not parked.
    const ids = (await h.berth.runner.listContainers('w')).map((c) => c.id);
    for (const old of [base.containerId, level.containerId, limits.containerId]) expect(ids).not.toContain(old);
  });

  it('a deleted session takes its container along: the next session of that id starts afresh', async () => {
    const first = await run('web:hal', 'echo remembered > /tmp/mark');
    h.berth.admin.deleteSession('w', first.sessionId);
    // Removed in the background (deleting a session does not wait for the engine).
    await until(
      async () => !(await h.berth.runner.listContainers('w')).some((c) => c.id === first.containerId),
      "the deleted session's container to go",
    );
    expect((await h.berth.runner.listContainers('w')).map((c) => c.id)).not.toContain(first.containerId);
    const again = await run('web:hal', 'cat /tmp/mark 2>/dev/null || echo none');
    expect(again.sessionId).toBe(first.sessionId);
    expect(again.warm).toBe(false);
    expect(again.stdout).toBe('none\n');
  });

  it('a session deleted while its first message runs does not leave that container to a new session of the id', async () => {
    const before = new Set((await h.berth.runner.listContainers('w')).map((c) => c.id));
    const running = run('web:lee', 'sleep 1; echo done').catch((err: unknown) => err); // its session vanishes under it
    const started = async () => (await h.berth.runner.listContainers('w')).map((c) => c.id).filter((id) => !before.has(id));
    await until(async () => (await started()).length > 0, 'its container to start');
    const mine = await started();
    expect(mine).toHaveLength(1);
    const sessionId = h.berth.sessions.list(h.berth.store.get('w')).find((x) => x.tenant_key === 'web:lee')?.id;
    h.berth.admin.deleteSession('w', sessionId as string);
    await running;
    await until(async () => !(await h.berth.runner.listContainers('w')).some((c) => c.id === mine[0]), 'its container to go');
    expect((await h.berth.runner.listContainers('w')).map((c) => c.id)).not.toContain(mine[0]);
    const again = await run('web:lee', 'true');
    expect(again.warm).toBe(false);
  });

  it("a warm container removed behind berth's back: the next message gets a new one and runs", async () => {
    const first = await run('web:max', 'true');
    await new Docker().getContainer(first.containerId).remove({ force: true });
    const next = await run('web:max', 'echo ran');
    expect(next.stdout).toBe('ran\n');
    expect(next.warm).toBe(false);
    expect(next.containerId).not.toBe(first.containerId);
    const third = await run('web:max', 'echo again');
    expect(third.warm).toBe(true);
  });

  it('a timeout kills the message (its container goes), and the next message starts clean', async () => {
    const slow = await run('web:dave', 'echo started; sleep 30 & sleep 30');
    expect(slow.timedOut).toBe(true);
    const next = await run('web:dave', 'ps -o pid,comm | grep -c sleep || true');
    expect(next.warm).toBe(false);
    expect(next.containerId).not.toBe(slow.containerId);
    expect(next.stdout.trim()).toBe('0');
  });

  it('a message that leaves a process behind never shares its container with the next message', async () => {
    const daemon = await run('web:erin', 'setsid sleep 300 >/dev/null 2>&1 < /dev/null & echo planted');
    expect(daemon.stdout).toBe('planted\n');
    const next = await run('web:erin', 'ps -o comm | grep -c sleep || true');
    expect(next.containerId).not.toBe(daemon.containerId);
    expect(next.stdout.trim()).toBe('0');
    expect((await h.berth.runner.listContainers('w')).map((c) => c.id)).not.toContain(daemon.containerId);
  });

  it('a process whose main thread exits while another thread runs is caught too (its leader is a zombie)', async () => {
    const first = await run('web:ivy', 'true');
    const dir = join(h.berth.store.get('w').paths.workspacesDir, first.workspaceId);
    const src = join(h.home, 'zl.c');
    fs.writeFileSync(
      src,
      '#include <pthread.h>\n#include <unistd.h>\nstatic void *spin(void *a) { (void)a; sleep(300); return 0; }\nint main(void) { pthread_t t; pthread_create(&t, 0, spin, 0); pthread_exit(0); }\n',
    );
    execFileSync('gcc', ['-static', '-O2', '-pthread', '-o', join(dir, 'zl'), src]);
    const planted = await run('web:ivy', './zl & sleep 0.2; echo planted');
    expect(planted.stdout).toBe('planted\n');
    expect(planted.containerId).toBe(first.containerId);
    const next = await run('web:ivy', 'true');
    expect(next.containerId).not.toBe(planted.containerId);
    expect((await h.berth.runner.listContainers('w')).map((c) => c.id)).not.toContain(planted.containerId);
  });

  it('a message cannot ptrace the keep-alive or the relay (same uid): they are not dumpable', async () => {
    const first = await run('web:kim', 'true'); // medium: the egress relay runs beside the keep-alive
    const dir = join(h.berth.store.get('w').paths.workspacesDir, first.workspaceId);
    const src = join(h.home, 'pt.c');
    fs.writeFileSync(
      src,
      '#include <errno.h>\n#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n#include <sys/ptrace.h>\n' +
        'int main(int c, char **v) { for (int i = 1; i < c; i++) { long r = ptrace(PTRACE_ATTACH, atoi(v[i]), 0, 0); printf("%s %s\\n", v[i], r == 0 ? "attached" : strerror(errno)); } return 0; }\n',
    );
    execFileSync('gcc', ['-static', '-O2', '-o', join(dir, 'pt'), src]);
    // pid 1 is the idle keep-alive; the relay listener is the other berth-bridge.
    const o = await run(
      'web:kim',
      'for p in /proc/[0-9]*; do [ "$(cat $p/comm 2>/dev/null)" = berth-bridge ] && echo ${p#/proc/}; done | xargs ./pt',
    );
    expect(o.warm).toBe(true);
    const lines = o.stdout.trim().split('\n');
    expect(lines.length).toBeGreaterThanOrEqual(2);
    for (const line of lines) expect(line).toMatch(/Operation not permitted$/);
  });

  it('a process that keeps forking a successor and exiting is caught (the container is frozen while its threads are read)', async () => {
    const first = await run('web:nia', 'true');
    const dir = join(h.berth.store.get('w').paths.workspacesDir, first.workspaceId);
    const src = join(h.home, 'hop.c');
    fs.writeFileSync(src, '#include <unistd.h>\nint main(void) { for (;;) { if (fork() > 0) _exit(0); usleep(200); } }\n');
    execFileSync('gcc', ['-static', '-O2', '-o', join(dir, 'hop'), src]);
    for (let i = 0; i < 2; i++) {
      const planted = await run('web:nia', './hop & sleep 0.2; echo planted');
      expect(planted.stdout).toBe('planted\n');
      const next = await run('web:nia', 'true');
      expect(next.containerId).not.toBe(planted.containerId);
    }
  });

  it('many processes at once leave the container whole: the next message runs (runc keeps it clean)', async () => {
    // gVisor keeps 15-30 host tasks per process that ran at once (RUNSC_MIN_PIDS): 20 take 320-640 of
    // 1024; past half, the container is not kept (docker/reports.ts hostTasksNearLimit).
    const first = await run('web:lou', 'for i in $(seq 20); do sleep 0.5 & done; wait; echo done');
    expect(first.stdout).toBe('done\n');
    const next = await run('web:lou', 'echo next');
    expect(next.stdout).toBe('next\n');
    if (RUNTIME !== 'runsc') expect(next.containerId).toBe(first.containerId);
  });

  it('page cache is not held against a container: writing a big workspace file keeps it warm', async () => {
    await run('web:ola', 'true');
    const big = await run('web:ola', 'dd if=/dev/zero of=big bs=1M count=64 2>/dev/null; sync; echo written');
    expect(big.stdout).toBe('written\n');
    const next = await run('web:ola', 'rm big; echo gone');
    expect(next.containerId).toBe(big.containerId);
    expect(next.warm).toBe(true);
  });

  it('a message that leaves memory held (a big /tmp file) does not park it in an idle container', async () => {
    const big = await run('web:jo', 'head -c 48000000 /dev/zero > /tmp/big; echo written');
    expect(big.stdout).toBe('written\n');
    const next = await run('web:jo', 'ls /tmp');
    expect(next.containerId).not.toBe(big.containerId);
    expect(next.stdout).toBe('');
  });

  it('between messages the container reaches nothing: its run directory holds no socket', async () => {
    const o = await run('web:frank', 'ls /run/berth | wc -l', { level: 'low' });
    expect(Number(o.stdout.trim())).toBeGreaterThan(0); // during the message: the model socket
    const again = await run('web:frank', 'true', { level: 'low' });
    expect(again.warm).toBe(true);
    const sockets = join(h.home, '.berth', 'sockets');
    const dirs = fs.readdirSync(sockets);
    for (const d of dirs) expect(fs.readdirSync(join(sockets, d))).toEqual([]);
  });

  it('idle containers are removed after warm_idle_seconds; restart leaves none behind', async () => {
    fs.writeFileSync(join(h.home, 'berth.yaml'), testConfig('runs: { warm_idle_seconds: 1 }\n')!);
    const o = await run('web:gina', 'true');
    expect((await h.berth.runner.listContainers('w')).map((c) => c.id)).toContain(o.containerId);
    await until(
      async () => !(await h.berth.runner.listContainers('w')).some((c) => c.id === o.containerId),
      'the idle container to be removed',
    );

    // A berth that dies leaves its warm containers to the next one's startup reaper.
    fs.writeFileSync(join(h.home, 'berth.yaml'), testConfig('runs: { warm_idle_seconds: 60 }\n')!);
    await run('web:gina', 'true');
    expect((await h.berth.runner.listContainers('w')).length).toBeGreaterThan(0);
    const next = createBerth({ home: h.home, logLevel: 'silent' });
    // This process is alive, so its containers stay: the reaper spares a live owner's.
    await next.runner.recover();
    expect((await h.berth.runner.listContainers('w')).length).toBeGreaterThan(0);
    expect(await h.berth.runner.releaseWarm()).toBeGreaterThan(0);
    expect(await h.berth.runner.listContainers('w')).toEqual([]);
  });
});
