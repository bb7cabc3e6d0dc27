import { createHash } from 'node:crypto';
import fs from 'node:fs';
import { dirname, join } from 'node:path';
import lockfile from 'proper-lockfile';
import { z } from 'zod';
import { appendFsyncedLine } from '../fs/fsynced-lines.js';
import { parseJsonLine, readJsonLines } from '../fs/json-file.js';

/**
 * The audit log: one fsynced JSON line per event (admin actions, authentication failures,
 * permission denials, sandbox violations) in berth's private state. Each line carries the hash
 * of the line before it and its own, so a line cut out, edited or reordered breaks the chain at
 * that line (`berth audit verify`). Never a token, a key or a message body: targets are names.
 */
export const AUDIT_KINDS = ['admin', 'auth_failure', 'permission_denied', 'sandbox_violation'] as const;
const GENESIS = '0'.repeat(64);

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
});
export type AuditEvent = z.infer<typeof AuditEventSchema>;

export const AuditEntrySchema = AuditEventSchema.extend({ seq: z.number().int().min(1), at: z.string(), prev: z.string(), hash: z.string() });
export type AuditEntry = z.infer<typeof AuditEntrySchema>;

function hashOf(entry: Omit<AuditEntry, 'hash'>): string {
  const canonical = JSON.stringify(entry, Object.keys(entry).sort());
  return createHash('sha256').update(`${entry.prev}\n${canonical}`).digest('hex');
}

/** The last line's seq and hash, read from the file's tail (the log only grows). */
function tail(file: string): { seq: number; hash: string } {
  let fd: number;
  try {
    fd = fs.openSync(file, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW);
  } catch {
    return { seq: 0, hash: GENESIS };
  }
  try {
    const size = fs.fstatSync(fd).size;
    const length = Math.min(size, 64 * 1024);
    const buf = Buffer.alloc(length);
    fs.readSync(fd, buf, 0, length, size - length);
    // The last whole entry: a line a crash cut short is passed over (verify will name it), never a reason to restart the chain.
    for (const line of buf.toString('utf8').trimEnd().split('\n').reverse()) {
      try {
        const parsed = AuditEntrySchema.safeParse(JSON.parse(line));
        if (parsed.success) return { seq: parsed.data.seq, hash: parsed.data.hash };
      } catch {
        // not this one
      }
    }
    if (size > 0) throw new Error('the audit log ends in no whole entry: refusing to start a new chain over it');
    return { seq: 0, hash: GENESIS };
  } finally {
    fs.closeSync(fd);
  }
}

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

export function appendAudit(file: string, event: AuditEvent): AuditEntry {
  fs.mkdirSync(dirname(file), { recursive: true, mode: 0o700 });
  return locked(file, () => {
    const last = tail(file);
    const body = { ...AuditEventSchema.parse(event), seq: last.seq + 1, at: new Date().toISOString(), prev: last.hash };
    const entry = { ...body, hash: hashOf(body) };
    appendFsyncedLine(file, entry);
    return entry;
  });
}

/** Which events to read (the HTTP query and the CLI's flags parse with this one schema). */
export const AuditFilterSchema = z.object({
  since: z.iso.datetime({ error: 'must be an ISO 8601 time, e.g. 2026-11-23T00:00:00Z' }).optional().describe('Only events at or after this time.'),
  project: z.string().max(128).optional(),
  actor: z.string().max(512).optional().describe('"admin", "operator", "anonymous", "session:<project>/<id>", "tenant:<key>".'),
  kind: z.enum(AUDIT_KINDS).optional(),
  limit: z.coerce.number().int().min(1).max(1000).default(100),
});
export type AuditFilter = z.output<typeof AuditFilterSchema>;

/** Newest first. */
export function readAudit(file: string, filter: AuditFilter): AuditEntry[] {
  const out: AuditEntry[] = [];
  const lines = readJsonLines(file);
  for (let i = lines.length - 1; i >= 0 && out.length < filter.limit; i--) {
    const entry = parseJsonLine(lines[i] as string, AuditEntrySchema);
    if (!entry) continue; // verifyAudit names it
    if (filter.since && entry.at < filter.since) break;
    if (filter.project && entry.project !== filter.project) continue;
    if (filter.actor && entry.actor !== filter.actor) continue;
    if (filter.kind && entry.kind !== filter.kind) continue;
    out.push(entry);
  }
  return out;
}

/** Walk the chain from the first line; the first line that does not follow names where it broke. */
export function verifyAudit(file: string): { ok: boolean; lines: number; broken?: { line: number; reason: string } } {
  const lines = readJsonLines(file);
  let prev = GENESIS;
  let seq = 0;
  for (const [i, line] of lines.entries()) {
    const n = i + 1;
    let entry: AuditEntry;
    try {
      entry = AuditEntrySchema.parse(JSON.parse(line));
    } catch {
      return { ok: false, lines: lines.length, broken: { line: n, reason: 'not an audit entry (cut or edited)' } };
    }
    if (entry.prev !== prev) return { ok: false, lines: lines.length, broken: { line: n, reason: 'does not follow the line before it (a line was removed, inserted or reordered)' } };
    if (entry.seq !== seq + 1) return { ok: false, lines: lines.length, broken: { line: n, reason: `sequence ${entry.seq} after ${seq}` } };
    const { hash, ...body } = entry;
    if (hashOf(body) !== hash) return { ok: false, lines: lines.length, broken: { line: n, reason: 'its content does not match its hash (edited)' } };
    prev = hash;
    seq = entry.seq;
  }
  return { ok: true, lines: lines.length };
}
