import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { BerthError } from '../base/errors.js';
import { at, closeQuietly, fdRealPath, openChildDir, openNoFollow, openRootDir, withFd } from '../fs/fd-path.js';
import { moveInto, sameOwnerAndMode, type MovedInto } from '../fs/move-into.js';
import { ownerAlive, selfIdentity } from '../fs/process-identity.js';
import { ensureDirPath, writeNewFileAt, type Owner } from '../fs/tree.js';
import type { FreshLayout } from '../plan/pool.js';
import type { BindMount } from '../plan/run-plan.js';

/**
 * Adopt's directories (plan/pool.ts): each pool container of an adopt shape starts with fresh,
 * empty directories of berth's at its person binds, made for it alone below
 * `<adopt dir>/<this process>/<random name>/`, in berth's private state (never in a project's
 * tree, which a shared-mode container sees whole). A claim moves a new person's first contents
 * (the seed, a first message's files, the mount points, the decoys, the run's sockets) into them
 * and renames each over the person's own, now empty, directory. The sandbox's gofer has served
 * that directory since the start; it now serves it under the person's path.
 */
export interface FreshDirs {
  /** The container's own directory: a random name, made once, never again. */
  root: string;
  /** Its fresh directory by person target. */
  byTarget: Record<string, string>;
  /** Set when a failed claim could not put a person's entries back: then nothing here is removed. */
  keep?: string;
}

/** What one claim copies at most into files something is mounted on (the protected paths' seeds). */
const CLAIM_COPY_BYTES = 64 * 1024 * 1024;
/** Where the merged-away originals go until the claim is done (below the container's own directory). */
const ASIDE = 'aside';

/** This process's directory below the adopt dir; the directories of berth processes that are gone are removed. */
export function ownAdoptDir(adoptDir: string): string {
  fs.mkdirSync(adoptDir, { recursive: true, mode: 0o700 });
  const self = selfIdentity();
  for (const owner of fs.readdirSync(adoptDir)) {
    if (owner !== self && !ownerAlive(owner)) fs.rmSync(join(adoptDir, owner), { recursive: true, force: true });
  }
  const own = join(adoptDir, self);
  fs.mkdirSync(own, { recursive: true, mode: 0o700 });
  return own;
}

/** One pool container's fresh directories, and the mount points its workspace must hold (as prepareMounts makes them). */
export function makeFreshDirs(dir: string, layout: FreshLayout, owner?: Owner): FreshDirs {
  const root = join(dir, randomBytes(12).toString('hex'));
  fs.mkdirSync(root, { mode: 0o700 }); // never recursive, never over anything: a name made once
  try {
    withFd(openRootDir(root), (rootFd) => {
      for (const d of layout.dirs) {
        fs.mkdirSync(at(rootFd, d.name), { mode: d.mode });
        if (d.tenantOwned && owner) fs.lchownSync(at(rootFd, d.name), owner.uid, owner.gid);
      }
      const workspace = layout.dirs.find((d) => d.target === '/workspace');
      if (!workspace || !layout.mountpoints.length) return;
      withFd(openChildDir(rootFd, workspace.name, workspace.name) as number, (wsFd) => {
        for (const { path, kind } of layout.mountpoints) {
          const parts = path.split('/');
          const name = parts.pop() as string;
          withFd(ensureDirPath(wsFd, parts, { owner, shownRoot: '' }), (parentFd) => {
            if (kind === 'file') return writeNewFileAt(parentFd, name, '', 0o644, owner);
            fs.mkdirSync(at(parentFd, name), { mode: 0o755 });
            if (owner) fs.lchownSync(at(parentFd, name), owner.uid, owner.gid);
          });
        }
      });
    });
  } catch (err) {
    fs.rmSync(root, { recursive: true, force: true });
    throw err;
  }
  return { root, byTarget: Object.fromEntries(layout.dirs.map((d) => [d.target, join(root, d.name)])) };
}

/** Remove a pool container's fresh directories (what is left of them: a claim renamed them away). Never follows a link. */
export function removeFreshDirs(fresh: FreshDirs): void {
  if (fresh.keep) return;
  fs.rmSync(fresh.root, { recursive: true, force: true });
}

interface Adoption {
  target: string;
  parentFd: number;
  name: string;
  personFd: number;
  freshName: string;
  /** Open as long as `moved` may be undone: its steps name it. */
  freshFd?: number;
  moved?: MovedInto;
}

/**
 * The claim: each person directory's entries moved into its fresh twin, then the twin renamed
 * over it (the person's directory must then be empty: anything that arrived meanwhile makes the
 * rename fail). On any failure the entries not yet renamed into place go back where they were and
 * it throws: the caller drops the container and the run starts its own, losing nothing. A twin
 * already renamed stays: it is the person's directory, whole. Should putting back fail too, the
 * entries stay in the fresh directories, which are then kept (`keep`), never removed.
 */
export function adoptFreshDirs(fresh: FreshDirs, person: readonly BindMount[]): void {
  const rootFd = openRootDir(fresh.root);
  let asideFd: number | undefined;
  const adoptions: Adoption[] = [];
  let renamed = 0;
  try {
    fs.mkdirSync(at(rootFd, ASIDE), { mode: 0o700 });
    const aside = openChildDir(rootFd, ASIDE, ASIDE);
    if (aside === undefined) throw new BerthError('INTERNAL', 'the claim could not make its aside directory');
    asideFd = aside;
    const limit = { bytes: CLAIM_COPY_BYTES };
    for (const m of person) {
      const freshPath = fresh.byTarget[m.target];
      if (!freshPath) throw new BerthError('INTERNAL', `the pool container has no fresh directory for ${m.target}`);
      const a = openPerson(m.source, m.target, basename(freshPath));
      adoptions.push(a);
      a.freshFd = openChildDir(rootFd, a.freshName, a.freshName);
      if (a.freshFd === undefined) throw new BerthError('INTERNAL', `the fresh directory for ${m.target} is gone`);
      a.moved = moveInto(a.personFd, a.freshFd, asideFd, limit);
      sameOwnerAndMode(a.personFd, a.freshFd);
    }
    for (const a of adoptions) {
      // Still the directory whose entries were moved (nothing swapped it meanwhile); then the twin over it.
      if (fs.lstatSync(at(a.parentFd, a.name)).ino !== fs.fstatSync(a.personFd).ino)
        throw new BerthError('E_SANDBOX_VIOLATION', `the directory at ${a.target} was replaced during the claim`);
      fs.renameSync(at(rootFd, a.freshName), at(a.parentFd, a.name));
      renamed++;
    }
  } catch (err) {
    try {
      for (const a of adoptions.slice(renamed).reverse()) a.moved?.undo();
    } catch (undoErr) {
      fresh.keep = `putting the entries back failed (${String(undoErr)})`;
      throw new BerthError('INTERNAL', `a pool claim failed (${String(err)}) and ${fresh.keep}: they are in ${fresh.root}`);
    }
    throw err;
  } finally {
    for (const a of adoptions) {
      a.moved?.close();
      closeQuietly(a.freshFd);
      closeQuietly(a.personFd);
      closeQuietly(a.parentFd);
    }
    closeQuietly(asideFd);
    closeQuietly(rootFd);
  }
}

/** The person's directory and its parent, each opened without following a link, and still the planned path. */
function openPerson(source: string, target: string, freshName: string): Adoption {
  const { fd: parentFd, kind } = openNoFollow(dirname(source));
  if (kind !== 'dir' || fdRealPath(parentFd) !== dirname(source)) {
    closeQuietly(parentFd);
    throw new BerthError('E_SANDBOX_VIOLATION', `${dirname(source)} is not the directory berth planned`, { path: source });
  }
  let personFd: number | undefined;
  try {
    personFd = openChildDir(parentFd, basename(source), source);
  } finally {
    if (personFd === undefined) closeQuietly(parentFd);
  }
  if (personFd === undefined) throw new BerthError('E_SANDBOX_VIOLATION', `${source} does not exist`, { path: source });
  return { target, parentFd, name: basename(source), personFd, freshName };
}
