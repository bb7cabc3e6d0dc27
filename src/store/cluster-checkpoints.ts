import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import { join } from 'node:path';
import { createKeyedLock } from '../base/keyed-lock.js';
import { BerthError } from '../base/errors.js';
import type { BerthConfig } from '../config/berth-config.js';
import { KubernetesSchema } from '../config/kubernetes.js';
import { withOwnerLock } from '../fs/lock.js';
import { readVolumeId, recordRetired, VOLUME_MARKER } from '../launch/kubernetes/volumes.js';
import type { CheckpointOwner, SessionVolumes, VolumeCheckpoints } from '../launch/volume-checkpoints.js';
import {
  checkpointBounds,
  checkpointId,
  restoreDrops,
  roomFor,
  sortCheckpoints,
  type CheckpointBounds,
  type CheckpointMeta,
} from '../plan/checkpoints.js';
import type { CheckpointThread } from './checkpoint-thread.js';
import {
  checkpointTenant,
  drop,
  findCheckpoint,
  listCheckpoints,
  tenantDir,
  tenantLock,
  writeMeta,
  type CheckpointSource,
} from './checkpoints.js';
import type { Project } from './projects.js';

/**
 * Checkpoints where the workspaces and homes are a cluster's claims (launcher: kubernetes): the
 * launcher copies or snapshots them (launch/volume-checkpoints.ts), berth's state keeps the list
 * as on Docker (each checkpoint's meta.json in the tenant's directory, no objects), so listing,
 * the bounds (plan/checkpoints.ts) and /checkpoints are the same. A tenant's checkpoints are
 * made under its lock, across processes; this process's calls for one tenant take turns first.
 */

const TMP = '.tmp-';
/** Room beside the bound for the checkpoint volume's filesystem (ext4 keeps 5% for root, and its journal). */
const storeBytesFor = (bytes: number) => Math.ceil(bytes * 1.15) + 64 * 1048576;

export function clusterCheckpointStore(deps: {
  volumes: VolumeCheckpoints;
  installation: string;
  /** This berth process (its identity): its copy pods' owner. */
  owner?: string;
  config: () => BerthConfig;
  /** berth's state directory: claims of volumes replaced by a restore wait there for deletion (kubernetes/volumes.ts). */
  stateDir: string;
}): CheckpointThread {
  const turn = createKeyedLock();
  const kube = () => deps.config().kubernetes ?? KubernetesSchema.parse({});

  const volumesOf = (s: CheckpointSource): SessionVolumes => ({
    project: s.project.metadata.name,
    session: s.session,
    workspace: s.workspace.id,
    workspaceDir: s.workspace.dir,
    homeDir: s.home,
    sizeBytes: s.project.metadata.limits.disk_mb * 1048576,
  });
  const ownerOf = (project: Project, tenantKey: string): CheckpointOwner => {
    const cfg = deps.config();
    const dir = tenantDir(project, tenantKey);
    fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
    return {
      installation: deps.installation,
      ...(deps.owner ? { owner: deps.owner } : {}),
      tenant: checkpointTenant(tenantKey),
      storeDir: dir,
      storeBytes: storeBytesFor(checkpointBounds(cfg.checkpoints, project.metadata.limits.disk_mb).bytes),
      image: cfg.images.shell,
      user: { uid: cfg.agent_user.uid, gid: cfg.agent_user.gid },
    };
  };

  /** fn in the tenant's turn here, holding its lock across processes (for as long as a copy may take). */
  const locked = <T>(project: Project, tenantKey: string, fn: (dir: string, o: CheckpointOwner) => Promise<T>): Promise<T> => {
    const o = ownerOf(project, tenantKey);
    const k = kube();
    const timeoutMs = (k.start_timeout_seconds + 3 * k.checkpoints.timeout_seconds) * 1000;
    return turn(o.storeDir, () => withOwnerLock(tenantLock(project, tenantKey), () => fn(o.storeDir, o), { timeoutMs }));
  };

  return {
    take: (src, bounds, about = {}) =>
      locked(src.project, src.tenantKey, (dir, o) => takeOn(deps.volumes, volumesOf(src), src, bounds, about, dir, o)),

    restore: (target, checkpoint) =>
      locked(target.project, target.tenantKey, async (dir, o) => {
        const meta = findCheckpoint(target.project, target.tenantKey, target.session, checkpoint);
        if (!meta.cluster)
          throw new BerthError(
            'LAUNCHER_UNSUPPORTED',
            `checkpoint ${checkpoint} was kept by berth's host (launcher: docker): it cannot be put back on the cluster`,
          );
        const list = listCheckpoints(target.project, target.tenantKey);
        const used = restoreDrops(list, target.session, checkpoint);
        const { retired } = await deps.volumes.restore(
          volumesOf(target),
          o,
          { id: meta.id, way: meta.cluster.way, ...(meta.cluster.empty ? { empty: true } : {}) },
          used,
        );
        if (retired.length) recordRetired(deps.stateDir, retired);
        drop(dir, list, used);
        return meta;
      }),

    copyInto: (from, to) => deps.volumes.fork(volumesOf(from), volumesOf(to), ownerOf(from.project, from.tenantKey)),

    dropSession: async (project, tenantKey, session) => {
      if (!fs.existsSync(tenantDir(project, tenantKey))) return;
      await locked(project, tenantKey, async (dir, o) => {
        const list = listCheckpoints(project, tenantKey);
        const mine = list.filter((c) => c.session === session).map((c) => c.id);
        const kept = drop(dir, list, mine.reverse());
        await deps.volumes.sweep(
          { ...o, project: project.metadata.name },
          kept.map((c) => c.id),
        );
        // None left: the checkpoint volume goes too (a forgotten tenant leaves nothing on the cluster); a new one is made at need.
        const volume = kept.length ? undefined : readVolumeId(dir);
        if (volume) {
          fs.rmSync(join(dir, VOLUME_MARKER), { force: true });
          recordRetired(deps.stateDir, [volume]);
        }
      });
    },

    close: async () => undefined,
  };
}

/**
 * Keep a checkpoint of the session on the cluster (the caller holds the tenant's lock): the oldest
 * go, before the copy, until it fits the bounds as measured; its record is written once it is
 * there. Over the bounds alone: LIMIT_REACHED, and the tenant's others stay.
 */
async function takeOn(
  volumes: VolumeCheckpoints,
  v: SessionVolumes,
  src: CheckpointSource,
  bounds: CheckpointBounds & { files: number },
  about: { run?: string; message?: string },
  dir: string,
  o: CheckpointOwner,
): Promise<CheckpointMeta> {
  for (const n of fs.readdirSync(dir)) if (n.startsWith(TMP)) fs.rmSync(join(dir, n), { recursive: true, force: true });
  const list = listCheckpoints(src.project, src.tenantKey);
  const t0 = process.hrtime.bigint();
  const id = checkpointId(new Date(), randomBytes(3).toString('hex'));
  const meta = (bytes: number, files: number): CheckpointMeta => ({
    id,
    session: src.session,
    workspace_id: src.workspace.id,
    created_at: new Date().toISOString(),
    started_ns: (BigInt(Date.now()) * 1_000_000n).toString(),
    ...(about.run ? { run: about.run } : {}),
    ...(about.message ? { message: about.message.replace(/\s+/g, ' ').trim().slice(0, 80) } : {}),
    owned_bytes: bytes,
    linked_bytes: 0,
    files,
    skipped: 0,
    ms: 0,
  });
  const taken = await volumes.take(v, o, id, (size) => {
    const room = roomFor(list, meta(size?.bytes ?? 0, size?.files ?? 0), bounds);
    if ('over' in room) throw new BerthError('LIMIT_REACHED', `no checkpoint kept: ${room.over}`);
    // Their records go first: a copy left of one is removed by the copy that follows (it keeps only what is listed).
    return drop(dir, sortCheckpoints(list), room.drop).map((c) => c.id);
  });
  const kept: CheckpointMeta = {
    ...meta(taken.bytes, taken.files),
    ms: Number(process.hrtime.bigint() - t0) / 1e6,
    cluster: { way: taken.way, ...(taken.empty ? { empty: true as const } : {}) },
  };
  const tmp = join(dir, `${TMP}${id}`);
  fs.mkdirSync(tmp, { mode: 0o700 });
  writeMeta(tmp, kept);
  fs.renameSync(tmp, join(dir, id));
  return kept;
}
