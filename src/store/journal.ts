import fs from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { parseJsonLine, readJsonLines } from '../fs/json-file.js';

/**
 * The run journal: every run, one JSON line per phase — accepted (before its container exists),
 * started (the container's id), then finished, failed or interrupted — appended to the project's
 * sessions/journal.jsonl (berth-owned, hidden from containers) and fsynced line by line, so a
 * berth killed at any point leaves a trace of every run it accepted.
 */
const FILE = 'journal.jsonl';

export const RUN_PHASES = ['accepted', 'started', 'finished', 'failed', 'interrupted'] as const;
/** The three kinds of run (a message to the agent, a workflow step, a shell-tool command). */
export const RUN_KINDS = ['message', 'workflow_step', 'shell_tool'] as const;

export const JournalEntrySchema = z.object({
  run: z.string(),
  phase: z.enum(RUN_PHASES),
  at: z.string(),
  /** The berth process that owns the run ("<pid>.<start time>"), set when it is accepted. */
  owner: z.string().optional(),
  kind: z.enum(RUN_KINDS).optional(),
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

/** Each run's journal folded into one record: its last phase and time, plus what its earlier lines said. */
export type RunTrace = Omit<JournalEntry, 'exit_code'>;

function traces(sessionsDir: string): RunTrace[] {
  const runs = new Map<string, RunTrace>();
  for (const line of readJsonLines(join(sessionsDir, FILE))) {
    const entry = parseJsonLine(line, JournalEntrySchema); // undefined: a line cut by a crash mid-write
    if (!entry) continue;
    const { exit_code: _exit, ...e } = entry;
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
