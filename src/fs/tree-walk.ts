import fs from 'node:fs';
import { at, closeQuietly, openChildDir } from './fd-path.js';

/**
 * The one walk behind berth's copies of a tenant's tree (copy-tree-exact.ts: a tree into another;
 * checkpoint-copy.ts: a tree into a checkpoint): by descriptor, one no-follow open at a time, so a
 * folder the tenant swaps for a link mid-walk fails the walk (E_SANDBOX_VIOLATION from
 * openChildDir), never leads outside, and no path grows past the kernel's limit however deep.
 * One lstat per entry, taken with nanosecond times (what a checkpoint compares).
 */
export interface TreeVisitor<D> {
  /** A directory, opened no-follow as `fd`; what its entries get as their parent. */
  enter(fd: number, name: string, rel: string, st: fs.BigIntStats, parent: D): D;
  /** After its entries; `st` is the opened directory's own fstat. */
  leave(fd: number, rel: string, st: fs.BigIntStats, own: D): void;
  /** Always called once `enter` returned (also when the walk fails): release what `enter` opened. */
  close?(own: D): void;
  file(dirFd: number, name: string, rel: string, st: fs.BigIntStats, parent: D): void;
  symlink(dirFd: number, name: string, rel: string, st: fs.BigIntStats, parent: D): void;
  /** A fifo, socket or device: never opened. */
  other(rel: string): void;
}

export interface WalkOptions {
  /** Names at the root left out (a loop filesystem's lost+found). */
  skipRoot?: ReadonlySet<string>;
  maxDepth: number;
  tooDeep: () => Error;
}

export const MAX_TREE_DEPTH = 256;

/** Walk the tree under rootFd (the root itself is the caller's): entries in directory order, each directory before its content. */
export function walkTree<D>(rootFd: number, root: D, visitor: TreeVisitor<D>, opts: WalkOptions): void {
  const skipRoot = opts.skipRoot ?? new Set<string>();
  const walk = (fd: number, rel: string, depth: number, parent: D): void => {
    if (depth > opts.maxDepth) throw opts.tooDeep();
    const dir = fs.opendirSync(`/proc/self/fd/${fd}`);
    try {
      for (let entry = dir.readSync(); entry; entry = dir.readSync()) {
        const name = entry.name;
        if (depth === 0 && skipRoot.has(name)) continue;
        const relName = rel ? `${rel}/${name}` : name;
        const st = fs.lstatSync(at(fd, name), { bigint: true, throwIfNoEntry: false });
        if (!st) continue; // removed meanwhile
        if (st.isFile()) visitor.file(fd, name, relName, st, parent);
        else if (st.isDirectory()) {
          const child = openChildDir(fd, name, relName);
          if (child === undefined) continue;
          try {
            const own = visitor.enter(child, name, relName, st, parent);
            try {
              walk(child, relName, depth + 1, own);
              visitor.leave(child, relName, fs.fstatSync(child, { bigint: true }), own);
            } finally {
              visitor.close?.(own);
            }
          } finally {
            closeQuietly(child);
          }
        } else if (st.isSymbolicLink()) visitor.symlink(fd, name, relName, st, parent);
        else visitor.other(relName);
      }
    } finally {
      dir.closeSync();
    }
  };
  walk(rootFd, '', 0, root);
}
