import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import { join } from 'node:path';
import { readdirIfExists } from '../fs/dir.js';
import { atomicWriteFile } from '../fs/tree.js';
import { pruneRunFiles, readRunFiles, runFilesDirOf, RUN_FILES_RECORD, type RunFilesRecord } from './run-files.js';

/**
 * A file berth made for a person (a chat /export's archive), kept as a run's file is: under a
 * run id of its own, with a link key, pruned with the runs' files. `write` puts it at the path given.
 */
export async function keepPersonFile(
  stateDir: string,
  runId: string,
  who: { tenant_key: string; session: string },
  file: { name: string; type: string },
  write: (path: string) => Promise<unknown>,
): Promise<{ size: number; key: string }> {
  const dir = runFilesDirOf(stateDir, runId);
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  try {
    await write(join(dir, file.name));
    const size = fs.statSync(join(dir, file.name)).size;
    const key = randomBytes(16).toString('base64url');
    const record: RunFilesRecord = { ...who, files: [{ ...file, size }], key };
    atomicWriteFile(join(dir, RUN_FILES_RECORD), JSON.stringify(record), 0o600);
    pruneRunFiles(stateDir, Date.now());
    return { size, key };
  } catch (err) {
    fs.rmSync(dir, { recursive: true, force: true });
    throw err;
  }
}

/** The runs (and person files) whose kept files are this tenant's: what berth tenant forget removes with their runs. */
export function runFilesOfTenant(stateDir: string, tenant: string): string[] {
  return readdirIfExists(join(stateDir, 'run-files')).filter((run) => readRunFiles(stateDir, run)?.tenant_key === tenant);
}
