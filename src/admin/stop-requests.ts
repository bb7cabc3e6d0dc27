import fs from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { readJsonFile } from '../fs/json-file.js';
import { atomicWriteFile } from '../fs/tree.js';

/**
 * A stop asked of a run another process of this home is running (berth serve runs it, the CLI
 * asks): a file in berth's state that the process holding the run reads within a tick
 * (STOP_POLL_MS) and acts on through its own runner. A request no process takes lapses after
 * STOP_REQUEST_TTL_MS (its run ended, or its berth died and the journal closes it).
 */
export const STOP_POLL_MS = 500;
export const STOP_REQUEST_TTL_MS = 60_000;
/** Requests read per tick: a full directory cannot hold a tick up. */
const READ_MAX = 256;

const StopRequestSchema = z
  .object({ project: z.string().max(64), run: z.string().max(64), reason: z.string().max(500), at: z.number() })
  .strict();
const RUN_ID = /^[a-z0-9]{1,64}$/;

const dirOf = (stateDir: string) => join(stateDir, 'stop-requests');

export function fileStopRequest(stateDir: string, project: string, run: string, reason: string): void {
  if (!RUN_ID.test(run)) return; // not a run id berth made: nothing could pick it up
  fs.mkdirSync(dirOf(stateDir), { recursive: true, mode: 0o700 });
  const request = { project, run, reason: reason.slice(0, 500), at: Date.now() };
  atomicWriteFile(join(dirOf(stateDir), `${run}.json`), JSON.stringify(request), 0o600);
}

/** Every STOP_POLL_MS: the requests for runs this process holds are acted on (`stop` true) and removed; the lapsed removed. */
export function watchStopRequests(stateDir: string, stop: (project: string, run: string, reason: string) => boolean): () => void {
  const tick = () => {
    let names: string[];
    try {
      names = fs
        .readdirSync(dirOf(stateDir))
        .filter((n) => n.endsWith('.json'))
        .slice(0, READ_MAX);
    } catch {
      return; // none asked yet (no directory), or it cannot be read: the next tick tries again
    }
    for (const name of names) {
      const path = join(dirOf(stateDir), name);
      let request: z.infer<typeof StopRequestSchema> | undefined;
      try {
        request = readJsonFile(path, StopRequestSchema);
      } catch {
        request = undefined;
      }
      const done = !request || Date.now() - request.at > STOP_REQUEST_TTL_MS || stop(request.project, request.run, request.reason);
      if (done) fs.rmSync(path, { force: true });
    }
  };
  const timer = setInterval(tick, STOP_POLL_MS);
  timer.unref();
  return () => clearInterval(timer);
}
