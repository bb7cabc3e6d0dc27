/**
 * A fake Matrix homeserver that speaks the Client-Server API (spec v1.x,
 * https://spec.matrix.org/latest/client-server-api/) a bot uses, for tests of the Matrix bridge.
 * Checked against the spec sources (matrix-org/matrix-spec: content/client-server-api/_index.md,
 * data/api/client-server/*.yaml) and Synapse (rest/client/sync.py, handlers/sync.py,
 * rest/client/room.py, receipts.py, transactions.py, api/auth/base.py, api/errors.py,
 * http/servlet.py). Where the two leave room, the fake does what Synapse does and says so.
 *
 * Every JSON response has `Content-Type: application/json`; every error is
 * `{"errcode":"M_…","error":"…"}` (plus the fields named below). Unknown path → 404
 * `M_UNRECOGNIZED`; known path, wrong method → 405 `M_UNRECOGNIZED` (Synapse). A body over
 * `maxBodyBytes` (1 MiB) → 413 `M_TOO_LARGE`, before auth, as Synapse's HTTP layer does. A body
 * that is not JSON → 400 `M_NOT_JSON` "Content not JSON."; JSON but not an object → 400
 * `M_BAD_JSON`. Anything unexpected → 500 `M_UNKNOWN`; the fake never throws out of a request.
 * Path parameters are percent-decoded segment by segment (`%21room%3Aberth.test` → `!room:berth.test`).
 * Prefix `/_matrix/client/v3/` (and `r0/`). OPTIONS → 204 with CORS headers.
 *
 * Content repository (spec "Content repository"; Synapse rest/media/*):
 * - `POST /_matrix/media/v3/upload[?filename=]` (auth; body: the bytes, `Content-Type` kept) →
 *   `{content_uri: "mxc://<server>/<media id>"}`. A body over `maxUploadBytes` → 413 `M_TOO_LARGE`.
 * - `GET /_matrix/client/v1/media/config` (auth) → `{"m.upload.size": maxUploadBytes}`.
 * - `GET /_matrix/client/v1/media/download/{serverName}/{mediaId}[/{fileName}]` (auth, as v1.11's
 *   authenticated media) → the bytes with their Content-Type and `Content-Disposition`; unknown →
 *   404 `M_NOT_FOUND`. With `authenticatedMedia: false` (a server older than v1.11) every
 *   `/_matrix/client/v1/media/…` path is 404 `M_UNRECOGNIZED`, and the bytes are served at the
 *   legacy `GET /_matrix/media/v3/download/{serverName}/{mediaId}` (no auth) alone; with it on
 *   (default), the legacy path answers 404 `M_NOT_FOUND` for media uploaded after the switch, as
 *   Synapse's `enable_authenticated_media` does. `chunkedMedia`: downloads without Content-Length.
 *   Media a person sent: `uploadMedia()`.
 *
 * Auth: `Authorization: Bearer <token>` or `?access_token=` (the spec dropped the query form in
 * v1.20; Synapse still takes it). Missing → 401 `M_MISSING_TOKEN`; a header that is not
 * exactly `Bearer <token>`, or header and query together → 401 `M_MISSING_TOKEN` (Synapse);
 * unknown or revoked → 401 `M_UNKNOWN_TOKEN` with `soft_logout` (false unless revoked with
 * `{ softLogout: true }`). Every user has one access token bound to one device.
 *
 * Endpoints:
 * - `GET /_matrix/client/versions` (no auth) → `{versions:[r0.0.1 … v1.12], unstable_features:{}}`
 *   (Synapse's list).
 * - `GET account/whoami` → `{user_id, device_id, is_guest:false}`.
 * - `GET sync` — see "Sync" below.
 * - `POST user/{userId}/filter` → `{filter_id:"0"|"1"|…}`; `GET user/{userId}/filter/{id}` → the
 *   filter, 404 `M_NOT_FOUND`. Someone else's userId → 403 `M_FORBIDDEN`.
 * - `PUT rooms/{roomId}/send/{eventType}/{txnId}` → `{event_id}`. Idempotent per (user, device,
 *   roomId, eventType, txnId) — the spec scopes a txnId to one device and one endpoint path:
 *   a repeat returns the first event_id and stores nothing. The lookup comes before anything
 *   else (as Synapse's transaction cache wraps the handler); failed attempts (429, 403, …) are
 *   not remembered, so a retry after a 429 sends. Body must be a JSON object. Event over 65536
 *   bytes in federation format (estimated: the content plus a room-v10 PDU envelope) or type
 *   over 255 bytes → 413 `M_TOO_LARGE` "event too large". Half a surrogate pair anywhere in the
 *   content → 500 `M_UNKNOWN` (Synapse's UnicodeEncodeError). Malformed room id → 400
 *   `M_INVALID_PARAM`; unknown room → 404 `M_NOT_FOUND`; not joined → 403 `M_FORBIDDEN`.
 * - `PUT rooms/{roomId}/typing/{userId}` `{typing, timeout}` → `{}`, recorded. Another user's id
 *   → 400 `M_FORBIDDEN` "Cannot set another user's typing state" (Synapse's status; the spec
 *   names none); not joined → 403 `M_FORBIDDEN`; `typing` not a boolean → 400 `M_BAD_JSON`.
 *   `timeout` is clamped to 120000 ms (Synapse); typing stops by itself when it runs out.
 * - `POST rooms/{roomId}/receipt/{receiptType}/{eventId}` (body: a JSON object, optionally
 *   `thread_id`) → `{}`, recorded. receiptType `m.read` | `m.read.private` | `m.fully_read`
 *   else 400 `M_INVALID_PARAM` (Synapse: M_UNKNOWN); event id not starting with `$` → 400;
 *   not joined → 403; an event id the room does not have is accepted and ignored (Synapse).
 *   `m.fully_read` becomes room account data, the others `m.receipt` ephemeral events.
 * - `POST rooms/{roomId}/read_markers` `{"m.fully_read"?, "m.read"?, "m.read.private"?}` → `{}`.
 * - `POST join/{roomIdOrAlias}`, `POST rooms/{roomId}/join` (empty body allowed) → `{room_id}`:
 *   accepts an invite (or joins a public room). Not invited → 403 "You are not invited to this
 *   room."; banned → 403; unknown room or alias → 404 `M_NOT_FOUND`. Joining again is a no-op.
 * - `POST rooms/{roomId}/leave` (empty body allowed) → `{}`: leaves, or rejects an invite.
 *   Leaving again is a no-op (Synapse de-duplicates identical membership); never a member → 403.
 * - `GET joined_rooms`, `GET rooms/{roomId}/joined_members`, `GET rooms/{roomId}/state`,
 *   `GET rooms/{roomId}/state/{type}[/{stateKey}]` (404 `M_NOT_FOUND` when unset),
 *   `GET rooms/{roomId}/event/{eventId}`, `GET rooms/{roomId}/messages?from=&to=&dir=&limit=`
 *   (to close a `limited` gap from `prev_batch`), `GET profile/{userId}[/displayname]`,
 *   `GET|PUT user/{userId}/account_data/{type}`. Room reads need the caller joined (403).
 *
 * Sync (`GET sync?since=&timeout=&filter=&full_state=&set_presence=`):
 * - Everything lives on one stream; `next_batch` is `s<position>` (treat it as opaque). A
 *   `since` token can be replayed any number of times and always yields the same events: a
 *   bridge that crashes before persisting `next_batch` sees them again and must dedupe by
 *   event_id.
 * - No `since` (initial sync), `full_state=true` or `timeout=0` → answers at once. Otherwise the
 *   request is held until there is something for the caller after `since`, or `timeout` ms pass
 *   (capped at `maxSyncTimeoutMs`); then the answer has no rooms and `next_batch` equals `since`
 *   (Synapse does the same, see its sync handler). Changes are batched per event-loop turn.
 * - Initial sync: every joined room with its last N timeline events (N = the filter's
 *   `room.timeline.limit`, else `defaultTimelineLimit` = 10, Synapse's default; capped at 100
 *   like Synapse's filter_timeline_limit), `limited: true` when older events exist, `state` = the
 *   room state at the start of the timeline; every pending invite; no left rooms.
 * - Incremental: rooms with new timeline events / ephemeral events / room account data. Over the
 *   limit → the last N events, `limited: true`, `state` = the state changes in the gap. A room
 *   the caller joined since `since` comes like in an initial sync and always `limited: true`
 *   (Synapse). A room the caller left (or rejected the invite of) since `since` is under `leave`
 *   with the timeline up to the leave event.
 * - Invites: `rooms.invite[roomId].invite_state.events` = stripped state (`{type, state_key,
 *   sender, content}` of m.room.create, join_rules, canonical_alias, avatar, encryption, name,
 *   topic and the inviter's m.room.member) followed by the invite m.room.member event itself in
 *   full client format, as Synapse sends it. `content.is_direct` is true for direct rooms.
 * - Timeline/state events use the ClientEventWithoutRoomID format: no `room_id` (the spec's
 *   /sync format; events returned by the injection helpers and by /event and /messages carry
 *   it). `unsigned` has `age`, `membership` (the caller's, spec v1.11), `transaction_id` on the
 *   caller's own device's sends, `prev_content`/`replaces_state` on state events that replaced
 *   one. The bot's own sent events come back in its sync like anyone's.
 * - Empty sections are left out, as Synapse does: no `rooms` key when no room changed, no
 *   `account_data`/`presence` when empty (`includeEmptySections: true` fills them all in).
 *   `device_one_time_keys_count` and `device_unused_fallback_key_types` are always there.
 * - Joined rooms always have `timeline`, `state`, `ephemeral`, `account_data`,
 *   `unread_notifications` (messages from others after the caller's last read receipt or own
 *   message; highlights = m.mentions naming the caller) and `summary`. Like Synapse, `summary`
 *   is `{}` unless the filter sets `room.state.lazy_load_members` (then: joined/invited counts,
 *   and `m.heroes` when the room has no name or alias) — `summary: 'always'` computes it always.
 * - `ephemeral`: `m.typing` (who types now) when typing changed, `m.receipt` for new receipts
 *   (another user's `m.read.private` is never shown).
 * - Filters: inline JSON (`filter={…}`) or an id from POST filter. Honoured: room.timeline
 *   `limit`, `types`, `not_types`, `senders`, `not_senders` (`*` wildcards in types) and
 *   room.state `lazy_load_members` (only for `summary`; state is never lazy-loaded). Bad inline
 *   JSON → 400 `M_NOT_JSON`; wrong shape → 400 `M_BAD_JSON` (Synapse: M_UNKNOWN); unknown filter
 *   id → 400 `M_INVALID_PARAM` "No such filter".
 * - `since` that is not a token of this fake → 400 `M_UNKNOWN` "Invalid stream token" (Synapse's
 *   StreamToken.from_string); a well-formed token ahead of the stream is clamped to the current
 *   position (Synapse's bound_future_token). `from=` → 400 (Synapse: "Did you mean 'since'?").
 *   `timeout` not a non-negative integer, `full_state` not true/false, `set_presence` not
 *   online/offline/unavailable → 400 `M_INVALID_PARAM`.
 *
 * Injected failures (`rateLimitNext`, `failNext`) apply to matching requests after auth:
 * 429 `{"errcode":"M_LIMIT_EXCEEDED","error":"Too Many Requests","retry_after_ms":N}` with
 * `Retry-After: ceil(N/1000)` (seconds; spec v1.10, Synapse).
 *
 * Rooms are created by the test (`createRoom`) with the events Synapse's private_chat preset
 * makes (create, creator's join, power_levels, [canonical_alias], join_rules,
 * history_visibility "shared", guest_access, [encryption], [name], [topic], then invite and join
 * of each member), room version 10. History is "shared": a joiner sees what came before.
 *
 * Only node:http; binds to 127.0.0.1:0 unless told otherwise.
 *
 * @example
 * const mx = await startFakeMatrix({ serverName: 'berth.test' });
 * const room = mx.createRoom({ members: ['@alice:berth.test'], direct: true });
 * // start the bridge with homeserver mx.url, user mx.botUserId, token mx.botAccessToken, then:
 * await mx.waitForPoll();
 * const ev = mx.sendText(room, '@alice:berth.test', 'hi');
 * await mx.waitFor(() => mx.repliesIn(room).length > 0);
 * expect(mx.repliesIn(room)[0]!.content.body).toContain('…');
 * await mx.close();
 */
import http from 'node:http';
import { createHash, randomBytes } from 'node:crypto';
import type { AddressInfo, Socket } from 'node:net';
import { pollUntil } from './poll.js';

// ---------------------------------------------------------------------------------------------
// Wire types (the subset the fake writes)

export type JsonObject = Record<string, unknown>;

export interface Unsigned {
  age?: number;
  membership?: string;
  transaction_id?: string;
  prev_content?: JsonObject;
  replaces_state?: string;
  [k: string]: unknown;
}

/** A room event in client format. `room_id` is absent inside /sync responses. */
export interface ClientEvent {
  event_id: string;
  type: string;
  sender: string;
  origin_server_ts: number;
  content: JsonObject;
  state_key?: string;
  room_id?: string;
  redacts?: string;
  unsigned?: Unsigned;
}

export interface StrippedStateEvent {
  type: string;
  state_key: string;
  sender: string;
  content: JsonObject;
}

/** m.typing, m.receipt, account data events: `{type, content}`. */
export interface BasicEvent {
  type: string;
  content: JsonObject;
}

export interface TimelineBatch {
  events: ClientEvent[];
  limited: boolean;
  prev_batch: string;
}

export interface RoomSummary {
  'm.heroes'?: string[];
  'm.joined_member_count'?: number;
  'm.invited_member_count'?: number;
}

export interface JoinedRoom {
  timeline: TimelineBatch;
  state: { events: ClientEvent[] };
  account_data: { events: BasicEvent[] };
  ephemeral: { events: BasicEvent[] };
  unread_notifications: { notification_count: number; highlight_count: number };
  summary: RoomSummary;
}

export interface InvitedRoom {
  invite_state: { events: Array<StrippedStateEvent | ClientEvent> };
}

export interface LeftRoom {
  timeline: TimelineBatch;
  state: { events: ClientEvent[] };
  account_data: { events: BasicEvent[] };
}

export interface SyncResponse {
  next_batch: string;
  rooms?: {
    join?: Record<string, JoinedRoom>;
    invite?: Record<string, InvitedRoom>;
    leave?: Record<string, LeftRoom>;
    knock?: Record<string, unknown>;
  };
  account_data?: { events: BasicEvent[] };
  presence?: { events: unknown[] };
  to_device?: { events: unknown[] };
  device_lists?: { changed: string[]; left: string[] };
  device_one_time_keys_count: Record<string, number>;
  device_unused_fallback_key_types: string[];
}

export interface MatrixErrorBody {
  errcode: string;
  error: string;
  [k: string]: unknown;
}

// ---------------------------------------------------------------------------------------------
// Recording and option types

/** One event the bot sent through `PUT …/send/…` (repeats of a txnId are not recorded again). */
export interface SentEvent {
  roomId: string;
  type: string;
  txnId: string;
  content: JsonObject;
  eventId: string;
  sender: string;
  deviceId: string;
  at: number;
}

export interface TypingRecord {
  roomId: string;
  userId: string;
  typing: boolean;
  /** As sent (before clamping); undefined when absent. */
  timeout?: number;
  at: number;
}

export interface ReceiptRecord {
  roomId: string;
  userId: string;
  receiptType: string;
  eventId: string;
  threadId?: string;
  /** false when the room has no such event (accepted and ignored, like Synapse). */
  known: boolean;
  /** 'receipt' for POST …/receipt, 'read_markers' for POST …/read_markers. */
  via: 'receipt' | 'read_markers';
  at: number;
}

export interface RequestRecord {
  method: string;
  /** Decoded path, without the query. */
  path: string;
  query: string;
  status: number;
  /** The authenticated caller, when there was one. */
  userId?: string;
  at: number;
}

export interface UserOptions {
  userId: string;
  displayName?: string | null;
  /** Default: a fresh `syt_…` token. */
  accessToken?: string;
  /** Default: a fresh device id. */
  deviceId?: string;
}

export interface FakeUser {
  userId: string;
  accessToken: string;
  deviceId: string;
  displayName: string | null;
}

export interface CreateRoomOptions {
  /** Users in the room besides the bot (registered on the fly when unknown). They join. */
  members?: string[];
  /** Who creates the room and invites the others. Default: the first member, else the bot. */
  creator?: string;
  name?: string;
  topic?: string;
  /** A DM: invites carry `is_direct: true`. */
  direct?: boolean;
  /** The bot is invited but has not joined (it accepts with POST /join). Default false. */
  invite?: boolean;
  /** The bot is not in the room at all (a room with history it is invited into later with `invite`). Default false. */
  withoutBot?: boolean;
  /** `#alias:server`, set as m.room.canonical_alias and joinable by alias. */
  alias?: string;
  /** Default 'invite'. 'public' rooms can be joined without an invite. */
  joinRule?: 'invite' | 'public';
  /** Adds m.room.encryption (the fake does not encrypt anything). */
  encrypted?: boolean;
  /** Use this room id instead of a random one. */
  roomId?: string;
}

export interface SendTextOptions {
  /** HTML body: sets `format: org.matrix.custom.html` and `formatted_body`. */
  html?: string;
  /** Default 'm.text'. */
  msgtype?: string;
  /** A reply: `m.relates_to: {m.in_reply_to: {event_id}}`. */
  replyTo?: string;
  /** A thread reply: `m.relates_to: {rel_type: m.thread, event_id, is_falling_back, m.in_reply_to}`. */
  threadRoot?: string;
  /** `m.mentions.user_ids`. */
  mentions?: string[];
  /** origin_server_ts; default now. */
  ts?: number;
  /** Extra content fields, merged last. */
  content?: JsonObject;
}

export interface RawEvent {
  type: string;
  sender: string;
  content?: unknown;
  state_key?: string;
  redacts?: string;
  origin_server_ts?: number;
  /** Default: a fresh id. */
  event_id?: string;
  /** Extra unsigned fields. */
  unsigned?: JsonObject;
}

export interface FailOptions {
  /** How many matching requests fail. Default 1; Infinity until `clearFailures()`. */
  count?: number;
  /** Only this HTTP method. */
  method?: string;
}

export interface FakeMatrixOptions {
  /** Default 'berth.test'. */
  serverName?: string;
  /** Default '@berth:<serverName>'. */
  botUserId?: string;
  /** Default 'berth-bot-token'. */
  botAccessToken?: string;
  /** Default 'BERTHBOT'. */
  botDeviceId?: string;
  /** Default 'berth'. */
  botDisplayName?: string | null;
  /** More users (the people who talk); they can also call the API with their own tokens. */
  users?: UserOptions[];
  /** Timeline limit when the filter sets none. Default 10 (Synapse). */
  defaultTimelineLimit?: number;
  /** 'synapse' (default): summary only with lazy_load_members, like Synapse; 'always'. */
  summary?: 'synapse' | 'always';
  /** Put every optional sync section in, even empty. Default false (Synapse leaves them out). */
  includeEmptySections?: boolean;
  /** Default 1 MiB. */
  maxBodyBytes?: number;
  /** Media uploads. Default 50 MiB (Synapse's max_upload_size). */
  maxUploadBytes?: number;
  /** The v1.11 authenticated media endpoints (default true); false: an older server, legacy downloads only. */
  authenticatedMedia?: boolean;
  /** Serve media downloads chunked, without Content-Length. */
  chunkedMedia?: boolean;
  /** Upper bound on a sync's hold time. Default 300000. */
  maxSyncTimeoutMs?: number;
  host?: string;
  port?: number;
}

export interface FakeMatrix {
  /** e.g. http://127.0.0.1:41234 (the homeserver base URL). */
  url: string;
  serverName: string;
  botUserId: string;
  botAccessToken: string;
  botDeviceId: string;
  /** Every event the bot sent via PUT …/send, in order. */
  sent: SentEvent[];
  /** Every typing PUT (any user), in order. */
  typing: TypingRecord[];
  /** Every receipt / read marker (any user), in order. */
  receipts: ReceiptRecord[];
  /** Every HTTP request answered, in order. */
  requests: RequestRecord[];
  /** The bot's m.room.message sends in this room. */
  repliesIn(roomId: string): SentEvent[];
  /** Media a person uploaded (to put in an m.image/m.file event's `url`): its mxc:// URI. */
  uploadMedia(data: Buffer, opts?: { contentType?: string; filename?: string }): string;
  /** Every media upload (the bot's and uploadMedia's), by mxc:// URI. */
  media: Map<string, { bytes: Buffer; contentType?: string; filename?: string; by?: string }>;
  /** Every media download answered with bytes: which endpoint, and the user whose token came with it (none for legacy). */
  mediaDownloads: Array<{ mxc: string; endpoint: 'v1' | 'v3'; userId?: string }>;

  addUser(user: UserOptions | string): FakeUser;
  user(userId: string): FakeUser | undefined;
  /** Make a token answer 401 M_UNKNOWN_TOKEN from now on. */
  revokeToken(token: string, opts?: { softLogout?: boolean }): void;

  /** Create a room (see CreateRoomOptions); returns its id. */
  createRoom(opts?: CreateRoomOptions): string;
  /** A text message from `sender` (must be joined). */
  sendText(roomId: string, sender: string, body: string, opts?: SendTextOptions): ClientEvent;
  /** Any event, no checks (the sender need not be in the room; content need not be an object). */
  sendRaw(roomId: string, event: RawEvent): ClientEvent;
  /** An edit (m.replace) of `targetEventId`: body `* <newBody>`, m.new_content. */
  edit(roomId: string, sender: string, targetEventId: string, newBody: string, opts?: { html?: string; msgtype?: string }): ClientEvent;
  /** `from` invites `target` (default: the bot). */
  invite(roomId: string, from: string, target?: string, opts?: { direct?: boolean }): ClientEvent;
  join(roomId: string, userId: string): ClientEvent;
  leave(roomId: string, userId: string, reason?: string): ClientEvent;
  /** Another user starts/stops typing (shows up as m.typing). */
  setTyping(roomId: string, userId: string, typing: boolean, timeoutMs?: number): void;

  /** The room's events in order, client format with room_id. */
  events(roomId: string): ClientEvent[];
  /** Current membership of every user with an m.room.member event. */
  members(roomId: string): Record<string, string>;
  roomIds(): string[];
  /** The current stream position as a sync token. */
  currentToken(): string;

  /** The next matching request(s) get 429 M_LIMIT_EXCEEDED. pattern: substring of, or RegExp on,
   * the decoded path (e.g. '/send/', /\/sync$/). */
  rateLimitNext(pattern: string | RegExp, retryAfterMs: number, opts?: FailOptions): void;
  /** The next matching request(s) get this error. */
  failNext(
    pattern: string | RegExp,
    error: { status: number; errcode: string; error?: string; extra?: JsonObject; headers?: Record<string, string> },
    opts?: FailOptions,
  ): void;
  clearFailures(): void;

  /** Sync requests now being held, by anyone (or by this user). */
  pendingSyncs(userId?: string): number;
  /** Resolves once the bot has a sync long-poll held open (it is idle and listening). */
  waitForPoll(timeoutMs?: number): Promise<void>;
  /** Polls pred every 10 ms; resolves with its first truthy value. */
  waitFor<T>(pred: () => T | undefined | null | false | 0 | '', timeoutMs?: number): Promise<T>;
  /** Answers held syncs at once (empty), then closes every connection. */
  close(): Promise<void>;
}

// ---------------------------------------------------------------------------------------------
// Helpers

class MatrixError extends Error {
  constructor(
    readonly status: number,
    readonly errcode: string,
    message: string,
    readonly extra: JsonObject = {},
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }
}

function isObject(v: unknown): v is JsonObject {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

const USER_ID = /^@[^:\s]+:[^\s]+$/;
const ROOM_ID = /^![^:\s]+:[^\s]+$/;
const ALIAS = /^#[^:\s]+:[^\s]+$/;

const MAX_PDU_BYTES = 65_536;

/** A string anywhere in a JSON value (keys too) holding half a surrogate pair. */
function hasLoneSurrogate(v: unknown): boolean {
  if (typeof v === 'string') return /\p{Cs}/u.test(v);
  if (Array.isArray(v)) return v.some(hasLoneSurrogate);
  return isObject(v) && Object.entries(v).some(([k, x]) => hasLoneSurrogate(k) || hasLoneSurrogate(x));
}
const MAX_TIMELINE_LIMIT = 100;
const MAX_TYPING_TIMEOUT = 120_000;
const RECEIPT_TYPES = ['m.read', 'm.read.private', 'm.fully_read'];
const VERSIONS = [
  'r0.0.1',
  'r0.1.0',
  'r0.2.0',
  'r0.3.0',
  'r0.4.0',
  'r0.5.0',
  'r0.6.0',
  'r0.6.1',
  'v1.1',
  'v1.2',
  'v1.3',
  'v1.4',
  'v1.5',
  'v1.6',
  'v1.7',
  'v1.8',
  'v1.9',
  'v1.10',
  'v1.11',
  'v1.12',
];
/** The stripped state Synapse puts into invites (room_prejoin_state defaults). */
const PREJOIN_TYPES = [
  'm.room.create',
  'm.room.join_rules',
  'm.room.canonical_alias',
  'm.room.avatar',
  'm.room.encryption',
  'm.room.name',
  'm.room.topic',
];
const NOTIFYING_TYPES = new Set(['m.room.message', 'm.room.encrypted', 'm.sticker']);

const base64url = (b: Buffer): string => b.toString('base64url');
const randomLetters = (n: number): string => Array.from(randomBytes(n), (b) => String.fromCharCode(65 + (b % 26) + (b & 32))).join('');
const clone = <T>(v: T): T => structuredClone(v);
const stateKeyOf = (type: string, stateKey: string): string => `${type}\u0000${stateKey}`;

function localpart(userId: string): string {
  return userId.slice(1, userId.indexOf(':'));
}

// ---------------------------------------------------------------------------------------------
// The fake's model

interface StoredEvent {
  pos: number;
  roomId: string;
  eventId: string;
  type: string;
  sender: string;
  ts: number;
  content: unknown;
  stateKey?: string;
  redacts?: string;
  /** The state event this one replaced. */
  prev?: StoredEvent;
  txn?: { userId: string; deviceId: string; txnId: string };
  extraUnsigned?: JsonObject;
}

interface ReceiptEntry {
  pos: number;
  userId: string;
  type: string;
  eventId: string;
  threadId?: string;
  ts: number;
}

interface Room {
  id: string;
  events: StoredEvent[];
  state: Map<string, StoredEvent>;
  /** userId → their m.room.member events, in order. */
  memberships: Map<string, StoredEvent[]>;
  /** userId → typing expiry timer. */
  typing: Map<string, NodeJS.Timeout>;
  typingPos: number;
  receipts: ReceiptEntry[];
  /** userId → type → room account data. */
  accountData: Map<string, Map<string, { content: JsonObject; pos: number }>>;
  direct: boolean;
}

interface Session {
  token: string;
  userId: string;
  deviceId: string;
  revoked: boolean;
  softLogout: boolean;
}

interface UserRecord {
  userId: string;
  displayName: string | null;
  session: Session;
  accountData: Map<string, { content: JsonObject; pos: number }>;
  filters: JsonObject[];
}

interface SyncFilter {
  limit: number;
  lazy: boolean;
  types?: string[];
  notTypes?: string[];
  senders?: string[];
  notSenders?: string[];
}

interface PendingSync {
  session: Session;
  since: number;
  fullState: boolean;
  filter: SyncFilter;
  res: http.ServerResponse;
  timer: NodeJS.Timeout;
}

interface FailRule {
  pattern: string | RegExp;
  method?: string;
  remaining: number;
  status: number;
  body: MatrixErrorBody;
  headers: Record<string, string>;
}

interface Reply {
  status: number;
  json: unknown;
  headers?: Record<string, string>;
}

interface Ctx {
  req: http.IncomingMessage;
  res: http.ServerResponse;
  method: string;
  path: string;
  query: URLSearchParams;
  params: Record<string, string>;
  body: Buffer;
  session?: Session;
}

type Handler = (c: Ctx) => Reply | undefined;

interface Route {
  method: string;
  /** Segments after the client prefix; ':name' captures one decoded segment. */
  path: string[];
  auth: 'required' | 'optional' | 'none';
  handle: Handler;
}

export async function startFakeMatrix(opts: FakeMatrixOptions = {}): Promise<FakeMatrix> {
  const serverName = opts.serverName ?? 'berth.test';
  const botUserId = opts.botUserId ?? `@berth:${serverName}`;
  const botAccessToken = opts.botAccessToken ?? 'berth-bot-token';
  const botDeviceId = opts.botDeviceId ?? 'BERTHBOT';
  const defaultLimit = Math.min(Math.max(0, opts.defaultTimelineLimit ?? 10), MAX_TIMELINE_LIMIT);
  const summaryMode = opts.summary ?? 'synapse';
  const includeEmpty = opts.includeEmptySections ?? false;
  const maxBody = opts.maxBodyBytes ?? 1024 * 1024;
  const maxUpload = opts.maxUploadBytes ?? 50 * 1024 * 1024;
  const authenticatedMedia = opts.authenticatedMedia ?? true;
  const media = new Map<string, { bytes: Buffer; contentType?: string; filename?: string; by?: string }>();
  const mediaDownloads: Array<{ mxc: string; endpoint: 'v1' | 'v3'; userId?: string }> = [];
  const storeMedia = (bytes: Buffer, contentType?: string, filename?: string, by?: string): string => {
    const mxc = `mxc://${serverName}/${randomLetters(24)}`;
    media.set(mxc, { bytes, ...(contentType ? { contentType } : {}), ...(filename ? { filename } : {}), ...(by ? { by } : {}) });
    return mxc;
  };
  const maxSyncTimeout = opts.maxSyncTimeoutMs ?? 300_000;

  const sent: SentEvent[] = [];
  const typingLog: TypingRecord[] = [];
  const receiptLog: ReceiptRecord[] = [];
  const requestLog: RequestRecord[] = [];

  const users = new Map<string, UserRecord>();
  const tokens = new Map<string, Session>();
  const rooms = new Map<string, Room>();
  const aliases = new Map<string, string>();
  const eventsById = new Map<string, StoredEvent>();
  /** `${userId}\0${deviceId}\0${roomId}\0${type}\0${txnId}` → event id. */
  const txns = new Map<string, string>();
  const failures: FailRule[] = [];
  const pending = new Set<PendingSync>();
  const sockets = new Set<Socket>();
  let streamPos = 0;
  let closed = false;

  // -------------------------------------------------------------------------------------------
  // Users

  function addUser(u: UserOptions | string): FakeUser {
    const o: UserOptions = typeof u === 'string' ? { userId: u } : u;
    if (!USER_ID.test(o.userId)) throw new Error(`fake matrix: not a user id: ${o.userId}`);
    const existing = users.get(o.userId);
    if (existing) return publicUser(existing);
    const token = o.accessToken ?? `syt_${base64url(Buffer.from(localpart(o.userId)))}_${randomLetters(20)}`;
    if (tokens.has(token)) throw new Error(`fake matrix: access token already in use: ${token}`);
    const session: Session = {
      token,
      userId: o.userId,
      deviceId: o.deviceId ?? randomLetters(10).toUpperCase(),
      revoked: false,
      softLogout: false,
    };
    const rec: UserRecord = {
      userId: o.userId,
      displayName: o.displayName === undefined ? localpart(o.userId) : o.displayName,
      session,
      accountData: new Map(),
      filters: [],
    };
    users.set(o.userId, rec);
    tokens.set(token, session);
    return publicUser(rec);
  }

  function publicUser(r: UserRecord): FakeUser {
    return { userId: r.userId, accessToken: r.session.token, deviceId: r.session.deviceId, displayName: r.displayName };
  }

  const ensureUser = (userId: string): UserRecord => {
    if (!users.has(userId)) addUser(userId);
    return users.get(userId)!;
  };

  addUser({
    userId: botUserId,
    accessToken: botAccessToken,
    deviceId: botDeviceId,
    displayName: opts.botDisplayName === undefined ? 'berth' : opts.botDisplayName,
  });
  for (const u of opts.users ?? []) addUser(u);

  // -------------------------------------------------------------------------------------------
  // Rooms and events

  function newEventId(): string {
    return `$${base64url(createHash('sha256').update(randomBytes(16)).update(String(streamPos)).digest())}`;
  }

  function getRoom(roomId: string): Room {
    const r = rooms.get(roomId);
    if (!r) throw new Error(`fake matrix: unknown room ${roomId}`);
    return r;
  }

  function append(
    room: Room,
    e: {
      type: string;
      sender: string;
      content: unknown;
      stateKey?: string;
      redacts?: string;
      ts?: number;
      eventId?: string;
      txn?: StoredEvent['txn'];
      extraUnsigned?: JsonObject;
    },
  ): StoredEvent {
    const ev: StoredEvent = {
      pos: ++streamPos,
      roomId: room.id,
      eventId: e.eventId ?? newEventId(),
      type: e.type,
      sender: e.sender,
      ts: e.ts ?? Date.now(),
      content: e.content,
      ...(e.stateKey !== undefined ? { stateKey: e.stateKey } : {}),
      ...(e.redacts !== undefined ? { redacts: e.redacts } : {}),
      ...(e.txn ? { txn: e.txn } : {}),
      ...(e.extraUnsigned ? { extraUnsigned: e.extraUnsigned } : {}),
    };
    if (ev.stateKey !== undefined) {
      const key = stateKeyOf(ev.type, ev.stateKey);
      const prev = room.state.get(key);
      if (prev) ev.prev = prev;
      room.state.set(key, ev);
      if (ev.type === 'm.room.member') {
        const list = room.memberships.get(ev.stateKey) ?? [];
        list.push(ev);
        room.memberships.set(ev.stateKey, list);
      }
    }
    room.events.push(ev);
    if (!eventsById.has(ev.eventId)) eventsById.set(ev.eventId, ev);
    return ev;
  }

  function membershipEventAt(room: Room, userId: string, pos: number): StoredEvent | undefined {
    const list = room.memberships.get(userId);
    if (!list) return undefined;
    for (let i = list.length - 1; i >= 0; i--) if (list[i]!.pos <= pos) return list[i];
    return undefined;
  }

  function membershipAt(room: Room, userId: string, pos: number): string | undefined {
    const ev = membershipEventAt(room, userId, pos);
    if (!ev || !isObject(ev.content)) return undefined;
    return typeof ev.content.membership === 'string' ? ev.content.membership : undefined;
  }

  const currentMembership = (room: Room, userId: string): string | undefined => membershipAt(room, userId, streamPos);

  /** The room state just before stream position `pos`. */
  function stateBefore(room: Room, pos: number): StoredEvent[] {
    const m = new Map<string, StoredEvent>();
    for (const ev of room.events) {
      if (ev.pos >= pos) break;
      if (ev.stateKey !== undefined) m.set(stateKeyOf(ev.type, ev.stateKey), ev);
    }
    return [...m.values()];
  }

  function stateContent(room: Room, type: string, stateKey = ''): JsonObject | undefined {
    const ev = room.state.get(stateKeyOf(type, stateKey));
    return ev && isObject(ev.content) ? ev.content : undefined;
  }

  function memberContent(userId: string, membership: string, extra: JsonObject = {}): JsonObject {
    const name = users.get(userId)?.displayName;
    return { membership, ...(membership === 'join' || membership === 'invite' ? (name ? { displayname: name } : {}) : {}), ...extra };
  }

  function clientEvent(ev: StoredEvent, viewer: Session | undefined, now: number, withRoomId: boolean): ClientEvent {
    const out: ClientEvent = {
      type: ev.type,
      event_id: ev.eventId,
      sender: ev.sender,
      origin_server_ts: ev.ts,
      content: clone(ev.content) as JsonObject,
    };
    if (ev.stateKey !== undefined) out.state_key = ev.stateKey;
    if (ev.redacts !== undefined) out.redacts = ev.redacts;
    if (withRoomId) out.room_id = ev.roomId;
    const unsigned: Unsigned = { ...clone(ev.extraUnsigned ?? {}), age: Math.max(0, now - ev.ts) };
    const room = rooms.get(ev.roomId);
    if (viewer && room) unsigned.membership = membershipAt(room, viewer.userId, ev.pos) ?? 'leave';
    if (ev.prev) {
      unsigned.prev_content = clone(ev.prev.content) as JsonObject;
      unsigned.replaces_state = ev.prev.eventId;
    }
    if (viewer && ev.txn && ev.txn.userId === viewer.userId && ev.txn.deviceId === viewer.deviceId) {
      unsigned.transaction_id = ev.txn.txnId;
    }
    out.unsigned = unsigned;
    return out;
  }

  function stripped(ev: StoredEvent): StrippedStateEvent {
    return { type: ev.type, state_key: ev.stateKey ?? '', sender: ev.sender, content: clone(ev.content) as JsonObject };
  }

  /** Approximate size of the event in federation format (room v10 PDU, canonical JSON). */
  function pduBytes(room: Room, type: string, sender: string, content: unknown, stateKey?: string): number {
    const id = `$${'x'.repeat(43)}`;
    const pdu = {
      auth_events: [id, id, id],
      content,
      depth: streamPos + 1,
      hashes: { sha256: 'x'.repeat(43) },
      origin: serverName,
      origin_server_ts: Date.now(),
      prev_events: [id],
      room_id: room.id,
      sender,
      signatures: { [serverName]: { 'ed25519:a_AAAA': 'x'.repeat(86) } },
      ...(stateKey !== undefined ? { state_key: stateKey } : {}),
      type,
      unsigned: { age_ts: Date.now() },
    };
    return Buffer.byteLength(JSON.stringify(pdu), 'utf8');
  }

  // -------------------------------------------------------------------------------------------
  // Change notification (held syncs)

  let wakeScheduled = false;
  function changed(): void {
    if (wakeScheduled || closed) return;
    wakeScheduled = true;
    setImmediate(() => {
      wakeScheduled = false;
      for (const p of [...pending]) {
        const r = buildSync(p.session, p.since, p.fullState, p.filter);
        if (!r.empty) finishPending(p, r.body);
      }
    });
  }

  function finishPending(p: PendingSync, body: SyncResponse): void {
    if (!pending.delete(p)) return;
    clearTimeout(p.timer);
    if (!p.res.writableEnded && !p.res.destroyed) sendJson(p.res, 200, body);
  }

  // -------------------------------------------------------------------------------------------
  // Sync

  function matchesType(pattern: string, type: string): boolean {
    if (!pattern.includes('*')) return pattern === type;
    const re = new RegExp(
      `^${pattern
        .split('*')
        .map((s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
        .join('.*')}$`,
    );
    return re.test(type);
  }

  function passesFilter(f: SyncFilter, ev: StoredEvent): boolean {
    if (f.types && !f.types.some((t) => matchesType(t, ev.type))) return false;
    if (f.notTypes && f.notTypes.some((t) => matchesType(t, ev.type))) return false;
    if (f.senders && !f.senders.includes(ev.sender)) return false;
    if (f.notSenders && f.notSenders.includes(ev.sender)) return false;
    return true;
  }

  /** The latest state event per key among `evs`. */
  function latestState(evs: StoredEvent[]): StoredEvent[] {
    const m = new Map<string, StoredEvent>();
    for (const ev of evs) if (ev.stateKey !== undefined) m.set(stateKeyOf(ev.type, ev.stateKey), ev);
    return [...m.values()];
  }

  interface Window {
    timeline: StoredEvent[];
    limited: boolean;
    state: StoredEvent[];
  }

  /** Timeline and state for events in (since, until]; since null = from the room's start, full state. */
  function timelineWindow(
    room: Room,
    since: number | null,
    until: number,
    f: SyncFilter,
    fullState: boolean,
    forceLimited: boolean,
  ): Window {
    const candidates = room.events.filter((e) => e.pos <= until && (since === null || e.pos > since));
    const filtered = candidates.filter((e) => passesFilter(f, e));
    const timeline = f.limit > 0 ? filtered.slice(-f.limit) : [];
    const limited = forceLimited || filtered.length > timeline.length;
    const startPos = timeline[0]?.pos ?? until + 1;
    let state: StoredEvent[];
    if (since === null || fullState) state = stateBefore(room, startPos);
    else if (limited) state = latestState(candidates.filter((e) => e.pos < startPos));
    else state = [];
    return { timeline, limited, state };
  }

  function summaryOf(room: Room, userId: string): RoomSummary {
    const current = [...room.memberships.entries()].map(([uid, list]) => ({ uid, ev: list[list.length - 1]! }));
    const m = (e: StoredEvent): unknown => (isObject(e.content) ? e.content.membership : undefined);
    const s: RoomSummary = {
      'm.joined_member_count': current.filter((c) => m(c.ev) === 'join').length,
      'm.invited_member_count': current.filter((c) => m(c.ev) === 'invite').length,
    };
    if (stateContent(room, 'm.room.name')?.name || stateContent(room, 'm.room.canonical_alias')?.alias) return s;
    const others = current.filter((c) => c.uid !== userId).sort((a, b) => a.ev.pos - b.ev.pos);
    let heroes = others.filter((c) => m(c.ev) === 'join' || m(c.ev) === 'invite');
    if (heroes.length === 0) heroes = others.filter((c) => m(c.ev) === 'leave' || m(c.ev) === 'ban');
    s['m.heroes'] = heroes.slice(0, 5).map((c) => c.uid);
    return s;
  }

  function mentions(ev: StoredEvent, userId: string): boolean {
    if (!isObject(ev.content)) return false;
    const mm = ev.content['m.mentions'];
    if (isObject(mm)) {
      return (Array.isArray(mm.user_ids) && mm.user_ids.includes(userId)) || mm.room === true;
    }
    const body = ev.content.body;
    const name = users.get(userId)?.displayName;
    return typeof body === 'string' && (body.includes(userId) || (!!name && body.includes(name)));
  }

  function unreadCounts(room: Room, userId: string): { notification_count: number; highlight_count: number } {
    let readPos = membershipEventAt(room, userId, streamPos)?.pos ?? 0;
    for (const r of room.receipts) {
      if (r.userId !== userId || (r.type !== 'm.read' && r.type !== 'm.read.private')) continue;
      const target = eventsById.get(r.eventId);
      if (target && target.roomId === room.id && target.pos > readPos) readPos = target.pos;
    }
    for (const ev of room.events) if (ev.sender === userId && ev.pos > readPos) readPos = ev.pos;
    let n = 0;
    let h = 0;
    for (const ev of room.events) {
      if (ev.pos <= readPos || ev.sender === userId || !NOTIFYING_TYPES.has(ev.type)) continue;
      n++;
      if (mentions(ev, userId)) h++;
    }
    return { notification_count: n, highlight_count: h };
  }

  function ephemeralFor(room: Room, userId: string, since: number | null): BasicEvent[] {
    const out: BasicEvent[] = [];
    if (since === null ? room.typing.size > 0 : room.typingPos > since) {
      out.push({ type: 'm.typing', content: { user_ids: [...room.typing.keys()] } });
    }
    let rs = room.receipts.filter((r) => (since === null || r.pos > since) && (r.type !== 'm.read.private' || r.userId === userId));
    if (since === null) {
      const latest = new Map<string, ReceiptEntry>();
      for (const r of rs) latest.set(`${r.userId}\u0000${r.type}\u0000${r.threadId ?? ''}`, r);
      rs = [...latest.values()];
    }
    if (rs.length > 0) {
      const content: Record<string, Record<string, Record<string, JsonObject>>> = {};
      for (const r of rs) {
        const byType = (content[r.eventId] ??= {});
        const byUser = (byType[r.type] ??= {});
        byUser[r.userId] = { ts: r.ts, ...(r.threadId !== undefined ? { thread_id: r.threadId } : {}) };
      }
      out.push({ type: 'm.receipt', content });
    }
    return out;
  }

  function roomAccountData(room: Room, userId: string, since: number | null): BasicEvent[] {
    const m = room.accountData.get(userId);
    if (!m) return [];
    return [...m.entries()].filter(([, v]) => since === null || v.pos > since).map(([type, v]) => ({ type, content: clone(v.content) }));
  }

  function buildSync(session: Session, since: number | null, fullState: boolean, f: SyncFilter): { body: SyncResponse; empty: boolean } {
    const now = Date.now();
    const N = streamPos;
    const U = session.userId;
    const fmt = (e: StoredEvent): ClientEvent => clientEvent(e, session, now, false);
    const batch = (w: Window, until: number): TimelineBatch => ({
      events: w.timeline.map(fmt),
      limited: w.limited,
      prev_batch: `s${(w.timeline[0]?.pos ?? until + 1) - 1}`,
    });
    const join: Record<string, JoinedRoom> = {};
    const invite: Record<string, InvitedRoom> = {};
    const leave: Record<string, LeftRoom> = {};

    for (const room of rooms.values()) {
      const mN = membershipAt(room, U, N);
      const mS = since === null ? undefined : membershipAt(room, U, since);
      if (mN === 'join') {
        const newly = since !== null && mS !== 'join';
        const w = timelineWindow(room, since === null || newly ? null : since, N, f, fullState, newly);
        const eph = ephemeralFor(room, U, since === null || newly ? null : since);
        const acc = roomAccountData(room, U, since === null || newly ? null : since);
        const full = since === null || newly || fullState;
        if (!full && w.timeline.length === 0 && w.state.length === 0 && eph.length === 0 && acc.length === 0) continue;
        const memberChange =
          w.timeline.some((e) => e.type === 'm.room.member') || (w.limited && w.state.some((e) => e.type === 'm.room.member'));
        const wantSummary = summaryMode === 'always' || (f.lazy && (since === null || newly || memberChange));
        join[room.id] = {
          timeline: batch(w, N),
          state: { events: w.state.map(fmt) },
          account_data: { events: acc },
          ephemeral: { events: eph },
          unread_notifications: unreadCounts(room, U),
          summary: wantSummary ? summaryOf(room, U) : {},
        };
      } else if (mN === 'invite') {
        const inv = membershipEventAt(room, U, N)!;
        if (since !== null && inv.pos <= since && !fullState) continue;
        const strippedState = PREJOIN_TYPES.map((t) => room.state.get(stateKeyOf(t, ''))).filter((e): e is StoredEvent => !!e);
        const inviter = room.state.get(stateKeyOf('m.room.member', inv.sender));
        if (inviter && inv.sender !== U) strippedState.push(inviter);
        invite[room.id] = { invite_state: { events: [...strippedState.map(stripped), fmt(inv)] } };
      } else if ((mN === 'leave' || mN === 'ban') && since !== null && (mS === 'join' || mS === 'invite')) {
        const left = membershipEventAt(room, U, N)!;
        const w: Window =
          mS === 'invite' ? { timeline: [left], limited: false, state: [] } : timelineWindow(room, since, left.pos, f, false, false);
        leave[room.id] = { timeline: batch(w, left.pos), state: { events: w.state.map(fmt) }, account_data: { events: [] } };
      }
    }

    const user = users.get(U);
    const accountData: BasicEvent[] = user
      ? [...user.accountData.entries()]
          .filter(([, v]) => since === null || v.pos > since)
          .map(([type, v]) => ({ type, content: clone(v.content) }))
      : [];

    const body: SyncResponse = {
      next_batch: `s${N}`,
      device_one_time_keys_count: { signed_curve25519: 0 },
      device_unused_fallback_key_types: [],
    };
    const hasRooms = Object.keys(join).length + Object.keys(invite).length + Object.keys(leave).length > 0;
    if (includeEmpty) {
      body.rooms = { join, invite, leave, knock: {} };
      body.account_data = { events: accountData };
      body.presence = { events: [] };
      body.to_device = { events: [] };
      body.device_lists = { changed: [], left: [] };
    } else {
      if (accountData.length) body.account_data = { events: accountData };
      if (hasRooms) {
        body.rooms = {};
        if (Object.keys(join).length) body.rooms.join = join;
        if (Object.keys(invite).length) body.rooms.invite = invite;
        if (Object.keys(leave).length) body.rooms.leave = leave;
      }
    }
    return { body, empty: !hasRooms && accountData.length === 0 };
  }

  // -------------------------------------------------------------------------------------------
  // Request parsing helpers

  function jsonBody(c: Ctx, allowEmpty = false): JsonObject {
    if (c.body.length === 0 && allowEmpty) return {};
    let v: unknown;
    try {
      v = JSON.parse(c.body.toString('utf8'));
    } catch {
      throw new MatrixError(400, 'M_NOT_JSON', 'Content not JSON.');
    }
    if (!isObject(v)) throw new MatrixError(400, 'M_BAD_JSON', 'Content must be a JSON object.');
    return v;
  }

  function intParam(q: URLSearchParams, name: string, def: number): number {
    const v = q.get(name);
    if (v === null) return def;
    if (!/^\d{1,15}$/.test(v))
      throw new MatrixError(400, 'M_INVALID_PARAM', `Query parameter ${JSON.stringify(name)} must be a non-negative integer.`);
    return Number(v);
  }

  function boolParam(q: URLSearchParams, name: string, def: boolean): boolean {
    const v = q.get(name);
    if (v === null) return def;
    if (v !== 'true' && v !== 'false')
      throw new MatrixError(400, 'M_INVALID_PARAM', `Boolean query parameter ${JSON.stringify(name)} must be one of ['true', 'false']`);
    return v === 'true';
  }

  function roomFromParam(roomId: string): Room {
    if (!ROOM_ID.test(roomId)) throw new MatrixError(400, 'M_INVALID_PARAM', `Expected room ID, got ${JSON.stringify(roomId)}`);
    const r = rooms.get(roomId);
    if (!r) throw new MatrixError(404, 'M_NOT_FOUND', 'Unknown room');
    return r;
  }

  function requireJoined(room: Room, userId: string): void {
    if (currentMembership(room, userId) !== 'join') {
      throw new MatrixError(403, 'M_FORBIDDEN', `User ${userId} not in room ${room.id}`);
    }
  }

  function sameUser(c: Ctx, userId: string, what: string): void {
    if (userId !== c.session!.userId) throw new MatrixError(403, 'M_FORBIDDEN', `Cannot ${what} for other users`);
  }

  const stringList = (v: unknown): v is string[] => Array.isArray(v) && v.every((x) => typeof x === 'string');

  function parseFilter(json: unknown): SyncFilter {
    const bad = (msg: string): MatrixError => new MatrixError(400, 'M_BAD_JSON', `Invalid filter: ${msg}`);
    if (!isObject(json)) throw bad('not an object');
    const room = json.room ?? {};
    if (!isObject(room)) throw bad('room must be an object');
    const timeline = room.timeline ?? {};
    const state = room.state ?? {};
    if (!isObject(timeline)) throw bad('room.timeline must be an object');
    if (!isObject(state)) throw bad('room.state must be an object');
    const f: SyncFilter = { limit: defaultLimit, lazy: state.lazy_load_members === true };
    if (timeline.limit !== undefined) {
      if (typeof timeline.limit !== 'number' || !Number.isFinite(timeline.limit)) throw bad('room.timeline.limit must be a number');
      f.limit = Math.min(Math.max(0, Math.floor(timeline.limit)), MAX_TIMELINE_LIMIT);
    }
    for (const [key, field] of [
      ['types', 'types'],
      ['not_types', 'notTypes'],
      ['senders', 'senders'],
      ['not_senders', 'notSenders'],
    ] as const) {
      const v = timeline[key];
      if (v === undefined) continue;
      if (!stringList(v)) throw bad(`room.timeline.${key} must be an array of strings`);
      f[field] = v;
    }
    return f;
  }

  // -------------------------------------------------------------------------------------------
  // Handlers

  function handleSync(c: Ctx): Reply | undefined {
    const q = c.query;
    const session = c.session!;
    if (q.has('from')) throw new MatrixError(400, 'M_UNKNOWN', "'from' is not a valid query parameter. Did you mean 'since'?");
    const timeout = Math.min(intParam(q, 'timeout', 0), maxSyncTimeout);
    const presence = q.get('set_presence');
    if (presence !== null && !['offline', 'online', 'unavailable'].includes(presence)) {
      throw new MatrixError(400, 'M_INVALID_PARAM', "Query parameter \"set_presence\" must be one of ['offline', 'online', 'unavailable']");
    }
    const fullState = boolParam(q, 'full_state', false);
    const filterParam = q.get('filter');
    let filter: SyncFilter = { limit: defaultLimit, lazy: false };
    if (filterParam !== null) {
      if (filterParam.startsWith('{')) {
        let json: unknown;
        try {
          json = JSON.parse(filterParam);
        } catch {
          throw new MatrixError(400, 'M_NOT_JSON', 'Invalid filter JSON');
        }
        filter = parseFilter(json);
      } else {
        const stored = /^\d{1,9}$/.test(filterParam) ? users.get(session.userId)?.filters[Number(filterParam)] : undefined;
        if (!stored) throw new MatrixError(400, 'M_INVALID_PARAM', 'No such filter');
        filter = parseFilter(stored);
      }
    }
    const sinceParam = q.get('since');
    let since: number | null = null;
    if (sinceParam !== null) {
      const m = /^s(\d{1,15})$/.exec(sinceParam);
      if (!m) throw new MatrixError(400, 'M_UNKNOWN', 'Invalid stream token');
      since = Math.min(Number(m[1]), streamPos);
    }
    const first = buildSync(session, since, fullState, filter);
    if (since === null || fullState || timeout === 0 || !first.empty) return { status: 200, json: first.body };

    const p: PendingSync = {
      session,
      since,
      fullState,
      filter,
      res: c.res,
      timer: setTimeout(() => {
        const r = buildSync(session, since, fullState, filter);
        if (r.empty) r.body.next_batch = `s${since}`;
        finishPending(p, r.body);
      }, timeout),
    };
    pending.add(p);
    c.res.on('close', () => {
      clearTimeout(p.timer);
      pending.delete(p);
    });
    return undefined;
  }

  function handleSend(c: Ctx): Reply {
    const s = c.session!;
    const { roomId, eventType, txnId } = c.params as { roomId: string; eventType: string; txnId: string };
    const key = [s.userId, s.deviceId, roomId, eventType, txnId].join('\u0000');
    const prior = txns.get(key);
    if (prior !== undefined) return { status: 200, json: { event_id: prior } };
    const content = jsonBody(c);
    const room = roomFromParam(roomId);
    requireJoined(room, s.userId);
    if (Buffer.byteLength(eventType, 'utf8') > 255) throw new MatrixError(413, 'M_TOO_LARGE', "'type' too large");
    if (pduBytes(room, eventType, s.userId, content) > MAX_PDU_BYTES) throw new MatrixError(413, 'M_TOO_LARGE', 'event too large');
    // Synapse hashes the event as UTF-8: a lone surrogate (a "\ud83d" escape in the JSON) raises
    // UnicodeEncodeError ("surrogates not allowed") and the client gets a bare 500.
    if (hasLoneSurrogate(content)) throw new MatrixError(500, 'M_UNKNOWN', 'Internal server error');
    const ev = append(room, { type: eventType, sender: s.userId, content, txn: { userId: s.userId, deviceId: s.deviceId, txnId } });
    txns.set(key, ev.eventId);
    if (s.userId === botUserId) {
      sent.push({
        roomId,
        type: eventType,
        txnId,
        content: clone(content),
        eventId: ev.eventId,
        sender: s.userId,
        deviceId: s.deviceId,
        at: Date.now(),
      });
    }
    changed();
    return { status: 200, json: { event_id: ev.eventId } };
  }

  function setTypingState(room: Room, userId: string, typing: boolean, timeout: number): void {
    const had = room.typing.get(userId);
    if (had) clearTimeout(had);
    if (typing) {
      const t = setTimeout(() => {
        if (room.typing.get(userId) === t) {
          room.typing.delete(userId);
          room.typingPos = ++streamPos;
          changed();
        }
      }, timeout);
      t.unref();
      room.typing.set(userId, t);
      if (had) return; // already typing: no new notification (Synapse)
    } else {
      if (!had) return;
      room.typing.delete(userId);
    }
    room.typingPos = ++streamPos;
    changed();
  }

  function handleTyping(c: Ctx): Reply {
    const s = c.session!;
    const { roomId, userId } = c.params as { roomId: string; userId: string };
    if (!USER_ID.test(userId)) throw new MatrixError(400, 'M_INVALID_PARAM', `Invalid user ID: ${JSON.stringify(userId)}`);
    const content = jsonBody(c);
    const room = roomFromParam(roomId);
    if (!userId.endsWith(`:${serverName}`)) throw new MatrixError(400, 'M_UNKNOWN', 'User is not hosted on this homeserver');
    if (userId !== s.userId) throw new MatrixError(400, 'M_FORBIDDEN', "Cannot set another user's typing state");
    if (typeof content.typing !== 'boolean') throw new MatrixError(400, 'M_BAD_JSON', "'typing' must be a boolean");
    if (content.timeout !== undefined && !Number.isSafeInteger(content.timeout))
      throw new MatrixError(400, 'M_BAD_JSON', "'timeout' must be an integer");
    requireJoined(room, s.userId);
    const timeout = content.timeout as number | undefined;
    typingLog.push({ roomId, userId, typing: content.typing, ...(timeout !== undefined ? { timeout } : {}), at: Date.now() });
    setTypingState(room, userId, content.typing, Math.max(0, Math.min(timeout ?? 30_000, MAX_TYPING_TIMEOUT)));
    return { status: 200, json: {} };
  }

  function storeReceipt(room: Room, userId: string, type: string, eventId: string, via: ReceiptRecord['via'], threadId?: string): void {
    const target = eventsById.get(eventId);
    const known = !!target && target.roomId === room.id;
    receiptLog.push({
      roomId: room.id,
      userId,
      receiptType: type,
      eventId,
      ...(threadId !== undefined ? { threadId } : {}),
      known,
      via,
      at: Date.now(),
    });
    if (!known) return;
    if (type === 'm.fully_read') {
      const m = room.accountData.get(userId) ?? new Map<string, { content: JsonObject; pos: number }>();
      m.set('m.fully_read', { content: { event_id: eventId }, pos: ++streamPos });
      room.accountData.set(userId, m);
    } else {
      room.receipts.push({ pos: ++streamPos, userId, type, eventId, ts: Date.now(), ...(threadId !== undefined ? { threadId } : {}) });
    }
    changed();
  }

  function handleReceipt(c: Ctx): Reply {
    const s = c.session!;
    const { roomId, receiptType, eventId } = c.params as { roomId: string; receiptType: string; eventId: string };
    if (!ROOM_ID.test(roomId) || !eventId.startsWith('$'))
      throw new MatrixError(400, 'M_INVALID_PARAM', 'A valid room ID and event ID must be specified');
    if (!RECEIPT_TYPES.includes(receiptType))
      throw new MatrixError(400, 'M_INVALID_PARAM', `Receipt type must be ${RECEIPT_TYPES.join(', ')}`);
    const body = jsonBody(c);
    let threadId: string | undefined;
    if ('thread_id' in body) {
      if (typeof body.thread_id !== 'string' || body.thread_id === '')
        throw new MatrixError(400, 'M_INVALID_PARAM', 'thread_id field must be a non-empty string');
      if (receiptType === 'm.fully_read')
        throw new MatrixError(400, 'M_INVALID_PARAM', 'thread_id is not compatible with m.fully_read receipts.');
      threadId = body.thread_id;
    }
    const room = roomFromParam(roomId);
    requireJoined(room, s.userId);
    storeReceipt(room, s.userId, receiptType, eventId, 'receipt', threadId);
    return { status: 200, json: {} };
  }

  function handleReadMarkers(c: Ctx): Reply {
    const s = c.session!;
    const body = jsonBody(c);
    const room = roomFromParam(c.params.roomId!);
    requireJoined(room, s.userId);
    for (const type of ['m.fully_read', 'm.read', 'm.read.private']) {
      const v = body[type];
      if (v === undefined) continue;
      if (typeof v !== 'string' || !v.startsWith('$')) throw new MatrixError(400, 'M_INVALID_PARAM', `${type} must be an event ID`);
      storeReceipt(room, s.userId, type, v, 'read_markers');
    }
    return { status: 200, json: {} };
  }

  function joinAs(room: Room, userId: string): StoredEvent {
    const m = currentMembership(room, userId);
    if (m === 'join') return membershipEventAt(room, userId, streamPos)!;
    if (m === 'ban') throw new MatrixError(403, 'M_FORBIDDEN', 'You are banned from this room');
    const rule = stateContent(room, 'm.room.join_rules')?.join_rule;
    if (m !== 'invite' && rule !== 'public') throw new MatrixError(403, 'M_FORBIDDEN', 'You are not invited to this room.');
    const ev = append(room, { type: 'm.room.member', sender: userId, stateKey: userId, content: memberContent(userId, 'join') });
    changed();
    return ev;
  }

  function leaveAs(room: Room, userId: string, sender: string, reason?: string): StoredEvent {
    const m = currentMembership(room, userId);
    if (m === 'leave') return membershipEventAt(room, userId, streamPos)!;
    if (m !== 'join' && m !== 'invite') throw new MatrixError(403, 'M_FORBIDDEN', `User ${userId} not in room ${room.id}`);
    const ev = append(room, {
      type: 'm.room.member',
      sender,
      stateKey: userId,
      content: memberContent(userId, 'leave', reason !== undefined ? { reason } : {}),
    });
    const t = room.typing.get(userId);
    if (t) {
      clearTimeout(t);
      room.typing.delete(userId);
      room.typingPos = ++streamPos;
    }
    changed();
    return ev;
  }

  function handleJoin(c: Ctx): Reply {
    const s = c.session!;
    const id = c.params.roomIdOrAlias ?? c.params.roomId!;
    jsonBody(c, true);
    let roomId: string;
    if (ALIAS.test(id)) {
      const r = aliases.get(id);
      if (!r) throw new MatrixError(404, 'M_NOT_FOUND', `Room alias ${id} not found`);
      roomId = r;
    } else if (ROOM_ID.test(id)) {
      roomId = id;
    } else {
      throw new MatrixError(400, 'M_UNKNOWN', `${id} was not legal room ID or room alias`);
    }
    const room = rooms.get(roomId);
    if (!room) throw new MatrixError(404, 'M_NOT_FOUND', 'No known servers');
    joinAs(room, s.userId);
    return { status: 200, json: { room_id: roomId } };
  }

  function handleLeave(c: Ctx): Reply {
    const s = c.session!;
    const body = jsonBody(c, true);
    const room = roomFromParam(c.params.roomId!);
    leaveAs(room, s.userId, s.userId, typeof body.reason === 'string' ? body.reason : undefined);
    return { status: 200, json: {} };
  }

  function handleMessages(c: Ctx): Reply {
    const s = c.session!;
    const room = roomFromParam(c.params.roomId!);
    requireJoined(room, s.userId);
    const q = c.query;
    const dir = q.get('dir') ?? 'f';
    if (dir !== 'f' && dir !== 'b') throw new MatrixError(400, 'M_INVALID_PARAM', "Query parameter \"dir\" must be one of ['b', 'f']");
    const limit = Math.min(intParam(q, 'limit', 10), 1000);
    const tok = (name: string): number | undefined => {
      const v = q.get(name);
      if (v === null) return undefined;
      const m = /^[st](\d{1,15})$/.exec(v);
      if (!m) throw new MatrixError(400, 'M_INVALID_PARAM', `Invalid ${name} token`);
      return Number(m[1]);
    };
    const from = tok('from') ?? (dir === 'b' ? streamPos : 0);
    const to = tok('to');
    let chunk: StoredEvent[];
    if (dir === 'b') {
      chunk = room.events
        .filter((e) => e.pos <= from && (to === undefined || e.pos > to))
        .reverse()
        .slice(0, limit);
    } else {
      chunk = room.events.filter((e) => e.pos > from && (to === undefined || e.pos <= to)).slice(0, limit);
    }
    const now = Date.now();
    const last = chunk[chunk.length - 1];
    return {
      status: 200,
      json: {
        start: `t${from}`,
        ...(last ? { end: `t${dir === 'b' ? last.pos - 1 : last.pos}` } : {}),
        chunk: chunk.map((e) => clientEvent(e, s, now, true)),
      },
    };
  }

  function accountDataHandler(c: Ctx): Reply {
    const { userId, type } = c.params as { userId: string; type: string };
    const rec = users.get(c.session!.userId)!;
    if (c.method === 'GET') {
      sameUser(c, userId, 'get account data');
      const v = rec.accountData.get(type);
      if (!v) throw new MatrixError(404, 'M_NOT_FOUND', 'Account data not found');
      return { status: 200, json: clone(v.content) };
    }
    sameUser(c, userId, 'add account data');
    const content = jsonBody(c);
    rec.accountData.set(type, { content, pos: ++streamPos });
    changed();
    return { status: 200, json: {} };
  }

  const routes: Route[] = [
    {
      method: 'GET',
      path: ['account', 'whoami'],
      auth: 'required',
      handle: (c) => ({ status: 200, json: { user_id: c.session!.userId, device_id: c.session!.deviceId, is_guest: false } }),
    },
    { method: 'GET', path: ['sync'], auth: 'required', handle: handleSync },
    {
      method: 'POST',
      path: ['user', ':userId', 'filter'],
      auth: 'required',
      handle: (c) => {
        sameUser(c, c.params.userId!, 'create filters');
        const body = jsonBody(c);
        parseFilter(body);
        const rec = users.get(c.session!.userId)!;
        rec.filters.push(clone(body));
        return { status: 200, json: { filter_id: String(rec.filters.length - 1) } };
      },
    },
    {
      method: 'GET',
      path: ['user', ':userId', 'filter', ':filterId'],
      auth: 'required',
      handle: (c) => {
        sameUser(c, c.params.userId!, 'get filters');
        const id = c.params.filterId!;
        if (!/^\d{1,9}$/.test(id)) throw new MatrixError(400, 'M_UNKNOWN', 'Invalid filter_id');
        const f = users.get(c.session!.userId)!.filters[Number(id)];
        if (!f) throw new MatrixError(404, 'M_NOT_FOUND', 'No such filter');
        return { status: 200, json: clone(f) };
      },
    },
    { method: 'GET', path: ['user', ':userId', 'account_data', ':type'], auth: 'required', handle: accountDataHandler },
    { method: 'PUT', path: ['user', ':userId', 'account_data', ':type'], auth: 'required', handle: accountDataHandler },
    { method: 'PUT', path: ['rooms', ':roomId', 'send', ':eventType', ':txnId'], auth: 'required', handle: handleSend },
    { method: 'PUT', path: ['rooms', ':roomId', 'typing', ':userId'], auth: 'required', handle: handleTyping },
    { method: 'POST', path: ['rooms', ':roomId', 'receipt', ':receiptType', ':eventId'], auth: 'required', handle: handleReceipt },
    { method: 'POST', path: ['rooms', ':roomId', 'read_markers'], auth: 'required', handle: handleReadMarkers },
    { method: 'POST', path: ['join', ':roomIdOrAlias'], auth: 'required', handle: handleJoin },
    { method: 'POST', path: ['rooms', ':roomId', 'join'], auth: 'required', handle: handleJoin },
    { method: 'POST', path: ['rooms', ':roomId', 'leave'], auth: 'required', handle: handleLeave },
    {
      method: 'GET',
      path: ['joined_rooms'],
      auth: 'required',
      handle: (c) => ({
        status: 200,
        json: { joined_rooms: [...rooms.values()].filter((r) => currentMembership(r, c.session!.userId) === 'join').map((r) => r.id) },
      }),
    },
    {
      method: 'GET',
      path: ['rooms', ':roomId', 'joined_members'],
      auth: 'required',
      handle: (c) => {
        const room = roomFromParam(c.params.roomId!);
        requireJoined(room, c.session!.userId);
        const joined: Record<string, JsonObject> = {};
        for (const [uid] of room.memberships) {
          if (currentMembership(room, uid) !== 'join') continue;
          const content = stateContent(room, 'm.room.member', uid) ?? {};
          joined[uid] = { display_name: content.displayname ?? null, avatar_url: content.avatar_url ?? null };
        }
        return { status: 200, json: { joined } };
      },
    },
    {
      method: 'GET',
      path: ['rooms', ':roomId', 'state'],
      auth: 'required',
      handle: (c) => {
        const room = roomFromParam(c.params.roomId!);
        requireJoined(room, c.session!.userId);
        const now = Date.now();
        return {
          status: 200,
          json: [...room.state.values()].sort((a, b) => a.pos - b.pos).map((e) => clientEvent(e, c.session, now, true)),
        };
      },
    },
    ...(['', ':stateKey'] as const).map((k): Route => ({
      method: 'GET',
      path: ['rooms', ':roomId', 'state', ':eventType', ...(k ? [k] : [])],
      auth: 'required',
      handle: (c) => {
        const room = roomFromParam(c.params.roomId!);
        requireJoined(room, c.session!.userId);
        const ev = room.state.get(stateKeyOf(c.params.eventType!, c.params.stateKey ?? ''));
        if (!ev) throw new MatrixError(404, 'M_NOT_FOUND', 'Event not found.');
        if (c.query.get('format') === 'event') return { status: 200, json: clientEvent(ev, c.session, Date.now(), true) };
        return { status: 200, json: clone(ev.content) };
      },
    })),
    {
      method: 'GET',
      path: ['rooms', ':roomId', 'event', ':eventId'],
      auth: 'required',
      handle: (c) => {
        const room = roomFromParam(c.params.roomId!);
        requireJoined(room, c.session!.userId);
        const ev = eventsById.get(c.params.eventId!);
        if (!ev || ev.roomId !== room.id) throw new MatrixError(404, 'M_NOT_FOUND', 'Event not found.');
        return { status: 200, json: clientEvent(ev, c.session, Date.now(), true) };
      },
    },
    { method: 'GET', path: ['rooms', ':roomId', 'messages'], auth: 'required', handle: handleMessages },
    ...(['', 'displayname'] as const).map((field): Route => ({
      method: 'GET',
      path: ['profile', ':userId', ...(field ? [field] : [])],
      auth: 'optional',
      handle: (c) => {
        const u = users.get(c.params.userId!);
        if (!u) throw new MatrixError(404, 'M_NOT_FOUND', 'Profile was not found');
        return { status: 200, json: u.displayName !== null ? { displayname: u.displayName } : {} };
      },
    })),
  ];

  // -------------------------------------------------------------------------------------------
  // HTTP

  const CORS = {
    'Access-Control-Allow-Origin': '*',
    'Access-Control-Allow-Methods': 'GET, POST, PUT, DELETE, OPTIONS',
    'Access-Control-Allow-Headers': 'X-Requested-With, Content-Type, Authorization',
  };

  function sendJson(res: http.ServerResponse, status: number, json: unknown, headers: Record<string, string> = {}): void {
    if (res.headersSent || res.destroyed) return;
    const body = Buffer.from(JSON.stringify(json));
    res.writeHead(status, { ...CORS, ...headers, 'Content-Type': 'application/json', 'Content-Length': String(body.length) });
    res.end(body);
  }

  function sendError(res: http.ServerResponse, e: MatrixError): void {
    sendJson(res, e.status, { errcode: e.errcode, error: e.message, ...e.extra }, e.headers);
  }

  function authenticate(req: http.IncomingMessage, query: URLSearchParams): Session {
    const header = req.headers.authorization;
    const queryTokens = query.getAll('access_token');
    let token: string;
    if (header !== undefined) {
      if (queryTokens.length > 0)
        throw new MatrixError(401, 'M_MISSING_TOKEN', 'Mixing Authorization headers and access_token query parameters.');
      const parts = header.split(' ');
      if (parts.length !== 2 || parts[0] !== 'Bearer' || parts[1] === '')
        throw new MatrixError(401, 'M_MISSING_TOKEN', 'Invalid Authorization header.');
      token = parts[1]!;
    } else {
      if (queryTokens.length === 0 || queryTokens[0] === '') throw new MatrixError(401, 'M_MISSING_TOKEN', 'Missing access token');
      token = queryTokens[0]!;
    }
    const s = tokens.get(token);
    if (!s) throw new MatrixError(401, 'M_UNKNOWN_TOKEN', 'Unrecognised access token', { soft_logout: false });
    if (s.revoked) {
      throw new MatrixError(401, 'M_UNKNOWN_TOKEN', s.softLogout ? 'Access token has expired' : 'Unrecognised access token', {
        soft_logout: s.softLogout,
      });
    }
    return s;
  }

  function matchRoute(segs: string[]): { routes: Array<{ route: Route; params: Record<string, string> }> } {
    const out: Array<{ route: Route; params: Record<string, string> }> = [];
    for (const route of routes) {
      if (route.path.length !== segs.length) continue;
      const params: Record<string, string> = {};
      let ok = true;
      for (let i = 0; i < segs.length; i++) {
        const p = route.path[i]!;
        const s = segs[i]!;
        if (p.startsWith(':')) params[p.slice(1)] = s;
        else if (p !== s) {
          ok = false;
          break;
        }
      }
      if (ok) out.push({ route, params });
    }
    return { routes: out };
  }

  function failureFor(path: string, method: string): FailRule | undefined {
    const rule = failures.find(
      (f) =>
        (f.method === undefined || f.method.toUpperCase() === method) &&
        (typeof f.pattern === 'string' ? path.includes(f.pattern) : f.pattern.test(path)),
    );
    if (!rule) return undefined;
    rule.remaining--;
    if (rule.remaining <= 0) failures.splice(failures.indexOf(rule), 1);
    return rule;
  }

  function dispatch(req: http.IncomingMessage, res: http.ServerResponse, body: Buffer, tooLarge: boolean, record: RequestRecord): void {
    const method = req.method ?? 'GET';
    const url = new URL(req.url ?? '/', 'http://fake');
    const rawSegs = url.pathname.split('/').slice(1);
    let segs: string[];
    try {
      segs = rawSegs.map((s) => decodeURIComponent(s));
    } catch {
      throw new MatrixError(400, 'M_INVALID_PARAM', 'Invalid percent-encoding in path');
    }
    record.path = `/${segs.join('/')}`;
    record.query = url.search;
    if (tooLarge)
      throw new MatrixError(
        413,
        'M_TOO_LARGE',
        segs[1] === 'media' ? `Upload request body is too large (>${maxUpload})` : `Request content is too large (>${maxBody})`,
      );
    if (method === 'OPTIONS') {
      res.writeHead(204, CORS);
      res.end();
      return;
    }

    if (segs[0] === '_matrix' && (segs[1] === 'media' || (segs[1] === 'client' && segs[2] === 'v1' && segs[3] === 'media'))) {
      const rule = failureFor(record.path, method);
      if (rule) return sendJson(res, rule.status, rule.body, rule.headers);
      return handleMedia(req, res, method, segs, url.searchParams, body, record);
    }
    let candidates: Array<{ route: Route; params: Record<string, string> }> = [];
    if (segs.length === 3 && segs[0] === '_matrix' && segs[1] === 'client' && segs[2] === 'versions') {
      if (method !== 'GET') throw new MatrixError(405, 'M_UNRECOGNIZED', 'Unrecognized request');
      const rule = failureFor(record.path, method);
      if (rule) return sendJson(res, rule.status, rule.body, rule.headers);
      return sendJson(res, 200, { versions: VERSIONS, unstable_features: {} });
    }
    if (segs.length > 3 && segs[0] === '_matrix' && segs[1] === 'client' && (segs[2] === 'v3' || segs[2] === 'r0')) {
      candidates = matchRoute(segs.slice(3)).routes;
    }
    if (candidates.length === 0) throw new MatrixError(404, 'M_UNRECOGNIZED', 'Unrecognized request');
    const hit = candidates.find((c) => c.route.method === method);
    if (!hit) throw new MatrixError(405, 'M_UNRECOGNIZED', 'Unrecognized request');

    const ctx: Ctx = { req, res, method, path: record.path, query: url.searchParams, params: hit.params, body };
    if (
      hit.route.auth === 'required' ||
      (hit.route.auth === 'optional' && (req.headers.authorization !== undefined || url.searchParams.has('access_token')))
    ) {
      ctx.session = authenticate(req, url.searchParams);
      record.userId = ctx.session.userId;
    }
    const rule = failureFor(record.path, method);
    if (rule) return sendJson(res, rule.status, rule.body, rule.headers);
    const reply = hit.route.handle(ctx);
    if (reply) sendJson(res, reply.status, reply.json, reply.headers);
  }

  /** The content repository: upload, config, downloads (authenticated v1 and legacy v3). */
  function handleMedia(
    req: http.IncomingMessage,
    res: http.ServerResponse,
    method: string,
    segs: string[],
    query: URLSearchParams,
    body: Buffer,
    record: RequestRecord,
  ): void {
    const v1 = segs[1] === 'client';
    const rest = v1 ? segs.slice(4) : segs.slice(3);
    if (v1 && !authenticatedMedia) throw new MatrixError(404, 'M_UNRECOGNIZED', 'Unrecognized request');
    if (!v1 && segs[2] !== 'v3') throw new MatrixError(404, 'M_UNRECOGNIZED', 'Unrecognized request');
    const session = v1 || rest[0] === 'upload' ? authenticate(req, query) : undefined;
    if (session) record.userId = session.userId;
    if (rest[0] === 'upload' && !v1 && rest.length === 1) {
      if (method !== 'POST') throw new MatrixError(405, 'M_UNRECOGNIZED', 'Unrecognized request');
      const type = req.headers['content-type'];
      const mxc = storeMedia(body, type, query.get('filename') ?? undefined, session!.userId);
      return sendJson(res, 200, { content_uri: mxc });
    }
    if (rest[0] === 'config' && rest.length === 1 && v1) {
      if (method !== 'GET') throw new MatrixError(405, 'M_UNRECOGNIZED', 'Unrecognized request');
      return sendJson(res, 200, { 'm.upload.size': maxUpload });
    }
    if (rest[0] === 'download' && (rest.length === 3 || rest.length === 4)) {
      if (method !== 'GET') throw new MatrixError(405, 'M_UNRECOGNIZED', 'Unrecognized request');
      const mxc = `mxc://${rest[1]}/${rest[2]}`;
      const item = media.get(mxc);
      // Synapse with authenticated media on: what was uploaded since is not served unauthenticated.
      if (!item || (!v1 && authenticatedMedia)) throw new MatrixError(404, 'M_NOT_FOUND', 'Not found');
      mediaDownloads.push({ mxc, endpoint: v1 ? 'v1' : 'v3', ...(session ? { userId: session.userId } : {}) });
      const headers: Record<string, string> = {
        'Content-Type': item.contentType ?? 'application/octet-stream',
        'Content-Disposition': `attachment; filename*=utf-8''${encodeURIComponent(item.filename ?? 'file')}`,
      };
      if (!opts.chunkedMedia) {
        res.writeHead(200, { ...headers, 'Content-Length': String(item.bytes.length) });
        return void res.end(item.bytes);
      }
      res.writeHead(200, headers);
      let at = 0;
      const more = (): void => {
        while (at < item.bytes.length && !res.destroyed) {
          if (!res.write(item.bytes.subarray(at, (at += 64 * 1024)))) return void res.once('drain', more);
        }
        if (!res.destroyed) res.end();
      };
      return more();
    }
    throw new MatrixError(404, 'M_UNRECOGNIZED', 'Unrecognized request');
  }

  const server = http.createServer((req, res) => {
    const limit = (req.url ?? '').startsWith('/_matrix/media/') ? maxUpload : maxBody;
    const record: RequestRecord = { method: req.method ?? 'GET', path: '', query: '', status: 0, at: Date.now() };
    res.on('finish', () => {
      record.status = res.statusCode;
      requestLog.push(record);
    });
    res.on('error', () => {});
    req.on('error', () => {});
    const chunks: Buffer[] = [];
    let size = 0;
    let tooLarge = Number(req.headers['content-length'] ?? 0) > limit;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        tooLarge = true;
        chunks.length = 0;
        // Drain what a client sends after the limit (so it reads our 413), up to a bound.
        if (size > Math.max(limit * 16, 64 * 1024 * 1024)) req.destroy();
        return;
      }
      if (!tooLarge) chunks.push(chunk);
    });
    req.on('end', () => {
      try {
        dispatch(req, res, Buffer.concat(chunks), tooLarge, record);
      } catch (e) {
        if (e instanceof MatrixError) sendError(res, e);
        else sendJson(res, 500, { errcode: 'M_UNKNOWN', error: `Internal server error: ${(e as Error).message}` });
      }
    });
  });
  server.on('connection', (s: Socket) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, opts.host ?? '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  const host = opts.host ?? '127.0.0.1';
  const url = `http://${host.includes(':') ? `[${host}]` : host}:${port}`;

  // -------------------------------------------------------------------------------------------
  // Test-facing API

  function requireMemberForInjection(room: Room, userId: string): void {
    if (currentMembership(room, userId) !== 'join') throw new Error(`fake matrix: ${userId} is not joined to ${room.id}`);
  }

  function injected(ev: StoredEvent): ClientEvent {
    changed();
    return clientEvent(ev, undefined, Date.now(), true);
  }

  function inviteEvent(room: Room, from: string, target: string, direct: boolean): StoredEvent {
    ensureUser(target);
    return append(room, {
      type: 'm.room.member',
      sender: from,
      stateKey: target,
      content: memberContent(target, 'invite', direct ? { is_direct: true } : {}),
    });
  }

  const api: FakeMatrix = {
    url,
    serverName,
    botUserId,
    botAccessToken,
    botDeviceId,
    sent,
    typing: typingLog,
    receipts: receiptLog,
    requests: requestLog,
    repliesIn: (roomId) => sent.filter((s) => s.roomId === roomId && s.type === 'm.room.message'),
    uploadMedia: (data, o = {}) => storeMedia(data, o.contentType, o.filename),
    media,
    mediaDownloads,

    addUser,
    user: (userId) => {
      const u = users.get(userId);
      return u ? publicUser(u) : undefined;
    },
    revokeToken(token, o = {}) {
      const s = tokens.get(token);
      if (!s) throw new Error(`fake matrix: unknown token ${token}`);
      s.revoked = true;
      s.softLogout = o.softLogout ?? false;
    },

    createRoom(o = {}) {
      const people = (o.members ?? []).filter((m) => m !== botUserId);
      for (const m of people) ensureUser(m);
      const creator = o.creator ?? people[0] ?? botUserId;
      ensureUser(creator);
      if (creator === botUserId && (o.invite || o.withoutBot))
        throw new Error('fake matrix: invite or withoutBot needs another member to create the room');
      const roomId = o.roomId ?? `!${randomLetters(18)}:${serverName}`;
      if (!ROOM_ID.test(roomId) || rooms.has(roomId)) throw new Error(`fake matrix: bad or duplicate room id ${roomId}`);
      if (o.alias !== undefined && (!ALIAS.test(o.alias) || aliases.has(o.alias)))
        throw new Error(`fake matrix: bad or duplicate alias ${o.alias}`);
      const room: Room = {
        id: roomId,
        events: [],
        state: new Map(),
        memberships: new Map(),
        typing: new Map(),
        typingPos: -1,
        receipts: [],
        accountData: new Map(),
        direct: o.direct ?? false,
      };
      rooms.set(roomId, room);
      const st = (type: string, content: JsonObject, stateKey = ''): StoredEvent =>
        append(room, { type, sender: creator, stateKey, content });
      st('m.room.create', { creator, room_version: '10' });
      append(room, { type: 'm.room.member', sender: creator, stateKey: creator, content: memberContent(creator, 'join') });
      st('m.room.power_levels', {
        users: Object.fromEntries([creator, ...(o.direct ? people.filter((p) => p !== creator) : [])].map((u) => [u, 100])),
        users_default: 0,
        events: {
          'm.room.name': 50,
          'm.room.power_levels': 100,
          'm.room.history_visibility': 100,
          'm.room.canonical_alias': 50,
          'm.room.avatar': 50,
          'm.room.tombstone': 100,
          'm.room.server_acl': 100,
          'm.room.encryption': 100,
        },
        events_default: 0,
        state_default: 50,
        ban: 50,
        kick: 50,
        redact: 50,
        invite: 0,
        historical: 100,
      });
      if (o.alias !== undefined) {
        aliases.set(o.alias, roomId);
        st('m.room.canonical_alias', { alias: o.alias });
      }
      st('m.room.join_rules', { join_rule: o.joinRule ?? 'invite' });
      st('m.room.history_visibility', { history_visibility: 'shared' });
      st('m.room.guest_access', { guest_access: 'can_join' });
      if (o.encrypted) st('m.room.encryption', { algorithm: 'm.megolm.v1.aes-sha2' });
      if (o.name !== undefined) st('m.room.name', { name: o.name });
      if (o.topic !== undefined) st('m.room.topic', { topic: o.topic });
      for (const m of o.withoutBot ? people : [...people, botUserId]) {
        if (m === creator) continue;
        inviteEvent(room, creator, m, room.direct);
        if (m === botUserId && o.invite) continue;
        append(room, { type: 'm.room.member', sender: m, stateKey: m, content: memberContent(m, 'join') });
      }
      changed();
      return roomId;
    },

    sendText(roomId, sender, body, o = {}) {
      const room = getRoom(roomId);
      requireMemberForInjection(room, sender);
      const content: JsonObject = { msgtype: o.msgtype ?? 'm.text', body };
      if (o.html !== undefined) {
        content.format = 'org.matrix.custom.html';
        content.formatted_body = o.html;
      }
      if (o.threadRoot !== undefined) {
        content['m.relates_to'] = {
          rel_type: 'm.thread',
          event_id: o.threadRoot,
          is_falling_back: o.replyTo === undefined,
          'm.in_reply_to': { event_id: o.replyTo ?? o.threadRoot },
        };
      } else if (o.replyTo !== undefined) {
        content['m.relates_to'] = { 'm.in_reply_to': { event_id: o.replyTo } };
      }
      if (o.mentions) content['m.mentions'] = { user_ids: o.mentions };
      Object.assign(content, o.content ?? {});
      return injected(append(room, { type: 'm.room.message', sender, content, ...(o.ts !== undefined ? { ts: o.ts } : {}) }));
    },

    sendRaw(roomId, e) {
      const room = getRoom(roomId);
      return injected(
        append(room, {
          type: e.type,
          sender: e.sender,
          content: e.content === undefined ? {} : clone(e.content),
          ...(e.state_key !== undefined ? { stateKey: e.state_key } : {}),
          ...(e.redacts !== undefined ? { redacts: e.redacts } : {}),
          ...(e.origin_server_ts !== undefined ? { ts: e.origin_server_ts } : {}),
          ...(e.event_id !== undefined ? { eventId: e.event_id } : {}),
          ...(e.unsigned !== undefined ? { extraUnsigned: clone(e.unsigned) } : {}),
        }),
      );
    },

    edit(roomId, sender, targetEventId, newBody, o = {}) {
      const room = getRoom(roomId);
      requireMemberForInjection(room, sender);
      const msgtype = o.msgtype ?? 'm.text';
      const fresh: JsonObject = { msgtype, body: newBody };
      const content: JsonObject = { msgtype, body: `* ${newBody}` };
      if (o.html !== undefined) {
        fresh.format = 'org.matrix.custom.html';
        fresh.formatted_body = o.html;
        content.format = 'org.matrix.custom.html';
        content.formatted_body = `* ${o.html}`;
      }
      content['m.new_content'] = fresh;
      content['m.relates_to'] = { rel_type: 'm.replace', event_id: targetEventId };
      return injected(append(room, { type: 'm.room.message', sender, content }));
    },

    invite(roomId, from, target = botUserId, o = {}) {
      const room = getRoom(roomId);
      requireMemberForInjection(room, from);
      const m = currentMembership(room, target);
      if (m === 'join' || m === 'invite' || m === 'ban') throw new Error(`fake matrix: ${target} is already ${m} in ${roomId}`);
      return injected(inviteEvent(room, from, target, o.direct ?? room.direct));
    },

    join(roomId, userId) {
      const room = getRoom(roomId);
      ensureUser(userId);
      const m = currentMembership(room, userId);
      if (m === 'join') throw new Error(`fake matrix: ${userId} is already joined to ${roomId}`);
      if (m === 'ban') throw new Error(`fake matrix: ${userId} is banned from ${roomId}`);
      return injected(append(room, { type: 'm.room.member', sender: userId, stateKey: userId, content: memberContent(userId, 'join') }));
    },

    leave(roomId, userId, reason) {
      const room = getRoom(roomId);
      const m = currentMembership(room, userId);
      if (m !== 'join' && m !== 'invite') throw new Error(`fake matrix: ${userId} is not in ${roomId}`);
      return clientEvent(leaveAs(room, userId, userId, reason), undefined, Date.now(), true);
    },

    setTyping(roomId, userId, typing, timeoutMs = 30_000) {
      const room = getRoom(roomId);
      requireMemberForInjection(room, userId);
      setTypingState(room, userId, typing, Math.min(timeoutMs, MAX_TYPING_TIMEOUT));
    },

    events(roomId) {
      const now = Date.now();
      return getRoom(roomId).events.map((e) => clientEvent(e, undefined, now, true));
    },
    members(roomId) {
      const room = getRoom(roomId);
      const out: Record<string, string> = {};
      for (const uid of room.memberships.keys()) out[uid] = currentMembership(room, uid) ?? 'leave';
      return out;
    },
    roomIds: () => [...rooms.keys()],
    currentToken: () => `s${streamPos}`,

    rateLimitNext(pattern, retryAfterMs, o = {}) {
      failures.push({
        pattern,
        ...(o.method !== undefined ? { method: o.method } : {}),
        remaining: o.count ?? 1,
        status: 429,
        body: { errcode: 'M_LIMIT_EXCEEDED', error: 'Too Many Requests', retry_after_ms: retryAfterMs },
        headers: { 'Retry-After': String(Math.ceil(retryAfterMs / 1000)) },
      });
    },
    failNext(pattern, e, o = {}) {
      failures.push({
        pattern,
        ...(o.method !== undefined ? { method: o.method } : {}),
        remaining: o.count ?? 1,
        status: e.status,
        body: { errcode: e.errcode, error: e.error ?? e.errcode, ...(e.extra ?? {}) },
        headers: e.headers ?? {},
      });
    },
    clearFailures() {
      failures.length = 0;
    },

    pendingSyncs: (userId) => [...pending].filter((p) => userId === undefined || p.session.userId === userId).length,

    async waitForPoll(timeoutMs = 5_000) {
      await api
        .waitFor(() => api.pendingSyncs(botUserId) > 0, timeoutMs)
        .catch(() => {
          throw new Error(`waitForPoll: the bot had no sync held open within ${timeoutMs} ms`);
        });
    },

    waitFor: <T>(pred: () => T | undefined | null | false | 0 | '', timeoutMs = 5_000): Promise<T> => pollUntil(pred, timeoutMs),

    async close() {
      if (closed) return;
      closed = true;
      const flushed: Array<Promise<void>> = [];
      for (const p of [...pending]) {
        const r = buildSync(p.session, p.since, p.fullState, p.filter);
        if (r.empty) r.body.next_batch = `s${p.since}`;
        finishPending(p, r.body);
        flushed.push(
          new Promise<void>((resolve) =>
            p.res.writableFinished || p.res.destroyed ? resolve() : p.res.once('close', resolve).once('finish', resolve),
          ),
        );
      }
      for (const room of rooms.values()) for (const t of room.typing.values()) clearTimeout(t);
      await Promise.race([Promise.all(flushed), new Promise((resolve) => setTimeout(resolve, 500).unref())]);
      server.closeAllConnections();
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  return api;
}
