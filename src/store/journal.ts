import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { errnoOf } from '../base/errors.js';
import { parseJsonLine, readJsonLines } from '../fs/json-file.js';
import { foldByKey } from '../fs/fsynced-lines.js';
import { journalCommit } from '../fs/group-commit.js';
import { readdirIfExists } from '../fs/dir.js';

/**
 * The run journal: every run, one JSON line per phase — accepted (before its container exists),
 * started (the container's id), then finished, failed or interrupted — appended to the project's
 * sessions/journal.jsonl (berth-owned, hidden from containers). Every line is written before the
 * run goes on, so a berth killed at any point leaves a trace of every run it accepted; lines are
 * fsynced by group commit (fs/group-commit.ts), concurrent runs sharing one fdatasync.
 *
 * Bounded: past ROTATE_BYTES the file is renamed to a segment (journal.<ms>.<random>.jsonl, a
 * name no other rotation can take, so a rename never replaces a segment) and appends start a new
 * one, with no lock: a writer that opened the old file just before keeps writing into the
 * segment, which readers read too. A segment goes once every run in it has ended, it is not one
 * of the newest KEEP_SEGMENTS (recent interrupted runs stay listed) and nothing wrote to it for
 * SEGMENT_GRACE_MS. Readers fold the segments, oldest first, then the current file.
 */
const FILE = 'journal.jsonl';
const SEGMENT = /^journal\.(\d{15})\.[0-9a-f]{8}\.jsonl$/;
export const JOURNAL_BOUNDS = { rotateBytes: 256 * 1024, keepSegments: 2, segmentGraceMs: 60_000 };

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
  const done = journalCommit.append(join(sessionsDir, FILE), { ...entry, at: new Date().toISOString() });
  try {
    if (entry.phase !== 'accepted') rotateIfDue(sessionsDir);
  } catch {
    // Housekeeping: a journal that could not rotate now only grows until the next try.
  }
  return done;
}

/** The journal's segments, oldest first (their names sort by the time they were made). */
function segments(sessionsDir: string): string[] {
  return readdirIfExists(sessionsDir)
    .filter((n) => SEGMENT.test(n))
    .sort();
}

/** Past its size bound the current file becomes a segment; then segments no reader needs go. */
export function rotateIfDue(sessionsDir: string, bounds = JOURNAL_BOUNDS, now = Date.now()): void {
  const current = join(sessionsDir, FILE);
  let size: number;
  try {
    size = fs.lstatSync(current).size;
  } catch (err) {
    if (errnoOf(err) === 'ENOENT') return;
    throw err;
  }
  if (size < bounds.rotateBytes) return;
  const segment = `journal.${String(now).padStart(15, '0')}.${randomBytes(4).toString('hex')}.jsonl`;
  try {
    fs.renameSync(current, join(sessionsDir, segment));
  } catch (err) {
    if (errnoOf(err) === 'ENOENT') return; // another process rotated it first
    throw err;
  }
  pruneSegments(sessionsDir, bounds, now);
}

function pruneSegments(sessionsDir: string, bounds: typeof JOURNAL_BOUNDS, now: number): void {
  const all = segments(sessionsDir);
  const ended = new Set(
    traces(sessionsDir)
      .filter((r) => !isOpen(r))
      .map((r) => r.run),
  );
  for (const name of all.slice(0, Math.max(0, all.length - bounds.keepSegments))) {
    const path = join(sessionsDir, name);
    const stat = fs.lstatSync(path, { throwIfNoEntry: false });
    if (!stat || now - stat.mtimeMs < bounds.segmentGraceMs) continue;
    if (entriesOf(path).every((e) => ended.has(e.run))) fs.rmSync(path, { force: true });
  }
}

const isOpen = (r: RunTrace) => r.phase === 'accepted' || r.phase === 'started';

function entriesOf(path: string): JournalEntry[] {
  // A line cut by a crash mid-write parses as undefined and is skipped.
  return readJsonLines(path).flatMap((line) => parseJsonLine(line, JournalEntrySchema) ?? []);
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
  const files = [...segments(sessionsDir), FILE].map((n) => join(sessionsDir, n));
  const entries = files.flatMap(entriesOf).map(({ exit_code: _exit, ...trace }) => trace);
  return [...foldByKey(entries, (e) => e.run).values()];
}

/** Runs whose last phase is accepted or started: in flight, or left open by a berth that died. */
export function openRuns(sessionsDir: string): RunTrace[] {
  return traces(sessionsDir).filter(isOpen);
}

/** Runs closed as interrupted (their berth died), newest first. */
export function interruptedRuns(sessionsDir: string, limit: number): RunTrace[] {
  return traces(sessionsDir)
    .filter((r) => r.phase === 'interrupted')
    .sort((a, b) => b.at.localeCompare(a.at))
    .slice(0, limit);
}
