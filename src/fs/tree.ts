import fs from 'node:fs';
import { BerthError, errnoOf } from '../base/errors.js';
import { at, closeQuietly, openChildDir, openRegularFile, withFd } from './fd-path.js';

/**
 * Host-side tree operations that a hostile tenant tree cannot redirect: every step is a
 * no-follow open relative to a directory descriptor (see fd-path.ts). Only regular files and
 * directories are ever read or created; symlinks, fifos, sockets and devices are skipped.
 */

export interface Owner {
  uid: number;
  gid: number;
}

export interface Skipped {
  path: string;
  reason: string;
}

export interface CopyBudget {
  maxFileBytes: number;
  maxTotalBytes: number;
  maxEntries: number;
  maxDepth: number;
}

export const DEFAULT_COPY_BUDGET: CopyBudget = {
  maxFileBytes: 16 * 1024 * 1024,
  maxTotalBytes: 64 * 1024 * 1024,
  maxEntries: 10_000,
  maxDepth: 32,
};

function chownFd(fd: number, owner: Owner | undefined): void {
  if (owner) fs.fchownSync(fd, owner.uid, owner.gid);
}

/** Move whatever is at name out of the way (tenant data is kept, under a telling name). */
export function displace(dirFd: number, name: string): string {
  const aside = `${name}.displaced-by-berth-${Date.now()}`;
  fs.renameSync(at(dirFd, name), at(dirFd, aside));
  return aside;
}

export type NodeKind = 'dir' | 'file' | 'symlink' | 'other' | 'missing';

export function kindAt(dirFd: number, name: string): NodeKind {
  let stat: fs.Stats;
  try {
    stat = fs.lstatSync(at(dirFd, name));
  } catch (err) {
    if (errnoOf(err) === 'ENOENT') return 'missing';
    throw err;
  }
  if (stat.isSymbolicLink()) return 'symlink';
  if (stat.isDirectory()) return 'dir';
  if (stat.isFile()) return 'file';
  return 'other';
}

/**
 * Open (creating if missing) the directory at components below rootFd. With displace, a
 * symlink or non-directory in the way is moved aside; without, it is a sandbox violation.
 * The caller owns the returned descriptor.
 */
export function ensureDirPath(
  rootFd: number,
  components: readonly string[],
  opts: { owner?: Owner; displace?: boolean; shownRoot: string; mode?: number },
): number {
  if (components.length === 0) return dupDir(rootFd);
  let fd = rootFd;
  let shown = opts.shownRoot;
  try {
    for (const name of components) {
      shown = `${shown}/${name}`;
      let child: number | undefined;
      try {
        child = openChildDir(fd, name, shown);
      } catch (err) {
        if (!opts.displace || !(err instanceof BerthError)) throw err;
        displace(fd, name);
      }
      if (child === undefined) {
        try {
          fs.mkdirSync(at(fd, name), { mode: opts.mode ?? 0o755 });
        } catch (err) {
          if (errnoOf(err) !== 'EEXIST') throw err;
        }
        child = openChildDir(fd, name, shown);
        if (child === undefined) throw new BerthError('INTERNAL', `could not create ${shown}`);
        chownFd(child, opts.owner);
      }
      if (fd !== rootFd) closeQuietly(fd);
      fd = child;
    }
    return fd;
  } catch (err) {
    if (fd !== rootFd) closeQuietly(fd);
    throw err;
  }
}

/** Open an existing directory path, refusing any symlink on the way; undefined if missing. */
export function openDirPath(rootFd: number, components: readonly string[], shownRoot: string): number | undefined {
  // The walk starts at the root itself (never closed here); only an empty walk duplicates it.
  if (components.length === 0) return dupDir(rootFd);
  let fd = rootFd;
  let shown = shownRoot;
  try {
    for (const name of components) {
      shown = `${shown}/${name}`;
      const child = openChildDir(fd, name, shown);
      if (fd !== rootFd) closeQuietly(fd);
      fd = -1;
      if (child === undefined) return undefined;
      fd = child;
    }
    return fd;
  } catch (err) {
    if (fd >= 0 && fd !== rootFd) closeQuietly(fd);
    throw err;
  }
}

/** A second descriptor of an open directory (the caller closes it). */
function dupDir(fd: number): number {
  return fs.openSync(`/proc/self/fd/${fd}`, fs.constants.O_RDONLY | fs.constants.O_DIRECTORY);
}

/** Create a new file (never through a symlink, never over an existing entry) with the given content. */
export function writeNewFileAt(dirFd: number, name: string, data: string | Uint8Array, mode = 0o644, owner?: Owner): void {
  const { O_WRONLY, O_CREAT, O_EXCL, O_NOFOLLOW } = fs.constants;
  withFd(fs.openSync(at(dirFd, name), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, mode), (fd) => {
    fs.writeFileSync(fd, data);
    chownFd(fd, owner);
  });
}

/** Read a regular file below dirFd with a size cap; undefined when missing. */
export function readFileAt(dirFd: number, name: string, shownPath: string, maxBytes: number): Buffer | undefined {
  const opened = openRegularFile(dirFd, name, shownPath);
  if (!opened) return undefined;
  return withFd(opened.fd, (fd) => {
    if (opened.size > maxBytes) {
      throw new BerthError('E_SANDBOX_VIOLATION', `${shownPath} is larger than ${maxBytes} bytes`, { path: shownPath });
    }
    return fs.readFileSync(fd);
  });
}

interface CopyState {
  budget: CopyBudget;
  entries: number;
  bytes: number;
  skipped: Skipped[];
}

/**
 * Copy srcDir/name to dstDir/name: directories and regular files only, within a budget.
 * Anything else (symlink, fifo, socket, device, over-size file) is skipped and reported,
 * so a planted link never makes berth read outside the tree and a fifo never blocks it.
 * The destination must not exist yet (O_EXCL), so nothing already there is followed.
 */
export function copyEntry(
  srcDirFd: number,
  dstDirFd: number,
  name: string,
  opts: { shownPath: string; owner?: Owner; budget?: CopyBudget; skipped?: Skipped[] },
): Skipped[] {
  const state: CopyState = { budget: opts.budget ?? DEFAULT_COPY_BUDGET, entries: 0, bytes: 0, skipped: opts.skipped ?? [] };
  copyInto(srcDirFd, dstDirFd, name, opts.shownPath, 0, state, opts.owner);
  return state.skipped;
}

function copyInto(src: number, dst: number, name: string, shown: string, depth: number, s: CopyState, owner?: Owner): void {
  if (++s.entries > s.budget.maxEntries) {
    s.skipped.push({ path: shown, reason: `more than ${s.budget.maxEntries} entries` });
    return;
  }
  const kind = kindAt(src, name);
  if (kind === 'missing') return;
  if (kind === 'dir') {
    if (depth >= s.budget.maxDepth) {
      s.skipped.push({ path: shown, reason: `deeper than ${s.budget.maxDepth} levels` });
      return;
    }
    const srcChild = openChildDir(src, name, shown);
    if (srcChild === undefined) return;
    withFd(srcChild, (srcFd) => {
      fs.mkdirSync(at(dst, name), { mode: 0o755 });
      const dstChild = openChildDir(dst, name, shown);
      if (dstChild === undefined) throw new BerthError('INTERNAL', `could not create ${shown}`);
      withFd(dstChild, (dstFd) => {
        chownFd(dstFd, owner);
        for (const child of fs.readdirSync(`/proc/self/fd/${srcFd}`).sort()) {
          copyInto(srcFd, dstFd, child, `${shown}/${child}`, depth + 1, s, owner);
        }
      });
    });
    return;
  }
  if (kind !== 'file') {
    s.skipped.push({ path: shown, reason: kind === 'symlink' ? 'symbolic link' : 'not a regular file' });
    return;
  }
  let opened: { fd: number; size: number } | undefined;
  try {
    opened = openRegularFile(src, name, shown);
  } catch (err) {
    if (!(err instanceof BerthError)) throw err;
    s.skipped.push({ path: shown, reason: 'changed into something other than a regular file' });
    return;
  }
  if (!opened) return;
  withFd(opened.fd, (fd) => {
    if (opened.size > s.budget.maxFileBytes || s.bytes + opened.size > s.budget.maxTotalBytes) {
      s.skipped.push({ path: shown, reason: `too large (${opened.size} bytes)` });
      return;
    }
    // Read at most the size seen at open: a file growing under us cannot blow the budget.
    const data = Buffer.alloc(opened.size);
    const read = fs.readSync(fd, data, 0, opened.size, 0);
    s.bytes += read;
    writeNewFileAt(dst, name, data.subarray(0, read), 0o644, owner);
  });
}

/**
 * Write a berth-owned file atomically: temp file in the same directory, fsync, rename. With
 * `verify`, the temp file is read back and checked before the rename publishes it: a failed
 * check (or a full disk) leaves the old file as it was.
 */
export function atomicWriteFile(path: string, data: string | Uint8Array, mode = 0o644, verify?: (written: string) => void): void {
  const tmp = `${path}.tmp-${process.pid}-${Math.random().toString(36).slice(2)}`;
  const { O_WRONLY, O_CREAT, O_EXCL, O_NOFOLLOW } = fs.constants;
  try {
    withFd(fs.openSync(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, mode), (fd) => {
      fs.writeFileSync(fd, data);
      fs.fsyncSync(fd);
    });
    verify?.(fs.readFileSync(tmp, 'utf8'));
    fs.renameSync(tmp, path);
  } catch (err) {
    fs.rmSync(tmp, { force: true });
    throw err;
  }
}

/** What link(2) says on a filesystem that has no hard links. */
const NO_LINKS = new Set(['EPERM', 'ENOTSUP', 'EOPNOTSUPP', 'ENOSYS']);

/**
 * Write a file only if none is at `path` (two writers at once: the first stands, never the last):
 * whole and synced under a temporary name, then linked into place. False when one was there. On
 * a filesystem without hard links, a rename after a check: the last writer then, narrowly.
 */
export function writeFileOnce(path: string, data: string, mode = 0o644, verify?: (written: string) => void): boolean {
  const tmp = `${path}.once-${process.pid}-${Math.random().toString(36).slice(2)}`;
  atomicWriteFile(tmp, data, mode, verify);
  try {
    fs.linkSync(tmp, path);
    return true;
  } catch (err) {
    const code = errnoOf(err);
    if (code === 'EEXIST') return false;
    if (!NO_LINKS.has(code ?? '')) throw err;
    if (fs.existsSync(path)) return false;
    fs.renameSync(tmp, path);
    return true;
  } finally {
    fs.rmSync(tmp, { force: true });
  }
}

/**
 * Remove name below dirFd and everything in it, one no-follow open at a time: no path is ever
 * built, so a tree deeper than PATH_MAX goes too, and a link in it is removed, never followed.
 */
export function removeTreeAt(dirFd: number, name: string): void {
  const st = fs.lstatSync(at(dirFd, name), { throwIfNoEntry: false });
  if (!st) return;
  if (!st.isDirectory()) {
    fs.unlinkSync(at(dirFd, name));
    return;
  }
  const child = openChildDir(dirFd, name, name);
  if (child !== undefined) {
    withFd(child, (fd) => {
      for (const entry of fs.readdirSync(`/proc/self/fd/${fd}`)) removeTreeAt(fd, entry);
    });
  }
  fs.rmdirSync(at(dirFd, name));
}
