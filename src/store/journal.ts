import { join } from 'node:path';
import { z } from 'zod';
import { parseJsonLine, readJsonLines } from '../fs/json-file.js';
import { appendFsyncedLine, foldByKey } from '../fs/fsynced-lines.js';

/**
 * The run journal (the chat inboxes use the same mechanism, fs/fsynced-lines.ts): every run, one JSON line per phase — accepted (before its container exists),
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
  /** The berth process that owns the run (its process identity, "<pid>.<start time>.<boot>"), set when it is accepted. */
  owner: z.string().optional(),
  kind: z.enum(RUN_KINDS).optional(),
  session: z.string().optional(),
  container: z.string().optional(),
  exit_code: z.number().int().optional(),
  reason: z.string().optional(),
});
export type JournalEntry = z.infer<typeof JournalEntrySchema>;

export function appendJournal(sessionsDir: string, entry: Omit<JournalEntry, 'at'>): void {
  appendFsyncedLine(join(sessionsDir, FILE), { ...entry, at: new Date().toISOString() });
}

/** Each run's journal folded into one record: its last phase and time, plus what its earlier lines said. */
export type RunTrace = Omit<JournalEntry, 'exit_code'>;

function traces(sessionsDir: string): RunTrace[] {
  // A line cut by a crash mid-write parses as undefined and is skipped.
  const entries = readJsonLines(join(sessionsDir, FILE)).flatMap((line) => {
    const entry = parseJsonLine(line, JournalEntrySchema);
    if (!entry) return [];
    const { exit_code: _exit, ...trace } = entry;
    return [trace];
  });
  return [...foldByKey(entries, (e) => e.run).values()];
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
