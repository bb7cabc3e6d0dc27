import { z } from 'zod';

/**
 * Checkpoints, as numbers (pure): which to prune, and who owns the bytes. A checkpoint's files
 * are its own copies or hard links to the same session's previous checkpoint (its base): an
 * inode's bytes are counted once, for the oldest checkpoint that holds it. Dropping the oldest
 * hands its successor the bytes it shared with it; dropping the newest frees what it owned.
 */
/** A checkpoint's id: its UTC time to the millisecond, then six random hex digits (sorts by time). */
export const CheckpointIdSchema = z.string().regex(/^\d{8}T\d{9}Z-[0-9a-f]{6}$/, 'is not a checkpoint id (as /checkpoints lists them)');

export const CheckpointMetaSchema = z
  .object({
    id: CheckpointIdSchema,
    session: z.string(),
    workspace_id: z.string(),
    created_at: z.string(),
    /** When its copy began (ns since the epoch, as a string): a file changed close to it is copied again next time. */
    started_ns: z.string().regex(/^\d+$/),
    run: z.string().optional(),
    /** The first words of the message it was kept before. */
    message: z.string().max(200).optional(),
    /** The checkpoint it linked unchanged files to (the same session's previous one), while that is kept. */
    base: z.string().optional(),
    owned_bytes: z.number().int().min(0),
    linked_bytes: z.number().int().min(0),
    files: z.number().int().min(0),
    /** Fifos, sockets and devices left out. */
    skipped: z.number().int().min(0),
    ms: z.number().min(0),
    /**
     * Kept on a cluster (launcher: kubernetes): a copy on the tenant's checkpoint volume, or
     * VolumeSnapshots; `empty` before the session had volumes. Absent: berth's own copy (objects).
     */
    cluster: z
      .object({ way: z.enum(['copy', 'snapshot']), empty: z.literal(true).optional() })
      .strict()
      .optional(),
  })
  .strict();
export type CheckpointMeta = z.output<typeof CheckpointMetaSchema>;

export interface CheckpointBounds {
  /** Checkpoints a tenant keeps (over all its sessions). */
  keep: number;
  /** Bytes they take on disk, all together. */
  bytes: number;
}

export const totalBytes = (list: readonly CheckpointMeta[]) => list.reduce((n, c) => n + c.owned_bytes, 0);

/** The list without `id`; its successor (base === id) now owns what it linked (the dropped one must have had no base). */
export function withoutCheckpoint(list: readonly CheckpointMeta[], id: string): CheckpointMeta[] {
  return list
    .filter((c) => c.id !== id)
    .map((c) => {
      if (c.base !== id) return c;
      const { base: _gone, ...rest } = c;
      return { ...rest, owned_bytes: c.owned_bytes + c.linked_bytes, linked_bytes: 0 };
    });
}

/**
 * Oldest first until the tenant's checkpoints fit its bounds: the ids to remove and the list as
 * it is then. The newest is dropped too when it alone is over the bytes (a checkpoint over the
 * bound is never kept).
 */
export function prunePlan(list: readonly CheckpointMeta[], bounds: CheckpointBounds): { drop: string[]; kept: CheckpointMeta[] } {
  let kept = sortCheckpoints(list);
  const drop: string[] = [];
  while (kept.length > 0 && (kept.length > bounds.keep || totalBytes(kept) > bounds.bytes)) {
    const oldest = kept[0] as CheckpointMeta;
    drop.push(oldest.id);
    kept = withoutCheckpoint(kept, oldest.id);
  }
  return { drop, kept };
}

/**
 * Room for a checkpoint measured before it is made (on a cluster: the copy's size is known first):
 * the tenant's checkpoints to drop, oldest first, so that the rest and it fit the bounds; or why it
 * cannot be kept at all (alone over a bound, or none are kept), and then nothing is dropped.
 */
export function roomFor(
  list: readonly CheckpointMeta[],
  next: CheckpointMeta,
  bounds: CheckpointBounds & { files: number },
): { drop: string[] } | { over: string } {
  if (bounds.keep === 0) return { over: 'checkpoints.keep is 0' };
  if (next.files > bounds.files) return { over: `it would hold more than ${bounds.files} files (checkpoints.max_files)` };
  if (next.owned_bytes > bounds.bytes) return { over: `it would take more than ${Math.round(bounds.bytes / 1048576)} MiB` };
  return { drop: prunePlan([...list, next], bounds).drop };
}

/** Oldest first (ids begin with their time, so they sort the same way). */
export function sortCheckpoints(list: readonly CheckpointMeta[]): CheckpointMeta[] {
  return [...list].sort((a, b) => a.id.localeCompare(b.id));
}

/**
 * What a restore to `id` of `session` removes: that checkpoint (it is used up: the workspace is
 * it now) and the session's newer ones, newest first (so none is dropped before its successor).
 */
export function restoreDrops(list: readonly CheckpointMeta[], session: string, id: string): string[] {
  const mine = sortCheckpoints(list.filter((c) => c.session === session));
  const at = mine.findIndex((c) => c.id === id);
  return at < 0
    ? []
    : mine
        .slice(at)
        .map((c) => c.id)
        .reverse();
}

export function checkpointId(now: Date, random: string): string {
  return `${now.toISOString().replace(/[-:.]/g, '')}-${random.slice(0, 6)}`;
}

/** A tenant's bounds from berth.yaml checkpoints: never more bytes than the project's disk_mb (its quota). */
export function checkpointBounds(
  settings: { keep: number; max_mb: number; max_files: number },
  diskMb: number,
): CheckpointBounds & { files: number } {
  return { keep: settings.keep, bytes: Math.min(settings.max_mb, diskMb) * 1048576, files: settings.max_files };
}
