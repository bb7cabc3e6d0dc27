import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import { join } from 'node:path';
import { errnoOf } from '../../base/errors.js';
import { readdirIfExists } from '../../fs/dir.js';
import { at, closeQuietly, openChildDir, openRootDir, withFd } from '../../fs/fd-path.js';

/**
 * What binds a cluster volume to what it belongs to (docs/kubernetes.md, "Volumes and what they
 * belong to"). On Docker a session's home and a tenant's workspace are host directories berth
 * makes, mounts, and removes with the session or the project: a new holder of a session id, or a
 * project made again under a deleted one's name, gets new directories. On Kubernetes the same
 * directories still exist on berth's host (the runner makes them for every run; no pod mounts
 * them), and each PVC is bound to its directory: the launcher writes a random volume id in it the
 * first time (`.berth-volume`), and the claim's name and its label `berth.volume` carry that id.
 * A directory berth removed takes its id along: the claim is never found, so never mounted, again.
 *
 * Deleting the claims themselves is the admin's (session and project delete): the ids of what
 * went are listed in berth's state (`volumes-retired/`) first, then deleted on the cluster; what
 * the cluster did not take stays listed for the next pass. Nothing here talks to the cluster.
 * Pure file work, no Kubernetes client: a berth on Docker loads this too.
 */

export const VOLUME_MARKER = '.berth-volume';
/** The claims' label with their volume id (a label value: 32 hex digits). */
export const VOLUME_LABEL = 'berth.volume';
const VOLUME_ID = /^[0-9a-f]{32}$/;
const RETIRED_DIR = 'volumes-retired';
/** At most this many volume ids wait for deletion; past it a retired claim is left (never mounted again, but kept). */
export const RETIRED_MAX = 100_000;

const { O_RDONLY, O_NOFOLLOW, O_NONBLOCK, O_WRONLY, O_CREAT, O_EXCL } = fs.constants;

/** The id in an open directory's marker: the id, undefined when there is none, 'invalid' when something else is there. */
function readAt(dirFd: number): string | undefined | 'invalid' {
  let fd: number;
  try {
    fd = fs.openSync(at(dirFd, VOLUME_MARKER), O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
  } catch (err) {
    const code = errnoOf(err);
    if (code === 'ENOENT') return undefined;
    if (code === 'ELOOP' || code === 'ENXIO' || code === 'EISDIR') return 'invalid';
    throw err;
  }
  return withFd(fd, () => {
    const st = fs.fstatSync(fd);
    if (!st.isFile() || st.size > 64) return 'invalid';
    const id = fs.readFileSync(fd, 'latin1').trim();
    return VOLUME_ID.test(id) ? id : 'invalid';
  });
}

/** The volume id of a directory, if it has one (a missing directory has none). */
export function readVolumeId(dir: string): string | undefined {
  let fd: number;
  try {
    fd = openRootDir(dir);
  } catch (err) {
    if (errnoOf(err) === 'ENOENT' || errnoOf(err) === 'ENOTDIR') return undefined;
    throw err;
  }
  return withFd(fd, () => {
    const id = readAt(fd);
    return id === 'invalid' ? undefined : id;
  });
}

/** A new volume id, written whole and synced to a temporary name beside the marker (never following a link there). */
function newMarker(dirFd: number): { id: string; tmp: string } {
  const id = randomBytes(16).toString('hex');
  const tmp = `${VOLUME_MARKER}.${randomBytes(6).toString('hex')}`;
  const fd = fs.openSync(at(dirFd, tmp), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0o600);
  try {
    fs.writeFileSync(fd, `${id}\n`);
    fs.fsyncSync(fd);
  } finally {
    closeQuietly(fd);
  }
  return { id, tmp };
}

/**
 * The volume id of a directory berth made (a mount source of a plan), made now if it has none: a
 * new file, written whole elsewhere and linked into place (two runs at once agree on one id;
 * a crash leaves none or a whole one). Anything else at the marker's name is removed first.
 */
export function volumeIdOf(dir: string): string {
  return withFd(openRootDir(dir), (dirFd) => {
    for (;;) {
      const found = readAt(dirFd);
      if (found !== undefined && found !== 'invalid') return found;
      if (found === 'invalid') fs.rmSync(at(dirFd, VOLUME_MARKER), { recursive: true, force: true }); // never followed: rm takes a link itself
      const { id, tmp } = newMarker(dirFd);
      try {
        fs.linkSync(at(dirFd, tmp), at(dirFd, VOLUME_MARKER));
        return id;
      } catch (err) {
        const code = errnoOf(err);
        // A filesystem without hard links: renamed into place. Runs of a home or workspace take turns
        // (its workspace's lock); two first runs of a shared project at once there: the later id wins.
        if (code === 'EPERM' || code === 'ENOTSUP' || code === 'EOPNOTSUPP' || code === 'ENOSYS') {
          fs.renameSync(at(dirFd, tmp), at(dirFd, VOLUME_MARKER));
          return id;
        }
        if (code !== 'EEXIST') throw err;
        // Another run made it first: its id is the one.
      } finally {
        fs.rmSync(at(dirFd, tmp), { force: true });
      }
    }
  });
}

/**
 * Bind a directory to a new volume (a checkpoint's snapshot restored as a new claim): a new id,
 * written whole and renamed over the marker. Returns the id it had (its claim is to be retired) and
 * the new one.
 */
export function renewVolumeId(dir: string): { old?: string; id: string } {
  return withFd(openRootDir(dir), (dirFd) => {
    const found = readAt(dirFd);
    const { id, tmp } = newMarker(dirFd);
    // A directory (or anything but a file) at the marker's name would take the rename: removed first, never followed.
    if (found === 'invalid') fs.rmSync(at(dirFd, VOLUME_MARKER), { recursive: true, force: true });
    fs.renameSync(at(dirFd, tmp), at(dirFd, VOLUME_MARKER));
    return { ...(found && found !== 'invalid' ? { old: found } : {}), id };
  });
}

/** The volume ids of every directory right below `parent` (not following links; each one's own marker). */
export function volumeIdsBelow(parent: string): string[] {
  let fd: number;
  try {
    fd = openRootDir(parent);
  } catch (err) {
    if (errnoOf(err) === 'ENOENT' || errnoOf(err) === 'ENOTDIR') return [];
    throw err;
  }
  return withFd(fd, () => {
    const ids: string[] = [];
    for (const name of fs.readdirSync(`/proc/self/fd/${fd}`)) {
      let child: number | undefined;
      try {
        child = openChildDir(fd, name, join(parent, name));
      } catch {
        continue; // a link or a file: no directory of berth's, no volume
      }
      if (child === undefined) continue;
      const id = withFd(child, () => readAt(child));
      if (id !== undefined && id !== 'invalid') ids.push(id);
    }
    return ids;
  });
}

const retiredDir = (stateDir: string) => join(stateDir, RETIRED_DIR);

/** List volume ids whose claims are to be deleted (their directories went); returns how many were listed. */
export function recordRetired(stateDir: string, ids: readonly string[]): number {
  const dir = retiredDir(stateDir);
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  let room = RETIRED_MAX - fs.readdirSync(dir).length;
  let listed = 0;
  for (const id of ids) {
    if (!VOLUME_ID.test(id) || room <= 0) continue;
    fs.writeFileSync(join(dir, id), '', { mode: 0o600 });
    room--;
    listed++;
  }
  return listed;
}

/** Up to `limit` volume ids waiting for their claims' deletion, and how many wait in all. */
export function retiredVolumes(stateDir: string, limit: number): { ids: string[]; waiting: number } {
  const all = readdirIfExists(retiredDir(stateDir)).filter((n) => VOLUME_ID.test(n));
  return { ids: all.slice(0, limit), waiting: all.length };
}

/** These ids' claims are gone from the cluster. */
export function forgetRetired(stateDir: string, ids: readonly string[]): void {
  for (const id of ids) if (VOLUME_ID.test(id)) fs.rmSync(join(retiredDir(stateDir), id), { force: true });
}
