import fs from 'node:fs';
import { join } from 'node:path';
import { BerthError, errnoOf } from '../base/errors.js';

/** A claim older than this is from a crashed creator (creating a project takes milliseconds). */
const STALE_MS = 60_000;

function holderAlive(file: string): boolean {
  try {
    const [pidText] = fs.readFileSync(file, 'utf8').split('\n');
    const age = Date.now() - fs.statSync(file).mtimeMs;
    if (age > STALE_MS) return false;
    const pid = Number(pidText);
    if (!Number.isInteger(pid) || pid <= 0) return age < 1000; // still being written
    process.kill(pid, 0);
    return true;
  } catch (err) {
    if (errnoOf(err) === 'EPERM') return true; // alive, another user's process
    return false; // ESRCH: gone; ENOENT: released meanwhile
  }
}

/**
 * Claim a project name for creation (O_EXCL file under .berth/locks). Of two creators of one
 * name the second gets PROJECT_EXISTS at once; a claim left by a crashed creator is taken over.
 * Returns the release function.
 */
export function claimProjectName(locksDir: string, name: string): () => void {
  fs.mkdirSync(locksDir, { recursive: true, mode: 0o700 });
  const file = join(locksDir, `create-${name}`);
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      fs.writeFileSync(file, `${process.pid}\n`, { flag: 'wx', mode: 0o600 });
      return () => fs.rmSync(file, { force: true });
    } catch (err) {
      if (errnoOf(err) !== 'EEXIST') throw err;
      if (holderAlive(file)) break;
      fs.rmSync(file, { force: true });
    }
  }
  throw new BerthError('PROJECT_EXISTS', `project "${name}" is being created right now`);
}
