import fs from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { parseJsonLine, readJsonLines } from '../fs/json-file.js';
import { appendFsyncedLine, foldByKey } from '../fs/fsynced-lines.js';
import { openIfExists } from '../fs/fd-path.js';
import { withOwnerLockSync, type LockOwner } from '../fs/lock.js';
import { selfIdentity } from '../fs/process-identity.js';
import { atomicWriteFile } from '../fs/tree.js';
import { PermissionLevelSchema, type PermissionLevel } from '../config/session.js';
import { FILE_BOUNDS } from '../config/bounds.js';
import { RunFileSchema } from './run-files.js';

/**
 * A bridge's durable inbox: every chat message, one fsynced JSON line per phase, written with
 * the run journal's mechanism. `received` is on disk before the transport is told the message
 * arrived or anything runs; `started` before its run starts (so a restart never runs it twice);
 * `answered` holds the reply before it is sent (and, when a send fails, each next way of sending it
 * before it is tried, and how many parts of it went through); `replied` or `failed` ends it. Keyed by the
 * transport's identity of the message, which also deduplicates re-deliveries — across
 * processes too: every append happens under the inbox's lock, after reading what other
 * processes appended, so two processes can never both accept one id. `held`: a stranger's first
 * message, kept until the operator approves them (then `received` again) — never run before.
 */
export const INBOX_PHASES = ['received', 'started', 'answered', 'replied', 'failed', 'held'] as const;
export type InboxPhase = (typeof INBOX_PHASES)[number];
/** The ways of sending an answer, in the order the core tries them (bridges/delivery-policy.ts). */
export const DELIVERY_STEPS = ['send', 'plain', 'file', 'notice'] as const;
export type DeliveryStep = (typeof DELIVERY_STEPS)[number];

export const InboxEntrySchema = z.object({
  id: z.string(),
  phase: z.enum(INBOX_PHASES),
  at: z.string(),
  chat: z.string().optional().describe('The chat the answer goes to (transport address).'),
  sender: z.string().optional().describe('Key of the sender.'),
  tenant: z.string().optional().describe('Tenant key of the chat (the sender, or the group).'),
  session: z.string().optional().describe("The session the person picked (web chat); else the chat's own."),
  level: PermissionLevelSchema.optional(),
  text: z.string().optional(),
  owner: z.string().optional(),
  reply: z.string().optional(),
  reason: z.string().optional(),
  delivery: z
    .enum(DELIVERY_STEPS)
    .optional()
    .describe(
      'The way of sending the answer tried last (bridges/delivery-policy.ts): a restart goes on from it, never back to a way that already failed.',
    ),
  sent: z
    .number()
    .int()
    .min(0)
    .optional()
    .describe('Parts of a reply sent in several that were delivered already: every next try (and a restart) starts at the next part.'),
  attachments: z
    .array(
      z.object({
        ref: z.string().max(4096),
        name: z.string().max(1024).optional(),
        mime: z.string().max(256).optional(),
        size: z.number().int().min(0).optional(),
        voice: z.boolean().optional(),
      }),
    )
    .max(100)
    .optional()
    .describe(
      'Files sent with the message, as its channel names them (channels/contract.ts ChannelAttachment): fetched again after a restart, before its run.',
    ),
  files: z
    .object({ run: z.string().max(64), list: z.array(RunFileSchema).max(FILE_BOUNDS.maxFiles) })
    .optional()
    .describe('Files the agent sent with the answer (store/run-files.ts): sent after it, also when a restart sends the answer.'),
});
export type InboxEntry = z.infer<typeof InboxEntrySchema>;

export interface Inbox {
  /** Record a message; false when its id was received before (a re-delivery: ignore it). */
  receive(entry: {
    id: string;
    chat: string;
    sender: string;
    tenant: string;
    text: string;
    owner?: string;
    session?: string;
    level?: PermissionLevel;
    attachments?: InboxEntry['attachments'];
  }): boolean;
  /** A new phase; 'received' again puts back a message whose run never started (berth was stopping). */
  mark(
    id: string,
    phase: InboxPhase,
    extra?: { reply?: string; reason?: string; delivery?: DeliveryStep; sent?: number; files?: InboxEntry['files'] },
  ): void;
  /** Messages not yet ended, in the order they arrived. */
  open(): InboxEntry[];
  /** Every message's folded state (for counts and tests). */
  all(): InboxEntry[];
  /** How many message ids this process holds in memory (bounded by INBOX_KEEP). */
  remembered(): number;
}

/**
 * What an inbox keeps of ended messages (replied or failed): for `days` after they ended, and
 * at most `ended` of them (the newest). Forgotten ones leave the journal and memory together; a
 * re-delivery of one that old would run again. Messages not ended are always kept.
 */
export const INBOX_KEEP = { days: 7, ended: 10_000 };
/** Growth allowed past twice the last rewrite's size before the next one. */
const COMPACT_SLACK_BYTES = 256 * 1024;
export type InboxKeep = typeof INBOX_KEEP;

/** What the inbox knows of one message: its last phase, and when it got it (ms). */
export interface InboxMark {
  phase: InboxPhase;
  at: number;
}

const ended = (phase: InboxPhase) => phase === 'replied' || phase === 'failed';

/** Which messages an inbox forgets now: ended ones past the retention, then the oldest ended beyond the count bound. */
export function inboxIdsToForget(marks: ReadonlyMap<string, InboxMark>, now: number, keep: InboxKeep): string[] {
  const done = [...marks].filter(([, m]) => ended(m.phase)).sort(([, a], [, b]) => b.at - a.at);
  const cutoff = now - keep.days * 24 * 60 * 60 * 1000;
  return done.filter(([, m], i) => m.at < cutoff || i >= keep.ended).map(([id]) => id);
}

export interface InboxOptions extends LockOwner {
  keep?: InboxKeep;
  now?: () => number;
}

export function openInbox(dir: string, bridge: string, opts: InboxOptions = {}): Inbox {
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  const file = join(dir, `${bridge}.jsonl`);
  const keep = opts.keep ?? INBOX_KEEP;
  const now = opts.now ?? Date.now;
  const who = { owner: opts.owner ?? selfIdentity(), alive: opts.alive };
  const locked = <T>(fn: () => T): T => withOwnerLockSync(`${file}.lock`, fn, who);
  const read = () => [
    ...foldByKey(
      readJsonLines(file).flatMap((l) => parseJsonLine(l, InboxEntrySchema) ?? []),
      (e) => e.id,
    ).values(),
  ];

  // Ids seen: a Map keyed by the transport's id (never an object's properties), kept up to date
  // with the file by reading what was appended since (by any process) before each append.
  let seen = new Map<string, InboxMark>();
  let position = { dev: -1, ino: -1, offset: 0 };
  let lastCompaction = 0;
  let compactedBytes = 0;

  /** Fold in the lines appended since this process last looked; true when the file ends mid-line (a cut write). */
  function catchUp(): boolean {
    const fd = openIfExists(file);
    if (fd === undefined) {
      seen = new Map();
      position = { dev: -1, ino: -1, offset: 0 };
      return false;
    }
    try {
      const st = fs.fstatSync(fd);
      // Another file (compacted by some process) or a shorter one: read it from the start.
      if (st.dev !== position.dev || st.ino !== position.ino || st.size < position.offset) {
        seen = new Map();
        position = { dev: st.dev, ino: st.ino, offset: 0 };
      }
      if (st.size === position.offset) return false;
      const buf = Buffer.alloc(st.size - position.offset);
      let got = 0;
      while (got < buf.length) {
        const n = fs.readSync(fd, buf, got, buf.length - got, position.offset + got);
        if (n === 0) break;
        got += n;
      }
      const whole = buf.lastIndexOf(0x0a, got - 1) + 1;
      for (const line of buf.subarray(0, whole).toString('utf8').split('\n')) {
        const e = line ? parseJsonLine(line, InboxEntrySchema) : undefined;
        if (e) seen.set(e.id, { phase: e.phase, at: Date.parse(e.at) || 0 });
      }
      position.offset += whole;
      return whole < got;
    } finally {
      fs.closeSync(fd);
    }
  }

  /** Append one line under the lock, after what others appended; a line a crash cut short is closed first. */
  function append(entry: Omit<InboxEntry, 'at'>, unless?: () => boolean): boolean {
    return locked(() => {
      const cut = catchUp();
      if (unless?.()) return false;
      if (cut) closeCutLine(file);
      appendFsyncedLine(file, { ...entry, at: new Date(now()).toISOString() });
      catchUp();
      compactIfDue();
      return true;
    });
  }

  /**
   * Rewrite the journal (whole, atomically) under the lock: old ended messages forgotten (from
   * memory too), the other ended ones cut to one short line (their id is all a re-delivery needs),
   * messages not ended kept line for line. Due hourly, past the count bound, or once the file
   * has doubled since the last rewrite (so a busy day's traffic never piles up for an hour).
   */
  function compactIfDue(force = false) {
    const over = seen.size > keep.ended + Math.ceil(keep.ended / 10);
    const grown = position.offset > 2 * compactedBytes + COMPACT_SLACK_BYTES;
    if (!over && !force && !grown && now() - lastCompaction < 60 * 60 * 1000) return;
    lastCompaction = now();
    const forget = new Set(inboxIdsToForget(seen, now(), keep));
    const lines: string[] = [];
    const endedDone = new Set<string>();
    for (const l of readJsonLines(file)) {
      const e = parseJsonLine(l, InboxEntrySchema);
      if (!e || forget.has(e.id)) continue;
      const mark = seen.get(e.id);
      if (!mark || !ended(mark.phase)) lines.push(l);
      else if (!endedDone.has(e.id)) {
        endedDone.add(e.id);
        lines.push(JSON.stringify({ id: e.id, phase: mark.phase, at: new Date(mark.at).toISOString() }));
      }
    }
    const text = lines.map((l) => `${l}\n`).join('');
    atomicWriteFile(file, text, 0o600);
    compactedBytes = Buffer.byteLength(text);
    catchUp(); // a new file: read again from its start
  }

  locked(() => {
    catchUp();
    compactIfDue(true);
  });

  return {
    receive(entry) {
      return append({ ...entry, phase: 'received' }, () => seen.has(entry.id));
    },
    mark(id, phase, extra = {}) {
      append({ id, phase, ...extra });
    },
    open: () => read().filter((e) => !ended(e.phase)),
    all: read,
    remembered: () => seen.size,
  };
}

/** End a line a crash cut short, so the next line is not glued to it (the cut one stays unreadable and is skipped). */
function closeCutLine(file: string): void {
  const fd = fs.openSync(file, fs.constants.O_WRONLY | fs.constants.O_APPEND | fs.constants.O_NOFOLLOW);
  try {
    fs.writeSync(fd, '\n');
  } finally {
    fs.closeSync(fd);
  }
}
