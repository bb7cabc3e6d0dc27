import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { tryOwnerLock, withOwnerLockSync } from '../../src/fs/lock.js';
import { ownerAlive, processIdentity } from '../../src/fs/process-identity.js';

/**
 * Owner locks (one consumer per bridge, the inbox's check-and-append): the file names its
 * holder; a live holder keeps it; a dead holder's lock is taken over at once and by exactly
 * one taker, also when a taker dies midway.
 */
const dirs: string[] = [];
afterEach(() => dirs.splice(0).forEach((d) => fs.rmSync(d, { recursive: true, force: true })));
const lockPath = () => {
  const d = fs.mkdtempSync(join(os.tmpdir(), 'berth-lock-'));
  dirs.push(d);
  return join(d, 'signal.consumer');
};
/** Owners named "dead-…" are gone; every other one is alive. */
const alive = (o: string) => !o.startsWith('dead');

describe('tryOwnerLock', () => {
  it('a free lock is taken and names its holder; a second taker is told who holds it; release frees it', () => {
    const path = lockPath();
    const a = tryOwnerLock(path, { owner: 'a', alive });
    expect('release' in a).toBe(true);
    expect(fs.readFileSync(path, 'utf8')).toBe('a');
    expect(tryOwnerLock(path, { owner: 'b', alive })).toEqual({ heldBy: 'a' });
    expect(tryOwnerLock(path, { owner: 'a', alive })).toEqual({ heldBy: 'a' }); // a second consumer in the same process too
    (a as { release(): void }).release();
    expect(fs.existsSync(path)).toBe(false);
    expect('release' in tryOwnerLock(path, { owner: 'b', alive })).toBe(true);
  });

  it("a dead holder's lock is taken over by exactly one of the takers that find it", () => {
    const path = lockPath();
    fs.writeFileSync(path, 'dead-1');
    const first = tryOwnerLock(path, { owner: 'a', alive });
    const second = tryOwnerLock(path, { owner: 'b', alive });
    expect('release' in first).toBe(true);
    expect(second).toEqual({ heldBy: 'a' });
    expect(fs.readFileSync(path, 'utf8')).toBe('a');
  });

  it('a taker that died midway (its takeover claim left behind) is itself taken over', () => {
    const path = lockPath();
    fs.writeFileSync(path, 'dead-1');
    fs.writeFileSync(`${path}.takeover-dead-1`, 'dead-2'); // dead-2 died between claiming and replacing
    expect('release' in tryOwnerLock(path, { owner: 'c', alive })).toBe(true);
    expect(fs.readFileSync(path, 'utf8')).toBe('c');
  });

  it('a slow taker that read the dead name before it was replaced finds the takeover claimed, not the lock free', () => {
    const path = lockPath();
    fs.writeFileSync(path, 'dead-1');
    expect('release' in tryOwnerLock(path, { owner: 'a', alive })).toBe(true);
    // What the slow one does next: claim the takeover of dead-1. It is held (by a), so it backs off.
    expect(tryOwnerLock(`${path}.takeover-dead-1`, { owner: 'slow', alive })).toEqual({ heldBy: 'a' });
  });

  it("release leaves a lock alone that is no longer its holder's", () => {
    const path = lockPath();
    const a = tryOwnerLock(path, { owner: 'a', alive }) as { release(): void };
    fs.writeFileSync(path, 'b');
    a.release();
    expect(fs.readFileSync(path, 'utf8')).toBe('b');
  });

  it('by default it goes by this process (pid and start time), which /proc says is alive', () => {
    const path = lockPath();
    const lock = tryOwnerLock(path) as { release(): void };
    expect(fs.readFileSync(path, 'utf8')).toBe(processIdentity());
    expect(ownerAlive(processIdentity())).toBe(true);
    expect(ownerAlive(`${process.pid}.1`)).toBe(false); // the same pid, another start: a reused pid
    lock.release();
  });
});

describe('withOwnerLockSync', () => {
  it('runs the section holding the lock and releases it, also when the section throws', () => {
    const path = lockPath();
    expect(withOwnerLockSync(path, () => fs.readFileSync(path, 'utf8'), { owner: 'a', alive })).toBe('a');
    expect(fs.existsSync(path)).toBe(false);
    expect(() =>
      withOwnerLockSync(
        path,
        () => {
          throw new Error('boom');
        },
        { owner: 'a', alive },
      ),
    ).toThrow('boom');
    expect(fs.existsSync(path)).toBe(false);
  });

  it('waits for a live holder, and gives up with its name after the timeout; a nested call fails at once', () => {
    const path = lockPath();
    fs.writeFileSync(path, 'other');
    const t0 = Date.now();
    expect(() => withOwnerLockSync(path, () => 1, { owner: 'a', alive, timeoutMs: 200 })).toThrow(/held by berth process other/);
    expect(() => withOwnerLockSync(path, () => 1, { owner: 'a', alive, timeoutMs: 50 })).toThrow(
      expect.objectContaining({ code: 'LOCKED' }),
    );
    expect(Date.now() - t0).toBeGreaterThanOrEqual(200);
    fs.rmSync(path);
    expect(() => withOwnerLockSync(path, () => withOwnerLockSync(path, () => 1, { owner: 'a', alive }), { owner: 'a', alive })).toThrow(
      /nested/,
    );
  });
});
