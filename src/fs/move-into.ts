import fs from 'node:fs';
import { BerthError, errnoOf } from '../base/errors.js';
import { at, closeQuietly, openChildDir, openRegularFile } from './fd-path.js';
import { kindAt } from './tree.js';

/**
 * Move a directory's entries into another directory on the same filesystem, by renames through
 * descriptors (a link is moved as the link, never followed; Node has no renameat, /proc/self/fd
 * paths are the same thing). An entry the target lacks is renamed in. One both hold is where the
 * target has something mounted, or a directory holding such a place: the target's inode stays
 * (a mount hangs on it) and takes the source's content: a directory is merged, a regular file
 * gets the source's bytes; mode and owner follow the source. The emptied source directory or the
 * copied file goes to `aside`. Anything else both hold is refused. Each step is logged, so
 * `undo` puts the source back as it was (the target keeps what was copied into it).
 */
export interface MovedInto {
  /** Put every entry back where it was, last step first. */
  undo(): void;
  /** Let go of the descriptors the log holds (after undo, or once nothing will be undone). */
  close(): void;
}

/** What a merge may copy at most (files both sides hold: the target's stays, the source's bytes go in). */
export interface CopyLimit {
  bytes: number;
}

type Step = { from: number; name: string; to: number; toName: string };

export function moveInto(fromFd: number, toFd: number, asideFd: number, limit: CopyLimit): MovedInto {
  const steps: Step[] = [];
  const held: number[] = [];
  let asideCount = 0;
  const rename = (from: number, name: string, to: number, toName: string) => {
    fs.renameSync(at(from, name), at(to, toName));
    steps.push({ from, name, to, toName });
  };
  const putAside = (from: number, name: string) => rename(from, name, asideFd, `${asideCount++}`);

  function merge(from: number, to: number, shown: string): void {
    for (const name of fs.readdirSync(`/proc/self/fd/${from}`)) {
      const there = kindAt(to, name);
      if (there === 'missing') {
        rename(from, name, to, name);
        continue;
      }
      const here = kindAt(from, name);
      if (here === 'dir' && there === 'dir') {
        const sub = openChildDir(from, name, `${shown}/${name}`);
        const into = openChildDir(to, name, `${shown}/${name}`);
        if (sub === undefined || into === undefined) throw new BerthError('INTERNAL', `${shown}/${name} vanished while it was moved`);
        held.push(sub, into);
        merge(sub, into, `${shown}/${name}`);
        sameOwnerAndMode(sub, into);
        putAside(from, name);
      } else if (here === 'file' && there === 'file') {
        copyInto(from, to, name, `${shown}/${name}`, limit);
        putAside(from, name);
      } else {
        throw new BerthError('E_SANDBOX_VIOLATION', `${shown}/${name} is a ${here} here and a ${there} where it goes`, {
          path: `${shown}/${name}`,
        });
      }
    }
  }

  const close = () => held.splice(0).forEach(closeQuietly);
  const undo = () => {
    for (const s of steps.splice(0).reverse()) fs.renameSync(at(s.to, s.toName), at(s.from, s.name));
  };
  try {
    merge(fromFd, toFd, '');
  } catch (err) {
    undo();
    close();
    throw err;
  }
  return { undo, close };
}

/** Give `to` the mode and owner of `from` (both open descriptors). */
export function sameOwnerAndMode(from: number, to: number): void {
  const st = fs.fstatSync(from);
  fs.fchownSync(to, st.uid, st.gid);
  fs.fchmodSync(to, st.mode & 0o7777);
}

/** The source file's bytes, mode, owner and times into the target's own file (its inode stays). */
function copyInto(from: number, to: number, name: string, shown: string, limit: CopyLimit): void {
  const src = openRegularFile(from, name, shown);
  if (!src) throw new BerthError('INTERNAL', `${shown} vanished while it was moved`);
  try {
    if (src.size > limit.bytes)
      throw new BerthError('RUN_FAILED', `${shown} is larger than a pool claim copies (${limit.bytes} bytes left)`);
    limit.bytes -= src.size;
    let dst: number;
    try {
      dst = fs.openSync(at(to, name), fs.constants.O_WRONLY | fs.constants.O_NOFOLLOW | fs.constants.O_NONBLOCK);
    } catch (err) {
      throw new BerthError('E_SANDBOX_VIOLATION', `${shown} where it goes is not a regular file (${errnoOf(err)})`, { path: shown });
    }
    try {
      if (!fs.fstatSync(dst).isFile())
        throw new BerthError('E_SANDBOX_VIOLATION', `${shown} where it goes is not a regular file`, { path: shown });
      fs.ftruncateSync(dst, 0);
      const buf = Buffer.allocUnsafe(64 * 1024);
      for (let pos = 0; pos < src.size;) {
        const n = fs.readSync(src.fd, buf, 0, Math.min(buf.length, src.size - pos), pos);
        if (n === 0) break;
        fs.writeSync(dst, buf, 0, n, pos);
        pos += n;
      }
      sameOwnerAndMode(src.fd, dst);
      const st = fs.fstatSync(src.fd);
      fs.futimesSync(dst, st.atime, st.mtime);
    } finally {
      closeQuietly(dst);
    }
  } finally {
    closeQuietly(src.fd);
  }
}
