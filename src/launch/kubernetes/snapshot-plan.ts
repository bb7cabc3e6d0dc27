import type { V1PersistentVolumeClaim } from '@kubernetes/client-node';
import { BerthError } from '../../base/errors.js';
import { LABELS } from '../../plan/labels.js';
import { kubeLabelValue, metaOf, nameHash, TENANT_LABEL } from './claims.js';

/**
 * Checkpoints as CSI VolumeSnapshots (snapshot.storage.k8s.io/v1), pure: whether a cluster offers
 * them for a volume, the snapshot objects of a checkpoint, a restored claim (a new claim with the
 * snapshot as its dataSource), and which snapshots may go. kubernetes/volume-snapshots.ts asks
 * the cluster. No CSI snapshotter runs in berth's test clusters: this path is tested as plans only.
 */

export const SNAPSHOT_API = { group: 'snapshot.storage.k8s.io', version: 'v1', plural: 'volumesnapshots', kind: 'VolumeSnapshot' } as const;
export const SNAPSHOT_CLASS_API = { group: 'snapshot.storage.k8s.io', version: 'v1', plural: 'volumesnapshotclasses' } as const;
/** A snapshot's checkpoint id, and which of the session's volumes it is of. */
export const CHECKPOINT_LABEL = 'berth.checkpoint';
export const SIDE_LABEL = 'berth.side';
const DEFAULT_CLASS = 'snapshot.storage.kubernetes.io/is-default-class';

export type SnapshotSide = 'workspace' | 'home';

export interface SnapshotClass {
  metadata?: { name?: string; annotations?: Record<string, string> };
  driver?: string;
}

/**
 * The class to snapshot a volume of `driver` with: the one berth.yaml names (it must be for that
 * driver), else the driver's default, else its only one; undefined when there is none.
 */
export function pickSnapshotClass(classes: readonly SnapshotClass[], driver: string | undefined, named?: string): string | undefined {
  if (!driver) return undefined;
  const mine = classes.filter((c) => c.driver === driver && c.metadata?.name);
  if (named) return mine.find((c) => c.metadata?.name === named)?.metadata?.name;
  const defaults = mine.filter((c) => c.metadata?.annotations?.[DEFAULT_CLASS] === 'true');
  if (defaults.length === 1) return defaults[0]?.metadata?.name;
  return mine.length === 1 ? mine[0]?.metadata?.name : undefined;
}

/** What the cluster offers for a volume, as read: whether it serves the API, and the class picked for the volume's driver. */
export interface SnapshotOffer {
  served: boolean;
  driver?: string;
  className?: string;
}

/** copy or snapshot, as berth.yaml kubernetes.checkpoints.way says and the cluster offers; "snapshot" where it cannot be had is refused. */
export function checkpointWay(
  way: 'auto' | 'copy' | 'snapshot',
  offer: SnapshotOffer,
): { way: 'copy' } | { way: 'snapshot'; className: string } {
  if (way === 'copy') return { way: 'copy' };
  if (offer.served && offer.className) return { way: 'snapshot', className: offer.className };
  if (way === 'auto') return { way: 'copy' };
  const why = !offer.served
    ? 'the cluster does not serve snapshot.storage.k8s.io/v1 (no CSI snapshot controller)'
    : `no VolumeSnapshotClass is for the volumes' driver (${offer.driver ?? 'unknown: their StorageClass could not be read'})`;
  throw new BerthError('LAUNCHER_UNSUPPORTED', `kubernetes.checkpoints.way is "snapshot", but ${why}`, {
    hint: 'install the CSI snapshotter and a VolumeSnapshotClass for the driver, or set kubernetes.checkpoints.way: auto (a copy pod)',
  });
}

export interface SnapshotOwner {
  installation: string;
  project: string;
  /** The digest of the tenant's key (its checkpoint directory's name in berth's state). */
  tenant: string;
  namespace: string;
}

export const snapshotName = (o: SnapshotOwner, id: string, side: SnapshotSide) =>
  `berth-snap-${nameHash(o.installation, o.project, o.tenant, id, side)}`;

/** The selector of a tenant's snapshots (all of them, or one checkpoint's). */
export const snapshotSelector = (o: SnapshotOwner, id?: string) =>
  [
    `${LABELS.managed}=true`,
    `${LABELS.installation}=${kubeLabelValue(o.installation)}`,
    `${TENANT_LABEL}=${o.tenant}`,
    ...(id ? [`${CHECKPOINT_LABEL}=${id}`] : []),
  ].join(',');

export interface VolumeSnapshot {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace: string; labels: Record<string, string>; annotations: Record<string, string> };
  spec: { volumeSnapshotClassName: string; source: { persistentVolumeClaimName: string } };
}

/** A snapshot of one of a session's claims for checkpoint `id`. */
export function renderSnapshot(o: SnapshotOwner, id: string, side: SnapshotSide, claim: string, className: string): VolumeSnapshot {
  return {
    apiVersion: `${SNAPSHOT_API.group}/${SNAPSHOT_API.version}`,
    kind: SNAPSHOT_API.kind,
    metadata: {
      name: snapshotName(o, id, side),
      namespace: o.namespace,
      ...metaOf({
        [LABELS.managed]: 'true',
        [LABELS.installation]: o.installation,
        [LABELS.project]: o.project,
        [TENANT_LABEL]: o.tenant,
        [CHECKPOINT_LABEL]: id,
        [SIDE_LABEL]: side,
      }),
    },
    spec: { volumeSnapshotClassName: className, source: { persistentVolumeClaimName: claim } },
  };
}

/**
 * A restored volume: the claim berth would make for the host directory's new volume id, with the
 * snapshot as its dataSource, at least as large as the snapshot needs.
 */
export function claimFromSnapshot(claim: V1PersistentVolumeClaim, snapshot: string, restoreBytes?: number): V1PersistentVolumeClaim {
  const want = Number(claim.spec?.resources?.requests?.storage ?? 0);
  const size = restoreBytes !== undefined && restoreBytes > want ? restoreBytes : want;
  return {
    ...claim,
    spec: {
      ...claim.spec,
      resources: { requests: { storage: String(size) } },
      dataSource: { apiGroup: SNAPSHOT_API.group, kind: SNAPSHOT_API.kind, name: snapshot },
    },
  };
}

/** Where a snapshot is: cut (its content fixed, even if the driver still uploads it), failed (the driver's words), or not yet. */
export function snapshotState(
  status: { readyToUse?: boolean; creationTime?: string; error?: { message?: string } } | undefined,
): 'cut' | 'pending' | { failed: string } {
  if (status?.error?.message) return { failed: status.error.message };
  if (status?.readyToUse || status?.creationTime) return 'cut';
  return 'pending';
}

/**
 * A tenant's snapshots that may be deleted: those of checkpoints it no longer keeps, except one a
 * claim is still being made from (a restored volume provisions when its first pod is placed: the
 * snapshot must outlive that). They go at a later sweep.
 */
export function snapshotsToDelete(
  snapshots: ReadonlyArray<{ name: string; checkpoint: string }>,
  keep: ReadonlySet<string>,
  claims: ReadonlyArray<{ dataSource?: { kind?: string; name?: string }; phase?: string }>,
): string[] {
  const pending = new Set(
    claims.filter((c) => c.dataSource?.kind === SNAPSHOT_API.kind && c.phase !== 'Bound').map((c) => c.dataSource?.name ?? ''),
  );
  return snapshots.filter((s) => !keep.has(s.checkpoint) && !pending.has(s.name)).map((s) => s.name);
}
