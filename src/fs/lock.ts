import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import { basename, dirname, join } from 'node:path';
import lockfile from 'proper-lockfile';
import { BerthError, errnoOf } from '../base/errors.js';
import { openIfExists } from './fd-path.js';
import { ownerAlive, selfIdentity } from './process-identity.js';

/**
 * Run fn holding a cross-process lock (CLI and server alike) kept as <dir>/<name>. A lock left
 * by a crashed holder goes stale after 10 s; waiters retry for about as long.
 */
export async function withFileLock<T>(dir: string, name: string, fn: () => T | Promise<T>): Promise<T> {
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  const release = await lockfile.lock(dir, {
    lockfilePath: join(dir, name),
    realpath: false,
    stale: 10_000,
    retries: { retries: 100, minTimeout: 10, maxTimeout: 100 },
  });
  try {
    return await fn();
  } finally {
    await release();
  }
}

/** An owner lock this process holds; release() gives it back (only if it is still this holder's). */
export interface OwnerLock {
  readonly path: string;
  release(): void;
}

/** Who an owner lock goes by, and how a holder is known to be gone (defaults: this process, /proc). */
export interface LockOwner {
  owner?: string;
  alive?: (owner: string) => boolean;
}

/**
 * Take the lock file <path> for `owner` without waiting, across processes: the file names its
 * holder (its process identity, "<pid>.<start time>.<boot>"), written whole before it appears (a link of a finished file).
 * A holder that is gone (`alive` says no: killed, crashed) is taken over at once, and by
 * exactly one taker: replacing the dead holder's name needs "<path>.takeover-<dead holder>",
 * itself an owner lock (so a taker that dies midway is taken over the same way). Those takeover
 * files stay (a slow taker that read the dead name late must still find it taken); ones older
 * than an hour are removed. Returns the live holder's name when someone else has it.
 */
export function tryOwnerLock(path: string, who: LockOwner = {}): OwnerLock | { heldBy: string } {
  const owner = who.owner ?? selfIdentity();
  const alive = who.alive ?? ownerAlive;
  for (let attempt = 0; attempt < 10; attempt++) {
    if (createHolding(path, owner)) return holding(path, owner);
    const holder = holderOf(path);
    if (holder === undefined) continue; // released meanwhile: try again
    if (holder === owner || alive(holder)) return { heldBy: holder };
    const takeover = tryOwnerLock(`${path}.takeover-${fileSafe(holder)}`, { owner, alive });
    if (!('release' in takeover)) return { heldBy: takeover.heldBy }; // another taker is replacing it right now
    if (holderOf(path) !== holder) continue; // cannot happen (only the takeover's holder replaces it): look again
    writeWhole(path, owner, (tmp) => fs.renameSync(tmp, path));
    pruneTakeovers(path);
    return holding(path, owner);
  }
  return { heldBy: holderOf(path) ?? 'unknown' };
}

/** The live holder of the owner lock <path> (its identity), without taking it; undefined if free or its holder is gone. */
export function liveHolderOf(path: string, alive: (owner: string) => boolean = ownerAlive): string | undefined {
  const holder = holderOf(path);
  return holder !== undefined && alive(holder) ? holder : undefined;
}

/** Why a wait for an owner lock must end: this very process holds it (a nested call, which would never end), or the deadline passed. */
function waitedTooLong(path: string, heldBy: string, owner: string, deadline: number, timeoutMs = 10_000): void {
  if (heldBy === owner) throw new Error(`${path} is already held by this process (nested lock)`);
  if (Date.now() > deadline)
    throw new BerthError('LOCKED', `${path} is held by berth process ${heldBy} for more than ${timeoutMs} ms`, {
      path,
      hint: 'another berth process is busy with it; try again',
      retry_after: 1,
    });
}

/**
 * Run fn holding the owner lock <path>, waiting (the thread sleeps) while a live holder has it:
 * for short, synchronous sections (a check-and-append). After `timeoutMs` it throws.
 */
export function withOwnerLockSync<T>(path: string, fn: () => T, who: LockOwner & { timeoutMs?: number } = {}): T {
  const owner = who.owner ?? selfIdentity();
  const deadline = Date.now() + (who.timeoutMs ?? 10_000);
  for (let pause = 1; ; pause = Math.min(pause * 2, 20)) {
    const lock = tryOwnerLock(path, { owner, alive: who.alive });
    if ('release' in lock) {
      try {
        return fn();
      } finally {
        lock.release();
      }
    }
    waitedTooLong(path, lock.heldBy, owner, deadline, who.timeoutMs);
    Atomics.wait(SLEEPER, 0, 0, pause);
  }
}

/**
 * Run fn holding the owner lock <path>, waiting without blocking the event loop while a live
 * holder has it: for sections that wait on something else (a cluster's copy pod). The lock names
 * the process, so this process's own sections must take turns before they get here (a keyed lock).
 */
export async function withOwnerLock<T>(path: string, fn: () => Promise<T>, who: LockOwner & { timeoutMs?: number } = {}): Promise<T> {
  const owner = who.owner ?? selfIdentity();
  const deadline = Date.now() + (who.timeoutMs ?? 10_000);
  for (let pause = 5; ; pause = Math.min(pause * 2, 200)) {
    const lock = tryOwnerLock(path, { owner, alive: who.alive });
    if ('release' in lock) {
      try {
        return await fn();
      } finally {
        lock.release();
      }
    }
    waitedTooLong(path, lock.heldBy, owner, deadline, who.timeoutMs);
    await new Promise((r) => setTimeout(r, pause));
  }
}

const SLEEPER = new Int32Array(new SharedArrayBuffer(4));
const TAKEOVER_KEPT_MS = 60 * 60 * 1000;

function holding(path: string, owner: string): OwnerLock {
  return {
    path,
    release() {
      if (holderOf(path) === owner) fs.rmSync(path, { force: true });
    },
  };
}

/** Create <path> naming owner, atomically and only if nothing is there (link fails on any existing name). */
function createHolding(path: string, owner: string): boolean {
  try {
    writeWhole(path, owner, (tmp) => fs.linkSync(tmp, path));
    return true;
  } catch (err) {
    if (errnoOf(err) === 'EEXIST') return false;
    throw err;
  }
}

/** Write the owner's name into a temporary file beside path, then put it in place with `place`. */
function writeWhole(path: string, owner: string, place: (tmp: string) => void): void {
  const tmp = `${path}.${fileSafe(owner)}.${randomBytes(4).toString('hex')}.tmp`;
  const { O_WRONLY, O_CREAT, O_EXCL, O_NOFOLLOW } = fs.constants;
  const fd = fs.openSync(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0o600);
  try {
    fs.writeSync(fd, owner);
  } finally {
    fs.closeSync(fd);
  }
  try {
    place(tmp);
  } finally {
    fs.rmSync(tmp, { force: true });
  }
}

/** The holder a lock file names; undefined when there is none. Never through a link. */
function holderOf(path: string): string | undefined {
  const fd = openIfExists(path);
  if (fd === undefined) return undefined;
  try {
    const buf = Buffer.alloc(256);
    return buf.subarray(0, fs.readSync(fd, buf, 0, buf.length, 0)).toString('utf8');
  } finally {
    fs.closeSync(fd);
  }
}

/** A holder's name as part of a file name (what berth writes is "<pid>.<start>.<boot>"; anything else is hashed). */
function fileSafe(holder: string): string {
  return /^[\w.-]{1,64}$/.test(holder) ? holder : `h${createHash('sha256').update(holder).digest('hex').slice(0, 16)}`;
}

/** Takeover claims older than an hour, and temporary files a holder killed while taking the lock left. */
function pruneTakeovers(path: string): void {
  const dir = dirname(path);
  const prefix = `${basename(path)}.`;
  for (const name of fs.readdirSync(dir)) {
    if (!name.startsWith(prefix) || !(name.startsWith(`${prefix}takeover-`) || name.endsWith('.tmp'))) continue;
    try {
      if (Date.now() - fs.lstatSync(join(dir, name)).mtimeMs > TAKEOVER_KEPT_MS) fs.rmSync(join(dir, name), { force: true });
    } catch {
      // gone meanwhile
    }
  }
}
