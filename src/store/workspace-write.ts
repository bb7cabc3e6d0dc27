import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import { BerthError, errnoOf } from '../base/errors.js';
import { at, closeQuietly, openNoFollow, withFd } from '../fs/fd-path.js';
import type { Owner } from '../fs/tree.js';
import { candidateNames } from '../plan/file-names.js';

/**
 * Writing a file into a tenant's workspace (inbox/, outbox/): through no-follow descriptors,
 * created under a temporary name and linked to the first free name, never written over anything.
 */

const { O_WRONLY, O_CREAT, O_EXCL, O_NOFOLLOW } = fs.constants;
const TEMP_PREFIX = '.berth-in-';

/** The workspace directory itself, no link anywhere on its path (berth's own path up to it). */
export function openWorkspace(dir: string): number {
  const opened = openNoFollow(dir);
  if (opened.kind !== 'dir') {
    closeQuietly(opened.fd);
    throw new BerthError('E_SANDBOX_VIOLATION', 'the workspace is not a directory', { path: dir });
  }
  return opened.fd;
}

/** Create `data` under the first free name of `name`'s candidates in dirFd; undefined when all are taken. */
export function writeUnder(dirFd: number, name: string, data: Uint8Array, owner?: Owner): string | undefined {
  const tmp = `${TEMP_PREFIX}${randomBytes(6).toString('hex')}`;
  try {
    withFd(fs.openSync(at(dirFd, tmp), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0o644), (fd) => {
      fs.writeFileSync(fd, data);
      if (owner) fs.fchownSync(fd, owner.uid, owner.gid);
      fs.fsyncSync(fd);
    });
    return linkToFreeName(dirFd, tmp, dirFd, name);
  } finally {
    fs.rmSync(at(dirFd, tmp), { force: true });
  }
}

/** link(2) never follows or replaces what is at the new name: the first free candidate gets it. */
export function linkToFreeName(fromFd: number, from: string, toFd: number, name: string): string | undefined {
  for (const candidate of candidateNames(name)) {
    try {
      fs.linkSync(at(fromFd, from), at(toFd, candidate));
      return candidate;
    } catch (err) {
      if (errnoOf(err) !== 'EEXIST') throw err;
    }
  }
  return undefined;
}
