/**
 * A fake of Slack that speaks its wire protocols, for tests of the Slack bridge: the Web API the
 * bridge calls, and both ways Slack delivers events to an app (Events API over HTTP, Socket
 * Mode over a WebSocket). Written from Slack's public documentation (docs.slack.dev / api.slack.com:
 * Web API basics, chat.postMessage, auth.test, apps.connections.open, assistant.threads.setStatus,
 * rate limits, the Events API and its retries, verifying requests from Slack, Socket Mode
 * implementation) and, for the exact frame shapes, the envelopes in slackapi's SDK test fixtures.
 *
 * Web API: `POST|GET /api/<method>` (other HTTP methods → 405, other paths → 404, empty bodies).
 * - Arguments as query parameters, an `application/x-www-form-urlencoded` body, or an
 *   `application/json` body (JSON wins over the query string). JSON values that are structures
 *   (`blocks`) may also come as JSON text in a form field. `multipart/form-data` is not supported
 *   (answers `invalid_form_data`).
 * - Token: `Authorization: Bearer <token>`, else a `token` form field or query parameter. As Slack
 *   documents, a `token` inside a JSON body is not read (JSON callers must use the header), so such
 *   a call is `not_authed`.
 * - Answers are HTTP 200 `application/json; charset=utf-8` with `{"ok":true,…}` or
 *   `{"ok":false,"error":"…"}`, in this order of checks: unknown method → HTTP 404
 *   `unknown_method`; unreadable body → `invalid_json` / `json_not_object` / `missing_post_type` /
 *   `invalid_post_type` / `invalid_form_data`; no token → `not_authed`; a token that is neither the
 *   bot nor the app-level token → `invalid_auth`; the wrong kind of token for the method →
 *   `not_allowed_token_type`; then an answer armed by the test (`rateLimitNext`: HTTP 429 with
 *   `Retry-After: <s>` and `{"ok":false,"error":"ratelimited"}`; `failNext`: ok:false with that
 *   error); then the method's own checks. A JSON body whose Content-Type has no charset gets
 *   `"warning":"missing_charset"` (+ `response_metadata.warnings`) on its answer, as Slack does.
 * - Bodies are bounded to 1 MiB: past it → HTTP 413 (empty body).
 *
 * Methods:
 * - `auth.test` (bot token) → `{ok, url, team, user, team_id, user_id, bot_id, is_enterprise_install}`.
 * - `chat.postMessage` (bot token): `channel` (a C/D/G id, or a U/W user id, which posts to the
 *   DM with that user: the answer's channel is `D…`), `text`, optional `thread_ts`, `mrkdwn`,
 *   `blocks`, `attachments`, `reply_broadcast`. Errors: `channel_not_found` (missing, malformed,
 *   or not in `opts.channels` when that is given), `no_text` (no text, blocks or attachments),
 *   `msg_too_long` (text over 40,000 characters; `longText: 'truncate'` truncates instead, which is
 *   what Slack's 2018 changelog says it does), `invalid_blocks`, `invalid_arguments` (a non-string
 *   text). → `{ok, channel, ts, message:{type:'message', user, text, ts, bot_id, app_id, team,
 *   bot_profile, thread_ts?, parent_user_id?, blocks?}}`. `ts` is unique and increasing
 *   ("1700000000.000100" shaped: the clock in microseconds, bumped by one on a collision).
 * - `apps.connections.open` (app-level xapp token only) → `{ok, url:"ws://HOST:PORT/link/?ticket=…&app_id=…"}`.
 *   Each ticket opens one connection.
 * - Files (docs.slack.dev: "Uploading files", files.getUploadURLExternal, files.completeUploadExternal,
 *   "File object"): `files.getUploadURLExternal` (bot token; `filename`, `length` > 0, both required
 *   else `invalid_arguments`; `length` over `maxFileBytes` → `file_upload_size_restricted`) →
 *   `{ok, upload_url, file_id}`; `POST <upload_url>` with the bytes (raw, or multipart form with one
 *   file part) → HTTP 200 `text/plain` "OK - <length>" (no token needed: the URL is the credential;
 *   an unknown URL → 404); `files.completeUploadExternal` (bot token; `files` a JSON array of
 *   `{id, title?}`, `channel_id`, `thread_ts`, `initial_comment`) → `{ok, files:[File]}`; a file id
 *   not handed out or whose bytes did not arrive (or not `length` of them) → `file_not_found` (the
 *   fake's word: Slack's docs list no narrower one); a `channel_id` the fake does not know →
 *   `channel_not_found`. Files people share come from `addFile` and `deliverMessage({files})`
 *   (a `message` event with `subtype: "file_share"` and `files: [File]`); their bytes are served at
 *   `url_private` / `url_private_download` (`/files-pri/<team>-<id>/[download/]<name>`) to the bot
 *   token in `Authorization: Bearer` only: without it, a 302 to the workspace's sign-in page, as
 *   Slack does (the token is never asked of a query string).
 * - `assistant.threads.setStatus` (bot token): `channel_id`, `thread_ts`, `status` (all required,
 *   status may be "" to clear; else `invalid_arguments`), optional `loading_messages` → `{ok}`.
 *
 * Socket Mode: WebSocket upgrades at `/link/?ticket=…` (unknown or used ticket → HTTP 401, no
 * upgrade). On connect: `{"type":"hello","num_connections":N,"debug_info":{host,build_number,
 * approximate_connection_time},"connection_info":{"app_id":…}}`. Events go to one open connection
 * (round robin) as `{"envelope_id":uuid,"payload":<event_callback body>,"type":"events_api",
 * "accepts_response_payload":false,"retry_attempt":n,"retry_reason":""|"timeout"}`. The app acks
 * with `{"envelope_id":…}` (any extra fields recorded); unacked within `ackTimeoutMs` → redelivered
 * (to any open connection, or the next one to open) with retry_attempt+1 and retry_reason
 * "timeout", up to `maxRetries` times. An ack of any attempt's envelope id settles the event.
 * `disconnect(reason)` sends `{"type":"disconnect","reason":…,"debug_info":{"host":…}}` and
 * closes (code 1000) after `closeAfterMs`; no new envelope goes to a connection told to go.
 * WebSocket pings every `socketPingMs`. Frames are bounded to 1 MiB (ws closes with 1009).
 *
 * Events API over HTTP: POST to the request URL, `Content-Type: application/json`,
 * `User-Agent: Slackbot 1.0 (+https://api.slack.com/robots)`, `X-Slack-Request-Timestamp: <unix s>`,
 * `X-Slack-Signature: v0=<hex HMAC-SHA256(signing secret, "v0:<ts>:<raw body>")>` (signed afresh
 * for every attempt). A 2xx answer within `httpTimeoutMs` (Slack: 3 s) delivers the event. Else it
 * is retried up to `maxRetries` (3) times after `retryDelaysMs` (Slack: nearly at once, 1 min,
 * 5 min), same body and event_id, with `X-Slack-Retry-Num: 1..3` and `X-Slack-Retry-Reason`:
 * `http_timeout` (the attempt is aborted at the deadline), `http_error` (non-2xx),
 * `connection_failed`, `too_many_redirects` (3xx are followed up to 2 times), `ssl_error`,
 * `unknown_error`. An answer carrying `X-Slack-No-Retry: 1` stops the retries. `verifyUrl()` sends
 * the signed `url_verification` challenge (never retried). `postRaw(body, headers)` sends anything,
 * signed unless the test overrides the headers (a header set to null is left out).
 *
 * Which way an event goes: `mode: 'auto'` (default) → Socket Mode if a socket client is
 * connected, else HTTP if a request URL is set, else held until either appears (`whenNoReceiver:
 * 'drop'` drops it into `dropped` instead). `'socket'` / `'http'` wait for that receiver only.
 *
 * Event bodies: `{token, team_id, context_team_id, context_enterprise_id, api_app_id, event,
 * type:'event_callback', event_id:'Ev…', event_time, authorizations:[{enterprise_id, team_id,
 * user_id:<bot user>, is_bot:true, is_enterprise_install}], is_ext_shared_channel, event_context}`.
 * `deliverMessage` → a `message` event (client_msg_id, type, text, user, ts, team, blocks (one
 * rich_text section: text and user mentions only), channel, event_ts, channel_type, thread_ts +
 * parent_user_id in a thread) or, with `edited`, the `message_changed` event Slack sends for an
 * edit. `deliverMention` → `app_mention` (text starts with `<@BOT>`; no channel_type, like Slack's).
 * `deliverBotMessage` → `message` with `subtype:'bot_message'` and `bot_id`. `echoPosts` makes every
 * successful chat.postMessage come back as the bot's own `message` event (user + bot_id + app_id),
 * as when the app subscribes to message.* events.
 *
 * Only node:http(s) and ws; binds to 127.0.0.1:0 unless told otherwise.
 *
 * @example
 * const slack = await startFakeSlack({ ackTimeoutMs: 200, retryDelaysMs: [10, 10, 10] });
 * // start the bridge with SLACK_API_URL=slack.apiUrl, the bot and app tokens, then:
 * await slack.waitForSocketClients(1);
 * const d = slack.deliverMessage({ channel: 'D0ALICE01', channelType: 'im', user: 'U0ALICE01', text: 'hi' });
 * expect((await d.done).delivered).toBe(true);
 * await slack.waitFor(() => slack.repliesIn('D0ALICE01').length > 0);
 * await slack.close();
 */
import http from 'node:http';
import https from 'node:https';
import { createHmac, randomBytes, randomUUID } from 'node:crypto';
import type { AddressInfo, Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { WebSocketServer, type RawData, type WebSocket } from 'ws';
import { pollUntil } from './poll.js';

// ---------------------------------------------------------------------------------------------
// Wire types (the subset the fake writes)

export type ChannelType = 'im' | 'channel' | 'group' | 'mpim';
export type DeliveryMode = 'auto' | 'socket' | 'http';
export type HttpOutcome = 'ok' | 'http_timeout' | 'too_many_redirects' | 'connection_failed' | 'ssl_error' | 'http_error' | 'unknown_error';
export type DisconnectReason = 'refresh_requested' | 'warning' | 'link_disabled';

/** An event inside an event_callback (`message`, `app_mention`, or anything deliverEvent got). */
export type SlackEvent = { type: string } & Record<string, unknown>;

export interface Authorization {
  enterprise_id: string | null;
  team_id: string;
  user_id: string;
  is_bot: boolean;
  is_enterprise_install: boolean;
}

/** The Events API body: what HTTP delivery POSTs and what a Socket Mode envelope's payload is. */
export interface EventCallback {
  token: string;
  team_id: string;
  context_team_id: string;
  context_enterprise_id: string | null;
  api_app_id: string;
  event: SlackEvent;
  type: 'event_callback';
  event_id: string;
  event_time: number;
  authorizations: Authorization[];
  is_ext_shared_channel: boolean;
  event_context: string;
}

/** A Socket Mode `events_api` frame. */
export interface SocketEnvelopeFrame {
  envelope_id: string;
  payload: EventCallback;
  type: 'events_api';
  accepts_response_payload: boolean;
  retry_attempt: number;
  retry_reason: string;
}

// ---------------------------------------------------------------------------------------------
// Recording types

export interface ApiCall {
  method: string;
  httpMethod: string;
  contentType?: string;
  /** The token the call presented, and where. */
  token?: string;
  tokenFrom?: 'header' | 'form' | 'query';
  /** Arguments as read (query + body). */
  params: Record<string, unknown>;
  status: number;
  response: Record<string, unknown>;
  at: number;
}

export interface PostedMessage {
  /** The channel as answered (a user id becomes the DM's D… id). */
  channel: string;
  /** The channel argument as given. */
  requestedChannel: string;
  text: string;
  thread_ts?: string;
  mrkdwn?: boolean;
  blocks?: unknown[];
  reply_broadcast?: boolean;
  /** Set when ok. */
  ts?: string;
  ok: boolean;
  error?: string;
  params: Record<string, unknown>;
  at: number;
}

export interface StatusCall {
  channel_id: string;
  thread_ts: string;
  status: string;
  loading_messages?: unknown[];
  ok: boolean;
  error?: string;
  at: number;
}

export interface HttpAttempt {
  kind: 'event' | 'url_verification' | 'raw';
  url: string;
  eventId?: string;
  /** 0 for the first attempt, else the X-Slack-Retry-Num sent. */
  retryNum: number;
  retryReason?: string;
  /** Request headers as sent. */
  headers: Record<string, string>;
  body: string;
  outcome: HttpOutcome;
  /** The app's HTTP status, when it answered. */
  status?: number;
  responseHeaders?: http.IncomingHttpHeaders;
  /** First 1 MiB of the answer. */
  responseBody?: string;
  /** The answer carried X-Slack-No-Retry: 1. */
  noRetry: boolean;
  error?: string;
  at: number;
  ms: number;
}

export interface SocketEnvelopeRecord {
  envelopeId: string;
  eventId: string;
  connectionId: number;
  retryAttempt: number;
  retryReason: string;
  frame: SocketEnvelopeFrame;
  sentAt: number;
  ackedAt?: number;
  /** No ack came within ackTimeoutMs. */
  timedOut?: boolean;
}

export interface SocketAck {
  envelopeId: string;
  connectionId: number;
  /** The whole frame the app sent. */
  frame: Record<string, unknown>;
  /** The envelope id was one the fake sent. */
  known: boolean;
  at: number;
}

export interface DeliveryOutcome {
  eventId: string;
  delivered: boolean;
  via?: 'http' | 'socket';
  /** Attempts made (first delivery included). */
  attempts: number;
  /** Why not delivered: 'no receiver', 'not acknowledged', 'http_error', 'closed', … */
  reason?: string;
}

export interface Delivery {
  eventId: string;
  /** The message's ts (for an edit: the edited message's ts). */
  ts?: string;
  event: SlackEvent;
  body: EventCallback;
  /** Settles when delivered, given up on, dropped or the fake closes; never rejects. */
  done: Promise<DeliveryOutcome>;
}

export interface RawResponse {
  outcome: HttpOutcome;
  status?: number;
  headers?: http.IncomingHttpHeaders;
  body?: string;
  error?: string;
}

export interface DeliverOptions {
  mode?: DeliveryMode;
}

/** A File object as message events carry it (the fields berth reads, and a few around them). */
export interface SlackFile {
  id: string;
  created: number;
  timestamp: number;
  name: string;
  title: string;
  mimetype: string;
  filetype: string;
  user: string;
  size: number;
  mode: 'hosted' | 'snippet' | 'tombstone' | 'hidden_by_limit';
  is_external: boolean;
  url_private: string;
  url_private_download: string;
  permalink: string;
}

/** An upload the bot made (getUploadURLExternal, the POST, completeUploadExternal). */
export interface SlackUpload {
  id: string;
  filename: string;
  length: number;
  bytes?: Buffer;
  /** The upload POST's Content-Type. */
  contentType?: string;
  /** Set by completeUploadExternal. */
  completed?: { channel_id?: string; thread_ts?: string; initial_comment?: string; title?: string; channels?: string };
}

export interface DeliverMessageOptions extends DeliverOptions {
  channel: string;
  channelType: ChannelType;
  user: string;
  text: string;
  /** Files shared with the message (from addFile): a `file_share` message. */
  files?: SlackFile[];
  /** A reply in this thread (thread_ts; parent_user_id from the parent when the fake knows it). */
  threadTs?: string;
  /** Deliver an edit (`message_changed`) instead: `true` edits this user's last message in the
   * channel (delivered by the fake), `{ ts }` the message with that ts. `text` is the new text. */
  edited?: true | { ts: string; previousText?: string };
}

export interface DeliverMentionOptions extends DeliverOptions {
  channel: string;
  user: string;
  /** `<@BOT> ` is put in front unless the text already starts with it. */
  text: string;
  threadTs?: string;
}

export interface DeliverBotMessageOptions extends DeliverOptions {
  channel: string;
  channelType?: ChannelType;
  text: string;
  /** Default: this app's own bot id (the echo of its own post). */
  botId?: string;
  username?: string;
  threadTs?: string;
}

export interface FakeSlackOptions {
  /** Default 'xoxb-0000000001-0000000002-fakebottoken0000'. */
  botToken?: string;
  /** Default 'xapp-1-A0FAKEAPP1-0000000003-fakeapptoken0000'. */
  appToken?: string;
  /** Default 'fake-signing-secret-0000000000000'. */
  signingSecret?: string;
  /** The deprecated verification token put in payloads' `token`. */
  verificationToken?: string;
  teamId?: string;
  teamName?: string;
  /** The workspace's subdomain (auth.test's url). */
  teamDomain?: string;
  appId?: string;
  botUserId?: string;
  botId?: string;
  /** The bot user's name (auth.test's `user`). */
  botName?: string;
  /** The Events API request URL (settable later with setRequestUrl). */
  requestUrl?: string;
  /** Deadline for the app's HTTP answer. Default 3000 (Slack's). */
  httpTimeoutMs?: number;
  /** Delays before retries 1..3. Default [0, 60_000, 300_000] (Slack: nearly at once, 1 min, 5 min). */
  retryDelaysMs?: number[];
  /** Default 3. */
  maxRetries?: number;
  /** Socket Mode ack deadline. Default 3000. */
  ackTimeoutMs?: number;
  /** Socket Mode redeliveries: a fresh envelope_id (default) or the first attempt's. */
  retryEnvelopeId?: 'new' | 'same';
  /** WebSocket ping period; 0 = none. Default 10_000. */
  socketPingMs?: number;
  /** Events with no receiver: held until one appears (default), or dropped. */
  whenNoReceiver?: 'hold' | 'drop';
  /** Known channels (id → type). When given, chat.postMessage / setStatus to other ids (except
   * those events were delivered in, and DMs) answer channel_not_found. */
  channels?: Record<string, ChannelType>;
  /** Text over 40,000 characters: msg_too_long (default) or truncated. */
  longText?: 'error' | 'truncate';
  /** The largest upload getUploadURLExternal grants (Slack: 1 GB). Default 20 MiB. */
  maxFileBytes?: number;
  /** Serve shared files chunked, without Content-Length. */
  chunkedFiles?: boolean;
  /** Every successful chat.postMessage comes back as the bot's own message event. Default false. */
  echoPosts?: boolean;
  host?: string;
  port?: number;
}

export interface FakeSlack {
  /** e.g. http://127.0.0.1:41234 */
  url: string;
  /** The Web API base, `${url}/api/` (Slack's is https://slack.com/api/). */
  apiUrl: string;
  botToken: string;
  appToken: string;
  signingSecret: string;
  teamId: string;
  appId: string;
  botUserId: string;
  botId: string;
  requestUrl(): string | undefined;
  setRequestUrl(url: string | undefined): void;

  /** Every Web API request that named a method, in arrival order. */
  calls: ApiCall[];
  /** Every chat.postMessage that got past authentication, failed ones too (ok: false). */
  posted: PostedMessage[];
  /** assistant.threads.setStatus calls that got past authentication. */
  statuses: StatusCall[];
  /** Every HTTP request sent to the app (events, url_verification, postRaw). */
  httpAttempts: HttpAttempt[];
  /** Every Socket Mode envelope sent. */
  envelopes: SocketEnvelopeRecord[];
  /** Every frame from a socket client that carried an envelope_id. */
  acks: SocketAck[];
  /** Frames from socket clients that were not JSON objects with an envelope_id. */
  socketNoise: string[];
  /** Event bodies dropped for want of a receiver (whenNoReceiver: 'drop'). */
  dropped: EventCallback[];
  /** Every event body injected, in order. */
  events: EventCallback[];

  /** Successful posts in the channel (answered channel or as requested), in this thread if given. */
  repliesIn(channel: string, threadTs?: string): PostedMessage[];
  /** The next `count` calls of the method answer HTTP 429 + Retry-After. */
  rateLimitNext(method: string, retryAfterSeconds: number, count?: number): void;
  /** The next `count` calls of the method answer {ok:false, error}. */
  failNext(method: string, error: string, count?: number): void;

  deliverMessage(o: DeliverMessageOptions): Delivery;
  /** A file a person shares (its File object, to pass to deliverMessage). `size`: what the object says (default: the true size). */
  addFile(data: Buffer, o: { name: string; mimetype: string; user?: string; size?: number }): SlackFile;
  /** Every download of a shared file: its id, and whether the bot token came with it. */
  fileDownloads: Array<{ id: string; authorized: boolean }>;
  /** The bot's uploads, in order. */
  uploads: SlackUpload[];
  deliverMention(o: DeliverMentionOptions): Delivery;
  deliverBotMessage(o: DeliverBotMessageOptions): Delivery;
  /** Any event, wrapped in an event_callback as given. */
  deliverEvent(event: SlackEvent, o?: DeliverOptions): Delivery;
  /** Outcome of an event by id (undefined while under way). */
  outcome(eventId: string): DeliveryOutcome | undefined;

  /** The url_verification handshake: true when the app answered 200 with the challenge (plain
   * text, JSON {challenge} or form challenge=). Throws without a request URL. */
  verifyUrl(): Promise<boolean>;
  /** POST anything to the request URL. Signed with the current time unless `headers` sets
   * X-Slack-Request-Timestamp (then signed with that) or X-Slack-Signature; null leaves a
   * header out. */
  postRaw(body: string | object, headers?: Record<string, string | null>): Promise<RawResponse>;
  /** `v0=` signature of a raw body at a timestamp (unix seconds). */
  sign(rawBody: string, timestamp: number | string): string;

  /** Open socket connections (not yet told to go). */
  socketClients(): number;
  /** Socket connections ever accepted. */
  socketConnections(): number;
  /** Resolves once socketClients() >= n (=== 0 when n is 0). */
  waitForSocketClients(n: number, timeoutMs?: number): Promise<void>;
  /** Send a disconnect frame to every open connection (or one) and close it. Returns how many. */
  disconnect(reason: DisconnectReason, opts?: { connectionId?: number; closeAfterMs?: number }): number;
  /** Terminate every socket without a frame (a network failure). */
  dropSockets(): void;

  /** Polls pred every 10 ms; resolves with its first truthy value. */
  waitFor<T>(pred: () => T | undefined | null | false | 0 | '', timeoutMs?: number): Promise<T>;
  close(): Promise<void>;
}

// ---------------------------------------------------------------------------------------------
// Helpers

const MAX_BODY = 1024 * 1024;
const MAX_TEXT = 40_000;
const MAX_BLOCKS = 50;
const USER_AGENT = 'Slackbot 1.0 (+https://api.slack.com/robots)';
const CHANNEL_ID = /^[CDG][A-Z0-9]{2,}$/;
const USER_ID = /^[UW][A-Z0-9]{2,}$/;

export function slackSignature(secret: string, timestamp: number | string, rawBody: string): string {
  return `v0=${createHmac('sha256', secret).update(`v0:${timestamp}:${rawBody}`).digest('hex')}`;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

const nowSeconds = (): number => Math.floor(Date.now() / 1000);

function bool(v: unknown): boolean | undefined {
  if (typeof v === 'boolean') return v;
  if (v === 'true' || v === '1' || v === 1) return true;
  if (v === 'false' || v === '0' || v === 0) return false;
  return undefined;
}

/** A JSON structure given as such (JSON body) or as JSON text (form field). */
function structured(v: unknown): { ok: true; value: unknown } | { ok: false } {
  if (typeof v !== 'string') return { ok: true, value: v };
  try {
    return { ok: true, value: JSON.parse(v) };
  } catch {
    return { ok: false };
  }
}

/** One rich_text section: plain text runs and `<@U…>` user mentions (Slack parses more). */
function richTextBlocks(text: string): unknown[] {
  const elements: unknown[] = [];
  let last = 0;
  for (const m of text.matchAll(/<@([UW][A-Z0-9]+)(?:\|[^>]*)?>/g)) {
    if (m.index > last) elements.push({ type: 'text', text: text.slice(last, m.index) });
    elements.push({ type: 'user', user_id: m[1] });
    last = m.index + m[0].length;
  }
  if (last < text.length) elements.push({ type: 'text', text: text.slice(last) });
  return [{ type: 'rich_text', block_id: randomBytes(3).toString('base64url'), elements: [{ type: 'rich_text_section', elements }] }];
}

function channelTypeGuess(channel: string): ChannelType {
  return channel.startsWith('D') ? 'im' : 'channel';
}

interface ReadResult {
  body?: Buffer;
  tooLarge?: boolean;
}

/** Reads a request body up to MAX_BODY; past it, drains (bounded) and reports tooLarge. */
function readBody(req: http.IncomingMessage, max = MAX_BODY): Promise<ReadResult> {
  const MAX_BODY = max;
  /** Beyond this much, a too-large request body is no longer drained: the socket is destroyed. */
  const MAX_DRAIN = 16 * max;
  return new Promise((resolve) => {
    const declared = Number(req.headers['content-length']);
    if (Number.isFinite(declared) && declared > MAX_DRAIN) {
      req.destroy();
      resolve({ tooLarge: true });
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    let tooLarge = Number.isFinite(declared) && declared > MAX_BODY;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > MAX_BODY) tooLarge = true;
      if (!tooLarge) chunks.push(c);
      if (size > MAX_DRAIN) req.destroy();
    });
    req.on('end', () => resolve(tooLarge ? { tooLarge } : { body: Buffer.concat(chunks) }));
    req.on('error', () => resolve({ tooLarge }));
    req.on('close', () => resolve(tooLarge ? { tooLarge } : { body: Buffer.concat(chunks) }));
  });
}

interface PostResult {
  outcome: HttpOutcome;
  status?: number;
  headers?: http.IncomingHttpHeaders;
  body?: string;
  error?: string;
}

function classifyError(e: NodeJS.ErrnoException): HttpOutcome {
  const code = e.code ?? '';
  if (/^(ECONNREFUSED|ENOTFOUND|EHOSTUNREACH|ENETUNREACH|ECONNRESET|EAI_AGAIN|EPIPE)$/.test(code)) return 'connection_failed';
  if (/^(ERR_TLS|ERR_SSL|CERT_|DEPTH_ZERO|SELF_SIGNED|UNABLE_TO_)/.test(code) || /SSL|TLS/i.test(e.message)) return 'ssl_error';
  return 'unknown_error';
}

// ---------------------------------------------------------------------------------------------
// The fake

interface SocketConn {
  id: number;
  ws: WebSocket;
  leaving: boolean;
  ping?: NodeJS.Timeout;
}

interface Job {
  body: EventCallback;
  mode: DeliveryMode;
  route?: 'http' | 'socket';
  /** Index of the next attempt (0 = the first delivery). */
  attempt: number;
  /** The retry reason for the next attempt. */
  reason: string;
  envelopeIds: string[];
  timer?: NodeJS.Timeout;
  settled: boolean;
  resolve: (o: DeliveryOutcome) => void;
}

interface Armed {
  kind: 'ratelimit' | 'fail';
  retryAfter?: number;
  error?: string;
  remaining: number;
}

interface Known {
  channel: string;
  ts: string;
  user?: string;
  text: string;
  threadTs?: string;
  clientMsgId?: string;
}

type MethodResult = { status?: number; headers?: Record<string, string>; json: Record<string, unknown> };

export async function startFakeSlack(opts: FakeSlackOptions = {}): Promise<FakeSlack> {
  const botToken = opts.botToken ?? 'xoxb-0000000001-0000000002-fakebottoken0000';
  const appToken = opts.appToken ?? 'xapp-1-A0FAKEAPP1-0000000003-fakeapptoken0000';
  const signingSecret = opts.signingSecret ?? 'fake-signing-secret-0000000000000';
  const verificationToken = opts.verificationToken ?? 'fakeverificationtoken000';
  const teamId = opts.teamId ?? 'T0FAKETEAM';
  const teamName = opts.teamName ?? 'Berth Fake Workspace';
  const teamDomain = opts.teamDomain ?? 'berth-fake';
  const appId = opts.appId ?? 'A0FAKEAPP1';
  const botUserId = opts.botUserId ?? 'U0FAKEBOT1';
  const botId = opts.botId ?? 'B0FAKEBOT1';
  const botName = opts.botName ?? 'berth';
  const httpTimeoutMs = opts.httpTimeoutMs ?? 3_000;
  const retryDelaysMs = opts.retryDelaysMs ?? [0, 60_000, 300_000];
  const maxRetries = opts.maxRetries ?? 3;
  const ackTimeoutMs = opts.ackTimeoutMs ?? 3_000;
  const sameEnvelopeId = opts.retryEnvelopeId === 'same';
  const socketPingMs = opts.socketPingMs ?? 10_000;
  const whenNoReceiver = opts.whenNoReceiver ?? 'hold';
  const strictChannels = opts.channels !== undefined;
  const longText = opts.longText ?? 'error';
  const maxFileBytes = opts.maxFileBytes ?? 20 * 1024 * 1024;
  /** Shared files' bytes by id, and the bot's uploads by id and by upload ticket. */
  const sharedFiles = new Map<string, Buffer>();
  const fileDownloads: Array<{ id: string; authorized: boolean }> = [];
  const uploads: SlackUpload[] = [];
  const uploadTickets = new Map<string, SlackUpload>();
  const newFileId = () => `F${randomBytes(6).toString('hex').toUpperCase()}`;
  const echoPosts = opts.echoPosts ?? false;
  let requestUrl = opts.requestUrl;
  let closed = false;

  const calls: ApiCall[] = [];
  const posted: PostedMessage[] = [];
  const statuses: StatusCall[] = [];
  const httpAttempts: HttpAttempt[] = [];
  const envelopes: SocketEnvelopeRecord[] = [];
  const acks: SocketAck[] = [];
  const socketNoise: string[] = [];
  const dropped: EventCallback[] = [];
  const events: EventCallback[] = [];

  const channelTypes = new Map<string, ChannelType>(Object.entries(opts.channels ?? {}));
  const known = new Map<string, Known>(); // `${channel}|${ts}` → message
  const history: Known[] = [];
  const armed = new Map<string, Armed[]>();
  const tickets = new Set<string>();
  const conns = new Set<SocketConn>();
  let connSeq = 0;
  let rr = 0;
  const held: Job[] = [];
  const jobs = new Set<Job>();
  const outcomes = new Map<string, DeliveryOutcome>();
  const envelopeJob = new Map<string, Job>();
  const envelopeRecord = new Map<string, SocketEnvelopeRecord>();
  const inflight = new Set<http.ClientRequest>();
  const sockets = new Set<Socket>();
  const timers = new Set<NodeJS.Timeout>();

  let lastMicros = 0;
  const nextTs = (): string => {
    lastMicros = Math.max(Date.now() * 1000, lastMicros + 1);
    return `${Math.floor(lastMicros / 1e6)}.${String(lastMicros % 1e6).padStart(6, '0')}`;
  };
  let eventSeq = 0;
  const nextEventId = (): string => `Ev0F${(++eventSeq).toString(36).toUpperCase().padStart(7, '0')}`;

  const later = (fn: () => void, ms: number): NodeJS.Timeout => {
    const t = setTimeout(() => {
      timers.delete(t);
      fn();
    }, ms);
    t.unref();
    timers.add(t);
    return t;
  };
  const cancel = (t: NodeJS.Timeout | undefined): void => {
    if (!t) return;
    clearTimeout(t);
    timers.delete(t);
  };

  function remember(k: Known): void {
    known.set(`${k.channel}|${k.ts}`, k);
    history.push(k);
    if (history.length > 10_000) {
      const old = history.shift()!;
      known.delete(`${old.channel}|${old.ts}`);
    }
  }

  function channelKnown(channel: string): boolean {
    if (channelTypes.has(channel)) return true;
    if (strictChannels) return channel.startsWith('D') && CHANNEL_ID.test(channel);
    return CHANNEL_ID.test(channel);
  }

  // -------------------------------------------------------------------------------------------
  // Event delivery

  function openConns(): SocketConn[] {
    return [...conns].filter((c) => !c.leaving && c.ws.readyState === c.ws.OPEN);
  }

  function settle(job: Job, o: Omit<DeliveryOutcome, 'eventId' | 'attempts'>, attempts = job.attempt): void {
    if (job.settled) return;
    job.settled = true;
    cancel(job.timer);
    jobs.delete(job);
    const outcome: DeliveryOutcome = { eventId: job.body.event_id, attempts, ...o };
    outcomes.set(job.body.event_id, outcome);
    job.resolve(outcome);
  }

  function routeFor(job: Job): 'http' | 'socket' | undefined {
    const want = job.route ?? (job.mode === 'auto' ? undefined : job.mode);
    if (want === 'socket') return openConns().length > 0 ? 'socket' : undefined;
    if (want === 'http') return requestUrl ? 'http' : undefined;
    if (openConns().length > 0) return 'socket';
    if (requestUrl) return 'http';
    return undefined;
  }

  function dispatch(job: Job): void {
    if (job.settled) return;
    if (closed) return settle(job, { delivered: false, reason: 'closed' });
    const route = routeFor(job);
    if (!route) {
      if (whenNoReceiver === 'drop' && !job.route) {
        dropped.push(job.body);
        return settle(job, { delivered: false, reason: 'no receiver' });
      }
      held.push(job);
      return;
    }
    job.route = route;
    if (route === 'socket') sendEnvelope(job);
    else void sendHttp(job);
  }

  function releaseHeld(): void {
    for (const job of held.splice(0)) dispatch(job);
  }

  function enqueue(event: SlackEvent, mode: DeliveryMode = 'auto', ts?: string): Delivery {
    const eventTs = typeof event.event_ts === 'string' ? event.event_ts : (ts ?? nextTs());
    const body: EventCallback = {
      token: verificationToken,
      team_id: teamId,
      context_team_id: teamId,
      context_enterprise_id: null,
      api_app_id: appId,
      event,
      type: 'event_callback',
      event_id: nextEventId(),
      event_time: Math.floor(Number(eventTs)) || nowSeconds(),
      authorizations: [{ enterprise_id: null, team_id: teamId, user_id: botUserId, is_bot: true, is_enterprise_install: false }],
      is_ext_shared_channel: false,
      event_context: `4-${Buffer.from(JSON.stringify({ et: event.type, tid: teamId, aid: appId, cid: event.channel ?? null })).toString('base64url')}`,
    };
    events.push(body);
    let resolve!: (o: DeliveryOutcome) => void;
    const done = new Promise<DeliveryOutcome>((r) => (resolve = r));
    const job: Job = { body, mode, attempt: 0, reason: '', envelopeIds: [], settled: false, resolve };
    jobs.add(job);
    dispatch(job);
    return { eventId: body.event_id, ...(ts !== undefined ? { ts } : {}), event, body, done };
  }

  // --- Socket Mode

  function sendEnvelope(job: Job): void {
    const open = openConns();
    const conn = open[rr++ % open.length]!;
    const envelopeId = sameEnvelopeId && job.envelopeIds[0] ? job.envelopeIds[0] : randomUUID();
    if (!job.envelopeIds.includes(envelopeId)) job.envelopeIds.push(envelopeId);
    envelopeJob.set(envelopeId, job);
    const frame: SocketEnvelopeFrame = {
      envelope_id: envelopeId,
      payload: job.body,
      type: 'events_api',
      accepts_response_payload: false,
      retry_attempt: job.attempt,
      retry_reason: job.attempt === 0 ? '' : job.reason,
    };
    const rec: SocketEnvelopeRecord = {
      envelopeId,
      eventId: job.body.event_id,
      connectionId: conn.id,
      retryAttempt: job.attempt,
      retryReason: frame.retry_reason,
      frame,
      sentAt: Date.now(),
    };
    envelopes.push(rec);
    envelopeRecord.set(envelopeId, rec);
    try {
      conn.ws.send(JSON.stringify(frame));
    } catch {
      // a socket closing under us: the ack timeout redelivers
    }
    job.timer = later(() => {
      job.timer = undefined;
      if (job.settled) return;
      rec.timedOut = true;
      job.attempt++;
      job.reason = 'timeout';
      if (job.attempt > maxRetries) settle(job, { delivered: false, via: 'socket', reason: 'not acknowledged' });
      else dispatch(job);
    }, ackTimeoutMs);
  }

  function onSocketMessage(conn: SocketConn, data: RawData, isBinary: boolean): void {
    const text = isBinary ? '' : Buffer.isBuffer(data) ? data.toString('utf8') : Buffer.concat(data as Buffer[]).toString('utf8');
    let frame: unknown;
    try {
      frame = JSON.parse(text);
    } catch {
      frame = undefined;
    }
    if (!isObject(frame) || typeof frame.envelope_id !== 'string') {
      if (socketNoise.length < 1000) socketNoise.push(text.slice(0, 4096));
      return;
    }
    const envelopeId = frame.envelope_id;
    const job = envelopeJob.get(envelopeId);
    acks.push({ envelopeId, connectionId: conn.id, frame, known: job !== undefined, at: Date.now() });
    const rec = envelopeRecord.get(envelopeId);
    if (rec && rec.ackedAt === undefined) rec.ackedAt = Date.now();
    if (job && !job.settled) settle(job, { delivered: true, via: 'socket' }, job.attempt + 1);
  }

  // --- HTTP

  function signedHeaders(raw: string, timestamp = String(nowSeconds())): Record<string, string> {
    return {
      'Content-Type': 'application/json',
      'User-Agent': USER_AGENT,
      'X-Slack-Request-Timestamp': timestamp,
      'X-Slack-Signature': slackSignature(signingSecret, timestamp, raw),
    };
  }

  function postOnce(url: string, body: string, headers: Record<string, string>, timeoutMs: number): Promise<PostResult> {
    return new Promise((resolve) => {
      let u: URL;
      try {
        u = new URL(url);
      } catch {
        resolve({ outcome: 'unknown_error', error: `bad URL: ${url}` });
        return;
      }
      const mod = u.protocol === 'https:' ? https : u.protocol === 'http:' ? http : undefined;
      if (!mod) {
        resolve({ outcome: 'unknown_error', error: `unsupported protocol ${u.protocol}` });
        return;
      }
      let finished = false;
      const finish = (r: PostResult): void => {
        if (finished) return;
        finished = true;
        cancel(timer);
        inflight.delete(req);
        resolve(r);
      };
      const req = mod.request(
        u,
        {
          method: 'POST',
          headers: { ...headers, 'Content-Length': String(Buffer.byteLength(body)) },
          ...(u.protocol === 'https:' ? { rejectUnauthorized: false } : {}),
        },
        (res) => {
          const chunks: Buffer[] = [];
          let size = 0;
          res.on('data', (c: Buffer) => {
            if (size + c.length <= MAX_BODY) chunks.push(c);
            size += c.length;
          });
          const done = (): void => {
            const status = res.statusCode ?? 0;
            finish({
              outcome: status >= 200 && status < 300 ? 'ok' : 'http_error',
              status,
              headers: res.headers,
              body: Buffer.concat(chunks).toString('utf8'),
            });
          };
          res.on('end', done);
          res.on('error', done);
          res.on('close', done);
        },
      );
      const timer = later(
        () => {
          finish({ outcome: 'http_timeout' });
          req.destroy();
        },
        Math.max(1, timeoutMs),
      );
      req.on('error', (e: NodeJS.ErrnoException) => finish({ outcome: classifyError(e), error: e.message }));
      inflight.add(req);
      req.end(body);
    });
  }

  /** POST with Slack's redirect rule: 3xx followed up to twice, more → too_many_redirects. */
  async function post(url: string, body: string, headers: Record<string, string>): Promise<PostResult> {
    const deadline = Date.now() + httpTimeoutMs;
    let target = url;
    for (let hops = 0; ; hops++) {
      const r = await postOnce(target, body, headers, deadline - Date.now());
      const location = r.headers?.location;
      if (r.status !== undefined && r.status >= 300 && r.status < 400 && location) {
        if (hops >= 2) return { ...r, outcome: 'too_many_redirects' };
        try {
          target = new URL(location, target).toString();
        } catch {
          return { ...r, outcome: 'http_error' };
        }
        continue;
      }
      return r;
    }
  }

  function record(
    kind: HttpAttempt['kind'],
    url: string,
    headers: Record<string, string>,
    body: string,
    r: PostResult,
    started: number,
    extra: Partial<HttpAttempt> = {},
  ): HttpAttempt {
    const a: HttpAttempt = {
      kind,
      url,
      retryNum: 0,
      headers,
      body,
      outcome: r.outcome,
      ...(r.status !== undefined ? { status: r.status } : {}),
      ...(r.headers !== undefined ? { responseHeaders: r.headers } : {}),
      ...(r.body !== undefined ? { responseBody: r.body } : {}),
      ...(r.error !== undefined ? { error: r.error } : {}),
      noRetry: r.headers?.['x-slack-no-retry'] === '1',
      at: started,
      ms: Date.now() - started,
      ...extra,
    };
    httpAttempts.push(a);
    return a;
  }

  async function sendHttp(job: Job): Promise<void> {
    const url = requestUrl!;
    const raw = JSON.stringify(job.body);
    const headers = signedHeaders(raw);
    if (job.attempt > 0) {
      headers['X-Slack-Retry-Num'] = String(job.attempt);
      headers['X-Slack-Retry-Reason'] = job.reason;
    }
    const started = Date.now();
    const r = await post(url, raw, headers);
    const a = record('event', url, headers, raw, r, started, {
      eventId: job.body.event_id,
      retryNum: job.attempt,
      ...(job.attempt > 0 ? { retryReason: job.reason } : {}),
    });
    if (job.settled) return;
    job.attempt++;
    if (r.outcome === 'ok') return settle(job, { delivered: true, via: 'http' });
    job.reason = r.outcome;
    if (a.noRetry || job.attempt > maxRetries || closed)
      return settle(job, { delivered: false, via: 'http', reason: closed ? 'closed' : r.outcome });
    const delay = retryDelaysMs[job.attempt - 1] ?? retryDelaysMs[retryDelaysMs.length - 1] ?? 0;
    job.timer = later(() => {
      job.timer = undefined;
      dispatch(job);
    }, delay);
  }

  // -------------------------------------------------------------------------------------------
  // Web API methods

  const ok = (fields: Record<string, unknown> = {}): MethodResult => ({ json: { ok: true, ...fields } });
  const fail = (error: string, fields: Record<string, unknown> = {}): MethodResult => ({ json: { ok: false, error, ...fields } });

  function postMessage(p: Record<string, unknown>, at: number): MethodResult {
    const requested = typeof p.channel === 'string' ? p.channel : '';
    const entry: PostedMessage = { channel: requested, requestedChannel: requested, text: '', ok: false, params: p, at };
    posted.push(entry);
    const r = ((): MethodResult => {
      if (p.text !== undefined && p.text !== null && typeof p.text !== 'string') {
        return fail('invalid_arguments', { response_metadata: { messages: ['[ERROR] must provide a string [json-pointer:/text]'] } });
      }
      let text = typeof p.text === 'string' ? p.text : '';
      entry.text = text;
      if (p.thread_ts !== undefined && p.thread_ts !== null && p.thread_ts !== '') entry.thread_ts = String(p.thread_ts);
      const mrkdwn = bool(p.mrkdwn);
      if (mrkdwn !== undefined) entry.mrkdwn = mrkdwn;
      const broadcast = bool(p.reply_broadcast);
      if (broadcast !== undefined) entry.reply_broadcast = broadcast;

      let channel = requested;
      if (USER_ID.test(channel)) channel = `D${channel.slice(1)}`;
      else if (!channelKnown(channel)) return fail('channel_not_found');
      entry.channel = channel;

      let blocks: unknown[] | undefined;
      if (p.blocks !== undefined && p.blocks !== null && p.blocks !== '') {
        const b = structured(p.blocks);
        if (
          !b.ok ||
          !Array.isArray(b.value) ||
          b.value.length > MAX_BLOCKS ||
          !b.value.every((x) => isObject(x) && typeof x.type === 'string')
        ) {
          return fail('invalid_blocks');
        }
        blocks = b.value;
        entry.blocks = blocks;
      }
      let attachments: unknown[] | undefined;
      if (p.attachments !== undefined && p.attachments !== null && p.attachments !== '') {
        const a = structured(p.attachments);
        if (!a.ok || !Array.isArray(a.value)) return fail('invalid_attachments');
        attachments = a.value;
      }
      if (text === '' && !blocks?.length && !attachments?.length) return fail('no_text');
      const chars = [...text];
      if (chars.length > MAX_TEXT) {
        if (longText === 'error') return fail('msg_too_long');
        text = chars.slice(0, MAX_TEXT).join('');
        entry.text = text;
      }

      const ts = nextTs();
      entry.ts = ts;
      const parent = entry.thread_ts !== undefined ? known.get(`${channel}|${entry.thread_ts}`) : undefined;
      const message: Record<string, unknown> = {
        user: botUserId,
        type: 'message',
        ts,
        bot_id: botId,
        app_id: appId,
        text,
        team: teamId,
        bot_profile: { id: botId, app_id: appId, user_id: botUserId, name: botName, deleted: false, team_id: teamId },
        ...(blocks ? { blocks } : {}),
        ...(attachments ? { attachments } : {}),
        ...(entry.thread_ts !== undefined ? { thread_ts: entry.thread_ts, parent_user_id: parent?.user ?? botUserId } : {}),
      };
      remember({ channel, ts, user: botUserId, text, ...(entry.thread_ts !== undefined ? { threadTs: entry.thread_ts } : {}) });
      if (echoPosts) {
        enqueue(
          { ...message, type: 'message', channel, event_ts: ts, channel_type: channelTypes.get(channel) ?? channelTypeGuess(channel) },
          'auto',
          ts,
        );
      }
      return ok({ channel, ts, message });
    })();
    entry.ok = r.json.ok === true;
    if (!entry.ok) entry.error = String(r.json.error);
    return r;
  }

  function setStatus(p: Record<string, unknown>, at: number): MethodResult {
    const entry: StatusCall = {
      channel_id: typeof p.channel_id === 'string' ? p.channel_id : '',
      thread_ts: p.thread_ts === undefined || p.thread_ts === null ? '' : String(p.thread_ts),
      status: typeof p.status === 'string' ? p.status : '',
      ok: false,
      at,
    };
    statuses.push(entry);
    const r = ((): MethodResult => {
      const missing = ['channel_id', 'thread_ts', 'status'].filter(
        (k) => p[k] === undefined || p[k] === null || (k !== 'status' && p[k] === ''),
      );
      if (missing.length) {
        return fail('invalid_arguments', { response_metadata: { messages: missing.map((k) => `[ERROR] missing required field: ${k}`) } });
      }
      if (typeof p.status !== 'string') return fail('invalid_arguments');
      if (p.loading_messages !== undefined) {
        const l = structured(p.loading_messages);
        if (!l.ok || !Array.isArray(l.value) || l.value.length > 10) return fail('invalid_arguments');
        entry.loading_messages = l.value;
      }
      if (!channelKnown(entry.channel_id)) return fail('channel_not_found');
      if (!/^\d+\.\d+$/.test(entry.thread_ts)) return fail('invalid_thread_ts');
      return ok();
    })();
    entry.ok = r.json.ok === true;
    if (!entry.ok) entry.error = String(r.json.error);
    return r;
  }

  function getUploadUrl(p: Record<string, unknown>): MethodResult {
    const filename = typeof p.filename === 'string' ? p.filename : '';
    const length = Number(p.length);
    if (filename === '' || !Number.isSafeInteger(length) || length <= 0) return fail('invalid_arguments');
    if (length > maxFileBytes) return fail('file_upload_size_restricted');
    const upload: SlackUpload = { id: newFileId(), filename, length };
    const ticket = randomBytes(12).toString('hex');
    uploads.push(upload);
    uploadTickets.set(ticket, upload);
    return ok({ upload_url: `http://${hostForUrl}:${port}/upload/v1/${ticket}`, file_id: upload.id });
  }

  function completeUpload(p: Record<string, unknown>): MethodResult {
    const list = structured(p.files);
    if (
      !list.ok ||
      !Array.isArray(list.value) ||
      list.value.length === 0 ||
      !list.value.every((f) => isObject(f) && typeof f.id === 'string')
    )
      return fail('invalid_arguments');
    const channel = typeof p.channel_id === 'string' && p.channel_id !== '' ? p.channel_id : undefined;
    if (channel !== undefined && !channelKnown(channel)) return fail('channel_not_found');
    const done: SlackUpload[] = [];
    for (const f of list.value as Array<{ id: string; title?: unknown }>) {
      const upload = uploads.find((u) => u.id === f.id);
      if (!upload?.bytes || upload.bytes.length !== upload.length) return fail('file_not_found');
      upload.completed = {
        ...(channel !== undefined ? { channel_id: channel } : {}),
        ...(typeof p.thread_ts === 'string' && p.thread_ts !== '' ? { thread_ts: p.thread_ts } : {}),
        ...(typeof p.initial_comment === 'string' ? { initial_comment: p.initial_comment } : {}),
        ...(typeof f.title === 'string' ? { title: f.title } : {}),
        ...(typeof p.channels === 'string' ? { channels: p.channels } : {}),
      };
      done.push(upload);
    }
    return ok({ files: done.map((u) => ({ id: u.id, name: u.filename, title: u.completed?.title ?? u.filename, size: u.length })) });
  }

  /** POST <upload_url>: the bytes, raw or as a multipart form's one file part. */
  async function handleUpload(req: http.IncomingMessage, res: http.ServerResponse, ticket: string): Promise<void> {
    const read = await readBody(req, maxFileBytes);
    const upload = uploadTickets.get(ticket);
    if (read.tooLarge) return empty(res, 413);
    if (!upload || req.method !== 'POST') return empty(res, upload ? 405 : 404);
    const type = String(req.headers['content-type'] ?? '');
    let bytes = read.body ?? Buffer.alloc(0);
    const boundary = /multipart\/form-data;.*boundary=(?:"([^"]+)"|([^;\s]+))/i.exec(type);
    if (boundary) {
      const text = bytes.toString('latin1');
      const delimiter = `--${boundary[1] ?? boundary[2]}`;
      const part = text.split(delimiter).find((x) => /filename=/i.test(x.slice(0, x.indexOf('\r\n\r\n'))));
      if (!part) return empty(res, 400);
      bytes = Buffer.from(part.slice(part.indexOf('\r\n\r\n') + 4, part.lastIndexOf('\r\n')), 'latin1');
    }
    upload.bytes = bytes;
    upload.contentType = type;
    const body = Buffer.from(`OK - ${bytes.length}`);
    res.writeHead(200, { 'Content-Type': 'text/plain', 'Content-Length': String(body.length) });
    res.end(body);
  }

  /** GET /files-pri/<team>-<id>/[download/]<name>: the bytes, to the bot token only. */
  function serveShared(req: http.IncomingMessage, res: http.ServerResponse, id: string): void {
    req.resume();
    const bytes = sharedFiles.get(id);
    const authorized = /^Bearer\s+(\S+)\s*$/i.exec(req.headers.authorization ?? '')?.[1] === botToken;
    if (!bytes) return empty(res, 404);
    fileDownloads.push({ id, authorized });
    if (!authorized) {
      res.writeHead(302, { Location: `https://${teamDomain}.slack.com/?redir=%2Ffiles-pri%2F${teamId}-${id}`, 'Content-Length': '0' });
      return void res.end();
    }
    if (!opts.chunkedFiles) {
      res.writeHead(200, { 'Content-Type': 'application/octet-stream', 'Content-Length': String(bytes.length) });
      return void res.end(bytes);
    }
    res.writeHead(200, { 'Content-Type': 'application/octet-stream' });
    let at = 0;
    const more = (): void => {
      while (at < bytes.length && !res.destroyed) {
        if (!res.write(bytes.subarray(at, (at += 64 * 1024)))) return void res.once('drain', more);
      }
      if (!res.destroyed) res.end();
    };
    more();
  }

  type TokenKind = 'bot' | 'app';
  const methods: Record<string, { token: TokenKind; run: (p: Record<string, unknown>, at: number) => MethodResult }> = {
    'auth.test': {
      token: 'bot',
      run: () =>
        ok({
          url: `https://${teamDomain}.slack.com/`,
          team: teamName,
          user: botName,
          team_id: teamId,
          user_id: botUserId,
          bot_id: botId,
          is_enterprise_install: false,
        }),
    },
    'chat.postMessage': { token: 'bot', run: postMessage },
    'apps.connections.open': {
      token: 'app',
      run: () => {
        const ticket = randomUUID();
        tickets.add(ticket);
        return ok({ url: `ws://${hostForUrl}:${port}/link/?ticket=${ticket}&app_id=${appId}` });
      },
    },
    'assistant.threads.setStatus': { token: 'bot', run: setStatus },
    'files.getUploadURLExternal': { token: 'bot', run: getUploadUrl },
    'files.completeUploadExternal': { token: 'bot', run: completeUpload },
  };

  function takeArmed(method: string): Armed | undefined {
    const q = armed.get(method);
    const a = q?.[0];
    if (!q || !a) return undefined;
    if (--a.remaining <= 0) q.shift();
    return a;
  }

  function sendJson(res: http.ServerResponse, status: number, json: unknown, headers: Record<string, string> = {}): void {
    const body = Buffer.from(JSON.stringify(json));
    res.writeHead(status, { 'Content-Type': 'application/json; charset=utf-8', 'Content-Length': String(body.length), ...headers });
    res.end(body);
  }

  function empty(res: http.ServerResponse, status: number): void {
    res.writeHead(status, { 'Content-Length': '0' });
    res.end();
  }

  async function handleApi(req: http.IncomingMessage, res: http.ServerResponse, method: string, query: URLSearchParams): Promise<void> {
    const at = Date.now();
    const read = await readBody(req);
    if (res.writableEnded || res.destroyed) return;
    if (read.tooLarge) {
      res.setHeader('Connection', 'close');
      return empty(res, 413);
    }
    const raw = read.body ?? Buffer.alloc(0);
    const ctHeader = req.headers['content-type'];
    const contentType = ctHeader?.split(';')[0]?.trim().toLowerCase();
    const params: Record<string, unknown> = Object.fromEntries(query);
    let formToken: { token: string; from: 'form' | 'query' } | undefined =
      typeof params.token === 'string' ? { token: params.token, from: 'query' } : undefined;
    const warnings: string[] = [];

    const call: ApiCall = {
      method,
      httpMethod: req.method ?? '',
      ...(contentType !== undefined ? { contentType } : {}),
      params,
      status: 200,
      response: {},
      at,
    };
    calls.push(call);

    const answer = (r: MethodResult): void => {
      const json = warnings.length
        ? {
            ...r.json,
            warning: warnings.join(','),
            response_metadata: { ...(isObject(r.json.response_metadata) ? r.json.response_metadata : {}), warnings },
          }
        : r.json;
      call.status = r.status ?? 200;
      call.response = json;
      sendJson(res, call.status, json, r.headers);
    };

    const spec = Object.hasOwn(methods, method) ? methods[method] : undefined;
    if (!spec) return answer({ status: 404, json: { ok: false, error: 'unknown_method', req_method: method } });

    if (raw.length > 0) {
      const text = raw.toString('utf8');
      if (!contentType) return answer(fail('missing_post_type'));
      if (contentType === 'application/x-www-form-urlencoded') {
        const form = new URLSearchParams(text);
        for (const [k, v] of form) params[k] = v;
        if (form.has('token')) formToken = { token: form.get('token')!, from: 'form' };
      } else if (contentType === 'application/json') {
        if (!/charset=/i.test(ctHeader ?? '')) warnings.push('missing_charset');
        let json: unknown;
        try {
          json = JSON.parse(text);
        } catch {
          return answer(fail('invalid_json'));
        }
        if (!isObject(json)) return answer(fail('json_not_object'));
        // A token in a JSON body is not read (Slack: JSON callers send it in Authorization).
        Object.assign(params, json);
      } else if (contentType === 'multipart/form-data') {
        return answer(fail('invalid_form_data'));
      } else {
        return answer(fail('invalid_post_type'));
      }
    }

    const auth = req.headers.authorization;
    const bearer = auth && /^Bearer\s+(\S+)\s*$/i.exec(auth)?.[1];
    const token = bearer || formToken?.token;
    if (bearer) {
      call.token = bearer;
      call.tokenFrom = 'header';
    } else if (formToken) {
      call.token = formToken.token;
      call.tokenFrom = formToken.from;
    }
    if (!token) return answer(fail('not_authed'));
    const kind: TokenKind | undefined = token === botToken ? 'bot' : token === appToken ? 'app' : undefined;
    if (!kind) return answer(fail('invalid_auth'));
    if (kind !== spec.token) return answer(fail('not_allowed_token_type'));

    const a = takeArmed(method);
    if (a) {
      const error = a.kind === 'ratelimit' ? 'ratelimited' : a.error!;
      if (method === 'chat.postMessage') {
        const channel = typeof params.channel === 'string' ? params.channel : '';
        const text = typeof params.text === 'string' ? params.text : '';
        posted.push({ channel, requestedChannel: channel, text, ok: false, error, params, at });
      }
      if (a.kind === 'ratelimit') {
        return answer({ status: 429, headers: { 'Retry-After': String(a.retryAfter ?? 1) }, json: { ok: false, error } });
      }
      return answer(fail(error));
    }
    answer(spec.run(params, at));
  }

  // -------------------------------------------------------------------------------------------
  // HTTP + WebSocket server

  const server = http.createServer((req, res) => {
    let u: URL;
    try {
      u = new URL(req.url ?? '/', 'http://fake');
    } catch {
      req.resume();
      return empty(res, 400);
    }
    const upload = /^\/upload\/v1\/([0-9a-f]{24})$/.exec(u.pathname);
    if (upload) {
      handleUpload(req, res, upload[1]!).catch(() => (res.headersSent ? res.destroy() : empty(res, 500)));
      return;
    }
    const shared = new RegExp(`^/files-pri/${teamId}-(F[0-9A-F]+)/(?:download/)?[^/]+$`).exec(u.pathname);
    if (shared && req.method === 'GET') return serveShared(req, res, shared[1]!);
    const m = /^\/api\/([A-Za-z0-9_.]+)$/.exec(u.pathname);
    if (m && (req.method === 'POST' || req.method === 'GET')) {
      handleApi(req, res, m[1]!, u.searchParams).catch(() => {
        if (!res.headersSent) empty(res, 500);
        else res.destroy();
      });
      return;
    }
    req.resume();
    empty(res, m ? 405 : 404);
  });
  server.on('connection', (s: Socket) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  server.on('clientError', (_e, socket: Duplex) => {
    if (socket.writable) socket.end('HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n');
    else socket.destroy();
  });

  const wss = new WebSocketServer({ noServer: true, maxPayload: MAX_BODY });
  server.on('upgrade', (req: http.IncomingMessage, socket: Duplex, head: Buffer) => {
    socket.on('error', () => {});
    let u: URL | undefined;
    try {
      u = new URL(req.url ?? '/', 'http://fake');
    } catch {
      u = undefined;
    }
    const ticket = u?.searchParams.get('ticket');
    if (closed || !u || (u.pathname !== '/link/' && u.pathname !== '/link') || !ticket || !tickets.has(ticket)) {
      socket.end('HTTP/1.1 401 Unauthorized\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
      return;
    }
    tickets.delete(ticket);
    wss.handleUpgrade(req, socket, head, (ws) => onSocket(ws));
  });

  function onSocket(ws: WebSocket): void {
    const conn: SocketConn = { id: ++connSeq, ws, leaving: false };
    conns.add(conn);
    ws.on('error', () => {});
    ws.on('message', (data, isBinary) => {
      try {
        onSocketMessage(conn, data, isBinary);
      } catch {
        // never let a client frame take the fake down
      }
    });
    ws.on('close', () => {
      conns.delete(conn);
      if (conn.ping) clearInterval(conn.ping);
    });
    if (socketPingMs > 0) {
      conn.ping = setInterval(() => {
        if (ws.readyState === ws.OPEN) ws.ping(`Ping from applink-fake-${conn.id}`);
      }, socketPingMs);
      conn.ping.unref();
    }
    ws.send(
      JSON.stringify({
        type: 'hello',
        num_connections: openConns().length,
        debug_info: { host: `applink-fake-${conn.id}`, build_number: 1, approximate_connection_time: 18060 },
        connection_info: { app_id: appId },
      }),
    );
    releaseHeld();
  }

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, opts.host ?? '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  const host = opts.host ?? '127.0.0.1';
  const hostForUrl = host.includes(':') ? `[${host}]` : host;
  const url = `http://${hostForUrl}:${port}`;

  // -------------------------------------------------------------------------------------------
  // Test-facing API

  function threadFields(channel: string, threadTs: string | undefined, fallbackUser: string): Record<string, unknown> {
    if (threadTs === undefined) return {};
    return { thread_ts: threadTs, parent_user_id: known.get(`${channel}|${threadTs}`)?.user ?? fallbackUser };
  }

  const api: FakeSlack = {
    url,
    apiUrl: `${url}/api/`,
    botToken,
    appToken,
    signingSecret,
    teamId,
    appId,
    botUserId,
    botId,
    requestUrl: () => requestUrl,
    setRequestUrl(u) {
      requestUrl = u;
      if (u) releaseHeld();
    },

    calls,
    posted,
    statuses,
    httpAttempts,
    envelopes,
    acks,
    socketNoise,
    dropped,
    events,

    repliesIn: (channel, threadTs) =>
      posted.filter(
        (p) => p.ok && (p.channel === channel || p.requestedChannel === channel) && (threadTs === undefined || p.thread_ts === threadTs),
      ),

    rateLimitNext(method, retryAfterSeconds, count = 1) {
      const q = armed.get(method) ?? [];
      q.push({ kind: 'ratelimit', retryAfter: retryAfterSeconds, remaining: count });
      armed.set(method, q);
    },
    failNext(method, error, count = 1) {
      const q = armed.get(method) ?? [];
      q.push({ kind: 'fail', error, remaining: count });
      armed.set(method, q);
    },

    deliverMessage(o) {
      channelTypes.set(o.channel, o.channelType);
      if (o.edited) {
        const target =
          o.edited === true
            ? [...history].reverse().find((k) => k.channel === o.channel && k.user === o.user)
            : known.get(`${o.channel}|${o.edited.ts}`);
        const origTs = o.edited === true ? target?.ts : o.edited.ts;
        if (!origTs) throw new Error(`deliverMessage: no earlier message by ${o.user} in ${o.channel} to edit`);
        const previousText = (o.edited !== true ? o.edited.previousText : undefined) ?? target?.text ?? '';
        const threadTs = o.threadTs ?? target?.threadTs;
        const editTs = nextTs();
        const base = {
          type: 'message',
          user: o.user,
          ts: origTs,
          team: teamId,
          ...(target?.clientMsgId ? { client_msg_id: target.clientMsgId } : {}),
          ...threadFields(o.channel, threadTs, o.user),
        };
        const event: SlackEvent = {
          type: 'message',
          subtype: 'message_changed',
          message: { ...base, text: o.text, blocks: richTextBlocks(o.text), edited: { user: o.user, ts: editTs } },
          previous_message: { ...base, text: previousText, blocks: richTextBlocks(previousText) },
          channel: o.channel,
          hidden: true,
          ts: editTs,
          event_ts: editTs,
          channel_type: o.channelType,
        };
        if (target) target.text = o.text;
        const d = enqueue(event, o.mode, editTs);
        return { ...d, ts: origTs };
      }
      const ts = nextTs();
      const clientMsgId = randomUUID();
      const event: SlackEvent = {
        ...(o.files?.length ? { subtype: 'file_share', files: o.files, upload: false, display_as_bot: false } : {}),
        client_msg_id: clientMsgId,
        type: 'message',
        text: o.text,
        user: o.user,
        ts,
        team: teamId,
        blocks: richTextBlocks(o.text),
        ...threadFields(o.channel, o.threadTs, o.user),
        channel: o.channel,
        event_ts: ts,
        channel_type: o.channelType,
      };
      remember({
        channel: o.channel,
        ts,
        user: o.user,
        text: o.text,
        clientMsgId,
        ...(o.threadTs !== undefined ? { threadTs: o.threadTs } : {}),
      });
      return enqueue(event, o.mode, ts);
    },

    addFile(data, o) {
      const id = newFileId();
      sharedFiles.set(id, data);
      const now = Math.floor(Date.now() / 1000);
      const base = `http://${hostForUrl}:${port}/files-pri/${teamId}-${id}`;
      return {
        id,
        created: now,
        timestamp: now,
        name: o.name,
        title: o.name,
        mimetype: o.mimetype,
        filetype: o.name.split('.').pop() ?? 'binary',
        user: o.user ?? 'U0ALICE01',
        size: o.size ?? data.length,
        mode: 'hosted',
        is_external: false,
        url_private: `${base}/${encodeURIComponent(o.name)}`,
        url_private_download: `${base}/download/${encodeURIComponent(o.name)}`,
        permalink: `https://${teamDomain}.slack.com/files/${o.user ?? 'U0ALICE01'}/${id}/${encodeURIComponent(o.name)}`,
      };
    },
    fileDownloads,
    uploads,

    deliverMention(o) {
      const tag = `<@${botUserId}>`;
      const text = o.text.startsWith(tag) ? o.text : `${tag} ${o.text}`;
      const ts = nextTs();
      const clientMsgId = randomUUID();
      const event: SlackEvent = {
        client_msg_id: clientMsgId,
        type: 'app_mention',
        text,
        user: o.user,
        ts,
        team: teamId,
        blocks: richTextBlocks(text),
        ...threadFields(o.channel, o.threadTs, o.user),
        channel: o.channel,
        event_ts: ts,
      };
      remember({ channel: o.channel, ts, user: o.user, text, clientMsgId, ...(o.threadTs !== undefined ? { threadTs: o.threadTs } : {}) });
      return enqueue(event, o.mode, ts);
    },

    deliverBotMessage(o) {
      const ts = nextTs();
      const event: SlackEvent = {
        type: 'message',
        subtype: 'bot_message',
        text: o.text,
        ts,
        bot_id: o.botId ?? botId,
        ...(o.username !== undefined ? { username: o.username } : {}),
        ...threadFields(o.channel, o.threadTs, botUserId),
        channel: o.channel,
        event_ts: ts,
        channel_type: o.channelType ?? channelTypes.get(o.channel) ?? channelTypeGuess(o.channel),
      };
      remember({ channel: o.channel, ts, text: o.text, ...(o.threadTs !== undefined ? { threadTs: o.threadTs } : {}) });
      return enqueue(event, o.mode, ts);
    },

    deliverEvent(event, o = {}) {
      return enqueue(structuredClone(event), o.mode);
    },

    outcome: (eventId) => outcomes.get(eventId),

    async verifyUrl() {
      if (!requestUrl) throw new Error('verifyUrl: no request URL set');
      const challenge = randomBytes(36).toString('base64url');
      const raw = JSON.stringify({ token: verificationToken, challenge, type: 'url_verification' });
      const headers = signedHeaders(raw);
      const started = Date.now();
      const r = await post(requestUrl, raw, headers);
      record('url_verification', requestUrl, headers, raw, r, started);
      if (r.status !== 200 || r.body === undefined) return false;
      const body = r.body.trim();
      if (body === challenge) return true;
      try {
        const j: unknown = JSON.parse(body);
        if (isObject(j) && j.challenge === challenge) return true;
      } catch {
        // not JSON
      }
      return new URLSearchParams(body).get('challenge') === challenge;
    },

    async postRaw(body, given = {}) {
      if (!requestUrl) throw new Error('postRaw: no request URL set');
      const raw = typeof body === 'string' ? body : JSON.stringify(body);
      const lower = new Map(Object.entries(given).map(([k, v]) => [k.toLowerCase(), { name: k, value: v }]));
      const tsGiven = lower.get('x-slack-request-timestamp')?.value;
      const headers = signedHeaders(raw, typeof tsGiven === 'string' ? tsGiven : undefined);
      for (const name of Object.keys(headers)) {
        const o = lower.get(name.toLowerCase());
        if (o) delete headers[name];
      }
      for (const { name, value } of lower.values()) if (value !== null) headers[name] = value;
      const started = Date.now();
      const r = await post(requestUrl, raw, headers);
      record('raw', requestUrl, headers, raw, r, started);
      return {
        outcome: r.outcome,
        ...(r.status !== undefined ? { status: r.status } : {}),
        ...(r.headers !== undefined ? { headers: r.headers } : {}),
        ...(r.body !== undefined ? { body: r.body } : {}),
        ...(r.error !== undefined ? { error: r.error } : {}),
      };
    },

    sign: (rawBody, timestamp) => slackSignature(signingSecret, timestamp, rawBody),

    socketClients: () => openConns().length,
    socketConnections: () => connSeq,

    async waitForSocketClients(n, timeoutMs = 5_000) {
      await api
        .waitFor(() => (n === 0 ? openConns().length === 0 : openConns().length >= n), timeoutMs)
        .catch(() => {
          throw new Error(`waitForSocketClients(${n}): ${openConns().length} connected after ${timeoutMs} ms`);
        });
    },

    disconnect(reason, o = {}) {
      let n = 0;
      for (const c of openConns()) {
        if (o.connectionId !== undefined && c.id !== o.connectionId) continue;
        c.leaving = true;
        n++;
        try {
          c.ws.send(JSON.stringify({ type: 'disconnect', reason, debug_info: { host: `applink-fake-${c.id}` } }));
        } catch {
          // already closing
        }
        later(() => c.ws.close(1000), o.closeAfterMs ?? 0);
      }
      return n;
    },

    dropSockets() {
      for (const c of [...conns]) {
        c.leaving = true;
        c.ws.terminate();
      }
    },

    waitFor: <T>(pred: () => T | undefined | null | false | 0 | '', timeoutMs = 5_000): Promise<T> => pollUntil(pred, timeoutMs),

    async close() {
      if (closed) return;
      closed = true;
      for (const t of timers) clearTimeout(t);
      timers.clear();
      for (const job of [...jobs]) settle(job, { delivered: false, reason: 'closed' });
      held.length = 0;
      for (const req of inflight) req.destroy();
      inflight.clear();
      for (const c of [...conns]) {
        if (c.ping) clearInterval(c.ping);
        c.ws.terminate();
      }
      conns.clear();
      wss.close();
      server.closeAllConnections();
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  return api;
}
