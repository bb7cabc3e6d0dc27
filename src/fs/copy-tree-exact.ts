import fs from 'node:fs';
import { BerthError, errnoOf } from '../base/errors.js';
import { at, openChildDir, withFd } from './fd-path.js';

/**
 * Copy a tenant's directory into a fresh filesystem that only berth can reach (a workspace's new
 * quota image, mounted at berth's scratch point), keeping what `cp -a` keeps: directories,
 * regular files, symbolic links (as links, never followed), hard links, owners, modes and
 * times. Both sides are walked by descriptor, one no-follow open at a time: a tenant that swaps
 * a directory for a link mid-copy makes berth read nothing outside its tree (the copy fails
 * instead), and no path grows past the kernel's limit however deep the tree. Fifos, sockets and
 * devices are not carried over (counted).
 */
export interface ExactCopy {
  /** Fifos, sockets and devices left behind. */
  skipped: number;
}

/** What a tree would take on a new filesystem, counted without reading a byte of it. */
export interface TreeBound {
  bytes: number;
  entries: number;
}

const { O_RDONLY, O_NOFOLLOW, O_NONBLOCK, O_WRONLY, O_CREAT, O_EXCL } = fs.constants;
const CHUNK = 1024 * 1024;
export const MAX_TREE_DEPTH = 256;

/** First copies of hard-linked inodes, by their path below the destination's root. */
type State = { skipped: number; links: Map<string, string>; buffer: Buffer; rootFd: number };

/**
 * Does the tree fit the bound? A walk of names and sizes (apparent sizes: a sparse file is
 * written out whole), stopped as soon as it is over, so a tenant's 100 GB sparse file or a
 * million files cost berth one refusal, not a copy that runs into ENOSPC.
 */
export function treeFits(srcDirFd: number, bound: TreeBound): { fits: true } | { fits: false; why: string } {
  const seen = { bytes: 0, entries: 0 };
  const walk = (fd: number, depth: number): string | undefined => {
    if (depth > MAX_TREE_DEPTH) return `it is nested deeper than ${MAX_TREE_DEPTH} levels`;
    const dir = fs.opendirSync(`/proc/self/fd/${fd}`);
    try {
      for (let entry = dir.readSync(); entry; entry = dir.readSync()) {
        if (++seen.entries > bound.entries) return `it holds more than ${bound.entries} files and directories`;
        const st = fs.lstatSync(at(fd, entry.name), { throwIfNoEntry: false });
        if (!st) continue;
        if (st.isFile()) seen.bytes += st.size;
        if (seen.bytes > bound.bytes) return `it holds more than ${Math.round(bound.bytes / 1048576)} MiB`;
        if (!st.isDirectory()) continue;
        const child = openChildDir(fd, entry.name, entry.name);
        if (child === undefined) continue;
        const why = withFd(child, (c) => walk(c, depth + 1));
        if (why) return why;
      }
    } finally {
      dir.closeSync();
    }
    return undefined;
  };
  const why = walk(srcDirFd, 0);
  return why ? { fits: false, why } : { fits: true };
}

export function copyTreeExact(srcDirFd: number, dstDirFd: number): ExactCopy {
  const state: State = { skipped: 0, links: new Map(), buffer: Buffer.alloc(CHUNK), rootFd: dstDirFd };
  copyDir(srcDirFd, dstDirFd, '', 0, state);
  keepMeta(dstDirFd, fs.fstatSync(srcDirFd));
  return { skipped: state.skipped };
}

function changed(shown: string): BerthError {
  return new BerthError('E_SANDBOX_VIOLATION', `${shown} changed while the workspace was copied`, { path: shown });
}

function copyDir(srcFd: number, dstFd: number, rel: string, depth: number, s: State): void {
  if (depth > MAX_TREE_DEPTH) throw new BerthError('DISK_QUOTA_FAILED', `the workspace is nested deeper than ${MAX_TREE_DEPTH} levels`);
  const dir = fs.opendirSync(`/proc/self/fd/${srcFd}`);
  try {
    for (let entry = dir.readSync(); entry; entry = dir.readSync()) {
      const name = entry.name;
      const relName = rel ? `${rel}/${name}` : name;
      const st = fs.lstatSync(at(srcFd, name), { throwIfNoEntry: false });
      if (!st) continue; // removed meanwhile
      if (st.isDirectory()) {
        const child = openChildDir(srcFd, name, name);
        if (child === undefined) continue;
        withFd(child, (from) => {
          fs.mkdirSync(at(dstFd, name), { mode: 0o700 });
          const made = openChildDir(dstFd, name, name);
          if (made === undefined) throw changed(name);
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
      } else if (st.isFile()) {
        copyFile(srcFd, dstFd, name, relName, s);
      } else {
        s.skipped++;
      }
    }
  } finally {
    dir.closeSync();
  }
}

function copyFile(srcFd: number, dstFd: number, name: string, relName: string, s: State): void {
  let fd: number;
  try {
    fd = fs.openSync(at(srcFd, name), O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
  } catch {
    throw changed(name);
  }
  withFd(fd, () => {
    const st = fs.fstatSync(fd);
    if (!st.isFile()) throw changed(name);
    const key = `${st.dev}:${st.ino}`;
    const first = st.nlink > 1 ? s.links.get(key) : undefined;
    // A later name of a hard-linked file links to the first copy, found from the root's descriptor.
    if (first !== undefined && linkTo(`/proc/self/fd/${s.rootFd}/${first}`, at(dstFd, name))) return;
    withFd(fs.openSync(at(dstFd, name), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0o600), (out) => {
      for (let n; (n = fs.readSync(fd, s.buffer, 0, CHUNK, null)) > 0;) fs.writeSync(out, s.buffer, 0, n);
      fs.fchownSync(out, st.uid, st.gid);
      fs.fchmodSync(out, st.mode & 0o7777);
      fs.futimesSync(out, st.atime, st.mtime);
    });
    if (st.nlink > 1 && first === undefined) s.links.set(key, relName);
  });
}

/** A hard link; false (the caller copies instead) when the path to the first copy is too long for the kernel. */
function linkTo(from: string, to: string): boolean {
  try {
    fs.linkSync(from, to);
    return true;
  } catch (err) {
    if (errnoOf(err) === 'EEXIST') throw err;
    return false;
  }
}

/** Owner, mode and times of a copied directory (after its content, so its mtime holds). */
function keepMeta(dirFd: number, st: fs.Stats): void {
  fs.fchownSync(dirFd, st.uid, st.gid);
  fs.fchmodSync(dirFd, st.mode & 0o7777);
  fs.futimesSync(dirFd, st.atime, st.mtime);
}
