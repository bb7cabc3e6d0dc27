import { createHash } from 'node:crypto';
import fs from 'node:fs';
import { basename, dirname, join } from 'node:path';
import lockfile from 'proper-lockfile';
import { z } from 'zod';
import { errnoOf } from '../base/errors.js';
import { appendFsyncedLine } from '../fs/fsynced-lines.js';
import type { GroupCommit } from '../fs/group-commit.js';
import { parseJsonLine, readJsonLines } from '../fs/json-file.js';
import {
  AUDIT_ROTATION,
  GENESIS,
  headFile,
  lastPointOf,
  logFiles,
  readHead,
  rotate,
  rotatedFiles,
  sizeOf,
  writeHead,
  type AuditHead,
  type AuditRotation,
  type ChainPoint,
} from './audit-files.js';

export { AUDIT_ROTATION, type AuditRotation } from './audit-files.js';

/**
 * The audit log: one fsynced JSON line per event (admin actions, permission denials, sandbox
 * violations, and per surface and minute a count of unauthenticated requests) in berth's private
 * state. Each line carries the hash of the line before it and its own, so a line cut out, edited
 * or reordered breaks the chain at that line (`berth audit verify`); the chain runs on across
 * rotated files, and a head record beside the log (audit-files.ts) shows lines cut off the end.
 * Never a token, a key or a message body: targets are names.
 */
export const AUDIT_KINDS = ['admin', 'auth_failure', 'permission_denied', 'sandbox_violation', 'run_receipt'] as const;

export const AuditEventSchema = z.object({
  kind: z.enum(AUDIT_KINDS),
  /** What was done or tried, e.g. "project.create", "session.token.mint". */
  action: z.string().max(128),
  /** Who: "admin" (the admin token), "operator" (the CLI on this host), "session:<project>/<id>", "tenant:<key>", "anonymous". */
  actor: z.string().max(512),
  request_id: z.string().max(128).optional(),
  project: z.string().max(128).optional(),
  /** What it was done to, by name (a session id, an area, a user) — never a secret. */
  target: z.string().max(512).optional(),
  outcome: z.enum(['ok', 'refused', 'error']),
  /** berth's error code when refused or failed. */
  code: z.string().max(64).optional(),
  /** A summary line (unauthenticated requests): how many, since when, and a few of the paths asked for. */
  count: z.number().int().min(1).optional(),
  first_at: z.string().max(40).optional(),
  samples: z.array(z.string().max(128)).max(8).optional(),
  /** A run's receipt (run_receipt): its sha256, so the receipt in the run log can be checked against the chain. */
  digest: z
    .string()
    .regex(/^sha256:[0-9a-f]{64}$/)
    .optional(),
});
export type AuditEvent = z.infer<typeof AuditEventSchema>;

// Strict: a field added to a line is outside its hash, so it is an edit, not a line to accept.
export const AuditEntrySchema = AuditEventSchema.extend({
  seq: z.number().int().min(1),
  at: z.string(),
  prev: z.string(),
  hash: z.string(),
}).strict();
export type AuditEntry = z.infer<typeof AuditEntrySchema>;

function hashOf(entry: Omit<AuditEntry, 'hash'>): string {
  const canonical = JSON.stringify(entry, Object.keys(entry).sort());
  return createHash('sha256').update(`${entry.prev}\n${canonical}`).digest('hex');
}

const pointOfLine = (line: string): ChainPoint | undefined => {
  const entry = parseJsonLine(line, AuditEntrySchema);
  return entry && { seq: entry.seq, hash: entry.hash };
};

/** Hold the log's lock (across processes: CLI and server append to one chain), briefly. */
function locked<T>(file: string, fn: () => T): T {
  const lockPath = `${file}.lock`;
  const deadline = Date.now() + 5000;
  for (;;) {
    try {
      const release = lockfile.lockSync(dirname(file), { lockfilePath: lockPath, realpath: false, stale: 10_000 });
      try {
        return fn();
      } finally {
        release();
      }
    } catch (err) {
      if ((err as { code?: string }).code !== 'ELOCKED' || Date.now() > deadline) throw err;
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 5);
    }
  }
}

export function auditFile(stateDir: string): string {
  return join(stateDir, 'audit.jsonl');
}

/**
 * The point the next line chains to. The head record says what berth wrote last; when the file
 * no longer holds it (lines cut off the end, an older copy put back), the next line chains on from
 * the head anyway, so the gap stays visible to verify instead of being written over.
 */
function chainPoint(file: string, head: AuditHead | undefined): ChainPoint {
  const last = lastPointOf(file, pointOfLine);
  if (last && (!head || last.seq > head.seq || (last.seq === head.seq && last.hash === head.hash))) return last; // the usual case, or a crash between the line and its head
  if (head) return head;
  // No head yet (a log from before heads, or a fresh one): the newest file that holds a line.
  for (const [, path] of rotatedFiles(file).reverse()) {
    const point = lastPointOf(path, pointOfLine);
    if (point) return point;
  }
  return { seq: 0, hash: GENESIS };
}

/** Under the log's lock: the next entry after the chain's last, its line written by `write`. */
function appendLocked<T>(
  file: string,
  event: AuditEvent,
  rotation: AuditRotation,
  write: (entry: AuditEntry, head: AuditHead | undefined) => T,
): { entry: AuditEntry; written: T } {
  const parsed = AuditEventSchema.parse(event);
  fs.mkdirSync(dirname(file), { recursive: true, mode: 0o700 });
  return locked(file, () => {
    let head = readHead(file);
    const last = chainPoint(file, head);
    if (sizeOf(file) >= rotation.rotateBytes) head = rotate(file, rotation, { ...last, base: head?.base }, pointOfLine);
    const body = { ...parsed, seq: last.seq + 1, at: new Date().toISOString(), prev: last.hash };
    const entry = { ...body, hash: hashOf(body) };
    return { entry, written: write(entry, head) };
  });
}

export function appendAudit(file: string, event: AuditEvent, rotation: AuditRotation = AUDIT_ROTATION): AuditEntry {
  return appendLocked(file, event, rotation, (entry, head) => {
    appendFsyncedLine(file, entry);
    writeHead(file, { seq: entry.seq, hash: entry.hash, ...(head?.base ? { base: head.base } : {}) });
  }).entry;
}

/**
 * The same line with its sync shared (group commit: lines written while one sync runs share the
 * next): written under the lock now, so the chain's order is the order of writes; `synced`
 * settles once it is on disk. The head record waits for that (advanceHead): a head never names a
 * line that might not be on disk, and one that lags is what a berth stopped between a line and
 * its head leaves, which verify accepts.
 */
export function appendAuditGrouped(
  file: string,
  event: AuditEvent,
  commit: GroupCommit,
  rotation: AuditRotation = AUDIT_ROTATION,
): { entry: AuditEntry; synced: Promise<void> } {
  const { entry, written } = appendLocked(file, event, rotation, (e, head) => {
    if (head) return commit.append(file, e);
    // A log's first line (or one from before heads): written and headed at once, so a log with lines never lacks its head.
    appendFsyncedLine(file, e);
    writeHead(file, { seq: e.seq, hash: e.hash });
    return Promise.resolve();
  });
  return { entry, synced: written };
}

/** The head record moved up to `point` (a line already on disk), unless another writer's head is there or past it. */
export function advanceHead(file: string, point: ChainPoint): void {
  locked(file, () => {
    const head = readHead(file);
    if (head && head.seq >= point.seq) return;
    writeHead(file, { ...point, ...(head?.base ? { base: head.base } : {}) });
  });
}

/**
 * The same with its write and fsync off the event loop: the new head is made whole under a
 * temporary name first, then renamed into place under the lock, only if no other writer's head
 * is there or past it and no rotation moved the base meanwhile (else it is dropped: the head then
 * lags, as after a berth stopped between a line and its head, and the next append moves it).
 */
export async function advanceHeadAsync(file: string, point: ChainPoint): Promise<void> {
  const seen = readHead(file);
  if (seen && seen.seq >= point.seq) return;
  const tmp = `${headFile(file)}.tmp-${process.pid}-${Math.random().toString(36).slice(2)}`;
  const { O_WRONLY, O_CREAT, O_EXCL, O_NOFOLLOW } = fs.constants;
  try {
    const handle = await fs.promises.open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0o600);
    try {
      await handle.writeFile(`${JSON.stringify({ ...point, ...(seen?.base ? { base: seen.base } : {}) })}\n`);
      await handle.sync();
    } finally {
      await handle.close();
    }
    locked(file, () => {
      const head = readHead(file);
      if ((head && head.seq >= point.seq) || head?.base?.seq !== seen?.base?.seq || head?.base?.hash !== seen?.base?.hash) return;
      fs.renameSync(tmp, headFile(file));
    });
  } finally {
    fs.rmSync(tmp, { force: true });
  }
}

/** Which events to read (the HTTP query and the CLI's flags parse with this one schema). */
/** "90s", "10m", "2h", "7d": a span back from now. */
const SPAN = /^(\d{1,6})([smhd])$/;
const SPAN_MS = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;

export const AuditFilterSchema = z.object({
  since: z
    .union([z.iso.datetime(), z.string().regex(SPAN)], {
      error: 'must be an ISO 8601 time (2026-11-23T00:00:00Z) or a span back from now (90s, 10m, 2h, 7d)',
    })
    .transform((v) => {
      const span = SPAN.exec(v);
      return span ? new Date(Date.now() - Number(span[1]) * SPAN_MS[span[2] as keyof typeof SPAN_MS]).toISOString() : v;
    })
    .optional()
    .describe('Only events at or after this time: ISO 8601, or a span back from now (10m, 2h, 7d).'),
  project: z.string().max(128).optional(),
  actor: z.string().max(512).optional().describe('"admin", "operator", "anonymous", "session:<project>/<id>", "tenant:<key>".'),
  kind: z.enum(AUDIT_KINDS).optional(),
  limit: z.coerce.number().int().min(1).max(1000).default(100),
});
export type AuditFilter = z.output<typeof AuditFilterSchema>;

/** Newest first, across the rotated files. */
export function readAudit(file: string, filter: AuditFilter): AuditEntry[] {
  const out: AuditEntry[] = [];
  for (const path of logFiles(file).reverse()) {
    const lines = readLines(path);
    for (let i = lines.length - 1; i >= 0 && out.length < filter.limit; i--) {
      const entry = parseJsonLine(lines[i] as string, AuditEntrySchema);
      if (!entry) continue; // verifyAudit names it
      if (filter.since && entry.at < filter.since) return out;
      if (filter.project && entry.project !== filter.project) continue;
      if (filter.actor && entry.actor !== filter.actor) continue;
      if (filter.kind && entry.kind !== filter.kind) continue;
      out.push(entry);
    }
    if (out.length >= filter.limit) break;
  }
  return out;
}

/** A file rotated away between listing and reading reads as empty: verify then retries. */
function readLines(path: string): string[] {
  try {
    return readJsonLines(path);
  } catch (err) {
    if (errnoOf(err) === 'ENOENT') return [];
    throw err;
  }
}

export interface AuditVerdict {
  ok: boolean;
  /** Lines checked, in all files. */
  lines: number;
  files: number;
  /** Where the chain broke: a file's name and its line (1-based), or the log's end when lines were cut off it. */
  broken?: { file: string; line: number; reason: string };
}

/**
 * Walk the chain from the oldest kept line to the head record; the first line that does not
 * follow names where it broke, and a log that ends before the head was cut.
 */
export function verifyAudit(file: string): AuditVerdict {
  for (let attempt = 0; ; attempt++) {
    const before = rotatedFiles(file)
      .map(([n]) => n)
      .join();
    const verdict = verifyOnce(file);
    // A rotation while reading makes a file look cut or missing: read again, the lock is not taken.
    if (
      verdict.ok ||
      attempt === 2 ||
      rotatedFiles(file)
        .map(([n]) => n)
        .join() === before
    )
      return verdict;
  }
}

function verifyOnce(file: string): AuditVerdict {
  const head = readHeadOrBroken(file);
  if ('broken' in head) return { ok: false, lines: 0, files: 0, broken: head.broken };
  const files = logFiles(file);
  let prev = head.record?.base?.hash ?? GENESIS;
  let seq = head.record?.base?.seq ?? 0;
  let checked = 0;
  const at = (path: string, line: number, reason: string): AuditVerdict => ({
    ok: false,
    lines: checked,
    files: files.length,
    broken: { file: basename(path), line, reason },
  });
  for (const path of files) {
    for (const [i, line] of readLines(path).entries()) {
      let entry: AuditEntry;
      try {
        entry = AuditEntrySchema.parse(JSON.parse(line));
      } catch {
        return at(path, i + 1, 'not an audit entry (cut or edited)');
      }
      // Lines the rotation already gave up (their file was being deleted when berth stopped).
      if (head.record?.base && checked === 0 && entry.seq <= head.record.base.seq) continue;
      checked++;
      if (entry.prev !== prev) return at(path, i + 1, 'does not follow the line before it (a line was removed, inserted or reordered)');
      if (entry.seq !== seq + 1) return at(path, i + 1, `sequence ${entry.seq} after ${seq}`);
      const { hash, ...body } = entry;
      if (hashOf(body) !== hash) return at(path, i + 1, 'its content does not match its hash (edited)');
      if (entry.seq === head.record?.seq && hash !== head.record.hash)
        return at(
          path,
          i + 1,
          `not the line #${entry.seq} berth wrote last (recorded in ${basename(headFile(file))}): the end of the log was replaced`,
        );
      prev = hash;
      seq = entry.seq;
    }
  }
  const verdict = { ok: true, lines: checked, files: files.filter((p) => sizeOf(p) > 0).length };
  if (!head.record) {
    if (checked === 0) return verdict;
    return {
      ...verdict,
      ok: false,
      broken: {
        file: basename(headFile(file)),
        line: 0,
        reason: `there is no head record (${basename(headFile(file))}), so lines cut off the end could not show; berth writes it with every event (after an upgrade, with the next one)`,
      },
    };
  }
  if (seq < head.record.seq) {
    return {
      ...verdict,
      ok: false,
      broken: {
        file: basename(file),
        line: 0,
        reason: `the log ends at #${seq} but berth last wrote #${head.record.seq} (recorded in ${basename(headFile(file))}): ${head.record.seq - seq} line(s) were cut from the end`,
      },
    };
  }
  // Lines past the head are those of a berth stopped between a line and its head (the head's own line was checked above).
  return verdict;
}

function readHeadOrBroken(file: string): { record?: AuditHead } | { broken: { file: string; line: number; reason: string } } {
  try {
    return { record: readHead(file) };
  } catch (err) {
    return { broken: { file: basename(headFile(file)), line: 0, reason: String((err as Error).message ?? err) } };
  }
}
