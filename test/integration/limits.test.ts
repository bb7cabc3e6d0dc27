import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testHome, type TestHome } from '../helpers.js';

let h: TestHome;
beforeAll(() => {
  h = testHome();
  h.create({
    name: 'limits',
    workspace_isolation: true,
    limits: { timeout_seconds: 4, output_bytes: 64 * 1024, pids: 64, memory_mb: 64 },
  });
});
afterAll(async () => {
  await h[Symbol.asyncDispose]();
});

describe('limits (real containers)', () => {
  it('a sleep past the timeout is killed, reported, and the next run works', async () => {
    const t0 = Date.now();
    const o = await h.run('limits', 'web:a', 'echo started; sleep 60; echo never');
    expect(o.timedOut).toBe(true);
    expect(o.stdout).toBe('started\n');
    expect(Date.now() - t0).toBeLessThan(15_000);
    const next = await h.run('limits', 'web:a', 'echo fine');
    expect(next).toMatchObject({ exitCode: 0, stdout: 'fine\n', timedOut: false });
  });

  it('an output flood is cut at the cap (not buffered) and the run stopped', async () => {
    const t0 = Date.now();
    const o = await h.run('limits', 'web:a', 'yes berth-flood-line');
    expect(o.truncated).toBe(true);
    expect(o.timedOut).toBe(false);
    expect(Buffer.byteLength(o.stdout) + Buffer.byteLength(o.stderr)).toBe(64 * 1024);
    expect(o.stdout.startsWith('berth-flood-line\n')).toBe(true);
    expect(Date.now() - t0).toBeLessThan(4_000);
    expect((await h.run('limits', 'web:a', 'echo fine')).stdout).toBe('fine\n');
  });

  it('a fork bomb hits the pids limit and ends with the timeout; the next run works', async () => {
    const t0 = Date.now();
    const o = await h.run(
      'limits',
      'web:a',
      'echo "pids.max=$(cat /sys/fs/cgroup/pids/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids.max)"; bomb() { bomb | bomb & }; bomb; sleep 60',
    );
    expect(o.stdout).toContain('pids.max=64\n');
    expect(o.stderr).toContain("can't fork: Resource temporarily unavailable");
    expect(o.timedOut).toBe(true);
    expect(Date.now() - t0).toBeLessThan(15_000);
    expect((await h.run('limits', 'web:a', 'echo fine')).stdout).toBe('fine\n');
  });

  it('memory is capped', async () => {
    const o = await h.run('limits', 'web:a', 'cat /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null || cat /sys/fs/cgroup/memory.max');
    expect(o.stdout.trim()).toBe(String(64 * 1024 * 1024));
  });

  it('leaves no labelled container behind', async () => {
    expect(await h.berth.runner.listContainers('limits')).toEqual([]);
  });
});
