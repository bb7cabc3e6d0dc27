import fs from 'node:fs';
import { createHash, randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { z } from 'zod';
import { isBerthError } from '../base/errors.js';
import { atomicWriteFile } from '../fs/tree.js';
import {
  backoffDelay,
  ChannelApiError,
  defineChannel,
  reach,
  sendPartsFrom,
  senderFields,
  threadProfileKeys,
  withOneRetry,
  type ChannelContext,
  type ChannelTransport,
} from './contract.js';
import { obj, str, list, type Json } from './json.js';
import { ENCRYPTED_ROOM_NOTICE, isEncryptedMessage, toldRooms } from './matrix-encrypted.js';
import { fetchGap, GAP_BOUNDS, joinGap } from './matrix-gap.js';
import { matrixJoins } from './matrix-joins.js';
import { afterArrival, isBotArrival, matrixChat, matrixChatOf, matrixMessage } from './matrix-timeline.js';
import { encryptedFileName, encryptedFileNotice, MATRIX_FILE_LIMIT_BYTES, matrixFiles } from './matrix-files.js';
import { oneSecret, readSecret, secretFields, secretIdentity } from './secrets.js';
import { graphemeCut, splitParts } from './text-cut.js';
export { matrixMessage } from './matrix-timeline.js';
const digest40 = (s: string) => createHash('sha256').update(s).digest('hex').slice(0, 40);

/**
 * Matrix, through the client-server API (https://spec.matrix.org/latest/client-server-api/):
 * the self-hosted channel for a self-hosted runner. `/sync` long polling; its `next_batch` is
 * written to berth's state only after every message of the batch is journaled, so a crash
 * syncs from the old token again and the inbox knows what it has (exactly once into the inbox).
 * The first sync of a new home only takes the token: history is not answered. Rooms are chats:
 * a room whose joined members are exactly the person and the bot is the person's own tenant;
 * any other room is one tenant (a room that grows becomes one at its next membership change).
 * Replies are m.notice (bots do not answer notices: no two bots talk in circles), in the thread a
 * message came in; typing is shown while the agent works; invites are accepted when auto_join
 * says so. A `limited` timeline's gap is paged back (matrix-gap.ts); what came before the bot's
 * arrival in a room is history, never a message (matrix-timeline.ts); an encrypted room is told
 * once that berth cannot read it (matrix-encrypted.ts).
 */
export const MATRIX_TEXT_LIMIT = 12_000;
/** A part's body as JSON, in bytes: Synapse refuses an event over 65,536 (M_TOO_LARGE), its envelope and relations included. */
const MATRIX_BODY_BYTES = 56_000;
const MATRIX_MAX_PARTS = 8;
const SYNC_MS = 25_000;
const MEMBERS_TTL_MS = 60 * 1000;
/** /messages pages one sync may ask for across its rooms (each room: GAP_BOUNDS.pages): many rooms back from downtime do not hold the sync for long. */
const SYNC_GAP_PAGES = 100;

export const MatrixBridgeSchema = z
  .object({
    homeserver: z
      .url({ protocol: /^https?$/, error: 'must be an http(s) URL' })
      .describe("The bot account's homeserver (its client-server API base, e.g. https://matrix.example.org)."),
    user_id: z
      .string()
      .regex(/^@[a-z0-9._=\-/+]{1,255}:[A-Za-z0-9.:\-[\]]{1,255}$/, 'must be a Matrix user id, e.g. @berth:example.org')
      .describe("The bot's user id."),
    ...secretFields('access_token', "The bot's access token (from a login of the bot account)"),
    auto_join: z.boolean().default(true).describe('Accept invites to rooms (whoever invites still has to be approved to be answered).'),
    ...senderFields('Matrix user ids (or tenant keys matrix:@user:server)'),
  })
  .strict()
  .superRefine((c, ctx) => oneSecret(c, 'access_token', ctx));
type MatrixConfig = z.output<typeof MatrixBridgeSchema>;

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
    throw new ChannelApiError(
      `${str(json.errcode) ?? `HTTP ${res.status}`}: ${str(json.error) ?? ''}`.trim(),
      res.status,
      retryMs === undefined ? undefined : Math.ceil(retryMs / 1000),
    );
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

  const joins = matrixJoins((roomId, signal) => call('POST', `/join/${room(roomId)}`, {}, signal), log);

  const readToken = () => {
    try {
      return fs.readFileSync(tokenFile, 'utf8').trim() || undefined;
    } catch {
      return undefined;
    }
  };

  const told = toldRooms(join(ctx.dir, 'encrypted-rooms'));
  /** A stop ends a gap's paging at once (the sync's token is not moved on: it comes again). */
  const stopGaps = new AbortController();

  /** Say once in an encrypted room that berth cannot read it; a send that fails is tried again at the next sign. */
  function tellEncrypted(roomId: string) {
    if (told.has(roomId)) return;
    told.add(roomId);
    log.warn({ room: roomId }, 'matrix room is end-to-end encrypted: berth cannot read it; telling the room once');
    const txn = `berth-e2e-${digest40(roomId)}`;
    void withOneRetry(log, 'send', () =>
      call('PUT', `/rooms/${room(roomId)}/send/m.room.message/${txn}`, { msgtype: 'm.notice', body: ENCRYPTED_ROOM_NOTICE }),
    ).catch((err: Error) => {
      told.delete(roomId);
      log.warn({ room: roomId, err: err.message.slice(0, 200) }, 'could not tell an encrypted room that berth cannot read it');
    });
  }

  /** An encrypted file in a room berth reads (a client that encrypts files alone): said once per event, in its thread. */
  function tellEncryptedFile(roomId: string, event: unknown) {
    const e = obj(event);
    const name = encryptedFileName(obj(e?.content) ?? {});
    const id = str(e?.event_id);
    if (name === undefined || id === undefined) return;
    log.info({ room: roomId, sender: str(e?.sender), id }, 'an encrypted file in a matrix room: berth cannot read it');
    void putMessage(
      matrixChatOf(roomId, obj(e?.content) ?? {}),
      { msgtype: 'm.notice', body: encryptedFileNotice(name) },
      id,
      'encrypted-file',
    ).catch((err: Error) =>
      log.warn({ room: roomId, err: err.message.slice(0, 200) }, 'could not say that an encrypted file cannot be read'),
    );
  }

  /**
   * A room's events of this sync, oldest first: a `limited` timeline's gap paged back first
   * (to the token berth had; or, when the bot arrived in this sync, to its invite), then cut
   * after the bot's arrival. A gap the homeserver refuses (4xx) is logged and skipped; any
   * other failure throws, so the token is not moved on and the sync comes again.
   */
  async function roomEvents(
    roomId: string,
    joined: Json | undefined,
    since: string,
    pagesLeft: number,
  ): Promise<{ events: unknown[]; pages: number }> {
    const timeline = obj(joined?.timeline);
    const events = list(timeline?.events);
    const state = list(obj(joined?.state)?.events);
    const arrived = [...state, ...events].some((e) => isBotArrival(e, config.user_id));
    const prevBatch = str(timeline?.prev_batch);
    if (timeline?.limited !== true || prevBatch === undefined) return { events: afterArrival(events, config.user_id), pages: 0 };
    try {
      const gap = await fetchGap(
        (path) => call('GET', path, undefined, AbortSignal.any([stopGaps.signal, AbortSignal.timeout(30_000)])),
        roomId,
        prevBatch,
        arrived ? undefined : since,
        config.user_id,
        { ...GAP_BOUNDS, pages: Math.min(GAP_BOUNDS.pages, pagesLeft) },
      );
      if (!gap.complete)
        log.warn({ room: roomId, fetched: gap.events.length }, 'matrix sync gap too long: older messages of this room were not fetched');
      return { events: afterArrival(joinGap(gap.events, events), config.user_id), pages: gap.pages };
    } catch (err) {
      if (!(err instanceof ChannelApiError) || err.status < 400 || err.status >= 500 || err.status === 429) throw err;
      log.warn(
        { room: roomId, err: err.message.slice(0, 200) },
        'the homeserver refused the messages of a sync gap; only the timeline is taken',
      );
      return { events: afterArrival(events, config.user_id), pages: 0 };
    }
  }

  /** Journal a sync's messages in order; a take that fails throws: the token is not moved on, and the batch comes again. */
  async function takeBatch(sync: Json, since: string) {
    const rooms = obj(sync.rooms);
    let pagesLeft = SYNC_GAP_PAGES;
    for (const [roomId, joined] of Object.entries(obj(rooms?.join) ?? {})) {
      const state = list(obj(obj(joined)?.state)?.events);
      const timeline = list(obj(obj(joined)?.timeline)?.events);
      const { events, pages } = await roomEvents(roomId, obj(joined), since, pagesLeft);
      pagesLeft -= pages;
      if ([...state, ...events].some((e) => obj(e)?.type === 'm.room.member')) members.delete(roomId);
      // The room's encryption may be history (set before the bot came): it is still this room's.
      if ([...state, ...timeline].some((e) => obj(e)?.type === 'm.room.encryption')) tellEncrypted(roomId);
      for (const event of events) {
        if (!isEncryptedMessage(event, config.user_id)) continue;
        log.info(
          { room: roomId, sender: str(obj(event)?.sender), id: str(obj(event)?.event_id) },
          'an encrypted matrix message: berth cannot read it',
        );
        tellEncrypted(roomId);
      }
      for (const event of events) {
        const sender = str(obj(event)?.sender);
        if (!sender || obj(event)?.type !== 'm.room.message') continue;
        if (sender !== config.user_id) tellEncryptedFile(roomId, event);
        const message = matrixMessage(roomId, event, config.user_id, await isDirect(roomId, sender));
        if (!message) continue;
        try {
          ctx.take(message);
        } catch (err) {
          log.error(
            { sender: message.sender, id: message.id, code: isBerthError(err) ? err.code : (err as Error)?.name },
            'could not take a matrix message; it comes again with the next sync',
          );
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
        if (since) await takeBatch(sync, since); // a new home's first sync is history: only its token (and its invites) are taken
        if (config.auto_join) joins.queue(sync);
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
   * from the message it answers, its part and its text: sent again after a crash it is the same
   * send, and another text for that message (its files' links) is no repeat (Synapse kept only the
   * first); a notice answering nothing gets a fresh id. In a thread: the thread's (reply fallback for
   * clients without threads). A homeserver that still finds a part too large (M_TOO_LARGE: its
   * limit is lower) gets it in two halves, twice at most, rather than nothing.
   */
  async function sendNotice(chat: string, body: string, answerTo: string | undefined, part: string, halvings = 2): Promise<void> {
    const { room: roomId } = matrixChat(chat);
    try {
      await putMessage(chat, { msgtype: 'm.notice', body }, answerTo, `${part}\0${body}`);
    } catch (err) {
      const half = graphemeCut(body, Math.floor(body.length / 2));
      if (!(err instanceof ChannelApiError) || err.status !== 413 || halvings === 0 || half === 0 || half >= body.length) throw err;
      log.warn({ room: roomId, length: body.length }, 'the homeserver found a reply part too large: sending it in two halves');
      await sendNotice(chat, body.slice(0, half), answerTo, `${part}a`, halvings - 1);
      await sendNotice(chat, body.slice(half), answerTo, `${part}b`, halvings - 1);
    }
  }

  /**
   * An m.room.message under a transaction id made from the message it answers, its part and a notice's
   * words (the same send after a crash is the same event; berth's notice about that message is not
   * its answer), else a fresh one; in the chat's thread, with the reply fallback the spec asks for.
   */
  async function putMessage(chat: string, content: Json, answerTo: string | undefined, part: string): Promise<void> {
    const { room: roomId, thread } = matrixChat(chat);
    const txn =
      answerTo === undefined
        ? `berth-${Date.now()}-${randomBytes(6).toString('hex')}`
        : `berth-a-${digest40(`${answerTo}\0${part}\0${content.msgtype === 'm.notice' ? content.body : ''}`)}`;
    const relates =
      thread === undefined
        ? {}
        : {
            'm.relates_to': {
              rel_type: 'm.thread',
              event_id: thread,
              is_falling_back: true,
              'm.in_reply_to': { event_id: answerTo?.startsWith('$') ? answerTo : thread },
            },
          };
    await withOneRetry(log, 'send', () => call('PUT', `/rooms/${room(roomId)}/send/m.room.message/${txn}`, { ...content, ...relates }));
  }

  const files = matrixFiles({ homeserver: config.homeserver, token });
  let uploadLimit = MATRIX_FILE_LIMIT_BYTES;

  return {
    name: 'matrix',
    typingEveryMs: 20_000,
    get fileLimitBytes() {
      return uploadLimit;
    },
    fetchAttachment: (ref, limits) => files.fetchAttachment(ref, limits),
    /** Uploaded, then its event (m.image, m.audio, m.video or m.file), in the thread when the chat is one. */
    async sendFile(chat, file, caption, about) {
      const url = await withOneRetry(log, 'media upload', () => files.upload(file, uploadLimit));
      await putMessage(chat, files.content(file, url, caption), about?.answerTo, `file\0${file.name}\0${caption}`);
    },
    start() {
      loop ??= run();
      void files.uploadLimit().then((limit) => {
        if (limit !== undefined) uploadLimit = limit;
      });
    },
    async stop() {
      stopped = true;
      abort?.abort();
      stopGaps.abort();
      await loop;
      await joins.stop();
    },
    connected: () => live,
    async send(chat, text, about) {
      const parts = splitParts(text, { units: MATRIX_TEXT_LIMIT, jsonBytes: MATRIX_BODY_BYTES, parts: MATRIX_MAX_PARTS });
      // Each part's transaction id makes a re-send the same event; parts delivered are skipped all the same.
      await sendPartsFrom(parts, about?.fromPart, (part, i) => sendNotice(chat, part, about?.answerTo, String(i)));
    },
    async typing(chat, on) {
      await call(
        'PUT',
        `/rooms/${room(matrixChat(chat).room)}/typing/${encodeURIComponent(config.user_id)}`,
        on ? { typing: true, timeout: 30_000 } : { typing: false },
      );
    },
    profileKeys: (chat) => {
      const { room: roomId, thread } = matrixChat(chat);
      return threadProfileKeys('matrix', roomId, thread);
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
  sends: {
    typing: true,
    inlineLimit: `${MATRIX_TEXT_LIMIT} characters`,
    longReplies: `split into up to ${MATRIX_MAX_PARTS} notices`,
    files:
      "in: m.image, m.file, m.audio, m.video by the authenticated media API (encrypted files: told they cannot be read); out: uploaded, then m.image/m.audio/m.video/m.file, up to the homeserver's m.upload.size (Synapse: 50 MiB)",
  },
  tenants: {
    direct: 'matrix:<user id> (a room of the person and the bot alone)',
    groups: 'matrix-room:<room id> for any other room: its members share a workspace, each paired on their own',
  },
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
      const res = await fetch(`${c.homeserver}/_matrix/client/v3/account/whoami`, {
        headers: { authorization: `Bearer ${readSecret(c, 'access_token')}` },
        signal: AbortSignal.timeout(5000),
      });
      const body = obj(await res.json().catch(() => undefined));
      if (!res.ok)
        return [
          {
            name,
            status: 'fail',
            detail: `${c.homeserver} refuses the access token (${str(body?.errcode) ?? `HTTP ${res.status}`}): check bridges.matrix.access_token`,
          },
        ];
      if (body?.user_id !== c.user_id)
        return [{ name, status: 'fail', detail: `the access token is ${str(body?.user_id) ?? 'someone else'}'s, not ${c.user_id}'s` }];
      return [
        {
          name,
          status: route ? 'ok' : 'warn',
          detail: `${c.user_id} at ${c.homeserver} ${route ?? 'has no "matrix" route: only rooms named in routes are answered'}; senders: ${c.senders}`,
        },
      ];
    } catch (err) {
      return [
        { name, status: 'fail', detail: isBerthError(err) ? err.message : `${c.homeserver} cannot be reached (${(err as Error).name})` },
      ];
    }
  },
});
