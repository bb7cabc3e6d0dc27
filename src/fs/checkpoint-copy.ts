import fs from 'node:fs';
import { join } from 'node:path';
import { BerthError, errnoOf } from '../base/errors.js';
import type { FileEntry, ManifestEntry, TreeManifest } from './checkpoint-manifest.js';
import { at, closeQuietly, openChildDir, withFd } from './fd-path.js';
import { copyBuffers, copyBytes, keepMeta, linkTo, makeSymlink, metaOf, type EntryMeta } from './file-copy.js';
import { removeTreeAt } from './tree.js';
import { MAX_TREE_DEPTH, walkTree, type TreeVisitor } from './tree-walk.js';

/**
 * The copies behind a checkpoint: `captureTree` reads a tenant's tree (walked by descriptor,
 * tree-walk.ts) into a manifest and objects (checkpoint-manifest.ts); `restoreTree` writes a
 * manifest back into an emptied tree. Kept: directories, regular files with their holes,
 * symbolic links as links, hard links, owners, modes and times. Fifos, sockets and devices are
 * left out (counted).
 *
 * A file unchanged since the base (the session's previous checkpoint) shares the base's object:
 * no copy, no link, one lstat. Safe because objects are berth's and never written after they are
 * made: the tenant's own file is never linked, only read. "Unchanged" is its inode, size, mtime
 * and ctime as the base saw them; the tenant can set mtime but not ctime, and a file whose ctime
 * was within RACY_NS of the base's start is copied again (a write in the same clock tick as the
 * base's look would keep its times: git's "racy" case).
 */
export interface CaptureBase {
  /** The base's files by path. */
  files: ReadonlyMap<string, FileEntry>;
  startedNs: bigint;
}

export interface CaptureBounds {
  /** Allocated bytes of the objects made (not those shared with the base). */
  bytes: number;
  /** Files, directories and links. */
  entries: number;
}

export interface CaptureResult {
  manifest: TreeManifest;
  ownedBytes: number;
  linkedBytes: number;
  count: number;
  skipped: number;
}

/** Where new objects go: `dir` (berth's own, `objects/<prefix>`), named `<prefix>/<n>` from `next`. */
export interface ObjectSink {
  dir: string;
  prefix: string;
  next: number;
}

export const RACY_NS = 2_000_000_000n;
const { O_RDONLY, O_NOFOLLOW, O_NONBLOCK, O_WRONLY, O_CREAT, O_EXCL } = fs.constants;

const keyOf = (st: fs.BigIntStats) => `${st.dev}:${st.ino}:${st.size}:${st.mtimeNs}:${st.ctimeNs}`;
const toMeta = (m: EntryMeta) => ({ u: m.uid, g: m.gid, m: m.mode, a: m.atime, t: m.mtime });
const fromMeta = (e: { u: number; g: number; m: number; a: number; t: number }): EntryMeta => ({
  uid: e.u,
  gid: e.g,
  mode: e.m,
  atime: e.a,
  mtime: e.t,
});

/** Over a bound: nothing of the copy is kept (the caller removes what it made). */
function over(what: string): BerthError {
  return new BerthError('LIMIT_REACHED', `the checkpoint would hold more than ${what}`, {
    hint: 'berth.yaml checkpoints.max_mb and checkpoints.max_files bound a tenant; older checkpoints are pruned first',
  });
}

function changed(shown: string): BerthError {
  return new BerthError('E_SANDBOX_VIOLATION', `${shown} changed while it was copied`, { path: shown });
}

/** Read the tree under srcFd into a manifest, new or changed files into objects of `sink`. `skipRoot`: root names left out (lost+found). */
export function captureTree(
  srcFd: number,
  sink: ObjectSink,
  opts: { base?: CaptureBase; bounds: CaptureBounds; skipRoot?: ReadonlySet<string> },
): CaptureResult {
  const { base, bounds } = opts;
  const entries: ManifestEntry[] = [];
  const out = { ownedBytes: 0, linkedBytes: 0, count: 0, skipped: 0 };
  const links = new Map<string, FileEntry>();
  const buffers = copyBuffers();
  const dirAt = new Map<string, Extract<ManifestEntry, { y: 'd' }>>();
  const counted = () => {
    if (++out.count > bounds.entries) throw over(`${bounds.entries} files and folders`);
  };
  let sinkMade = false;

  /** Unchanged since the base, decided from the walk's lstat alone: the base's object, nothing read. */
  const shared = (rel: string, st: fs.BigIntStats): FileEntry | undefined => {
    const prior = base?.files.get(rel);
    if (!base || !prior || prior.h !== undefined || st.nlink > 1n) return undefined;
    if (prior.k !== keyOf(st) || st.ctimeNs + RACY_NS >= base.startedNs) return undefined;
    return { ...prior, ...toMeta(metaOf(st)), p: rel };
  };

  const copyFile = (dirFd: number, name: string, rel: string): FileEntry | undefined => {
    let fd: number;
    try {
      fd = fs.openSync(at(dirFd, name), O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
    } catch (err) {
      if (errnoOf(err) === 'ENOENT') return undefined; // removed meanwhile
      throw changed(rel);
    }
    return withFd(fd, () => {
      const st = fs.fstatSync(fd, { bigint: true });
      if (!st.isFile()) throw changed(rel);
      const inode = `${st.dev}:${st.ino}`;
      // A second name of a file hard-linked in the tree: the first name's object.
      const first = st.nlink > 1n ? links.get(inode) : undefined;
      if (first) return { ...first, ...toMeta(metaOf(st)), p: rel, b: 0, h: first.p };
      const bytes = Number(st.blocks) * 512;
      out.ownedBytes += bytes;
      if (out.ownedBytes > bounds.bytes) throw over(`${Math.round(bounds.bytes / 1048576)} MiB`);
      if (!sinkMade) fs.mkdirSync(sink.dir, { recursive: true, mode: 0o700 });
      sinkMade = true;
      const n = sink.next++;
      withFd(fs.openSync(join(sink.dir, String(n)), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0o600), (obj) =>
        copyBytes(fd, obj, Number(st.size), bytes, buffers),
      );
      // Shared with the next checkpoint only if it did not change while it was read.
      const key = keyOf(st);
      const after = keyOf(fs.fstatSync(fd, { bigint: true }));
      const entry: FileEntry = {
        y: 'f',
        p: rel,
        ...toMeta(metaOf(st)),
        k: after === key ? key : `changed:${key}`,
        b: bytes,
        o: `${sink.prefix}/${n}`,
      };
      if (st.nlink > 1n) links.set(inode, entry);
      return entry;
    });
  };

  const visitor: TreeVisitor<undefined> = {
    enter(_fd, _name, rel, st) {
      counted();
      const e = { y: 'd' as const, p: rel, ...toMeta(metaOf(st)) };
      dirAt.set(rel, e);
      entries.push(e);
    },
    leave(_fd, rel, st) {
      const e = dirAt.get(rel);
      if (e) Object.assign(e, toMeta(metaOf(st)));
      dirAt.delete(rel);
    },
    file(dirFd, name, rel, st) {
      counted();
      const same = shared(rel, st);
      if (same) {
        out.linkedBytes += same.b;
        entries.push(same);
        return;
      }
      const copied = copyFile(dirFd, name, rel);
      if (copied) entries.push(copied);
    },
    symlink(dirFd, name, rel, st) {
      counted();
      entries.push({ y: 'l', p: rel, ...toMeta(metaOf(st)), to: fs.readlinkSync(at(dirFd, name)) });
    },
    other: () => void out.skipped++,
  };
  walkTree(srcFd, undefined, visitor, {
    skipRoot: opts.skipRoot,
    maxDepth: MAX_TREE_DEPTH,
    tooDeep: () => over(`${MAX_TREE_DEPTH} levels of folders`),
  });
  return { manifest: { root: toMeta(metaOf(fs.fstatSync(srcFd, { bigint: true }))), entries }, ...out };
}

/**
 * Write a manifest back into the empty directory dstFd, each file a fresh copy of its object
 * (the tenant never gets a link to a checkpoint's file; hard links inside the tree stay one file).
 * `objectsDir`: the tenant's store, berth's own.
 */
export function restoreTree(manifest: TreeManifest, objectsDir: string, dstFd: number): void {
  const buffers = copyBuffers();
  const stack: Array<{ rel: string; fd: number; meta: EntryMeta }> = [];
  const top = () => stack.at(-1) ?? { rel: '', fd: dstFd };
  const pop = () => {
    const d = stack.pop();
    if (!d) return;
    try {
      keepMeta(d.fd, d.meta);
    } finally {
      closeQuietly(d.fd);
    }
  };
  try {
    for (const e of manifest.entries) {
      const cut = e.p.lastIndexOf('/');
      const parentRel = cut < 0 ? '' : e.p.slice(0, cut);
      const name = e.p.slice(cut + 1);
      while (stack.length > 0 && top().rel !== parentRel) pop();
      if (top().rel !== parentRel) throw new BerthError('INTERNAL', `the checkpoint's list is out of order at ${e.p}`);
      const parent = top().fd;
      if (e.y === 'd') {
        fs.mkdirSync(at(parent, name), { mode: 0o700 });
        const fd = openChildDir(parent, name, e.p);
        if (fd === undefined) throw changed(e.p);
        stack.push({ rel: e.p, fd, meta: fromMeta(e) });
      } else if (e.y === 'l') makeSymlink(e.to, at(parent, name), fromMeta(e));
      else if (!(e.h !== undefined && linkTo(`/proc/self/fd/${dstFd}/${e.h}`, at(parent, name)))) {
        withFd(fs.openSync(join(objectsDir, e.o), O_RDONLY | O_NOFOLLOW), (obj) => {
          const st = fs.fstatSync(obj);
          withFd(fs.openSync(at(parent, name), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0o600), (to) => {
            copyBytes(obj, to, st.size, st.blocks * 512, buffers);
            keepMeta(to, fromMeta(e));
          });
        });
      }
    }
    while (stack.length > 0) pop();
  } finally {
    for (const d of stack) closeQuietly(d.fd);
  }
  keepMeta(dstFd, fromMeta(manifest.root));
}

/** Empty a directory, one no-follow open at a time (a link in it is removed, never followed). `keep`: root names left alone. */
export function clearDir(dirFd: number, keep: ReadonlySet<string> = new Set()): void {
  for (const name of fs.readdirSync(`/proc/self/fd/${dirFd}`)) if (!keep.has(name)) removeTreeAt(dirFd, name);
}
