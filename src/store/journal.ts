import fs from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { errnoOf } from '../errors.js';

/**
 * The run journal: every run, one JSON line per phase — accepted (before its container exists),
 * started (the container's id), then finished, failed or interrupted — appended to the project's
 * sessions/journal.jsonl (berth-owned, hidden from containers) and fsynced line by line, so a
 * berth killed at any point leaves a trace of every run it accepted.
 */
const FILE = 'journal.jsonl';

export const RUN_PHASES = ['accepted', 'started', 'finished', 'failed', 'interrupted'] as const;

export const JournalEntrySchema = z.object({
  run: z.string(),
  phase: z.enum(RUN_PHASES),
  at: z.string(),
  /** The berth process that owns the run ("<pid>.<start time>"), set when it is accepted. */
  owner: z.string().optional(),
  kind: z.enum(['message', 'workflow_step', 'shell_tool']).optional(),
  session: z.string().optional(),
  container: z.string().optional(),
  exit_code: z.number().int().optional(),
  reason: z.string().optional(),
});
export type JournalEntry = z.infer<typeof JournalEntrySchema>;

export function appendJournal(sessionsDir: string, entry: Omit<JournalEntry, 'at'>): void {
  const line = `${JSON.stringify({ ...entry, at: new Date().toISOString() })}\n`;
  const fd = fs.openSync(join(sessionsDir, FILE), fs.constants.O_WRONLY | fs.constants.O_APPEND | fs.constants.O_CREAT | fs.constants.O_NOFOLLOW, 0o600);
  try {
    fs.writeSync(fd, line);
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}

/** Each run's journal folded into one record: its last phase, plus what its earlier lines said. */
export interface RunTrace {
  run: string;
  phase: JournalEntry['phase'];
  at: string;
  owner?: string;
  kind?: JournalEntry['kind'];
  session?: string;
  container?: string;
  reason?: string;
}

function traces(sessionsDir: string): RunTrace[] {
  let text: string;
  try {
    text = fs.readFileSync(join(sessionsDir, FILE), 'utf8');
  } catch (err) {
    if (errnoOf(err) === 'ENOENT') return [];
    throw err;
  }
  const runs = new Map<string, RunTrace>();
  for (const line of text.split('\n')) {
    if (!line) continue;
    let parsed: ReturnType<typeof JournalEntrySchema.safeParse>;
    try {
      parsed = JournalEntrySchema.safeParse(JSON.parse(line));
    } catch {
      continue; // a line cut by a crash mid-write
    }
    if (!parsed.success) continue;
    const { exit_code: _exit, ...e } = parsed.data;
    runs.set(e.run, { ...runs.get(e.run), ...Object.fromEntries(Object.entries(e).filter(([, v]) => v !== undefined)) } as RunTrace);
  }
  return [...runs.values()];
}

/** Runs whose last phase is accepted or started: in flight, or left open by a berth that died. */
export function openRuns(sessionsDir: string): RunTrace[] {
  return traces(sessionsDir).filter((r) => r.phase === 'accepted' || r.phase === 'started');
}

/** Runs closed as interrupted (their berth died), newest first. */
export function interruptedRuns(sessionsDir: string, limit: number): RunTrace[] {
  return traces(sessionsDir)
    .filter((r) => r.phase === 'interrupted')
    .sort((a, b) => b.at.localeCompare(a.at))
    .slice(0, limit);
}
