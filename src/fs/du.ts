import fs from 'node:fs';
import { join } from 'node:path';
import { errnoOf } from '../base/errors.js';

/**
 * Bytes of regular files under dir: lstat only (a link is never followed), bounded by an
 * entry budget so a tenant with a million files cannot stall an admin listing.
 */
export function diskUsage(dir: string, maxEntries = 100_000): { bytes: number; complete: boolean } {
  let bytes = 0;
  let entries = 0;
  const stack = [dir];
  while (stack.length) {
    const current = stack.pop() as string;
    let names: string[];
    try {
      names = fs.readdirSync(current);
    } catch (err) {
      if (errnoOf(err) === 'ENOENT' || errnoOf(err) === 'ENOTDIR') continue;
      throw err;
    }
    for (const name of names) {
      if (++entries > maxEntries) return { bytes, complete: false };
      const full = join(current, name);
      let stat: fs.Stats;
      try {
        stat = fs.lstatSync(full);
      } catch {
        continue;
      }
      if (stat.isDirectory()) stack.push(full);
      else if (stat.isFile()) bytes += stat.size;
    }
  }
  return { bytes, complete: true };
}
