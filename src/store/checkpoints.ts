import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { BerthError } from '../base/errors.js';
import { clearDir, copyCheckpointTree, type CopyBase, type CopyEntry, type CopyResult } from '../fs/checkpoint-copy.js';
import { fdRealPath, openNoFollow, openRootDir, withFd } from '../fs/fd-path.js';
import { readJsonFile } from '../fs/json-file.js';
import { withOwnerLockSync } from '../fs/lock.js';
import { isMounted } from '../fs/mount-table.js';
import { readdirIfExists } from '../fs/dir.js';
import {
  checkpointId,
  CheckpointMetaSchema,
  prunePlan,
  restoreDrops,
  sortCheckpoints,
  withoutCheckpoint,
  type CheckpointBounds,
  type CheckpointMeta,
} from '../plan/checkpoints.js';
import type { Project } from './projects.js';

/**
 * A tenant's checkpoints: berth's private state (never mounted into a container, under runc or
 * runsc), .berth/projects/<name>/checkpoints/<digest of the tenant key>/<id>/ with
 *   meta.json     what /checkpoints shows, and the bytes it owns (plan/checkpoints.ts)
 *   entries.json  each regular file's source identity, for the next checkpoint's links
 *   workspace/    the workspace as it was      home/  the session's agent home (its conversation)
 * A checkpoint is made in .tmp-<id> and renamed into place: a crash mid-copy leaves a .tmp-*
 * directory (removed at the tenant's next checkpoint), never a half-made checkpoint.
 */
const DIR = 'checkpoints';
const LOCK = '.lock';
const TMP = '.tmp-';

const EntriesSchema = z.object({
  workspace: z.record(z.string(), z.object({ k: z.string(), b: z.number(), l: z.literal(1).optional() })),
  home: z.record(z.string(), z.object({ k: z.string(), b: z.number(), l: z.literal(1).optional() })),
});

export interface CheckpointSource {
  project: Project;
  tenantKey: string;
  session: string;
  workspace: { id: string; dir: string };
  home: string;
}

const tenantDir = (project: Project, tenantKey: string) =>
  join(project.paths.stateDir, DIR, createHash('sha256').update(tenantKey).digest('hex').slice(0, 32));

/** A loop filesystem's lost+found stays where it is: neither copied nor cleared. */
const rootKeep = (dir: string) => (isMounted(dir) ? new Set(['lost+found']) : new Set<string>());

/** The workspace or home directory, opened with no link in its path and still where berth made it. */
function openTree(dir: string): number {
  const { fd, kind } = openNoFollow(dir);
  if (kind !== 'dir' || fdRealPath(fd) !== dir) {
    fs.closeSync(fd);
    throw new BerthError('E_SANDBOX_VIOLATION', `${dir} is not the directory berth made`, { path: dir });
  }
  return fd;
}

export function listCheckpoints(project: Project, tenantKey: string, session?: string): CheckpointMeta[] {
  const dir = tenantDir(project, tenantKey);
  const all = readdirIfExists(dir)
    .filter((n) => !n.startsWith('.'))
    .map((n) => readJsonFile(join(dir, n, 'meta.json'), CheckpointMetaSchema))
    .filter((m): m is CheckpointMeta => m !== undefined);
  return sortCheckpoints(session === undefined ? all : all.filter((m) => m.session === session));
}

function writeMeta(dir: string, meta: CheckpointMeta): void {
  const tmp = join(dir, 'meta.json.tmp');
  fs.writeFileSync(tmp, `${JSON.stringify(meta)}\n`, { mode: 0o600 });
  fs.renameSync(tmp, join(dir, 'meta.json'));
}

/** Remove checkpoints (newest first as given) and write what their successors own now. */
function drop(dir: string, list: CheckpointMeta[], ids: readonly string[]): CheckpointMeta[] {
  let kept = list;
  for (const id of ids) {
    const next = withoutCheckpoint(kept, id);
    // The successor's record first: a crash between leaves one counted twice (pruned sooner), never a byte uncounted.
    for (const c of next) if (kept.find((k) => k.id === c.id) !== c) writeMeta(join(dir, c.id), c);
    fs.rmSync(join(dir, id), { recursive: true, force: true });
    kept = next;
  }
  return kept;
}

/**
 * Keep a checkpoint of the session's workspace and home now; then the tenant's oldest go until
 * its checkpoints fit `bounds`. Under the tenant's lock (its sessions may run at once, in more
 * than one berth process). LIMIT_REACHED when this one alone is over the bounds (none is kept).
 */
export function takeCheckpoint(
  src: CheckpointSource,
  bounds: CheckpointBounds & { files: number },
  about: { run?: string; message?: string } = {},
): CheckpointMeta {
  const dir = tenantDir(src.project, src.tenantKey);
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  return withOwnerLockSync(join(dir, LOCK), () => {
    for (const n of readdirIfExists(dir)) if (n.startsWith(TMP)) fs.rmSync(join(dir, n), { recursive: true, force: true });
    const list = listCheckpoints(src.project, src.tenantKey);
    const base = list.filter((c) => c.session === src.session && c.workspace_id === src.workspace.id).at(-1);
    const baseEntries = base && readJsonFile(join(dir, base.id, 'entries.json'), EntriesSchema);
    const started = process.hrtime.bigint();
    const startedNs = BigInt(Date.now()) * 1_000_000n;
    const id = checkpointId(new Date(), randomBytes(3).toString('hex'));
    const tmp = join(dir, `${TMP}${id}`);
    fs.mkdirSync(join(tmp, 'workspace'), { recursive: true, mode: 0o700 });
    fs.mkdirSync(join(tmp, 'home'), { mode: 0o700 });
    try {
      const copy = (tree: 'workspace' | 'home', from: string, budget: { bytes: number; files: number }): CopyResult =>
        withFd(openTree(from), (srcFd) =>
          withFd(openRootDir(join(tmp, tree)), (dstFd) => {
            const copyBase: CopyBase | undefined =
              base && baseEntries
                ? { dir: join(dir, base.id, tree), entries: baseEntries[tree], startedNs: BigInt(base.started_ns) }
                : undefined;
            const bounds = { bytes: budget.bytes, entries: budget.files };
            return copyCheckpointTree(srcFd, dstFd, { base: copyBase, bounds, skipRoot: rootKeep(from), dstDir: join(tmp, tree) });
          }),
        );
      const ws = copy('workspace', src.workspace.dir, { bytes: bounds.bytes, files: bounds.files });
      const home = copy('home', src.home, { bytes: bounds.bytes - ws.ownedBytes, files: bounds.files - ws.count });
      const entries: Record<'workspace' | 'home', Record<string, CopyEntry>> = { workspace: ws.entries, home: home.entries };
      fs.writeFileSync(join(tmp, 'entries.json'), JSON.stringify(entries), { mode: 0o600 });
      const meta: CheckpointMeta = {
        id,
        session: src.session,
        workspace_id: src.workspace.id,
        created_at: new Date().toISOString(),
        started_ns: startedNs.toString(),
        ...(about.run ? { run: about.run } : {}),
        ...(about.message ? { message: about.message.replace(/\s+/g, ' ').trim().slice(0, 80) } : {}),
        ...(base ? { base: base.id } : {}),
        owned_bytes: ws.ownedBytes + home.ownedBytes,
        linked_bytes: ws.linkedBytes + home.linkedBytes,
        files: ws.count + home.count,
        skipped: ws.skipped + home.skipped,
        ms: Number(process.hrtime.bigint() - started) / 1e6,
      };
      writeMeta(tmp, meta);
      fs.renameSync(tmp, join(dir, id));
      const plan = prunePlan([...list, meta], bounds);
      drop(dir, sortCheckpoints([...list, meta]), plan.drop);
      if (plan.drop.includes(id))
        throw new BerthError('LIMIT_REACHED', `the checkpoint would take more than ${Math.round(bounds.bytes / 1048576)} MiB`);
      return plan.kept.find((c) => c.id === id) ?? meta;
    } finally {
      fs.rmSync(tmp, { recursive: true, force: true });
    }
  });
}

/** One of the session's checkpoints; CHECKPOINT_NOT_FOUND when it is not kept (the newest when no id is given). */
export function findCheckpoint(project: Project, tenantKey: string, session: string, id?: string): CheckpointMeta {
  const mine = listCheckpoints(project, tenantKey, session);
  const found = id === undefined ? mine.at(-1) : mine.find((c) => c.id === id);
  if (!found)
    throw new BerthError(
      'CHECKPOINT_NOT_FOUND',
      id === undefined ? `session "${session}" has no checkpoint to go back to` : `session "${session}" has no checkpoint "${id}"`,
    );
  return found;
}

/**
 * Put the session's workspace and home back as checkpoint `id` kept them; it and the session's
 * newer ones are used up. No container may hold the workspace or the home meanwhile (the caller's
 * part): the tree is emptied and copied into in place (a loop-mounted workspace cannot be swapped).
 */
export function restoreCheckpoint(target: CheckpointSource, id: string): CheckpointMeta {
  const dir = tenantDir(target.project, target.tenantKey);
  return withOwnerLockSync(join(dir, LOCK), () => {
    const meta = findCheckpoint(target.project, target.tenantKey, target.session, id);
    copyInto(join(dir, id), target);
    drop(
      dir,
      listCheckpoints(target.project, target.tenantKey),
      restoreDrops(listCheckpoints(target.project, target.tenantKey), target.session, id),
    );
    return meta;
  });
}

/** Empty the target's workspace and home and copy `from` (a checkpoint, or a live session's) into them. */
export function copyInto(
  from: { workspace: string; home: string } | string,
  to: Omit<CheckpointSource, 'tenantKey' | 'project' | 'session'>,
): void {
  const src = typeof from === 'string' ? { workspace: join(from, 'workspace'), home: join(from, 'home') } : from;
  const unbounded = { bytes: Number.MAX_SAFE_INTEGER, entries: Number.MAX_SAFE_INTEGER };
  for (const [source, dest] of [
    [src.workspace, to.workspace.dir],
    [src.home, to.home],
  ] as const) {
    const keep = rootKeep(dest);
    const skipRoot = new Set([...keep, ...rootKeep(source)]);
    withFd(openTree(source), (s) =>
      withFd(openTree(dest), (d) => {
        clearDir(d, keep);
        copyCheckpointTree(s, d, { bounds: unbounded, skipRoot });
      }),
    );
  }
}

/** Forget a session's checkpoints (it was deleted): newest first. */
export function dropSessionCheckpoints(project: Project, tenantKey: string, session: string): void {
  const dir = tenantDir(project, tenantKey);
  if (!fs.existsSync(dir)) return;
  withOwnerLockSync(join(dir, LOCK), () => {
    const list = listCheckpoints(project, tenantKey);
    drop(
      dir,
      list,
      list
        .filter((c) => c.session === session)
        .map((c) => c.id)
        .reverse(),
    );
  });
}
