import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import { BerthError, errnoOf } from '../base/errors.js';
import { at, openChildDir, withFd } from './fd-path.js';
import { MAX_TREE_DEPTH } from './copy-tree-exact.js';
import { removeTreeAt } from './tree.js';

/**
 * The copy behind a checkpoint (and a restore, and a fork): a tenant's tree walked by descriptor,
 * one no-follow open at a time (a directory swapped for a link mid-copy fails the copy, never
 * leads outside), keeping what `cp -a --sparse=always` keeps: directories, regular files with
 * their holes, symbolic links as links, hard links, owners, modes and times. Fifos, sockets and
 * devices are left out (counted).
 *
 * A file that has not changed since the base (the session's previous checkpoint) copied it is
 * hard-linked to that copy instead of copied again. Safe because the copies are berth's and never
 * written after they are made: the tenant's own file is never linked, only read. "Not changed"
 * is its inode, size, mtime and ctime as the base saw them; the tenant can set mtime but not
 * ctime, and a file whose ctime was within RACY_NS of the base's start is copied again (a write
 * in the same clock tick as the base's look would keep its times: git's "racy" case).
 */
export interface CopyEntry {
  /** Inode, size, mtime and ctime of the source when it was copied ("dev:ino:size:mtime_ns:ctime_ns"). */
  k: string;
  /** Bytes it takes on disk (allocated blocks). */
  b: number;
  /** 1: a hard link to the base's copy (its bytes are the base's). */
  l?: 1;
}

export interface CopyBase {
  /** The base's tree: berth's own (its checkpoint store), so joined as a path (a path through /proc costs 5× per link). */
  dir: string;
  entries: Record<string, CopyEntry>;
  startedNs: bigint;
}

export interface CopyBounds {
  /** Allocated bytes of the files copied (not those linked to the base). */
  bytes: number;
  /** Files, directories and links. */
  entries: number;
}

export interface CopyResult {
  /** Regular files by their path below the root. */
  entries: Record<string, CopyEntry>;
  ownedBytes: number;
  linkedBytes: number;
  count: number;
  skipped: number;
}

export const RACY_NS = 2_000_000_000n;
const CHUNK = 1024 * 1024;
/** Files at least this big with holes go through cp's SEEK_DATA (no read of the holes' zeros). */
const SPARSE_CP_MIN = 8 * CHUNK;
const { O_RDONLY, O_NOFOLLOW, O_NONBLOCK, O_WRONLY, O_CREAT, O_EXCL } = fs.constants;

interface State {
  base?: CopyBase;
  bounds: CopyBounds;
  out: CopyResult;
  links: Map<string, string>;
  buffer: Buffer;
  zero: Buffer;
  rootFd: number;
  /** The destination's path when it is berth's own (a new checkpoint): links are made by path. */
  dstDir?: string;
  skipRoot: ReadonlySet<string>;
}

const keyOf = (st: fs.BigIntStats) => `${st.dev}:${st.ino}:${st.size}:${st.mtimeNs}:${st.ctimeNs}`;
const ctimeOf = (key: string) => BigInt(key.split(':')[4] ?? '0');

/** Over a bound: nothing of the copy is kept (the caller removes its temporary directory). */
function over(what: string): BerthError {
  return new BerthError('LIMIT_REACHED', `the checkpoint would hold more than ${what}`, {
    hint: 'berth.yaml checkpoints.max_mb and checkpoints.max_files bound a tenant; older checkpoints are pruned first',
  });
}

function changed(shown: string): BerthError {
  return new BerthError('E_SANDBOX_VIOLATION', `${shown} changed while it was copied`, { path: shown });
}

/**
 * Copy the tree under srcFd into the empty directory dstFd. `skipRoot`: names at the root left
 * out (a loop filesystem's lost+found).
 */
export function copyCheckpointTree(
  srcFd: number,
  dstFd: number,
  opts: { base?: CopyBase; bounds: CopyBounds; skipRoot?: ReadonlySet<string>; dstDir?: string },
): CopyResult {
  const s: State = {
    base: opts.base,
    bounds: opts.bounds,
    out: { entries: {}, ownedBytes: 0, linkedBytes: 0, count: 0, skipped: 0 },
    links: new Map(),
    buffer: Buffer.alloc(CHUNK),
    zero: Buffer.alloc(CHUNK),
    rootFd: dstFd,
    dstDir: opts.dstDir,
    skipRoot: opts.skipRoot ?? new Set(),
  };
  copyDir(srcFd, dstFd, '', 0, s);
  keepMeta(dstFd, fs.fstatSync(srcFd));
  return s.out;
}

function copyDir(srcFd: number, dstFd: number, rel: string, depth: number, s: State): void {
  if (depth > MAX_TREE_DEPTH) throw over(`${MAX_TREE_DEPTH} levels of folders`);
  const dir = fs.opendirSync(`/proc/self/fd/${srcFd}`);
  try {
    for (let entry = dir.readSync(); entry; entry = dir.readSync()) {
      const name = entry.name;
      if (depth === 0 && s.skipRoot.has(name)) continue;
      const relName = rel ? `${rel}/${name}` : name;
      const st = fs.lstatSync(at(srcFd, name), { throwIfNoEntry: false });
      if (!st) continue; // removed meanwhile
      if (!st.isDirectory() && !st.isSymbolicLink() && !st.isFile()) {
        s.out.skipped++;
        continue;
      }
      if (++s.out.count > s.bounds.entries) throw over(`${s.bounds.entries} files and folders`);
      if (st.isDirectory()) {
        const child = openChildDir(srcFd, name, relName);
        if (child === undefined) continue;
        withFd(child, (from) => {
          fs.mkdirSync(at(dstFd, name), { mode: 0o700 });
          const made = openChildDir(dstFd, name, relName);
          if (made === undefined) throw changed(relName);
          withFd(made, (to) => {
            copyDir(from, to, relName, depth + 1, s);
            keepMeta(to, fs.fstatSync(from));
          });
        });
      } else if (st.isSymbolicLink()) {
        const target = at(dstFd, name);
        fs.symlinkSync(fs.readlinkSync(at(srcFd, name)), target);
        fs.lchownSync(target, st.uid, st.gid);
        fs.lutimesSync(target, st.atime, st.mtime);
      } else if (!linkedFromBase(srcFd, dstFd, name, relName, s)) copyFile(srcFd, dstFd, name, relName, s);
    }
  } finally {
    dir.closeSync();
  }
}

/**
 * Unchanged since the base: a hard link to the base's copy, decided from an lstat alone (no open:
 * the file is not read). Its own hard links inside the tree are the copy's business.
 */
function linkedFromBase(srcFd: number, dstFd: number, name: string, relName: string, s: State): boolean {
  const prior = s.base?.entries[relName];
  if (!s.base || !prior) return false;
  const st = fs.lstatSync(at(srcFd, name), { bigint: true, throwIfNoEntry: false });
  if (!st?.isFile() || st.nlink > 1n) return false;
  const key = keyOf(st);
  if (prior.k !== key || ctimeOf(key) + RACY_NS >= s.base.startedNs) return false;
  if (!linkTo(`${s.base.dir}/${relName}`, s.dstDir ? `${s.dstDir}/${relName}` : at(dstFd, name))) return false;
  const bytes = Number(st.blocks) * 512;
  s.out.entries[relName] = { k: key, b: bytes, l: 1 };
  s.out.linkedBytes += bytes;
  return true;
}

function copyFile(srcFd: number, dstFd: number, name: string, relName: string, s: State): void {
  let fd: number;
  try {
    fd = fs.openSync(at(srcFd, name), O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
  } catch (err) {
    if (errnoOf(err) === 'ENOENT') return; // removed meanwhile
    throw changed(relName);
  }
  withFd(fd, () => {
    const st = fs.fstatSync(fd, { bigint: true });
    if (!st.isFile()) throw changed(relName);
    const key = keyOf(st);
    const bytes = Number(st.blocks) * 512;
    const inode = `${st.dev}:${st.ino}`;
    // A second name of a file hard-linked in the tree: a link to its first copy in this checkpoint.
    const first = st.nlink > 1n ? s.links.get(inode) : undefined;
    if (first !== undefined && linkTo(`/proc/self/fd/${s.rootFd}/${first}`, at(dstFd, name))) {
      const e = s.out.entries[first];
      if (e) s.out.entries[relName] = { ...e, b: 0 };
      return;
    }
    s.out.ownedBytes += bytes;
    if (s.out.ownedBytes > s.bounds.bytes) throw over(`${Math.round(s.bounds.bytes / 1048576)} MiB`);
    withFd(fs.openSync(at(dstFd, name), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0o600), (out) => {
      copyBytes(fd, out, st, s);
      fs.fchownSync(out, Number(st.uid), Number(st.gid));
      fs.fchmodSync(out, Number(st.mode) & 0o7777);
      fs.futimesSync(out, st.atime, st.mtime);
    });
    // Kept as a base for the next checkpoint only if it did not change while it was read.
    const after = keyOf(fs.fstatSync(fd, { bigint: true }));
    s.out.entries[relName] = { k: after === key ? key : `changed:${key}`, b: bytes };
    if (st.nlink > 1n) s.links.set(inode, relName);
  });
}

/** The bytes, holes kept: all-zero chunks are skipped over, a big file with holes goes to cp (SEEK_DATA). */
function copyBytes(from: number, to: number, st: fs.BigIntStats, s: State): void {
  const size = Number(st.size);
  if (size >= SPARSE_CP_MIN && Number(st.blocks) * 512 < size) {
    // Both ends are descriptors berth holds: cp opens no path of the tenant's.
    const r = spawnSync('cp', ['--sparse=always', '/dev/stdin', '/dev/stdout'], { stdio: [from, to, 'pipe'] });
    if (r.status === 0) return;
    fs.ftruncateSync(to, 0);
  }
  let pos = 0;
  for (let n; (n = fs.readSync(from, s.buffer, 0, CHUNK, pos)) > 0; pos += n) {
    if (s.buffer.compare(s.zero, 0, n, 0, n) !== 0) fs.writeSync(to, s.buffer, 0, n, pos);
  }
  fs.ftruncateSync(to, pos);
}

/** A hard link; false (the caller copies instead) when the path is too long for the kernel or the link count is full. */
function linkTo(from: string, to: string): boolean {
  try {
    fs.linkSync(from, to);
    return true;
  } catch (err) {
    if (errnoOf(err) === 'EEXIST') throw err;
    return false;
  }
}

function keepMeta(dirFd: number, st: fs.Stats): void {
  fs.fchownSync(dirFd, st.uid, st.gid);
  fs.fchmodSync(dirFd, st.mode & 0o7777);
  fs.futimesSync(dirFd, st.atime, st.mtime);
}

/** Empty a directory, one no-follow open at a time (a link in it is removed, never followed). `keep`: root names left alone. */
export function clearDir(dirFd: number, keep: ReadonlySet<string> = new Set()): void {
  for (const name of fs.readdirSync(`/proc/self/fd/${dirFd}`)) if (!keep.has(name)) removeTreeAt(dirFd, name);
}
