import { BerthError } from '../base/errors.js';

/**
 * At most `perKey` requests of one key (a chat login) and `total` in all at once, for requests
 * that hold or stream a whole file (uploads, downloads); past that BUSY (429, try again in a
 * second): a person's parallel requests cannot add up to what the process holds.
 */
export function inFlight(limits: { perKey: number; total: number }, what: string) {
  const byKey = new Map<string, number>();
  let all = 0;
  /** A slot for `key`, held until the returned release is called (once; again is a no-op). */
  const acquire = (key: string): (() => void) => {
    const mine = byKey.get(key) ?? 0;
    if (mine >= limits.perKey || all >= limits.total) {
      throw new BerthError('BUSY', `too many ${what} at once: try again in a moment`, { retry_after: 1 });
    }
    byKey.set(key, mine + 1);
    all++;
    let held = true;
    return () => {
      if (!held) return;
      held = false;
      all--;
      const left = (byKey.get(key) ?? 1) - 1;
      if (left > 0) byKey.set(key, left);
      else byKey.delete(key);
    };
  };
  /** `fn` within a slot, released when it settles. */
  const run = async <T>(key: string, fn: () => T | Promise<T>): Promise<T> => {
    const release = acquire(key);
    try {
      return await fn();
    } finally {
      release();
    }
  };
  return Object.assign(run, { acquire });
}

/** Files a chat login may send or fetch at once, and all logins together. */
export const FILE_REQUESTS_IN_FLIGHT = { perKey: 2, total: 8 };
