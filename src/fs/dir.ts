import fs from 'node:fs';
import { errnoOf } from '../base/errors.js';

/** A directory's entry names, or none when it does not exist (yet): berth's stores make their directories on first write. */
export function readdirIfExists(dir: string): string[] {
  try {
    return fs.readdirSync(dir);
  } catch (err) {
    if (errnoOf(err) === 'ENOENT') return [];
    throw err;
  }
}
