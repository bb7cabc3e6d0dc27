import { join } from 'node:path';
import { z } from 'zod';
import { parseJsonLine, readJsonLines } from '../fs/json-file.js';
import { foldByKey } from '../fs/fsynced-lines.js';
import { journalCommit } from '../fs/group-commit.js';

/**
 * The run journal (the chat inboxes use the same mechanism, fs/fsynced-lines.ts): every run, one JSON line per phase — accepted (before its container exists),
 * started (the container's id), then finished, failed or interrupted — appended to the project's
 * sessions/journal.jsonl (berth-owned, hidden from containers). Every line is written before the
 * run goes on, so a berth killed at any point leaves a trace of every run it accepted; lines are
 * fsynced by group commit (fs/group-commit.ts), concurrent runs sharing one fdatasync.
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

/** Append a line; resolves once it is on disk. */
export function appendJournal(sessionsDir: string, entry: Omit<JournalEntry, 'at'>): Promise<void> {
  return journalCommit.append(join(sessionsDir, FILE), { ...entry, at: new Date().toISOString() });
}

/**
 * Append a `started` line with no sync of its own (a kill -9 keeps it; the run's next line syncs
 * it). Lost to a power cut, the run reads as accepted, which a restart closes as interrupted just
 * as it would a started one; its container is found by its labels, not by this line.
 */
export function noteStarted(sessionsDir: string, entry: Omit<JournalEntry, 'at' | 'phase'>): void {
  journalCommit.note(join(sessionsDir, FILE), { ...entry, phase: 'started', at: new Date().toISOString() });
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
