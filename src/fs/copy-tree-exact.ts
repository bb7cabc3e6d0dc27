import fs from 'node:fs';
import { BerthError, errnoOf } from '../base/errors.js';
import { at, closeQuietly, openChildDir, withFd } from './fd-path.js';
import { copyBuffers, copyBytes, keepMeta, linkTo, makeSymlink, metaOf } from './file-copy.js';
import { MAX_TREE_DEPTH, walkTree, type TreeVisitor } from './tree-walk.js';

/**
 * Copy a tenant's directory into another that only berth writes (a workspace's new quota image
 * mounted at berth's scratch point, a fork's new workspace), keeping what `cp -a --sparse=always`
 * keeps: directories, regular files with their holes, symbolic links (as links, never followed),
 * hard links, owners, modes and times. Walked by descriptor (tree-walk.ts): a tenant that swaps a
 * directory for a link mid-copy makes berth read nothing outside its tree (the copy fails
 * instead). Fifos, sockets and devices are not carried over (counted).
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

export { MAX_TREE_DEPTH };
const { O_RDONLY, O_NOFOLLOW, O_NONBLOCK, O_WRONLY, O_CREAT, O_EXCL } = fs.constants;

const tooDeep = () => new BerthError('DISK_QUOTA_FAILED', `the workspace is nested deeper than ${MAX_TREE_DEPTH} levels`);

/**
 * Does the tree fit the bound? A walk of names and sizes (apparent sizes: a sparse file is
 * counted whole), stopped as soon as it is over, so a tenant's 100 GB sparse file or a
 * million files cost berth one refusal, not a copy that runs into ENOSPC.
 */
export function treeFits(srcDirFd: number, bound: TreeBound): { fits: true } | { fits: false; why: string } {
  const seen = { bytes: 0, entries: 0 };
  class Over extends Error {}
  const count = (bytes = 0n) => {
    if (++seen.entries > bound.entries) throw new Over(`it holds more than ${bound.entries} files and directories`);
    seen.bytes += Number(bytes);
    if (seen.bytes > bound.bytes) throw new Over(`it holds more than ${Math.round(bound.bytes / 1048576)} MiB`);
  };
  const visitor: TreeVisitor<undefined> = {
    enter: () => void count(),
    leave: () => undefined,
    file: (_fd, _name, _rel, st) => count(st.size),
    symlink: () => count(),
    other: () => count(),
  };
  try {
    walkTree(srcDirFd, undefined, visitor, {
      maxDepth: MAX_TREE_DEPTH,
      tooDeep: () => new Over(`it is nested deeper than ${MAX_TREE_DEPTH} levels`),
    });
  } catch (err) {
    if (err instanceof Over) return { fits: false, why: err.message };
    throw err;
  }
  return { fits: true };
}

function changed(shown: string): BerthError {
  return new BerthError('E_SANDBOX_VIOLATION', `${shown} changed while it was copied`, { path: shown });
}

/** Copy the tree under srcDirFd into the empty directory dstDirFd. `skipRoot`: names at the root left out (lost+found). */
export function copyTreeExact(srcDirFd: number, dstDirFd: number, opts: { skipRoot?: ReadonlySet<string> } = {}): ExactCopy {
  let skipped = 0;
  /** First copies of hard-linked inodes, by their path below the destination's root. */
  const links = new Map<string, string>();
  const buffers = copyBuffers();
  const visitor: TreeVisitor<number> = {
    enter(_fd, name, rel, _st, parent) {
      fs.mkdirSync(at(parent, name), { mode: 0o700 });
      const made = openChildDir(parent, name, rel);
      if (made === undefined) throw changed(rel);
      return made;
    },
    leave: (_fd, _rel, st, own) => keepMeta(own, metaOf(st)),
    close: (own) => closeQuietly(own),
    file(dirFd, name, rel, _st, parent) {
      let fd: number;
      try {
        fd = fs.openSync(at(dirFd, name), O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
      } catch (err) {
        if (errnoOf(err) === 'ENOENT') return; // removed meanwhile
        throw changed(rel);
      }
      withFd(fd, () => {
        const st = fs.fstatSync(fd, { bigint: true });
        if (!st.isFile()) throw changed(rel);
        const inode = `${st.dev}:${st.ino}`;
        const first = st.nlink > 1n ? links.get(inode) : undefined;
        // A later name of a hard-linked file links to the first copy, found from the root's descriptor.
        if (first !== undefined && linkTo(`/proc/self/fd/${dstDirFd}/${first}`, at(parent, name))) return;
        withFd(fs.openSync(at(parent, name), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0o600), (out) => {
          copyBytes(fd, out, Number(st.size), Number(st.blocks) * 512, buffers);
          keepMeta(out, metaOf(st));
        });
        if (st.nlink > 1n && first === undefined) links.set(inode, rel);
      });
    },
    symlink: (dirFd, name, _rel, st, parent) => makeSymlink(fs.readlinkSync(at(dirFd, name)), at(parent, name), metaOf(st)),
    other: () => void skipped++,
  };
  walkTree(srcDirFd, dstDirFd, visitor, { skipRoot: opts.skipRoot, maxDepth: MAX_TREE_DEPTH, tooDeep });
  keepMeta(dstDirFd, metaOf(fs.fstatSync(srcDirFd, { bigint: true })));
  return { skipped };
}
