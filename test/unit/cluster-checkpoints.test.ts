import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { BerthConfigSchema } from '../../src/config/berth-config-schema.js';
import { readVolumeId, retiredVolumes, volumeIdOf } from '../../src/launch/kubernetes/volumes.js';
import type { VolumeCheckpoints } from '../../src/launch/volume-checkpoints.js';
import { checkpointBounds, roomFor, type CheckpointMeta } from '../../src/plan/checkpoints.js';
import { clusterCheckpointStore } from '../../src/store/cluster-checkpoints.js';
import { listCheckpoints, tenantDir, writeMeta, type CheckpointSource } from '../../src/store/checkpoints.js';
import type { Project } from '../../src/store/projects.js';

/**
 * The list, bounds and locks of checkpoints kept on a cluster (store/cluster-checkpoints.ts), on a
 * stand-in for the launcher's part that does what the copy pod does to the checkpoint volume (a set
 * of ids): what berth's state says and what it asks of the cluster. The cluster's part itself runs
 * in test/integration/kube-checkpoints.test.ts.
 */

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});

const MiB = 1048576;

function rig(opts: { keep?: number; maxMb?: number; size?: number } = {}) {
  let size = opts.size ?? MiB;
  const root = fs.mkdtempSync(join(os.tmpdir(), 'berth-cluster-ckpt-'));
  dirs.push(root);
  const project = {
    paths: { stateDir: join(root, 'state', 'projects', 'p') },
    metadata: { name: 'p', limits: { disk_mb: 100 } },
  } as unknown as Project;
  const config = BerthConfigSchema.parse({ checkpoints: { keep: opts.keep ?? 3, max_mb: opts.maxMb ?? 50 } });
  /** The checkpoint volume as the copy pod leaves it: the ids on it. */
  const onVolume = new Set<string>();
  const calls: string[] = [];
  let active = 0;
  const volumes: VolumeCheckpoints = {
    async take(_v, o, id, keep) {
      active++;
      expect(active, 'one copy of a tenant at a time').toBe(1);
      await new Promise((r) => setTimeout(r, 5));
      const kept = keep({ bytes: size, files: 3 });
      for (const x of [...onVolume]) if (!kept.includes(x)) onVolume.delete(x); // the take's sweep
      onVolume.add(id);
      calls.push(`take ${o.tenant.length}`);
      active--;
      return { way: 'copy', bytes: size, files: 3, empty: false };
    },
    async restore(_v, _o, c, drop) {
      calls.push(`restore ${c.id} drop ${drop.length}`);
      for (const d of drop) onVolume.delete(d);
      return { retired: [] };
    },
    async fork() {
      calls.push('fork');
    },
    async sweep(_o, keep) {
      calls.push(`sweep ${keep.length}`);
    },
  };
  const stateDir = join(root, 'state');
  const store = clusterCheckpointStore({ volumes, installation: 'inst', config: () => config, stateDir });
  const src = (session: string): CheckpointSource => ({
    project,
    tenantKey: 'web:alice',
    session,
    workspace: { id: 'w1', dir: join(root, 'ws') },
    home: join(root, `home-${session}`),
  });
  const bounds = checkpointBounds(config.checkpoints, 100);
  return { project, store, src, bounds, onVolume, calls, stateDir, setSize: (n: number) => void (size = n) };
}

describe('checkpoints on a cluster: the list in berth state, the copies on the cluster', () => {
  it('keeps a record per checkpoint, as on Docker, and prunes the oldest to the count before the copy is made', async () => {
    const r = rig({ keep: 2 });
    const a = await r.store.take(r.src('s1'), r.bounds, { message: 'one' });
    const b = await r.store.take(r.src('s1'), r.bounds, { message: 'two' });
    const c = await r.store.take(r.src('s1'), r.bounds, { message: 'three' });
    expect(c).toMatchObject({ session: 's1', message: 'three', owned_bytes: MiB, files: 3, cluster: { way: 'copy' } });
    expect(listCheckpoints(r.project, 'web:alice').map((m) => m.id)).toEqual([b.id, c.id]);
    expect([...r.onVolume].sort()).toEqual([b.id, c.id]);
    expect(a.id < b.id && b.id < c.id).toBe(true);
  });

  it('one over the bytes alone is not kept, and costs the tenant none of its others', async () => {
    const r = rig({ maxMb: 2 });
    const a = await r.store.take(r.src('s1'), r.bounds);
    r.setSize(3 * MiB);
    await expect(r.store.take(r.src('s1'), r.bounds)).rejects.toMatchObject({ code: 'LIMIT_REACHED' });
    expect(listCheckpoints(r.project, 'web:alice').map((m) => m.id)).toEqual([a.id]);
    expect([...r.onVolume]).toEqual([a.id]);
    expect(roomFor([], { ...a, owned_bytes: 3 * MiB }, r.bounds)).toEqual({ over: 'it would take more than 2 MiB' });
    expect(roomFor([], { ...a, files: 300_000 }, r.bounds)).toEqual({
      over: 'it would hold more than 200000 files (checkpoints.max_files)',
    });
    expect(roomFor([a], { ...a, id: `${a.id.slice(0, -1)}f` }, { ...r.bounds, keep: 1 })).toEqual({ drop: [a.id] });
  });

  it("a tenant's copies take turns in one process (its lock names the process)", async () => {
    const r = rig({ keep: 10 });
    const kept = await Promise.all([
      r.store.take(r.src('s1'), r.bounds),
      r.store.take(r.src('s2'), r.bounds),
      r.store.take(r.src('s1'), r.bounds),
    ]);
    expect(new Set(kept.map((k) => k.id)).size).toBe(3);
    expect(listCheckpoints(r.project, 'web:alice')).toHaveLength(3);
  });

  it('a restore uses up the checkpoint and the newer ones of its session; one kept by berth’s host is refused', async () => {
    const r = rig({ keep: 10 });
    const a = await r.store.take(r.src('s1'), r.bounds);
    const other = await r.store.take(r.src('s2'), r.bounds);
    const b = await r.store.take(r.src('s1'), r.bounds);
    await r.store.restore(r.src('s1'), a.id);
    expect(r.calls).toContain(`restore ${a.id} drop 2`);
    expect(listCheckpoints(r.project, 'web:alice').map((m) => m.id)).toEqual([other.id]);
    expect(r.onVolume.has(b.id)).toBe(false);

    const host: CheckpointMeta = { ...a, id: '20200101T000000000Z-000000' };
    delete (host as Partial<CheckpointMeta>).cluster;
    const dir = join(tenantDir(r.project, 'web:alice'), host.id);
    fs.mkdirSync(dir);
    writeMeta(dir, host);
    await expect(r.store.restore(r.src('s1'), host.id)).rejects.toMatchObject({ code: 'LAUNCHER_UNSUPPORTED' });
  });

  it("a deleted session's checkpoints go; with the last one the checkpoint volume is retired (a forgotten tenant leaves nothing)", async () => {
    const r = rig({ keep: 10 });
    await r.store.take(r.src('s1'), r.bounds);
    await r.store.take(r.src('s2'), r.bounds);
    const dir = tenantDir(r.project, 'web:alice');
    const volume = volumeIdOf(dir); // what the launcher bound the checkpoint claim to
    await r.store.dropSession(r.project, 'web:alice', 's1');
    expect(listCheckpoints(r.project, 'web:alice').map((m) => m.session)).toEqual(['s2']);
    expect(readVolumeId(dir)).toBe(volume);
    await r.store.dropSession(r.project, 'web:alice', 's2');
    expect(listCheckpoints(r.project, 'web:alice')).toEqual([]);
    expect(readVolumeId(dir)).toBeUndefined();
    expect(retiredVolumes(r.stateDir, 10).ids).toEqual([volume]);
    expect(r.calls.filter((c) => c.startsWith('sweep'))).toEqual(['sweep 1', 'sweep 0']);
  });
});
