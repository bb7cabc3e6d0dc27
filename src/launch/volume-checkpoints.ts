/**
 * Checkpoints of volumes a launcher keeps where berth's host cannot reach them (a cluster's
 * claims: docs/checkpoints.md, "Kubernetes"). The launcher copies or snapshots; berth's state keeps
 * the list, the bounds and the locks (store/cluster-checkpoints.ts). Optional in the launcher
 * contract: a launcher whose workspaces are berth's directories has none (the checkpoint thread
 * copies those).
 */

/** A session's volumes: berth's host directories they are bound to (kubernetes/volumes.ts), and what names them. */
export interface SessionVolumes {
  project: string;
  session: string;
  /** The workspace's id (a claim's name and label). */
  workspace: string;
  workspaceDir: string;
  homeDir: string;
  /** A claim made now gets this size: the project's disk_mb. */
  sizeBytes: number;
}

/** Whose checkpoints, where they are kept, and what the copy pods run as. */
export interface CheckpointOwner {
  installation: string;
  /** The berth process (its identity): a copy pod of a dead process is reaped as its containers are. */
  owner?: string;
  /** The digest of the tenant's key, and its checkpoint directory in berth's state (the checkpoint volume is bound to it). */
  tenant: string;
  storeDir: string;
  /** The checkpoint volume's size when it is made: the tenant's bound on checkpoint bytes, and room for the filesystem's own. */
  storeBytes: number;
  /** berth's shell image (busybox) and the agent user, who owns the tenant's files. */
  image: string;
  user: { uid: number; gid: number };
}

export type VolumeCheckpointWay = 'copy' | 'snapshot';

/** A kept checkpoint, as the launcher needs it back. `empty`: kept before the session had volumes at all. */
export interface VolumeCheckpointRef {
  id: string;
  way: VolumeCheckpointWay;
  empty?: boolean;
}

export interface VolumeCheckpoints {
  /**
   * Keep checkpoint `id` of the session's volumes. `keep` is told the checkpoint's size before it is
   * made (undefined where it cannot be measured: a snapshot, or no volume yet), drops what must go
   * to make room, and returns the ids of the tenant's checkpoints still kept; it throws to keep none.
   */
  take(
    v: SessionVolumes,
    o: CheckpointOwner,
    id: string,
    keep: (size: { bytes: number; files: number } | undefined) => string[],
  ): Promise<{ way: VolumeCheckpointWay; bytes: number; files: number; empty: boolean }>;
  /**
   * Put the session's volumes back as `checkpoint` kept them; `drop` (used up) go too. Nothing may
   * hold the volumes meanwhile (the caller retired the session's pods). Returns volume ids whose
   * claims are to be deleted and were not yet (a snapshot's restore makes new claims).
   */
  restore(v: SessionVolumes, o: CheckpointOwner, checkpoint: VolumeCheckpointRef, drop: string[]): Promise<{ retired: string[] }>;
  /** Empty `to`'s volumes and copy `from`'s into them. */
  fork(from: SessionVolumes, to: SessionVolumes, o: CheckpointOwner): Promise<void>;
  /** Remove what the tenant no longer keeps, where that needs no pod (snapshots); a copy goes at the tenant's next copy. */
  sweep(o: CheckpointOwner & { project: string }, keep: string[]): Promise<void>;
}
