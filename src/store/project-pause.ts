import fs from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { BerthError } from '../base/errors.js';
import { readJsonFile } from '../fs/json-file.js';
import { atomicWriteFile } from '../fs/tree.js';

/**
 * A project paused by its operator: no new run starts (a chat message, an API or CLI run, a
 * schedule's firing, a session's shell tool); runs already going finish. Kept in the project's
 * state (.berth/projects/<name>/paused.json), so it holds across restarts and for every process
 * of the home, and goes to the trash with the project.
 */
export const PAUSE_REASON_MAX = 500;
export const PauseSchema = z
  .object({
    at: z.string(),
    by: z.string().max(200).describe('Who paused it ("operator", or the console login).'),
    reason: z.string().max(PAUSE_REASON_MAX).optional().describe('Shown to the people whose messages are refused.'),
  })
  .strict();
export type Pause = z.infer<typeof PauseSchema>;

const FILE = 'paused.json';

export function readPause(stateDir: string): Pause | undefined {
  try {
    return readJsonFile(join(stateDir, FILE), PauseSchema);
  } catch {
    // An unreadable file pauses nothing it cannot say (a half-written one is never published: atomic write).
    return undefined;
  }
}

export function writePause(stateDir: string, pause: Pause): void {
  atomicWriteFile(join(stateDir, FILE), JSON.stringify(PauseSchema.parse(pause)), 0o600);
}

/** True when it was paused. */
export function clearPause(stateDir: string): boolean {
  const had = fs.existsSync(join(stateDir, FILE));
  fs.rmSync(join(stateDir, FILE), { force: true });
  return had;
}

/** The refusal of a new run in a paused project (PROJECT_PAUSED: 423, exit 33). */
export function assertNotPaused(project: string, stateDir: string): void {
  const pause = readPause(stateDir);
  if (!pause) return;
  throw new BerthError('PROJECT_PAUSED', `project ${project} is paused since ${pause.at}${pause.reason ? `: ${pause.reason}` : ''}`, {
    hint: `berth project resume ${project}`,
  });
}
