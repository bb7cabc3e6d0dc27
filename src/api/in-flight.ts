import { BerthError } from '../base/errors.js';

/**
 * At most `perKey` requests of one key (a chat login) and `total` in all at once, for requests
 * that hold a whole file in memory (uploads, downloads); past that BUSY (429, try again in a
 * second): a person's parallel requests cannot add up to what the process holds.
 */
export function inFlight(limits: { perKey: number; total: number }, what: string) {
  const byKey = new Map<string, number>();
  let all = 0;
  return async <T>(key: string, fn: () => T | Promise<T>): Promise<T> => {
    const mine = byKey.get(key) ?? 0;
    if (mine >= limits.perKey || all >= limits.total) {
      throw new BerthError('BUSY', `too many ${what} at once: try again in a moment`, { retry_after: 1 });
    }
    byKey.set(key, mine + 1);
    all++;
    try {
      return await fn();
    } finally {
      all--;
      const left = (byKey.get(key) ?? 1) - 1;
      if (left > 0) byKey.set(key, left);
      else byKey.delete(key);
    }
  };
}

/** Files a chat login may send or fetch at once, and all logins together. */
export const FILE_REQUESTS_IN_FLIGHT = { perKey: 2, total: 8 };
