import fs from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import Docker from 'dockerode';
import { createBerth, installationId } from '../../src/main.js';
import { releaseMountsUnder } from '../../src/fs/loop-quota.js';
import { isMounted } from '../../src/fs/mount-table.js';
import { assessDisk } from '../../src/cli/doctor.js';
import { testHome, type TestHome } from '../helpers.js';

/** berth.yaml disk_quotas: loop, on the real kernel and engine: ENOSPC at the quota, for the tenant only. */
let h: TestHome;
const MiB = 1024 * 1024;
const wsOf = (project: string, user: string) => h.berth.admin.listWorkspaces(project).find((w) => w.tenant_key === user);
const dirOf = (project: string, user: string) => join(h.berth.store.get(project).paths.workspacesDir, wsOf(project, user)?.id ?? 'missing');

beforeAll(() => {
  h = testHome({ config: 'disk_quotas: loop\n' });
  fs.writeFileSync(join(h.home, 'seed-agents.md'), 'house rules\n');
  h.create({ name: 'q', workspace_isolation: true, limits: { disk_mb: 16, files: 300, timeout_seconds: 30 } });
  fs.writeFileSync(join(h.berth.store.get('q').paths.dir, 'AGENTS.md'), 'house rules\n');
});
afterAll(async () => {
  await h[Symbol.asyncDispose]();
});

describe('disk quotas: one loop-mounted ext4 image per tenant workspace', () => {
  it('a tenant that fills its quota gets ENOSPC; its neighbour and berth keep writing', async () => {
    const fill = await h.run('q', 'web:filler', 'dd if=/dev/zero of=big bs=1M count=100 2>&1; echo "dd=$?"; df -k /workspace | tail -1');
    expect(fill.stdout).toContain('No space left on device');
    expect(fill.stdout).toMatch(/dd=1\n/);
    expect(fs.statSync(join(dirOf('q', 'web:filler'), 'big')).size).toBeLessThan(16 * MiB);
    expect(isMounted(dirOf('q', 'web:filler'))).toBe(true);
    // The seed was copied in after the mount: it is on the tenant's filesystem.
    expect(fs.readFileSync(join(dirOf('q', 'web:filler'), 'AGENTS.md'), 'utf8')).toBe('house rules\n');
    expect(fs.existsSync(join(dirOf('q', 'web:filler'), 'lost+found'))).toBe(false);

    const neighbour = await h.run('q', 'web:neighbour', 'dd if=/dev/zero of=f bs=1M count=4 2>/dev/null; echo "dd=$?"; wc -c < f');
    expect(neighbour.stdout).toBe(`dd=0\n${4 * MiB}\n`);
    // berth's own records of the full tenant's run were written (they live elsewhere).
    const runs = h.berth.admin.listRuns('q', {}).runs.map((r) => r.run);
    expect(runs).toEqual(expect.arrayContaining([fill.runId, neighbour.runId]));
  });

  it('files are bounded by the kernel too (inodes = limits.files)', async () => {
    const o = await h.run('q', 'web:files', 'mkdir d; i=0; while touch d/f$i 2>/dev/null; do i=$((i+1)); done; echo "made=$i"');
    const made = Number(/made=(\d+)/.exec(o.stdout)?.[1]);
    expect(made).toBeGreaterThan(250);
    expect(made).toBeLessThan(300);
    expect(o.timedOut).toBe(false);
  });

  it('reports usage per workspace from the filesystem', () => {
    const full = wsOf('q', 'web:filler');
    const small = wsOf('q', 'web:neighbour');
    expect(full?.quota?.size_bytes).toBeGreaterThan(12 * MiB);
    expect(full?.quota?.size_bytes).toBeLessThanOrEqual(16 * MiB);
    expect(full?.size_bytes).toBeGreaterThan(0.9 * (full?.quota?.size_bytes ?? Infinity));
    expect(small?.size_bytes).toBeGreaterThanOrEqual(4 * MiB);
    expect(small?.size_bytes).toBeLessThan(6 * MiB);
    expect(small?.quota?.files_max).toBeGreaterThanOrEqual(300); // mkfs rounds up to whole inode tables
    expect(small?.quota?.files_max).toBeLessThan(320);
  });

  it('survives a reboot: startup mounts the images again, content intact', async () => {
    const dir = dirOf('q', 'web:neighbour');
    expect(releaseMountsUnder(h.home)).toBeGreaterThanOrEqual(3); // what a reboot does to mounts
    expect(isMounted(dir)).toBe(false);
    expect(fs.readdirSync(dir)).toEqual([]);
    const again = createBerth({ home: h.home, logLevel: 'silent' });
    await again.runner.recover();
    expect(isMounted(dir)).toBe(true);
    expect(fs.statSync(join(dir, 'f')).size).toBe(4 * MiB);
    // A run mounts it too, when nothing ran recover (a one-shot CLI run).
    releaseMountsUnder(dir);
    const o = await h.run('q', 'web:neighbour', 'wc -c < f');
    expect(o.stdout).toBe(`${4 * MiB}\n`);
  });

  it('limits.disk_mb changes resize the image offline, keeping the content; a shrink below the data is refused with a warning', async () => {
    await h.berth.admin.updateProject('q', { limits: { disk_mb: 48 } });
    const grown = await h.run('q', 'web:neighbour', 'wc -c < f; dd if=/dev/zero of=g bs=1M count=30 2>/dev/null; echo "dd=$?"');
    expect(grown.stdout).toBe(`${4 * MiB}\ndd=0\n`);
    expect(wsOf('q', 'web:neighbour')?.quota?.size_bytes).toBeGreaterThan(40 * MiB);

    await h.berth.admin.updateProject('q', { limits: { disk_mb: 8 } });
    const kept = await h.run('q', 'web:neighbour', 'wc -c < g');
    expect(kept.stdout).toBe(`${30 * MiB}\n`);
    expect(wsOf('q', 'web:neighbour')?.quota?.size_bytes).toBeGreaterThan(40 * MiB);
    // Cleared, the next run gets the smaller size.
    await h.run('q', 'web:neighbour', 'rm g');
    await h.run('q', 'web:neighbour', 'true');
    expect(wsOf('q', 'web:neighbour')?.quota?.size_bytes).toBeLessThanOrEqual(8 * MiB);
    expect((await h.run('q', 'web:neighbour', 'wc -c < f')).stdout).toBe(`${4 * MiB}\n`);
  });

  it('a lower limits.files still holds for a workspace whose filesystem was made with more inodes', async () => {
    await h.berth.admin.updateProject('q', { limits: { disk_mb: 8, files: 100 } });
    const o = await h.run(
      'q',
      'web:neighbour',
      'mkdir -p many; i=0; while [ $i -lt 250 ]; do touch many/f$i; i=$((i+1)); sleep 0.01; done; echo finished',
    );
    expect(o.stdout).not.toContain('finished');
    expect(o.warnings.join()).toContain('limits.files (100 files and directories)');
    await h.run('q', 'web:neighbour', 'rm -rf many');
    await h.berth.admin.updateProject('q', { limits: { files: 300 } });
  });

  it('a workspace made before quotas were on is moved into its image with its content', async () => {
    h.create({ name: 'late', workspace_isolation: true, limits: { disk_mb: 16 } });
    fs.writeFileSync(join(h.home, 'berth.yaml'), 'disk_quotas: off\n');
    const before = await h.run('late', 'web:early', 'mkdir -p a/b; echo kept > a/b/file; ln -s a/b/file link; echo done');
    expect(before.stdout).toBe('done\n');
    expect(isMounted(dirOf('late', 'web:early'))).toBe(false);
    fs.writeFileSync(join(h.home, 'berth.yaml'), 'disk_quotas: loop\n');
    const after = await h.run('late', 'web:early', 'cat a/b/file; readlink link; df -k /workspace | tail -1');
    expect(after.stdout).toMatch(/^kept\na\/b\/file\n/);
    expect(isMounted(dirOf('late', 'web:early'))).toBe(true);
    // Nothing left beside it: the pre-quota copy was dropped once the image held it.
    expect(fs.readdirSync(h.berth.store.get('late').paths.workspacesDir).filter((n) => n.startsWith('.'))).toEqual([]);
  });

  it('a workspace too full for its quota is refused with a clear error, and nothing changes', async () => {
    h.create({ name: 'over', workspace_isolation: true, limits: { disk_mb: 8 } });
    fs.writeFileSync(join(h.home, 'berth.yaml'), 'disk_quotas: off\n');
    await h.run('over', 'web:big', 'dd if=/dev/zero of=big bs=1M count=7 2>/dev/null; dd if=/dev/zero of=big2 bs=1M count=7 2>/dev/null');
    fs.writeFileSync(join(h.home, 'berth.yaml'), 'disk_quotas: loop\n');
    await expect(h.run('over', 'web:big', 'true')).rejects.toMatchObject({ code: 'DISK_QUOTA_FAILED' });
    expect(isMounted(dirOf('over', 'web:big'))).toBe(false);
    expect(fs.statSync(join(dirOf('over', 'web:big'), 'big2')).size).toBe(7 * MiB);
    const quotas = join(h.berth.store.get('over').paths.stateDir, 'quotas');
    expect(fs.existsSync(quotas) ? fs.readdirSync(quotas) : []).toEqual([]); // refused after a walk, before any image
  });

  it('deleting a project unmounts its workspaces, so its trash can be removed', async () => {
    const dir = dirOf('late', 'web:early');
    const { trashed_to } = await h.berth.admin.deleteProject('late', 'late');
    expect(isMounted(dir)).toBe(false);
    fs.rmSync(trashed_to, { recursive: true }); // throws EBUSY over a live mount
    expect(fs.existsSync(trashed_to)).toBe(false);
  });

  it('doctor says which bound is active', () => {
    const on = assessDisk(h.home, '/var/lib/docker', 'loop');
    expect(on).toMatchObject({ name: 'disk quotas', status: 'ok' });
    expect(on.detail).toContain('disk_quotas: loop');
    expect(assessDisk(h.home, '/nonexistent', 'off').detail).toContain('this host can do disk_quotas: loop');
    const unsupported = assessDisk(h.home, '/nonexistent', 'loop', { ok: false, detail: 'no loop devices' });
    expect(unsupported).toMatchObject({ status: 'fail' });
    expect(unsupported.detail).toContain('no loop devices');
  });
});

describe('disk quotas with warm containers', () => {
  let w: TestHome;
  beforeAll(() => {
    w = testHome({ warm: true, config: 'disk_quotas: loop\nruns: { warm_idle_seconds: 60 }\n' });
    w.create({ name: 'wq', workspace_isolation: true, limits: { disk_mb: 16 } });
  });
  afterAll(async () => {
    await w[Symbol.asyncDispose]();
  });
  const df = (o: { stdout: string }) => Number(o.stdout.trim().split(/\s+/)[1]) * 1024;

  it("a resize waits for no container to hold the filesystem: the session's warm containers are let go first", async () => {
    const first = await w.run('wq', 'web:ann', 'echo kept > f; df -k /workspace | tail -1');
    await w.berth.runner.run({ project: 'wq', tenantKey: 'web:ann', sessionId: 'other', message: 'true' }); // a second session, same workspace
    expect(df(first)).toBeLessThanOrEqual(16 * MiB);
    await w.berth.admin.updateProject('wq', { limits: { disk_mb: 40 } });
    const after = await w.run('wq', 'web:ann', 'cat f; df -k /workspace | tail -1');
    expect(after.warm).toBe(false);
    expect(after.stdout.split('\n')[0]).toBe('kept');
    expect(df({ stdout: after.stdout.split('\n')[1] ?? '' })).toBeGreaterThan(30 * MiB);
  });

  it('never resizes a filesystem another container still has mounted (fsck on a live filesystem corrupts it)', async () => {
    const o = await w.run('wq', 'web:bea', 'echo safe > f');
    const dir = join(w.berth.store.get('wq').paths.workspacesDir, o.workspaceId);
    await w.berth.runner.releaseWarm();
    const docker = new Docker();
    const holder = await docker.createContainer({
      Image: 'berth/shell:latest',
      Cmd: ['berth-bridge', 'idle'],
      Labels: { 'berth.managed': 'true', 'berth.installation': installationId(w.home) },
      HostConfig: { NetworkMode: 'none', Mounts: [{ Type: 'bind', Source: dir, Target: '/held', ReadOnly: true }] as never },
    });
    await holder.start();
    try {
      await w.berth.admin.updateProject('wq', { limits: { disk_mb: 24 } });
      const next = await w.run('wq', 'web:bea', 'cat f; df -k /workspace | tail -1');
      expect(next.stdout.split('\n')[0]).toBe('safe');
      expect(df({ stdout: next.stdout.split('\n')[1] ?? '' })).toBeGreaterThan(30 * MiB); // still 40 MiB
    } finally {
      await holder.remove({ force: true });
    }
    await w.berth.runner.releaseWarm();
    const resized = await w.run('wq', 'web:bea', 'cat f; df -k /workspace | tail -1');
    expect(resized.stdout.split('\n')[0]).toBe('safe');
    expect(df({ stdout: resized.stdout.split('\n')[1] ?? '' })).toBeLessThanOrEqual(24 * MiB);
  });
});
