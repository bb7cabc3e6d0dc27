import type { CheckpointAdmin, CheckpointView } from '../admin/checkpoints.js';
import { BerthError, isBerthError } from '../base/errors.js';

/**
 * The chat's checkpoint commands: /undo, /checkpoints, /fork [name]. berth keeps a checkpoint of
 * the conversation's files and of the agent's memory of it before each message
 * (runs/checkpoint-before.ts); these put one back, list them, or start a second conversation
 * from this one. The person's own session only: the chat decides which that is.
 */
export interface CheckpointCommandContext {
  admin: CheckpointAdmin & { getSession(project: string, id: string): { tenant_key: string } };
  project: string;
  tenant: string;
  sessionId: string;
  /** Start the chat's next conversation; returns its session id. */
  newSession: () => string;
}

type CheckpointCommand = (ctx: CheckpointCommandContext, args: string[]) => Promise<string>;

export const CHECKPOINT_HELP = [
  '/undo — put your files and this conversation back as they were before your last message (again: one more back)',
  '/checkpoints — what /undo can go back to: when, before which message, how big',
  '/fork [name] — a new conversation that starts from this one (its files and what was said); this one stays as it is',
];

/** "812 bytes", "4.2 KiB", "96.0 MiB". */
export function sizeWords(n: number): string {
  if (n < 1024) return `${n} bytes`;
  return n < 1048576 ? `${(n / 1024).toFixed(1)} KiB` : `${(n / 1048576).toFixed(1)} MiB`;
}

/** "14:02 UTC" today, "27 Nov 14:02 UTC" before. */
function whenOf(iso: string, now: Date): string {
  const d = new Date(iso);
  const hm = d.toISOString().slice(11, 16);
  if (d.toISOString().slice(0, 10) === now.toISOString().slice(0, 10)) return `${hm} UTC`;
  return `${d.getUTCDate()} ${d.toLocaleString('en-GB', { month: 'short', timeZone: 'UTC' })} ${hm} UTC`;
}

const quoted = (c: CheckpointView) => (c.message ? `"${c.message.length > 40 ? `${c.message.slice(0, 40)}…` : c.message}"` : 'a message');

/** The chat's session, checked to be the person's own (a chat never names someone else's). */
function ownSession(ctx: CheckpointCommandContext): boolean {
  try {
    if (ctx.admin.getSession(ctx.project, ctx.sessionId).tenant_key !== ctx.tenant)
      throw new BerthError('PERMISSION_DENIED', 'this conversation is not yours', { rule: 'session_owner' });
    return true;
  } catch (err) {
    if (isBerthError(err, 'SESSION_NOT_FOUND')) return false;
    throw err;
  }
}

export const CHECKPOINT_COMMANDS: Record<string, CheckpointCommand> = {
  async undo(ctx) {
    if (!ownSession(ctx)) return 'berth: nothing to undo: this conversation has no messages yet.';
    try {
      const back = await ctx.admin.restoreSession(ctx.project, ctx.sessionId);
      return `berth: undone. Your files and this conversation are back as they were before ${quoted(back)} (${whenOf(back.created_at, new Date())}). /undo again goes one message further back.`;
    } catch (err) {
      if (isBerthError(err, 'CHECKPOINT_NOT_FOUND'))
        return 'berth: nothing to undo: no checkpoint of this conversation is kept (/checkpoints).';
      if (isBerthError(err, 'BUSY')) return 'berth: your agent is still working on this folder; try /undo again once it has answered.';
      throw err;
    }
  },

  async checkpoints(ctx) {
    if (!ownSession(ctx)) return 'berth: no checkpoints yet: one is kept before each message you send.';
    const list = ctx.admin.sessionCheckpoints(ctx.project, ctx.sessionId);
    if (!list.length) return 'berth: no checkpoints of this conversation are kept.';
    const now = new Date();
    const lines = [...list]
      .reverse()
      .map((c, i) => `${i + 1}. before ${quoted(c)}, ${whenOf(c.created_at, now)}, ${sizeWords(c.bytes)} (${c.id})`);
    return `berth: checkpoints of this conversation, newest first:\n${lines.join('\n')}\n/undo goes back to the first one.`;
  },

  async fork(ctx, args) {
    const name = args.join(' ').trim();
    if (name.length > 80) return 'berth: a name for the new conversation may have at most 80 characters.';
    if (!ownSession(ctx)) return 'berth: nothing to fork yet: send a message first (or /new for an empty conversation).';
    const from = ctx.sessionId;
    const to = ctx.newSession();
    try {
      await ctx.admin.forkSession(ctx.project, from, to, { fresh: true, ...(name ? { title: name } : {}) });
    } catch (err) {
      const why = isBerthError(err) ? err.message : 'it could not be copied';
      return `berth: the fork failed (${why}). You are in a new, empty conversation (${to}); your files are as they were.`;
    }
    return `berth: forked. You are now in a new conversation${name ? ` "${name}"` : ''} (${to}) with this one's files and everything said so far; the one you left stays as it was.`;
  },
};
