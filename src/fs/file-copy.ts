import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import { errnoOf } from '../base/errors.js';

/** The byte and metadata steps of berth's tree copies (copy-tree-exact.ts, checkpoint-copy.ts). */
export const CHUNK = 1024 * 1024;
/** Files at least this big with holes go through cp's SEEK_DATA (no read of the holes' zeros). */
const SPARSE_CP_MIN = 8 * CHUNK;

/** Buffers one copy reuses for all its files. */
export interface CopyBuffers {
  buffer: Buffer;
  zero: Buffer;
}

export const copyBuffers = (): CopyBuffers => ({ buffer: Buffer.alloc(CHUNK), zero: Buffer.alloc(CHUNK) });

/**
 * The bytes of descriptor `from` into `to`, holes kept: all-zero chunks are skipped over, a big
 * file with holes goes to cp (SEEK_DATA), on berth's two descriptors (cp opens no path of the tenant's).
 */
export function copyBytes(from: number, to: number, size: number, allocated: number, b: CopyBuffers): void {
  if (size >= SPARSE_CP_MIN && allocated < size) {
    const r = spawnSync('cp', ['--sparse=always', '/dev/stdin', '/dev/stdout'], { stdio: [from, to, 'pipe'] });
    if (r.status === 0) return;
    fs.ftruncateSync(to, 0);
  }
  let pos = 0;
  for (let n; (n = fs.readSync(from, b.buffer, 0, CHUNK, pos)) > 0; pos += n) {
    if (b.buffer.compare(b.zero, 0, n, 0, n) !== 0) fs.writeSync(to, b.buffer, 0, n, pos);
  }
  fs.ftruncateSync(to, pos);
}

/** A hard link; false (the caller copies instead) when the path is too long for the kernel or the link count is full. */
export function linkTo(from: string, to: string): boolean {
  try {
    fs.linkSync(from, to);
    return true;
  } catch (err) {
    if (errnoOf(err) === 'EEXIST') throw err;
    return false;
  }
}

/** What a copy keeps of an entry besides its bytes. */
export interface EntryMeta {
  uid: number;
  gid: number;
  mode: number;
  /** Seconds since the epoch. */
  atime: number;
  mtime: number;
}

export const metaOf = (st: fs.BigIntStats): EntryMeta => ({
  uid: Number(st.uid),
  gid: Number(st.gid),
  mode: Number(st.mode) & 0o7777,
  atime: Number(st.atimeNs) / 1e9,
  mtime: Number(st.mtimeNs) / 1e9,
});

/** Owner, mode and times of a file or directory berth made (a directory's after its content, so its mtime holds). */
export function keepMeta(fd: number, m: EntryMeta): void {
  fs.fchownSync(fd, m.uid, m.gid);
  fs.fchmodSync(fd, m.mode);
  fs.futimesSync(fd, m.atime, m.mtime);
}

/** A symbolic link as a link (never followed), with its owner and times. */
export function makeSymlink(target: string, path: string, m: EntryMeta): void {
  fs.symlinkSync(target, path);
  fs.lchownSync(path, m.uid, m.gid);
  fs.lutimesSync(path, m.atime, m.mtime);
}
