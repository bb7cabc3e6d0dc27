import type { ChannelMessage } from './contract.js';
import { obj, str } from './json.js';
import { matrixAttachment } from './matrix-files.js';

/**
 * What a Matrix room's timeline is to berth, as data: which events are a person's text to answer,
 * where the bot's own stay in the room began (what came before is history, never a message), and
 * how a thread is a chat of its own.
 */

/**
 * A chat is a room, or a thread in it: `<room id>/<thread root event id>`. Room ids homeservers
 * make hold no "/$" (random letters; room version 12: unpadded URL-safe base64), event ids of
 * room versions 4 and later no "/".
 */
export function matrixChat(chat: string): { room: string; thread?: string } {
  const at = chat.lastIndexOf('/$');
  return at <= 0 ? { room: chat } : { room: chat.slice(0, at), thread: chat.slice(at + 1) };
}

/** The chat a message in `roomId` is answered in: its thread when it is in one and the two read back apart. */
export function matrixChatOf(roomId: string, content: Record<string, unknown>): string {
  const relates = obj(content['m.relates_to']);
  const root = relates?.rel_type === 'm.thread' ? str(relates.event_id) : undefined;
  return root && /^\$[^/\s]{1,254}$/.test(root) && !roomId.includes('/$') ? `${roomId}/${root}` : roomId;
}

/** A timeline event as berth takes it (text, or a file with its caption), or undefined for what is not a person's message to answer. */
export function matrixMessage(roomId: string, event: unknown, bot: string, direct: boolean): ChannelMessage | undefined {
  const e = obj(event);
  const content = obj(e?.content);
  const sender = str(e?.sender);
  const eventId = str(e?.event_id);
  if (e?.type !== 'm.room.message' || !content || !sender || !eventId || sender === bot) return undefined;
  const relates = obj(content['m.relates_to']);
  const edit = relates?.rel_type === 'm.replace' ? obj(content['m.new_content']) : undefined;
  const shown = edit ?? content;
  const file = edit ? undefined : matrixAttachment(content);
  const body = file ? file.caption : str(shown.body);
  if (!file && (shown.msgtype !== 'm.text' || body === undefined || body.trim() === '')) return undefined; // notices (other bots), edits of files
  return {
    id: eventId,
    chat: matrixChatOf(roomId, content),
    tenant: direct ? `matrix:${sender}` : `matrix-room:${roomId}`,
    sender: `matrix:${sender}`,
    text: edit ? `(edited) ${body}` : (body ?? ''),
    receipt: { room: roomId, event: eventId },
    ...(file ? { attachments: [file.attachment] } : {}),
  };
}

const membershipOf = (content: unknown) => str(obj(content)?.membership);

/** The bot's own membership event: its membership now, and the one it replaced. */
function botMembership(event: unknown, bot: string): { now: string; before?: string } | undefined {
  const e = obj(event);
  if (e?.type !== 'm.room.member' || e.state_key !== bot) return undefined;
  const now = membershipOf(e.content);
  if (now === undefined) return undefined;
  const before = membershipOf(obj(e.unsigned)?.prev_content);
  return before === undefined ? { now } : { now, before };
}

/** The bot came into the room with this event (a join that was not one already: not a profile change). */
export function isBotArrival(event: unknown, bot: string): boolean {
  const m = botMembership(event, bot);
  return m?.now === 'join' && m.before !== 'join';
}

/**
 * Going back in time, this event is where the bot's stay began: its invite, or a join no invite
 * came before (a public room). A join after an invite is not: the invite is further back, and
 * what people wrote while the bot was invited is for it (a person writes in a new DM at once).
 */
export function startsStay(event: unknown, bot: string): boolean {
  const m = botMembership(event, bot);
  return m?.now === 'invite' || (m?.now === 'join' && m.before !== 'invite' && m.before !== 'join');
}

/**
 * The events after the bot's latest arrival, oldest first: history before it (a room it was
 * invited into, one it left and came back to) is never a message. A join after an invite cuts at
 * the invite when the invite is among the events, else at the join.
 */
export function afterArrival(events: readonly unknown[], bot: string): unknown[] {
  let cut = -1;
  let invitedAt: number | undefined;
  for (const [i, event] of events.entries()) {
    const m = botMembership(event, bot);
    if (!m) continue;
    if (m.now === 'invite') invitedAt = i;
    else if (m.now === 'join') {
      if (m.before !== 'join') cut = m.before === 'invite' && invitedAt !== undefined ? invitedAt : i;
      invitedAt = undefined;
    } else {
      cut = i; // left or banned: what came before belongs to an earlier stay
      invitedAt = undefined;
    }
  }
  return events.slice(cut + 1);
}
