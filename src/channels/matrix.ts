import fs from 'node:fs';
import { createHash, randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { z } from 'zod';
import { isBerthError } from '../errors.js';
import { atomicWriteFile } from '../fs/tree.js';
import { backoffDelay, ChannelApiError, defineChannel, reach, senderFields, withOneRetry, type ChannelContext, type ChannelMessage, type ChannelTransport } from './contract.js';
import { obj, str, list, type Json } from './json.js';
import { oneSecret, readSecret, secretFields, secretIdentity } from './secrets.js';

/**
 * Matrix, through the client-server API (https://spec.matrix.org/latest/client-server-api/):
 * the self-hosted channel for a self-hosted runner. `/sync` long polling; its `next_batch` is
 * written to berth's state only after every message of the batch is journaled, so a crash
 * syncs from the old token again and the inbox knows what it has (exactly once into the inbox).
 * The first sync of a new home only takes the token: history is not answered. Rooms are chats:
 * a room whose joined members are exactly the person and the bot is the person's own tenant;
 * any other room is one tenant (a room that grows becomes one at its next membership change).
 * Replies are m.notice (bots do not answer notices: no two bots talk in circles); typing is
 * shown while the agent works; invites are accepted when auto_join says so.
 */
export const MATRIX_TEXT_LIMIT = 12_000;
const MATRIX_MAX_PARTS = 8;
const SYNC_MS = 25_000;
const MEMBERS_TTL_MS = 60 * 1000;
const JOIN_QUEUE = 100;

export const MatrixBridgeSchema = z
  .object({
    homeserver: z.url({ protocol: /^https?$/, error: 'must be an http(s) URL' }).describe("The bot account's homeserver (its client-server API base, e.g. https://matrix.example.org)."),
    user_id: z.string().regex(/^@[a-z0-9._=\-/+]{1,255}:[A-Za-z0-9.:\-[\]]{1,255}$/, 'must be a Matrix user id, e.g. @berth:example.org').describe("The bot's user id."),
    ...secretFields('access_token', "The bot's access token (from a login of the bot account)"),
    auto_join: z.boolean().default(true).describe('Accept invites to rooms (whoever invites still has to be approved to be answered).'),
    ...senderFields('Matrix user ids (or tenant keys matrix:@user:server)'),
  })
  .strict()
  .superRefine((c, ctx) => oneSecret(c, 'access_token', ctx));
type MatrixConfig = z.output<typeof MatrixBridgeSchema>;


/** A timeline event as berth takes it, or undefined for what is not a person's text to answer. */
export function matrixMessage(roomId: string, event: unknown, bot: string, direct: boolean): ChannelMessage | undefined {
  const e = obj(event);
  const content = obj(e?.content);
  const sender = str(e?.sender);
  const eventId = str(e?.event_id);
  if (e?.type !== 'm.room.message' || !content || !sender || !eventId || sender === bot) return undefined;
  const relates = obj(content['m.relates_to']);
  const edit = relates?.rel_type === 'm.replace' ? obj(content['m.new_content']) : undefined;
  const shown = edit ?? content;
  const body = str(shown.body);
  if (shown.msgtype !== 'm.text' || body === undefined || body.trim() === '') return undefined; // notices (other bots), images, files
  return {
    id: eventId,
    chat: roomId,
    tenant: direct ? `matrix:${sender}` : `matrix-room:${roomId}`,
    sender: `matrix:${sender}`,
    text: edit ? `(edited) ${body}` : body,
    receipt: { room: roomId, event: eventId },
  };
}

export function createMatrixBridge(ctx: ChannelContext<MatrixConfig>): ChannelTransport {
  const config = ctx.config;
  const token = readSecret(config, 'access_token');
  const log = ctx.logger.child({ bridge: 'matrix' });
  const tokenFile = join(ctx.dir, 'next_batch');
  const members = new Map<string, { ids: Set<string>; at: number }>();
  let stopped = false;
  let live = false;
  let abort: AbortController | undefined;
  let loop: Promise<void> | undefined;

  async function call(method: string, path: string, body?: Json, signal?: AbortSignal): Promise<Json> {
    const res = await reach('the homeserver', `${config.homeserver}/_matrix/client/v3${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body ? { 'content-type': 'application/json' } : {}) },
      body: body ? JSON.stringify(body) : undefined,
      signal: signal ?? AbortSignal.timeout(30_000),
    });
    const json = obj(await res.json().catch(() => undefined)) ?? {};
    if (res.ok) return json;
    const retryMs = typeof json.retry_after_ms === 'number' ? json.retry_after_ms : undefined;
    throw new ChannelApiError(`${str(json.errcode) ?? `HTTP ${res.status}`}: ${str(json.error) ?? ''}`.trim(), res.status, retryMs === undefined ? undefined : Math.ceil(retryMs / 1000));
  }

  const room = (id: string) => encodeURIComponent(id);

  /**
   * Is the room the person's and the bot's alone? Its joined members must be exactly those two:
   * a room of two strangers' choosing, or one that grew, is a group. Asked again after any
   * membership change the sync shows, and at least every minute.
   */
  async function isDirect(roomId: string, sender: string): Promise<boolean> {
    let known = members.get(roomId);
    if (!known || Date.now() - known.at > MEMBERS_TTL_MS) {
      const joined = obj((await call('GET', `/rooms/${room(roomId)}/joined_members`)).joined) ?? {};
      known = { ids: new Set(Object.keys(joined).slice(0, 3)), at: Date.now() };
      members.set(roomId, known);
    }
    return known.ids.size === 2 && known.ids.has(sender) && known.ids.has(config.user_id);
  }

  /** Invites are joined one at a time beside the sync loop (a slow federation join never holds anyone's message), at most JOIN_QUEUE waiting. */
  const joins: string[] = [];
  let joining: Promise<void> | undefined;
  const stopJoins = new AbortController();
  function queueJoins(sync: Json) {
    if (!config.auto_join) return;
    for (const roomId of Object.keys(obj(obj(sync.rooms)?.invite) ?? {})) if (joins.length < JOIN_QUEUE && !joins.includes(roomId)) joins.push(roomId);
    pumpJoins();
  }
  function pumpJoins() {
    const next = joining || stopped ? undefined : joins.shift();
    if (next === undefined) return;
    const signal = AbortSignal.any([stopJoins.signal, AbortSignal.timeout(15_000)]);
    joining = call('POST', `/join/${room(next)}`, {}, signal)
      .then(() => undefined, (err: Error) => log.warn({ err: err.message.slice(0, 200) }, 'could not join a room berth was invited to'))
      .then(() => {
        joining = undefined;
        pumpJoins();
      });
  }

  const readToken = () => {
    try {
      return fs.readFileSync(tokenFile, 'utf8').trim() || undefined;
    } catch {
      return undefined;
    }
  };

  /** Journal a sync's messages in order; a take that fails throws: the token is not moved on, and the batch comes again. */
  async function takeBatch(sync: Json) {
    const rooms = obj(sync.rooms);
    for (const [roomId, joined] of Object.entries(obj(rooms?.join) ?? {})) {
      const events = list(obj(obj(joined)?.timeline)?.events);
      const state = list(obj(obj(joined)?.state)?.events);
      if ([...state, ...events].some((e) => obj(e)?.type === 'm.room.member')) members.delete(roomId);
      for (const event of events) {
        const sender = str(obj(event)?.sender);
        if (!sender || obj(event)?.type !== 'm.room.message') continue;
        const message = matrixMessage(roomId, event, config.user_id, await isDirect(roomId, sender));
        if (!message) continue;
        try {
          ctx.take(message);
        } catch (err) {
          log.error({ sender: message.sender, id: message.id, code: isBerthError(err) ? err.code : (err as Error)?.name }, 'could not take a matrix message; it comes again with the next sync');
          throw err;
        }
      }
    }
  }

  async function run() {
    let since = readToken();
    let attempt = 0;
    while (!stopped) {
      abort = new AbortController();
      const timer = setTimeout(() => abort?.abort(), SYNC_MS + 15_000);
      try {
        const query = since ? `?since=${encodeURIComponent(since)}&timeout=${SYNC_MS}` : '?timeout=0';
        const sync = await call('GET', `/sync${query}`, undefined, abort.signal);
        live = true;
        attempt = 0;
        const next = str(sync.next_batch);
        if (since) await takeBatch(sync); // a new home's first sync is history: only its token (and its invites) are taken
        queueJoins(sync);
        if (next && next !== since) {
          atomicWriteFile(tokenFile, `${next}\n`);
          since = next;
        }
      } catch (err) {
        if (stopped) break;
        live = false;
        attempt++;
        log.warn({ err: String((err as Error).message).slice(0, 200), attempt }, 'matrix sync failed');
        await new Promise((r) => setTimeout(r, backoffDelay(attempt, ctx.backoffMs)));
      } finally {
        clearTimeout(timer);
      }
    }
    live = false;
  }

  /**
   * A notice under a transaction id: the homeserver sends one event per id. An answer's id comes
   * from the message it answers and its part, so the same answer sent again after a crash (the
   * inbox had it answered, not yet replied) is the same send; a notice that answers nothing gets
   * a fresh id.
   */
  async function sendNotice(roomId: string, body: string, answerTo: string | undefined, part: number) {
    const txn = answerTo === undefined ? `berth-${Date.now()}-${randomBytes(6).toString('hex')}` : `berth-a-${createHash('sha256').update(`${answerTo}\0${part}`).digest('hex').slice(0, 40)}`;
    await withOneRetry(log, 'send', () => call('PUT', `/rooms/${room(roomId)}/send/m.room.message/${txn}`, { msgtype: 'm.notice', body }));
  }

  return {
    name: 'matrix',
    typingEveryMs: 20_000,
    start() {
      loop ??= run();
    },
    async stop() {
      stopped = true;
      abort?.abort();
      stopJoins.abort();
      await loop;
      await joining;
    },
    connected: () => live,
    async send(chat, text, about) {
      const parts: string[] = [];
      for (let rest = text; rest.length > 0 && parts.length < MATRIX_MAX_PARTS; rest = rest.slice(MATRIX_TEXT_LIMIT)) parts.push(rest.slice(0, MATRIX_TEXT_LIMIT));
      if (text.length > MATRIX_TEXT_LIMIT * MATRIX_MAX_PARTS) parts[parts.length - 1] += '\n[… the reply was cut here]';
      for (const [i, part] of (parts.length > 0 ? parts : ['(empty)']).entries()) await sendNotice(chat, part, about?.answerTo, i);
    },
    async typing(chat, on) {
      await call('PUT', `/rooms/${room(chat)}/typing/${encodeURIComponent(config.user_id)}`, on ? { typing: true, timeout: 30_000 } : { typing: false });
    },
    async acknowledge(message) {
      const r = message.receipt;
      if (r) await call('POST', `/rooms/${room(String(r.room))}/receipt/m.read/${encodeURIComponent(String(r.event))}`, {});
    },
  };
}

export const matrixChannel = defineChannel({
  name: 'matrix',
  title: 'Matrix',
  schema: MatrixBridgeSchema,
  receives: () => 'poll',
  sends: { typing: true, inlineLimit: `${MATRIX_TEXT_LIMIT} characters`, longReplies: `split into up to ${MATRIX_MAX_PARTS} notices` },
  tenants: { direct: 'matrix:<user id> (a room of the person and the bot alone)', groups: 'matrix-room:<room id> for any other room: its members share a workspace, each paired on their own' },
  senderKey: /^matrix:@[^\s:]{1,255}:[^\s]{1,255}$/,
  pairing: true,
  senders: (c) => c,
  guide: 'docs/matrix.md',
  label: (c) => `${c.user_id} at ${c.homeserver} with ${secretIdentity(c, 'access_token')}`,
  describe: (c) => `${c.user_id} at ${c.homeserver} (senders: ${c.senders})`,
  create: createMatrixBridge,
  async doctor(c, route) {
    const name = 'bridge matrix';
    try {
      const res = await fetch(`${c.homeserver}/_matrix/client/v3/account/whoami`, { headers: { authorization: `Bearer ${readSecret(c, 'access_token')}` }, signal: AbortSignal.timeout(5000) });
      const body = obj(await res.json().catch(() => undefined));
      if (!res.ok) return [{ name, status: 'fail', detail: `${c.homeserver} refuses the access token (${str(body?.errcode) ?? `HTTP ${res.status}`}): check bridges.matrix.access_token` }];
      if (body?.user_id !== c.user_id) return [{ name, status: 'fail', detail: `the access token is ${str(body?.user_id) ?? 'someone else'}'s, not ${c.user_id}'s` }];
      return [{ name, status: route ? 'ok' : 'warn', detail: `${c.user_id} at ${c.homeserver} ${route ?? 'has no "matrix" channel profile: only rooms named in channels are answered'}; senders: ${c.senders}` }];
    } catch (err) {
      return [{ name, status: 'fail', detail: isBerthError(err) ? err.message : `${c.homeserver} cannot be reached (${(err as Error).name})` }];
    }
  },
});
