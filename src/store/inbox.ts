import fs from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { parseJsonLine, readJsonLines } from '../fs/json-file.js';
import { appendFsyncedLine, foldByKey } from '../fs/fsynced-lines.js';
import { PermissionLevelSchema, type PermissionLevel } from '../config/session.js';

/**
 * A bridge's durable inbox: every chat message, one fsynced JSON line per phase, written with
 * the run journal's mechanism. `received` is on disk before the transport is told the message
 * arrived or anything runs; `started` before its run starts (so a restart never runs it twice);
 * `answered` holds the reply before it is sent; `replied` or `failed` ends it. Keyed by the
 * transport's identity of the message, which also deduplicates re-deliveries.
 */
export const INBOX_PHASES = ['received', 'started', 'answered', 'replied', 'failed'] as const;
export type InboxPhase = (typeof INBOX_PHASES)[number];

export const InboxEntrySchema = z.object({
  id: z.string(),
  phase: z.enum(INBOX_PHASES),
  at: z.string(),
  chat: z.string().optional().describe('The chat the answer goes to (transport address).'),
  sender: z.string().optional().describe('Key of the sender.'),
  tenant: z.string().optional().describe('Tenant key of the chat (the sender, or the group).'),
  session: z.string().optional().describe('The session the person picked (web chat); else the chat\'s own.'),
  level: PermissionLevelSchema.optional(),
  text: z.string().optional(),
  owner: z.string().optional(),
  reply: z.string().optional(),
  reason: z.string().optional(),
});
export type InboxEntry = z.infer<typeof InboxEntrySchema>;

export interface Inbox {
  /** Record a message; false when its id was received before (a re-delivery: ignore it). */
  receive(entry: { id: string; chat: string; sender: string; tenant: string; text: string; owner?: string; session?: string; level?: PermissionLevel }): boolean;
  /** A new phase; 'received' again puts back a message whose run never started (berth was stopping). */
  mark(id: string, phase: InboxPhase, extra?: { reply?: string; reason?: string }): void;
  /** Messages not yet ended, in the order they arrived. */
  open(): InboxEntry[];
  /** Every message's folded state (for counts and tests). */
  all(): InboxEntry[];
}

export function openInbox(dir: string, bridge: string): Inbox {
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  const file = join(dir, `${bridge}.jsonl`);
  const read = () => [...foldByKey(readJsonLines(file).flatMap((l) => parseJsonLine(l, InboxEntrySchema) ?? []), (e) => e.id).values()];
  // Ids seen, loaded once: a Map keyed by the transport's id (never an object's properties).
  const seen = new Map(read().map((e) => [e.id, e.phase] as const));
  const append = (entry: Omit<InboxEntry, 'at'>) => {
    appendFsyncedLine(file, { ...entry, at: new Date().toISOString() });
    seen.set(entry.id, entry.phase);
  };
  return {
    receive(entry) {
      if (seen.has(entry.id)) return false;
      append({ ...entry, phase: 'received' });
      return true;
    },
    mark(id, phase, extra = {}) {
      append({ id, phase, ...extra });
    },
    open: () => read().filter((e) => e.phase !== 'replied' && e.phase !== 'failed'),
    all: read,
  };
}
