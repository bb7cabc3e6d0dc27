import fs from 'node:fs';
import { join } from 'node:path';
import lockfile from 'proper-lockfile';

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
