import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import { join } from 'node:path';
import { BerthError, errnoOf } from '../base/errors.js';
import { captureTree, clearDir, restoreTree, type CaptureBase, type CaptureResult } from '../fs/checkpoint-copy.js';
import { ManifestSchema, objectsOf, type FileEntry, type Manifest, type TreeManifest } from '../fs/checkpoint-manifest.js';
import { copyTreeExact } from '../fs/copy-tree-exact.js';
import { fdRealPath, openNoFollow, withFd } from '../fs/fd-path.js';
import { readJsonFile } from '../fs/json-file.js';
import { withOwnerLockSync } from '../fs/lock.js';
import { isOwnFilesystem } from '../fs/mount-table.js';
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
 * runsc), .berth/projects/<name>/checkpoints/<digest of the tenant key>/ with
 *   <id>/meta.json      what /checkpoints shows, and the bytes it owns (plan/checkpoints.ts)
 *   <id>/manifest.json  the workspace and the agent home (its conversation) as they were: each
 *                       entry's metadata, each file's object (fs/checkpoint-manifest.ts)
 *   .objects/<id>/<n>   the file copies checkpoint <id> made; the session's next checkpoints share
 *                       those of files left unchanged. An object goes when no checkpoint uses it.
 * A checkpoint is made in .tmp-<id> and renamed into place: a crash mid-copy leaves a .tmp-*
 * directory (removed with its objects at the tenant's next checkpoint), never a half-made one.
 * (A checkpoint from before the objects holds workspace/ and home/ trees: still restored.)
 */
const DIR = 'checkpoints';
const LOCK = '.lock';
const TMP = '.tmp-';
const OBJECTS = '.objects';

export interface CheckpointSource {
  project: Project;
  tenantKey: string;
  session: string;
  workspace: { id: string; dir: string };
  home: string;
}

type Tree = 'workspace' | 'home';

/** The digest of a tenant's key that names its checkpoint directory (and, on a cluster, labels its checkpoint volume). */
export const checkpointTenant = (tenantKey: string) => createHash('sha256').update(tenantKey).digest('hex').slice(0, 32);
/** Every tenant's checkpoints of a project are below this (a cluster's checkpoint volumes are bound to the tenants' directories). */
export const checkpointsRoot = (stateDir: string) => join(stateDir, DIR);
/** A tenant's checkpoint directory, and the lock all its checkpoints are made under. */
export const tenantDir = (project: Project, tenantKey: string) =>
  join(checkpointsRoot(project.paths.stateDir), checkpointTenant(tenantKey));
export const tenantLock = (project: Project, tenantKey: string) => join(tenantDir(project, tenantKey), LOCK);

/** A loop filesystem's lost+found stays where it is: neither copied nor cleared. */
const rootKeep = (dir: string) => (isOwnFilesystem(dir) ? new Set(['lost+found']) : new Set<string>());

/** The workspace or home directory, opened with no link in its path and still where berth made it. */
function openTree(dir: string): number {
  const { fd, kind } = openNoFollow(dir);
  if (kind !== 'dir' || fdRealPath(fd) !== dir) {
    fs.closeSync(fd);
    throw new BerthError('E_SANDBOX_VIOLATION', `${dir} is not the directory berth made`, { path: dir });
  }
  return fd;
}

/**
 * Manifests read before, by path and inode (a manifest is written once, under a new name): the
 * next checkpoint reads its base's without parsing a thousand entries again. Made by whoever
 * keeps the checkpoints of a process (checkpoint-thread.ts); bounded.
 */
export interface ManifestCache {
  get(path: string, ino: number): Manifest | undefined;
  set(path: string, ino: number, m: Manifest): void;
}

/** Bounded by entries, not manifests: a tenant's 200,000-file checkpoint must not pin gigabytes. */
export function manifestCache(maxEntries = 400_000): ManifestCache {
  const kept = new Map<string, { ino: number; m: Manifest; size: number }>();
  let total = 0;
  const forget = (path: string) => {
    total -= kept.get(path)?.size ?? 0;
    kept.delete(path);
  };
  return {
    get: (path, ino) => {
      const hit = kept.get(path);
      return hit?.ino === ino ? hit.m : undefined;
    },
    set(path, ino, m) {
      forget(path);
      const size = m.workspace.entries.length + m.home.entries.length + 1;
      if (size > maxEntries) return;
      kept.set(path, { ino, m, size });
      total += size;
      for (const old of kept.keys()) if (total > maxEntries) forget(old);
    },
  };
}

function readManifest(dir: string, id: string, cache?: ManifestCache): Manifest | undefined {
  const path = join(dir, id, 'manifest.json');
  const st = cache && fs.statSync(path, { throwIfNoEntry: false });
  const hit = st && cache?.get(path, st.ino);
  if (hit) return hit;
  const m = readJsonFile(path, ManifestSchema);
  if (m && st) cache?.set(path, st.ino, m);
  return m;
}

const filesOf = (tree: TreeManifest) => {
  const files = new Map<string, FileEntry>();
  for (const e of tree.entries) if (e.y === 'f') files.set(e.p, e);
  return files;
};

export function listCheckpoints(project: Project, tenantKey: string, session?: string): CheckpointMeta[] {
  const dir = tenantDir(project, tenantKey);
  const all = readdirIfExists(dir)
    .filter((n) => !n.startsWith('.'))
    .map((n) => readJsonFile(join(dir, n, 'meta.json'), CheckpointMetaSchema))
    .filter((m): m is CheckpointMeta => m !== undefined);
  return sortCheckpoints(session === undefined ? all : all.filter((m) => m.session === session));
}

export function writeMeta(dir: string, meta: CheckpointMeta): void {
  const tmp = join(dir, 'meta.json.tmp');
  fs.writeFileSync(tmp, `${JSON.stringify(meta)}\n`, { mode: 0o600 });
  fs.renameSync(tmp, join(dir, 'meta.json'));
}

/**
 * Remove checkpoints (newest first as given) and write what their successors own now. An object
 * goes with its checkpoint unless the one before or after it (the same session's) uses it too.
 */
export function drop(dir: string, list: CheckpointMeta[], ids: readonly string[], cache?: ManifestCache): CheckpointMeta[] {
  let kept = list;
  for (const id of ids) {
    const gone = kept.find((c) => c.id === id);
    const used = new Set<string>();
    for (const near of kept.filter((c) => c.id === gone?.base || c.base === id)) {
      for (const o of objectsOf(readManifest(dir, near.id, cache) ?? EMPTY)) used.add(o);
    }
    const freed = [...objectsOf(readManifest(dir, id, cache) ?? EMPTY)].filter((o) => !used.has(o));
    const next = withoutCheckpoint(kept, id);
    // The successor's record first: a crash between leaves one counted twice (pruned sooner), never a byte uncounted.
    for (const c of next) if (kept.find((k) => k.id === c.id) !== c) writeMeta(join(dir, c.id), c);
    // Its record before its objects: a crash between leaves objects unused (space), never a checkpoint without its bytes.
    fs.rmSync(join(dir, id), { recursive: true, force: true });
    removeObjects(dir, freed);
    kept = next;
  }
  return kept;
}

const EMPTY: Manifest = {
  v: 1,
  workspace: { root: { u: 0, g: 0, m: 0, a: 0, t: 0 }, entries: [] },
  home: { root: { u: 0, g: 0, m: 0, a: 0, t: 0 }, entries: [] },
};

function removeObjects(dir: string, names: readonly string[]): void {
  const prefixes = new Set<string>();
  for (const o of names) {
    fs.rmSync(join(dir, OBJECTS, o), { force: true });
    prefixes.add(o.split('/')[0] as string);
  }
  for (const p of prefixes) {
    try {
      fs.rmdirSync(join(dir, OBJECTS, p));
    } catch (err) {
      if (errnoOf(err) !== 'ENOTEMPTY' && errnoOf(err) !== 'ENOENT') throw err;
    }
  }
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
  cache?: ManifestCache,
): CheckpointMeta {
  const dir = tenantDir(src.project, src.tenantKey);
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  return withOwnerLockSync(join(dir, LOCK), () => {
    for (const n of readdirIfExists(dir)) {
      if (!n.startsWith(TMP)) continue;
      fs.rmSync(join(dir, n), { recursive: true, force: true });
      fs.rmSync(join(dir, OBJECTS, n.slice(TMP.length)), { recursive: true, force: true });
    }
    const list = listCheckpoints(src.project, src.tenantKey);
    const prior = list.filter((c) => c.session === src.session && c.workspace_id === src.workspace.id).at(-1);
    const priorManifest = prior && readManifest(dir, prior.id, cache);
    const base = priorManifest && prior;
    const started = process.hrtime.bigint();
    const startedNs = BigInt(Date.now()) * 1_000_000n;
    const id = checkpointId(new Date(), randomBytes(3).toString('hex'));
    const tmp = join(dir, `${TMP}${id}`);
    fs.mkdirSync(tmp, { mode: 0o700 });
    let placed = false;
    try {
      const sink = { dir: join(dir, OBJECTS, id), prefix: id, next: 0 };
      const capture = (tree: Tree, from: string, budget: { bytes: number; entries: number }): CaptureResult =>
        withFd(openTree(from), (srcFd) => {
          const captureBase: CaptureBase | undefined =
            base && priorManifest ? { files: filesOf(priorManifest[tree]), startedNs: BigInt(base.started_ns) } : undefined;
          return captureTree(srcFd, sink, { base: captureBase, bounds: budget, skipRoot: rootKeep(from) });
        });
      const ws = capture('workspace', src.workspace.dir, { bytes: bounds.bytes, entries: bounds.files });
      const home = capture('home', src.home, { bytes: bounds.bytes - ws.ownedBytes, entries: bounds.files - ws.count });
      const manifest: Manifest = { v: 1, workspace: ws.manifest, home: home.manifest };
      fs.writeFileSync(join(tmp, 'manifest.json'), JSON.stringify(manifest), { mode: 0o600 });
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
      placed = true;
      cache?.set(join(dir, id, 'manifest.json'), fs.statSync(join(dir, id, 'manifest.json')).ino, manifest);
      const plan = prunePlan([...list, meta], bounds);
      drop(dir, sortCheckpoints([...list, meta]), plan.drop, cache);
      if (plan.drop.includes(id))
        throw new BerthError('LIMIT_REACHED', `the checkpoint would take more than ${Math.round(bounds.bytes / 1048576)} MiB`);
      return plan.kept.find((c) => c.id === id) ?? meta;
    } catch (err) {
      if (!placed) fs.rmSync(join(dir, OBJECTS, id), { recursive: true, force: true });
      throw err;
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
    if (meta.cluster)
      throw new BerthError(
        'LAUNCHER_UNSUPPORTED',
        `checkpoint ${id} was kept on a cluster (launcher: kubernetes): this berth cannot put it back`,
      );
    const manifest = readManifest(dir, id);
    for (const [tree, dest] of [
      ['workspace', target.workspace.dir],
      ['home', target.home],
    ] as const) {
      const keep = rootKeep(dest);
      withFd(openTree(dest), (d) => {
        clearDir(d, keep);
        if (manifest) restoreTree(manifest[tree], join(dir, OBJECTS), d);
        // One kept before the objects: a tree of its own.
        else withFd(openTree(join(dir, id, tree)), (s) => copyTreeExact(s, d, { skipRoot: keep }));
      });
    }
    drop(
      dir,
      listCheckpoints(target.project, target.tenantKey),
      restoreDrops(listCheckpoints(target.project, target.tenantKey), target.session, id),
    );
    return meta;
  });
}

/** Empty the target's workspace and home and copy a live session's into them (a fork). */
export function copyInto(from: { workspace: string; home: string }, to: Omit<CheckpointSource, 'tenantKey' | 'project' | 'session'>): void {
  for (const [source, dest] of [
    [from.workspace, to.workspace.dir],
    [from.home, to.home],
  ] as const) {
    const keep = rootKeep(dest);
    const skipRoot = new Set([...keep, ...rootKeep(source)]);
    withFd(openTree(source), (s) =>
      withFd(openTree(dest), (d) => {
        clearDir(d, keep);
        copyTreeExact(s, d, { skipRoot });
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
