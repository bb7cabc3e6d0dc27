/**
 * A fake of the Telegram Bot API server (https://core.telegram.org/bots/api) that speaks its wire
 * protocol, for tests of the Telegram bridge. Written from the public Bot API documentation; the
 * details the documentation leaves open (exact error descriptions, clamping, the MarkdownV2/HTML
 * parsers, webhook retry timing) follow the reference server tdlib/telegram-bot-api (Client.cpp,
 * Query.cpp, WebhookActor.cpp, HttpConnection.cpp) and tdlib (td/telegram/MessageEntity.cpp,
 * tdnet HttpReader.cpp, tddb TQueue.cpp).
 *
 * HTTP (any HTTP method; anything the fake answers is JSON, `Content-Type: application/json`):
 * - `/bot<token>/<method>`; the method name is case-insensitive; an empty method name falls back to
 *   a `method` parameter (as the reference server does). Paths not starting with `/bot`, or with no
 *   `/` after the token → 404 `Not Found`. A malformed token (no `:`, starts with `0`, non-numeric
 *   bot id, > 80 chars) → 401 `Unauthorized: invalid token specified`; a well-formed but wrong one →
 *   401 `Unauthorized`. Unknown method → 404 `Not Found: method not found`.
 * - Parameters: query string first (it wins on duplicates), then the body: `application/json` (a
 *   top-level object; string members as is, any other member as its JSON text, so `reply_parameters`
 *   may be an object or a JSON string), `application/x-www-form-urlencoded`, or `multipart/form-data`
 *   (parts with a filename are files: `document`, or any name referenced as `attach://<name>`).
 *   Other content types: the body is ignored. `Content-Encoding` other than identity → 415.
 * - Bounds: body ≤ `maxUploadBytes` (10 MB) for multipart, ≤ `maxBodyBytes` (1 MB) otherwise, else
 *   413 `Request Entity Too Large…` (the body is drained first so the client can read the answer);
 *   ≤ 200 multipart parts. Malformed JSON / multipart → 400 `Bad Request: …`. Never crashes.
 * - Answers: `{"ok":true,"result":…[,"description":…]}` or
 *   `{"ok":false,"error_code":N,"description":"…"[,"parameters":{…}]}` with HTTP status N; a 429
 *   carries `parameters.retry_after` and a `Retry-After` header.
 *
 * Methods:
 * - `getMe` → the bot's User with the getMe-only fields (can_join_groups, …).
 * - `getUpdates` (offset, limit clamped to 1–100, default 100; timeout clamped to 0–50 s;
 *   allowed_updates): updates with update_id < offset are confirmed and forgotten forever;
 *   unconfirmed ones come back on every call; a negative offset keeps only the last -offset updates
 *   (all earlier ones are forgotten) and returns from the head; an offset more than 10 past the next
 *   update id is ignored (TQueue's "from_id is in the future"). With timeout > 0 and nothing to
 *   return, the request is held until an update arrives (answered on the next tick, so updates
 *   injected together come together) or the timeout ends (`[]`). A new getUpdates that has to wait
 *   too ends a held one with 409 `Conflict: terminated by other getUpdates request; make sure that
 *   only one bot instance is running`. While a webhook is set → 409 `Conflict: can't use getUpdates
 *   method while webhook is active; use deleteWebhook to delete the webhook first`.
 * - `setWebhook` (url, secret_token 0–256 of A-Za-z0-9_-, drop_pending_updates, max_connections,
 *   allowed_updates) → true with description `Webhook was set` / `Webhook is already set`; ends a
 *   held getUpdates with 409 `Conflict: terminated by setWebhook request`. Errors: `Bad Request:
 *   invalid webhook URL specified`, `Bad Request: secret token is too long`, `Bad Request: secret
 *   token contains unallowed characters`. `deleteWebhook` (drop_pending_updates) → true,
 *   `Webhook was deleted` / `Webhook is already deleted`. drop_pending_updates forgets the queue.
 * - `getWebhookInfo` → {url ('' when polling), has_custom_certificate, pending_update_count,
 *   last_error_date?, last_error_message?, max_connections?, ip_address?, allowed_updates?}.
 * - Webhook delivery: each update is POSTed as JSON to the url (`Content-Type: application/json`,
 *   `X-Telegram-Bot-Api-Secret-Token` when set), one at a time, in update_id order. A 2xx answer
 *   confirms it; a non-2xx answer, a connection error or a timeout keeps it pending and records
 *   last_error (`Wrong response from the webhook: 500 Internal Server Error`, `Connection refused`,
 *   `Webhook connection closed`, `Read timeout expired`). Retries as the reference server: the
 *   first retry at once, then `webhookBackoffMs`, doubling, capped at `webhookMaxBackoffMs`; a
 *   `Retry-After: N` answer waits N s (capped likewise). Every attempt is recorded.
 * - `sendMessage` (chat_id, text, parse_mode, entities, reply_parameters | reply_to_message_id +
 *   allow_sending_without_reply, message_thread_id, link_preview_options | disable_web_page_preview)
 *   → Message (message_id increasing per chat, from = the bot, chat, date, text, entities,
 *   reply_to_message, message_thread_id + is_topic_message in forum chats). Checks in the reference
 *   server's order: `message text is empty` (text param empty); `text must be encoded in UTF-8`
 *   (half a surrogate pair, as tdlib refuses it); `text is too long` (> 32768 bytes
 *   before parsing); `unsupported parse_mode`; `can't parse entities: …` (MarkdownV2, HTML and
 *   legacy Markdown parsed like tdlib, e.g. `Character '.' is reserved and must be escaped with the
 *   preceding '\'`, `Can't find end of Bold entity at byte offset 0`); reply/link-preview JSON;
 *   `chat_id is empty` / `chat not found`; `message to be replied not found`; then on the parsed
 *   text (control characters → spaces, \r dropped, leading/trailing spaces and newlines trimmed):
 *   `text must be non-empty`, `message is too long` (> 4096 Unicode code points).
 *   All prefixed `Bad Request: ` with status 400.
 * - `sendDocument` (chat_id, document: an uploaded file part, `attach://name`, a file_id the fake
 *   issued, or an http(s) URL; caption ≤ 1024 code points after parsing, parse_mode,
 *   caption_entities, reply as above) → Message with `document` {file_name, mime_type, file_id,
 *   file_unique_id, file_size}. `there is no document in the request`, `file must be non-empty`,
 *   `wrong file identifier/HTTP URL specified`, `message caption is too long`.
 * - `sendPhoto` (chat_id, photo: as `document` above; caption as above) → Message with `photo`
 *   [PhotoSize {file_id, file_unique_id, width, height, file_size}]. An upload over 10 MB →
 *   `Bad Request: PHOTO_SAVE_FILE_INVALID`; bytes that are not a JPEG, PNG, WebP or GIF →
 *   `Bad Request: IMAGE_PROCESS_FAILED` (the reference server's words for what tdlib cannot read
 *   as an image); `there is no photo in the request`.
 * - `getFile` (file_id) → File {file_id, file_unique_id, file_size?, file_path}; the file is then
 *   served at `GET /file/bot<token>/<file_path>` (Content-Length, or chunked with `chunkedFiles`),
 *   404 for an unknown path or token. A file over 20 MiB → `Bad Request: file is too big` (bots
 *   download at most 20 MB: the reference server's MAX_DOWNLOAD_FILE_SIZE, 20 << 20); an unknown file_id → `Bad Request: invalid file_id`. Files are those
 *   the fake issued for uploads and those a test added with `addFile` (the files people send).
 * - `sendChatAction` (chat_id, action: typing, upload_document, …, message_thread_id) → true;
 *   `wrong parameter action in request` (checked before the chat).
 * - A private chat that `blockChat()` marks answers sends and actions with 403 `Forbidden: bot was
 *   blocked by the user`. `failNext()` injects one-off errors (429 with retry_after, 403, 5xx, a raw
 *   non-JSON body, or a reset connection); for send methods it fires after validation, for others
 *   before. `setHandler()` adds or overrides a method.
 *
 * Chats are known once an update mentioned them (deliverText / deliverRaw) or via `chats`/`addChat`;
 * `chat_id` may be the numeric id (as a string in forms) or `@username`.
 *
 * Not modelled (see the reference server): the anti-busy-loop tweaks of getUpdates (a repeated
 * offset within 3 s forces timeout ≥ 3, within 0.5 s limit 1), the 3 s delay of a second 409 within
 * 3 s, webhook verification on setWebhook, the HTTPS/port rules for webhook URLs (this fake only
 * delivers over plain http and rejects https URLs), parallel per-chat webhook queues
 * (max_connections), answers-in-webhook-replies, update expiry after 24 h, entity auto-detection
 * in sent messages (urls, hashtags…), and transport-level errors answered with empty bodies (this
 * fake answers them as JSON).
 *
 * Only node:http; binds to 127.0.0.1:0 unless told otherwise.
 *
 * @example
 * const tg = await startFakeTelegram();
 * // start the bridge with TELEGRAM_API=tg.url, TELEGRAM_TOKEN=tg.token, then:
 * const up = tg.deliverText({ chat: { id: 42, type: 'private' }, from: { id: 42, first_name: 'Ann' }, text: '/start' });
 * await tg.waitFor(() => tg.repliesTo(42).length > 0);
 * expect(tg.repliesTo(42)[0]!.text).toContain('…');
 * await tg.close();
 */
import http from 'node:http';
import { randomBytes } from 'node:crypto';
import type { AddressInfo, Socket } from 'node:net';
import { pollUntil } from './poll.js';

// ---------------------------------------------------------------------------------------------
// Wire types (the subset the fake reads and writes)

export interface User {
  id: number;
  is_bot: boolean;
  first_name: string;
  last_name?: string;
  username?: string;
  language_code?: string;
  [k: string]: unknown;
}

export type ChatType = 'private' | 'group' | 'supergroup' | 'channel';

export interface Chat {
  id: number;
  type: ChatType;
  title?: string;
  username?: string;
  first_name?: string;
  last_name?: string;
  is_forum?: true;
  [k: string]: unknown;
}

export interface MessageEntity {
  type: string;
  offset: number;
  length: number;
  url?: string;
  user?: User;
  language?: string;
  custom_emoji_id?: string;
  unix_time?: number;
  [k: string]: unknown;
}

export interface Document {
  file_name?: string;
  mime_type?: string;
  file_id: string;
  file_unique_id: string;
  file_size?: number;
}

export interface Message {
  message_id: number;
  from?: User;
  chat: Chat;
  date: number;
  edit_date?: number;
  message_thread_id?: number;
  is_topic_message?: true;
  reply_to_message?: Message;
  text?: string;
  entities?: MessageEntity[];
  caption?: string;
  caption_entities?: MessageEntity[];
  document?: Document;
  [k: string]: unknown;
}

export interface Update {
  update_id: number;
  message?: Message;
  edited_message?: Message;
  [k: string]: unknown;
}

export interface WebhookInfo {
  url: string;
  has_custom_certificate: boolean;
  pending_update_count: number;
  last_error_date?: number;
  last_error_message?: string;
  max_connections?: number;
  ip_address?: string;
  allowed_updates?: string[];
}

// ---------------------------------------------------------------------------------------------
// Recording types

export interface ApiCall {
  /** The method as lower-cased by the server (e.g. 'sendmessage'). */
  method: string;
  httpMethod: string;
  /** All parameters as strings (query string + body), after parsing. */
  params: Record<string, string>;
  /** Names of uploaded file parts. */
  files: string[];
  at: number;
  /** HTTP status answered (undefined while held, e.g. a long poll; 0 for a reset connection). */
  status?: number;
  /** The JSON answered. */
  response?: unknown;
}

export interface SentDocument {
  /** 'upload' (a file part), 'file_id' (one the fake issued earlier) or 'url'. */
  source: 'upload' | 'file_id' | 'url';
  fileName?: string;
  mimeType?: string;
  /** The uploaded bytes ('upload' and a re-sent file_id of an upload). */
  bytes?: Buffer;
  /** For 'file_id' / 'url': the string given. */
  ref?: string;
}

export interface PhotoSize {
  file_id: string;
  file_unique_id: string;
  width: number;
  height: number;
  file_size?: number;
}

export interface SentMessage {
  method: 'sendMessage' | 'sendDocument' | 'sendPhoto';
  /** chat_id exactly as received. */
  chatIdParam: string;
  /** The resolved chat id (undefined when the chat was not found). */
  chatId?: number;
  /** sendMessage: text as received (with markup). */
  text?: string;
  /** sendDocument, sendPhoto: caption as received. */
  caption?: string;
  parseMode?: string;
  replyToMessageId?: number;
  messageThreadId?: number;
  linkPreviewOptions?: unknown;
  /** sendDocument: the document; sendPhoto: the photo (in the same shape). */
  document?: SentDocument;
  ok: boolean;
  error?: { code: number; description: string };
  /** The Message returned on success. */
  message?: Message;
  params: Record<string, string>;
  at: number;
}

export interface ChatActionCall {
  chatIdParam: string;
  chatId?: number;
  action: string;
  messageThreadId?: number;
  ok: boolean;
  error?: { code: number; description: string };
  at: number;
}

export interface WebhookDelivery {
  url: string;
  updateId: number;
  update: Update;
  /** 1 for the first attempt of this update under this webhook, then 2, 3… */
  attempt: number;
  /** The X-Telegram-Bot-Api-Secret-Token sent, if any. */
  secretToken?: string;
  /** HTTP status of the answer (undefined on a connection error). */
  status?: number;
  /** last_error_message form, when the attempt failed. */
  error?: string;
  ok: boolean;
  at: number;
  ms: number;
}

export interface Failure {
  /** HTTP status and error_code. */
  code: number;
  /** Default by code: 429 `Too Many Requests: retry after N`, 403 `Forbidden: bot was blocked by
   * the user`, 400 `Bad Request`, 401 `Unauthorized`, 409 `Conflict`, 5xx their reason phrase. */
  description?: string;
  /** 429: parameters.retry_after and the Retry-After header (default 1). */
  retryAfter?: number;
  /** Extra `parameters` (e.g. { migrate_to_chat_id }). */
  parameters?: Record<string, unknown>;
  /** Answer this raw body instead (Content-Type text/html), as a proxy in front would. */
  body?: string;
  /** Destroy the connection without answering. */
  reset?: boolean;
  /** How many matching calls fail. Default 1; Infinity until clearFailures(). */
  count?: number;
  /** Only calls for this chat id (send methods). */
  chatId?: number;
}

export interface DeliverTextOptions {
  chat: {
    id: number;
    type: 'private' | 'group' | 'supergroup';
    title?: string;
    username?: string;
    is_forum?: boolean;
    first_name?: string;
    last_name?: string;
  };
  from: { id: number; first_name: string; last_name?: string; username?: string; is_bot?: boolean; language_code?: string };
  text: string;
  /** A message id in the same chat the fake knows (delivered or sent), or a full Message. */
  reply_to_message?: number | Message;
  message_thread_id?: number;
  /** Override the auto-detected entities (bot_command, mention). */
  entities?: MessageEntity[];
  message_id?: number;
  date?: number;
}

export interface DeliverEditOptions {
  chat: DeliverTextOptions['chat'];
  from: DeliverTextOptions['from'];
  message_id: number;
  text: string;
  edit_date?: number;
  entities?: MessageEntity[];
}

export type MethodHandler = (params: Record<string, string>, files: Record<string, UploadedFile>) => unknown;

export interface UploadedFile {
  field: string;
  filename: string;
  contentType?: string;
  data: Buffer;
}

export interface FakeTelegramOptions {
  /** The bot token. Default '7000000001:AAF4keT0kenForBerthTestsOnly-0123456'. The bot's id is its prefix. */
  token?: string;
  /** The bot's User (getMe). */
  bot?: {
    first_name?: string;
    username?: string;
    can_join_groups?: boolean;
    can_read_all_group_messages?: boolean;
    supports_inline_queries?: boolean;
  };
  /** Chats known from the start (e.g. a group the bot is in). */
  chats?: Chat[];
  /** The first update_id. Default 100000001 (real ids start at an arbitrary positive number). */
  firstUpdateId?: number;
  /** Delay of the second retry of a webhook update (the reference server: 2 s). Default 50. */
  webhookBackoffMs?: number;
  /** Cap of the webhook retry delay (the reference server: 60–120 s). Default 1000. */
  webhookMaxBackoffMs?: number;
  /** Webhook request timeout. Default 10000. */
  webhookTimeoutMs?: number;
  /** Test shortcut: hold a long poll at most this long (the protocol's timeout is in seconds). */
  longPollCapMs?: number;
  /** Default 1 MB. */
  maxBodyBytes?: number;
  /** Multipart bodies. Default 10 MB. */
  maxUploadBytes?: number;
  /** Serve downloads (`/file/bot…`) chunked, without Content-Length (as a proxy in front may). */
  chunkedFiles?: boolean;
  host?: string;
  port?: number;
}

export interface FakeTelegram {
  /** e.g. http://127.0.0.1:41234 (the API root; methods live at `${url}/bot${token}/…`). */
  url: string;
  token: string;
  /** `${url}/bot${token}` */
  apiBase: string;
  bot: User;
  /** Every request that reached a method (after auth), in arrival order. */
  calls: ApiCall[];
  /** Every sendMessage / sendDocument, failed ones included (`ok: false`). */
  sent: SentMessage[];
  /** Every sendChatAction, failed ones included. */
  actions: ChatActionCall[];
  /** Every webhook delivery attempt. */
  webhookDeliveries: WebhookDelivery[];
  /** Every update injected and queued, in order (confirmed ones included). */
  updates: Update[];
  /** Updates dropped at injection because allowed_updates excluded their type. */
  filtered: Update[];
  /** Successful sends (sendMessage and sendDocument) to this chat id. */
  repliesTo(chatId: number): SentMessage[];
  /** Inject an incoming text message (Update.message); returns the Update. */
  deliverText(opts: DeliverTextOptions): Update;
  /** Inject an edited_message Update. */
  deliverEdit(opts: DeliverEditOptions): Update;
  /** Inject any Update; update_id is assigned when missing. Chats and messages in it are learnt. */
  deliverRaw(update: Omit<Update, 'update_id'> & { update_id?: number }): Update;
  /** Make a chat known without an update. */
  addChat(chat: Chat): void;
  /** A file as a person sent it (the ids to put in a message's photo/document/voice…). `fileSize: null`: getFile leaves file_size out; a number: it says that (true or not). */
  addFile(data: Buffer, opts?: { fileSize?: number | null }): { file_id: string; file_unique_id: string; file_size?: number };
  /** Every file path downloaded through /file/bot…, in order. */
  downloads: string[];
  /** 403 `Forbidden: bot was blocked by the user` for sends to this chat until unblocked. */
  blockChat(chatId: number, blocked?: boolean): void;
  /** The next matching call(s) of `method` ('*' for any) fail. */
  failNext(method: string, failure: Failure): void;
  clearFailures(): void;
  /** Add or override a method: the handler's return value is the result; throw
   * `new TelegramApiError(code, description)` to fail. */
  setHandler(method: string, handler: MethodHandler | undefined): void;
  /** Unconfirmed updates (what getWebhookInfo calls pending_update_count). */
  pending(): Update[];
  pendingCount(): number;
  /** The webhook set, if any. */
  webhook(): { url: string; secretToken?: string } | undefined;
  /** Whether a getUpdates is currently held. */
  longPolling(): boolean;
  /** The messages the fake knows in a chat (delivered and sent), by message_id. */
  messages(chatId: number): Message[];
  /** Polls pred every 10 ms; resolves with its first truthy value. */
  waitFor<T>(pred: () => T | undefined | null | false | 0 | '', timeoutMs?: number): Promise<T>;
  /** Answers held long polls with [] at once, stops webhook delivery, closes the server. */
  close(): Promise<void>;
}

/** Thrown by method handlers (and usable by setHandler handlers) to answer an error. */
export class TelegramApiError extends Error {
  constructor(
    readonly code: number,
    readonly description: string,
    readonly parameters?: Record<string, unknown>,
  ) {
    super(description);
  }
}

const badRequest = (msg: string): TelegramApiError => new TelegramApiError(400, `Bad Request: ${msg}`);

// ---------------------------------------------------------------------------------------------
// Text formatting: ports of tdlib's parse_markdown_v2, parse_html and parse_markdown, then the part
// of fix_formatted_text that decides the final text (cleaning, trimming).

type TdType =
  | 'Bold'
  | 'Italic'
  | 'Underline'
  | 'Strikethrough'
  | 'Spoiler'
  | 'Code'
  | 'Pre'
  | 'PreCode'
  | 'TextUrl'
  | 'CustomEmoji'
  | 'BlockQuote'
  | 'ExpandableBlockQuote';

class ParseError extends Error {}

const isFirstUnit = (c: number): boolean => (c & 0xc0) !== 0x80;
const isSpaceByte = (c: number): boolean => c === 0x20 || c === 0x09 || c === 0x0d || c === 0x0a || c === 0 || c === 0x0b;
const ch = (s: string): number => s.charCodeAt(0);

/** LinkManager::get_link_user_id + get_checked_link, approximated: a text_mention for tg://user?id=,
 * else a normalised http(s)/tg/ton link, else nothing (the entity is skipped). */
function linkEntity(rawUrl: string, offset: number, length: number): MessageEntity | undefined {
  const url = rawUrl.trim();
  const user = /^tg:(?:\/\/)?user\?id=(\d{1,15})$/i.exec(url);
  if (user) return { type: 'text_mention', offset, length, user: { id: Number(user[1]), is_bot: false, first_name: '' } };
  const special = /^(tg|ton|tonsite):(?:\/\/)?([A-Za-z0-9_.-]+)(.*)$/is.exec(url);
  if (special) return { type: 'text_link', offset, length, url: `${special[1]!.toLowerCase()}://${special[2]}${special[3]}` };
  let parsed: URL;
  try {
    parsed = new URL(/^[a-z][a-z0-9+.-]*:\/\//i.test(url) ? url : `http://${url}`);
  } catch {
    return undefined;
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') return undefined;
  if (!parsed.hostname.includes('.') && !parsed.hostname.startsWith('[')) return undefined;
  return { type: 'text_link', offset, length, url: parsed.href };
}

function tdEntity(type: TdType, offset: number, length: number, argument: string): MessageEntity {
  const base = { offset, length };
  switch (type) {
    case 'Bold':
      return { type: 'bold', ...base };
    case 'Italic':
      return { type: 'italic', ...base };
    case 'Underline':
      return { type: 'underline', ...base };
    case 'Strikethrough':
      return { type: 'strikethrough', ...base };
    case 'Spoiler':
      return { type: 'spoiler', ...base };
    case 'Code':
      return { type: 'code', ...base };
    case 'Pre':
      return { type: 'pre', ...base };
    case 'PreCode':
      return { type: 'pre', ...base, language: argument };
    case 'CustomEmoji':
      return { type: 'custom_emoji', ...base, custom_emoji_id: argument };
    case 'BlockQuote':
      return { type: 'blockquote', ...base };
    case 'ExpandableBlockQuote':
      return { type: 'expandable_blockquote', ...base };
    case 'TextUrl':
      return { type: 'text_link', ...base, url: argument };
  }
}

function sortEntities(entities: MessageEntity[]): MessageEntity[] {
  return entities.sort((a, b) => a.offset - b.offset || b.length - a.length);
}

/** tdlib parse_markdown_v2, byte for byte (offsets in errors are UTF-8 byte offsets). */
export function parseMarkdownV2(input: string): { text: string; entities: MessageEntity[] } {
  const src = Buffer.from(input, 'utf8');
  const n = src.length;
  const at = (k: number): number => (k < n ? src[k]! : 0);
  const out: number[] = [];
  const entities: MessageEntity[] = [];
  let utf16 = 0;
  interface Nested {
    type: TdType;
    argument: string;
    entityOffset: number;
    entityByteOffset: number;
    entityBeginPos: number;
  }
  const nested: Nested[] = [];
  const reservedErr = (c: number): ParseError =>
    new ParseError(`Character '${String.fromCharCode(c)}' is reserved and must be escaped with the preceding '\\'`);
  const endErr = (e: Nested): ParseError => new ParseError(`Can't find end of ${e.type} entity at byte offset ${e.entityByteOffset}`);
  const readUrl = (from: number): { url: string; end: number } => {
    let i = from;
    const bytes: number[] = [];
    while (i < n && at(i) !== ch(')')) {
      if (at(i) === ch('\\') && at(i + 1) > 0 && at(i + 1) <= 126) {
        bytes.push(at(i + 1));
        i += 2;
        continue;
      }
      bytes.push(at(i++));
    }
    if (at(i) !== ch(')')) throw new ParseError(`Can't find end of a URL at byte offset ${from}`);
    return { url: Buffer.from(bytes).toString('utf8'), end: i };
  };

  let haveBlockquote = false;
  let canStartBlockquote = true;
  for (let i = 0; i < n; i++) {
    const c = at(i);
    if (c === ch('\\') && at(i + 1) > 0 && at(i + 1) <= 126) {
      i++;
      utf16 += 1;
      out.push(at(i));
      if (at(i) !== ch('\r')) canStartBlockquote = at(i) === ch('\n');
      continue;
    }

    let reserved = '_*[]()~`>#+-=|{}.!\n';
    const top = nested[nested.length - 1];
    if (top && (top.type === 'Code' || top.type === 'Pre' || top.type === 'PreCode')) reserved = '`';
    if (c >= 0x80 || c === 0 || !reserved.includes(String.fromCharCode(c))) {
      if (isFirstUnit(c)) {
        utf16 += 1 + (c >= 0xf0 ? 1 : 0);
        if (c !== ch('\r')) canStartBlockquote = false;
      }
      out.push(c);
      continue;
    }

    const isEnd = ((): boolean => {
      if (!top) return false;
      if (haveBlockquote && c === ch('\n') && (i + 1 === n || at(i + 1) !== ch('>'))) return true;
      switch (top.type) {
        case 'Bold':
          return c === ch('*');
        case 'Italic':
          return c === ch('_') && at(i + 1) !== ch('_');
        case 'Code':
          return c === ch('`');
        case 'Pre':
        case 'PreCode':
          return c === ch('`') && at(i + 1) === ch('`') && at(i + 2) === ch('`');
        case 'TextUrl':
        case 'CustomEmoji':
          return c === ch(']');
        case 'Underline':
          return c === ch('_') && at(i + 1) === ch('_');
        case 'Strikethrough':
          return c === ch('~');
        case 'Spoiler':
          return c === ch('|') && at(i + 1) === ch('|');
        default:
          return false;
      }
    })();

    if (!isEnd) {
      let type: TdType | undefined;
      let argument = '';
      const entityByteOffset = i;
      switch (String.fromCharCode(c)) {
        case '_':
          if (at(i + 1) === ch('_')) {
            type = 'Underline';
            i++;
          } else type = 'Italic';
          break;
        case '*':
          type = 'Bold';
          break;
        case '~':
          type = 'Strikethrough';
          break;
        case '|':
          if (at(i + 1) !== ch('|')) throw reservedErr(c);
          i++;
          type = 'Spoiler';
          break;
        case '[':
          type = 'TextUrl';
          break;
        case '`':
          if (at(i + 1) === ch('`') && at(i + 2) === ch('`')) {
            i += 3;
            type = 'Pre';
            let languageEnd = i;
            while (!isSpaceByte(at(languageEnd)) && at(languageEnd) !== ch('`')) languageEnd++;
            if (i !== languageEnd && languageEnd < n && at(languageEnd) !== ch('`')) {
              type = 'PreCode';
              argument = src.subarray(i, languageEnd).toString('utf8');
              i = languageEnd;
            }
            if (at(i) === ch('\n') || at(i) === ch('\r')) {
              if ((at(i + 1) === ch('\n') || at(i + 1) === ch('\r')) && at(i) !== at(i + 1)) i += 2;
              else i++;
            }
            i--;
          } else type = 'Code';
          break;
        case '!':
          if (at(i + 1) !== ch('[')) throw reservedErr(c);
          i++;
          type = 'CustomEmoji';
          break;
        case '\n':
          utf16 += 1;
          out.push(ch('\n'));
          canStartBlockquote = true;
          break;
        case '>':
          if (!canStartBlockquote) throw reservedErr(c);
          if (!haveBlockquote) {
            type = 'BlockQuote';
            haveBlockquote = true;
          }
          break;
        default:
          throw reservedErr(c);
      }
      if (type === undefined) continue;
      nested.push({ type, argument, entityOffset: utf16, entityByteOffset, entityBeginPos: out.length });
      continue;
    }

    // End of an entity.
    let cur = top!;
    let type = cur.type;
    if (c === ch('\n') && type !== 'BlockQuote') {
      const spoilerRightBefore =
        cur.entityByteOffset === i - 2 || (cur.entityByteOffset === i - 3 && out.length !== 0 && out[out.length - 1] === ch('\r'));
      if (type !== 'Spoiler' || !spoilerRightBefore) throw endErr(cur);
      nested.pop();
      cur = nested[nested.length - 1]!;
      if (cur.type !== 'BlockQuote') throw endErr(cur);
      type = 'ExpandableBlockQuote';
    }
    let argument = cur.argument;
    let skip = utf16 === cur.entityOffset;
    let entity: MessageEntity | undefined;
    switch (type) {
      case 'Bold':
      case 'Italic':
      case 'Code':
      case 'Strikethrough':
        break;
      case 'Underline':
      case 'Spoiler':
        i++;
        break;
      case 'Pre':
      case 'PreCode':
        i += 2;
        break;
      case 'TextUrl': {
        let url: string;
        if (at(i + 1) !== ch('(')) {
          url = Buffer.from(out.slice(cur.entityBeginPos)).toString('utf8');
        } else {
          const r = readUrl(i + 2);
          url = r.url;
          i = r.end;
        }
        entity = linkEntity(url, cur.entityOffset, utf16 - cur.entityOffset);
        if (!entity) skip = true;
        break;
      }
      case 'CustomEmoji': {
        if (at(i + 1) !== ch('(')) throw new ParseError('The entity must contain a tg://emoji or tg://time URL');
        const r = readUrl(i + 2);
        i = r.end;
        const emoji = /^tg:\/\/emoji\?id=(\d{1,19})$/i.exec(r.url);
        const time = /^tg:\/\/time\?unix=(\d{1,10})(?:&format=[A-Za-z]*)?$/i.exec(r.url);
        if (emoji) argument = emoji[1]!;
        else if (time)
          entity = { type: 'date_time', offset: cur.entityOffset, length: utf16 - cur.entityOffset, unix_time: Number(time[1]) };
        else throw new ParseError('Invalid tg://emoji or tg://time URL specified');
        break;
      }
      case 'BlockQuote':
      case 'ExpandableBlockQuote':
        haveBlockquote = false;
        out.push(at(i));
        canStartBlockquote = true;
        utf16 += 1;
        skip = false;
        break;
    }
    if (!skip) entities.push(entity ?? tdEntity(type, cur.entityOffset, utf16 - cur.entityOffset, argument));
    nested.pop();
  }
  if (haveBlockquote) {
    let type: TdType = 'BlockQuote';
    const top = nested[nested.length - 1];
    if (top && top.type === 'Spoiler' && top.entityByteOffset === n - 2) {
      nested.pop();
      type = 'ExpandableBlockQuote';
    }
    const bq = nested[nested.length - 1];
    if (bq && bq.type === 'BlockQuote') {
      const length = utf16 - bq.entityOffset;
      if (length !== 0) entities.push(tdEntity(type, bq.entityOffset, length, ''));
      nested.pop();
    }
  }
  const open = nested[nested.length - 1];
  if (open) throw endErr(open);
  return { text: Buffer.from(out).toString('utf8'), entities: sortEntities(entities) };
}

const HTML_TAGS = new Set([
  'a',
  'b',
  'strong',
  'i',
  'em',
  's',
  'strike',
  'del',
  'u',
  'ins',
  'tg-spoiler',
  'tg-emoji',
  'tg-time',
  'span',
  'pre',
  'code',
  'blockquote',
]);

/** tdlib parse_html (offsets in errors are UTF-8 byte offsets). */
export function parseHtml(input: string): { text: string; entities: MessageEntity[] } {
  const src = Buffer.from(input, 'utf8');
  const n = src.length;
  const at = (k: number): number => (k < n ? src[k]! : 0);
  const str = (a: number, b: number): string => src.subarray(a, b).toString('utf8');
  const out: number[] = [];
  const entities: MessageEntity[] = [];
  let utf16 = 0;
  const nested: Array<{ tag: string; argument: string; date: number; entityOffset: number; entityBeginPos: number }> = [];
  const isAlnum = (c: number): boolean => (c >= 0x30 && c <= 0x39) || ((c | 0x20) >= 0x61 && (c | 0x20) <= 0x7a);

  /** decode_html_entity: returns [code point, new position] or undefined. */
  const decodeEntity = (pos: number): [number, number] | undefined => {
    let end = pos + 1;
    let res = 0;
    if (at(pos + 1) === ch('#')) {
      end++;
      if (at(pos + 2) === ch('x')) {
        end++;
        while (/[0-9a-fA-F]/.test(String.fromCharCode(at(end)))) res = res * 16 + parseInt(String.fromCharCode(at(end++)), 16);
      } else {
        while (at(end) >= 0x30 && at(end) <= 0x39) res = res * 10 + (at(end++) - 0x30);
      }
      if (res === 0 || res >= 0x10ffff || end - pos >= 10) return undefined;
    } else {
      while ((at(end) | 0x20) >= 0x61 && (at(end) | 0x20) <= 0x7a) end++;
      const name = str(pos + 1, end);
      const named: Record<string, number> = { lt: 0x3c, gt: 0x3e, amp: 0x26, quot: 0x22 };
      if (!Object.hasOwn(named, name)) return undefined;
      res = named[name]!;
    }
    return [res, at(end) === ch(';') ? end + 1 : end];
  };
  const pushCodePoint = (cp: number, target: number[]): void => {
    for (const b of Buffer.from(String.fromCodePoint(cp), 'utf8')) target.push(b);
  };

  for (let i = 0; i < n; i++) {
    const c = at(i);
    if (c === ch('&')) {
      const d = decodeEntity(i);
      if (d) {
        utf16 += 1 + (d[0] > 0xffff ? 1 : 0);
        pushCodePoint(d[0], out);
        i = d[1] - 1;
        continue;
      }
    }
    if (c !== ch('<')) {
      if (isFirstUnit(c)) utf16 += 1 + (c >= 0xf0 ? 1 : 0);
      out.push(c);
      continue;
    }
    const beginPos = i++;
    if (at(i) !== ch('/')) {
      while (!isSpaceByte(at(i)) && at(i) !== ch('>')) i++;
      if (at(i) === 0) throw new ParseError(`Unclosed start tag at byte offset ${beginPos}`);
      const tag = str(beginPos + 1, i).toLowerCase();
      if (!HTML_TAGS.has(tag)) throw new ParseError(`Unsupported start tag "${tag}" at byte offset ${beginPos}`);
      let argument = '';
      let date = 0;
      while (at(i) !== ch('>')) {
        while (at(i) !== 0 && isSpaceByte(at(i))) i++;
        if (at(i) === ch('>')) break;
        const attrBegin = i;
        while (!isSpaceByte(at(i)) && at(i) !== ch('=') && at(i) !== ch('>') && at(i) !== ch('/') && at(i) !== ch('"') && at(i) !== ch("'"))
          i++;
        const attr = str(attrBegin, i);
        if (attr === '') throw new ParseError(`Empty attribute name in the tag "${tag}" at byte offset ${beginPos}`);
        while (at(i) !== 0 && isSpaceByte(at(i))) i++;
        if (at(i) !== ch('=')) {
          if (at(i) === 0) throw new ParseError(`Unclosed start tag "${tag}" at byte offset ${beginPos}`);
          if (tag === 'blockquote' && attr === 'expandable') argument = '1';
          continue;
        }
        i++;
        while (at(i) !== 0 && isSpaceByte(at(i))) i++;
        if (at(i) === 0) throw new ParseError(`Unclosed start tag "${tag}" at byte offset ${beginPos}`);
        let value: string;
        if (at(i) !== ch("'") && at(i) !== ch('"')) {
          const tokenBegin = i;
          while (isAlnum(at(i)) || at(i) === ch('.') || at(i) === ch('-')) i++;
          value = str(tokenBegin, i).toLowerCase();
          if (!isSpaceByte(at(i)) && at(i) !== ch('>')) throw new ParseError(`Unexpected end of name token at byte offset ${tokenBegin}`);
        } else {
          const endChar = at(i++);
          const bytes: number[] = [];
          while (at(i) !== endChar && at(i) !== 0) {
            if (at(i) === ch('&')) {
              const d = decodeEntity(i);
              if (d) {
                pushCodePoint(d[0], bytes);
                i = d[1];
                continue;
              }
            }
            bytes.push(at(i++));
          }
          if (at(i) === endChar) i++;
          value = Buffer.from(bytes).toString('utf8');
        }
        if (at(i) === 0) throw new ParseError(`Unclosed start tag at byte offset ${beginPos}`);
        if (tag === 'a' && attr === 'href') argument = value;
        else if (tag === 'code' && attr === 'class' && value.startsWith('language-')) argument = value.slice(9);
        else if (tag === 'span' && attr === 'class' && value.startsWith('tg-')) argument = value.slice(3);
        else if (tag === 'tg-emoji' && attr === 'emoji-id') argument = value;
        else if (tag === 'blockquote' && attr === 'expandable') argument = '1';
        else if (tag === 'tg-time' && attr === 'unix') date = Number.parseInt(value, 10) || 0;
        else if (tag === 'tg-time' && attr === 'format') argument = value;
      }
      if (tag === 'span' && argument !== 'spoiler')
        throw new ParseError(`Tag "span" must have class "tg-spoiler" at byte offset ${beginPos}`);
      nested.push({ tag, argument, date, entityOffset: utf16, entityBeginPos: out.length });
      continue;
    }
    // End tag.
    const top = nested[nested.length - 1];
    if (!top) throw new ParseError(`Unexpected end tag at byte offset ${beginPos}`);
    while (!isSpaceByte(at(i)) && at(i) !== ch('>')) i++;
    const endTag = str(beginPos + 2, i).toLowerCase();
    while (isSpaceByte(at(i)) && at(i) !== 0) i++;
    if (at(i) !== ch('>')) throw new ParseError(`Unclosed end tag at byte offset ${beginPos}`);
    if (endTag !== '' && endTag !== top.tag) {
      throw new ParseError(`Unmatched end tag at byte offset ${beginPos}, expected "</${top.tag}>", found "</${endTag}>"`);
    }
    if (utf16 > top.entityOffset) {
      const offset = top.entityOffset;
      const length = utf16 - offset;
      const last = entities[entities.length - 1];
      switch (top.tag) {
        case 'i':
        case 'em':
          entities.push({ type: 'italic', offset, length });
          break;
        case 'b':
        case 'strong':
          entities.push({ type: 'bold', offset, length });
          break;
        case 's':
        case 'strike':
        case 'del':
          entities.push({ type: 'strikethrough', offset, length });
          break;
        case 'u':
        case 'ins':
          entities.push({ type: 'underline', offset, length });
          break;
        case 'tg-spoiler':
        case 'span':
          entities.push({ type: 'spoiler', offset, length });
          break;
        case 'tg-emoji':
          if (!/^[1-9]\d{0,18}$/.test(top.argument)) throw new ParseError('Invalid custom emoji identifier specified');
          entities.push({ type: 'custom_emoji', offset, length, custom_emoji_id: top.argument });
          break;
        case 'tg-time':
          if (top.date > 0) entities.push({ type: 'date_time', offset, length, unix_time: top.date });
          break;
        case 'a': {
          const url = top.argument !== '' ? top.argument : Buffer.from(out.slice(top.entityBeginPos)).toString('utf8');
          const e = linkEntity(url, offset, length);
          if (e) entities.push(e);
          break;
        }
        case 'pre':
          if (last && last.type === 'code' && last.offset === offset && last.length === length && last.language) {
            last.type = 'pre';
          } else entities.push({ type: 'pre', offset, length });
          break;
        case 'code':
          if (last && last.type === 'pre' && last.offset === offset && last.length === length && top.argument !== '') {
            last.language = top.argument;
          } else entities.push({ type: 'code', offset, length, ...(top.argument !== '' ? { language: top.argument } : {}) });
          break;
        case 'blockquote':
          entities.push({ type: top.argument !== '' ? 'expandable_blockquote' : 'blockquote', offset, length });
          break;
      }
    }
    nested.pop();
  }
  const open = nested[nested.length - 1];
  if (open) throw new ParseError(`Can't find end tag corresponding to start tag "${open.tag}"`);
  for (const e of entities) if (e.type === 'code') delete e.language;
  return { text: Buffer.from(out).toString('utf8'), entities: sortEntities(entities) };
}

/** tdlib parse_markdown (legacy `Markdown`). */
export function parseMarkdownLegacy(input: string): { text: string; entities: MessageEntity[] } {
  const src = Buffer.from(input, 'utf8');
  const n = src.length;
  const at = (k: number): number => (k < n ? src[k]! : 0);
  const out: number[] = [];
  const entities: MessageEntity[] = [];
  let utf16 = 0;
  for (let i = 0; i < n; i++) {
    const c = at(i);
    const next = at(i + 1);
    if (c === ch('\\') && (next === ch('_') || next === ch('*') || next === ch('`') || next === ch('['))) {
      i++;
      out.push(at(i));
      utf16++;
      continue;
    }
    if (c !== ch('_') && c !== ch('*') && c !== ch('`') && c !== ch('[')) {
      if (isFirstUnit(c)) utf16 += 1 + (c >= 0xf0 ? 1 : 0);
      out.push(c);
      continue;
    }
    const beginPos = i;
    const endChar = c === ch('[') ? ch(']') : c;
    let isPre = false;
    i++;
    let language = '';
    if (c === ch('`') && at(i) === ch('`') && at(i + 1) === ch('`')) {
      i += 2;
      isPre = true;
      let languageEnd = i;
      while (!isSpaceByte(at(languageEnd)) && at(languageEnd) !== ch('`')) languageEnd++;
      if (i !== languageEnd && languageEnd < n && at(languageEnd) !== ch('`')) {
        language = src.subarray(i, languageEnd).toString('utf8');
        i = languageEnd;
      }
      if (at(i) === ch('\n') || at(i) === ch('\r')) {
        if ((at(i + 1) === ch('\n') || at(i + 1) === ch('\r')) && at(i) !== at(i + 1)) i += 2;
        else i++;
      }
    }
    const entityOffset = utf16;
    while (i < n && (at(i) !== endChar || (isPre && !(at(i + 1) === ch('`') && at(i + 2) === ch('`'))))) {
      if (isFirstUnit(at(i))) utf16 += 1 + (at(i) >= 0xf0 ? 1 : 0);
      out.push(at(i++));
    }
    if (i === n) throw new ParseError(`Can't find end of the entity starting at byte offset ${beginPos}`);
    if (entityOffset !== utf16) {
      const length = utf16 - entityOffset;
      if (c === ch('_')) entities.push({ type: 'italic', offset: entityOffset, length });
      else if (c === ch('*')) entities.push({ type: 'bold', offset: entityOffset, length });
      else if (c === ch('[')) {
        let url: string;
        if (at(i + 1) !== ch('(')) url = src.subarray(beginPos + 1, i).toString('utf8');
        else {
          i += 2;
          const b = i;
          while (i < n && at(i) !== ch(')')) i++;
          url = src.subarray(b, i).toString('utf8');
        }
        const e = linkEntity(url, entityOffset, length);
        if (e) entities.push(e);
      } else if (isPre) entities.push({ type: 'pre', offset: entityOffset, length, ...(language ? { language } : {}) });
      else entities.push({ type: 'code', offset: entityOffset, length });
    }
    if (isPre) i += 2;
  }
  return { text: Buffer.from(out).toString('utf8'), entities };
}

/** Bot API get_formatted_text: the parse_mode switch (errors as the API words them, unprefixed). */
function formatText(text: string, parseMode: string, entitiesParam: string): { text: string; entities: MessageEntity[] } {
  if (Buffer.byteLength(text, 'utf8') > 1 << 15) throw badRequest('text is too long');
  const mode = parseMode.toLowerCase();
  if (text !== '' && mode !== '' && mode !== 'none') {
    let parse: (s: string) => { text: string; entities: MessageEntity[] };
    if (mode === 'markdown') parse = parseMarkdownLegacy;
    else if (mode === 'markdownv2') parse = parseMarkdownV2;
    else if (mode === 'html') parse = parseHtml;
    else throw badRequest('unsupported parse_mode');
    try {
      return parse(text);
    } catch (e) {
      if (e instanceof ParseError) throw badRequest(`can't parse entities: ${e.message}`);
      throw e;
    }
  }
  let entities: MessageEntity[] = [];
  if (entitiesParam !== '') {
    let parsed: unknown;
    try {
      parsed = JSON.parse(entitiesParam);
    } catch {
      parsed = undefined; // the reference server ignores unparsable entities
    }
    if (Array.isArray(parsed)) {
      for (const e of parsed) {
        if (!isObject(e) || typeof e.type !== 'string') throw badRequest('can\'t parse MessageEntity: Field "type" must be of type String');
        if (!Number.isSafeInteger(e.offset) || !Number.isSafeInteger(e.length))
          throw badRequest('can\'t parse MessageEntity: Field "offset" must be of type Number');
        entities.push({ ...e } as MessageEntity);
      }
      entities = sortEntities(entities);
    }
  }
  return { text, entities };
}

/** The part of tdlib's fix_formatted_text that shapes the final text: control characters become
 * spaces, \r and a few invisible characters go, then trailing and leading spaces/newlines are
 * trimmed (leading ones only before the first entity). Entity offsets follow. */
function fixText(text: string, entities: MessageEntity[], allowEmpty: boolean): { text: string; entities: MessageEntity[] } {
  const map: number[] = new Array<number>(text.length + 1);
  let out = '';
  for (let i = 0; i < text.length;) {
    const cp = text.codePointAt(i)!;
    const w = cp > 0xffff ? 2 : 1;
    map[i] = out.length;
    if (w === 2) map[i + 1] = out.length;
    if (cp === 13 || (cp >= 0x2028 && cp <= 0x202e) || cp === 0x333 || cp === 0x33f || cp === 0x30a) {
      // removed
    } else if (cp < 32 && cp !== 10) out += ' ';
    else out += String.fromCodePoint(cp);
    i += w;
  }
  map[text.length] = out.length;
  const mapAt = (k: number): number => map[Math.max(0, Math.min(text.length, k))]!;
  let ents = entities
    .map((e) => {
      const start = mapAt(e.offset);
      return { ...e, offset: start, length: mapAt(e.offset + e.length) - start };
    })
    .filter((e) => e.length > 0);
  let end = out.length;
  while (end > 0 && (out[end - 1] === ' ' || out[end - 1] === '\n')) end--;
  if (end === 0) {
    if (allowEmpty) return { text: '', entities: [] };
    throw badRequest('text must be non-empty');
  }
  ents = ents.filter((e) => e.offset < end).map((e) => (e.offset + e.length > end ? { ...e, length: end - e.offset } : e));
  sortEntities(ents);
  const firstEntity = ents[0]?.offset ?? end;
  let start = 0;
  while (start < firstEntity && (out[start] === ' ' || out[start] === '\n')) start++;
  return { text: out.slice(start, end), entities: ents.map((e) => (start ? { ...e, offset: e.offset - start } : e)) };
}

const codePoints = (s: string): number => [...s].length;

const WORD_CHAR = /^[\p{L}\p{N}]$/u;
const isWordChar = (c: string | undefined): boolean => c !== undefined && WORD_CHAR.test(c);
const isUsernameChar = (c: string | undefined): boolean => c !== undefined && /^[A-Za-z0-9_]$/.test(c);
const charBefore = (s: string, i: number): string | undefined => {
  if (i <= 0) return undefined;
  const lo = s.charCodeAt(i - 1);
  return lo >= 0xdc00 && lo <= 0xdfff && i >= 2 ? s.slice(i - 2, i) : s[i - 1];
};
const charAt = (s: string, i: number): string | undefined => {
  const cp = s.codePointAt(i);
  return cp === undefined ? undefined : String.fromCodePoint(cp);
};

/** bot_command and mention entities as tdlib's match_bot_commands / find_mentions find them
 * (UTF-16 offsets; mentions shorter than 4 characters are dropped, as are short usernames). */
export function findAutoEntities(text: string): MessageEntity[] {
  const found: MessageEntity[] = [];
  for (let i = text.indexOf('/'); i !== -1; i = text.indexOf('/', i + 1)) {
    const prev = charBefore(text, i);
    if (isWordChar(prev) || prev === '/' || prev === '<' || prev === '>') continue;
    let j = i + 1;
    while (j < text.length && isUsernameChar(text[j])) j++;
    if (j - i - 1 < 1 || j - i - 1 > 64) continue;
    if (text[j] === '@') {
      let k = j + 1;
      while (k < text.length && isUsernameChar(text[k])) k++;
      if (k - j - 1 < 3 || k - j - 1 > 32) continue;
      j = k;
    }
    const next = charAt(text, j);
    if (isWordChar(next) || next === '/' || next === '<' || next === '>') continue;
    found.push({ type: 'bot_command', offset: i, length: j - i });
  }
  for (let i = text.indexOf('@'); i !== -1; i = text.indexOf('@', i + 1)) {
    if (isWordChar(charBefore(text, i))) continue;
    let j = i + 1;
    while (j < text.length && isUsernameChar(text[j])) j++;
    const size = j - i - 1;
    if (size < 4 || size > 32) continue;
    if (isWordChar(charAt(text, j))) continue;
    if (found.some((e) => e.offset <= i && i < e.offset + e.length)) continue; // inside /cmd@bot
    found.push({ type: 'mention', offset: i, length: j - i });
  }
  return sortEntities(found);
}

// ---------------------------------------------------------------------------------------------
// Request parsing

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

type Args = Map<string, string>;

/** td::to_integer: an optional '-', then leading digits; anything else → 0. */
function toInteger(s: string): number {
  const m = /^(-?)(\d+)/.exec(s);
  if (!m) return 0;
  const v = Number(m[2]);
  return m[1] ? -v : v;
}

/** An image's width and height as its header says (PNG, GIF, WebP VP8X/VP8L/VP8, JPEG's SOF); undefined for what is not one of them. */
function imageSize(b: Buffer): { width: number; height: number } | undefined {
  if (b.length >= 24 && b.readUInt32BE(0) === 0x89504e47) return { width: b.readUInt32BE(16), height: b.readUInt32BE(20) };
  if (b.length >= 10 && b.subarray(0, 3).toString('latin1') === 'GIF') return { width: b.readUInt16LE(6), height: b.readUInt16LE(8) };
  if (b.length >= 30 && b.subarray(0, 4).toString('latin1') === 'RIFF' && b.subarray(8, 12).toString('latin1') === 'WEBP')
    return { width: 1, height: 1 };
  if (b.length >= 4 && b[0] === 0xff && b[1] === 0xd8) {
    for (let i = 2; i + 9 < b.length;) {
      if (b[i] !== 0xff) return undefined;
      const marker = b[i + 1]!;
      if (marker >= 0xc0 && marker <= 0xc3) return { width: b.readUInt16BE(i + 7), height: b.readUInt16BE(i + 5) };
      i += 2 + b.readUInt16BE(i + 2);
    }
    return { width: 1, height: 1 };
  }
  return undefined;
}

/** Client::to_bool */
const toBool = (s: string): boolean => ['true', 'yes', '1'].includes(s.trim().toLowerCase());

function parseJsonArgs(body: string, args: Args): void {
  let v: unknown;
  try {
    v = JSON.parse(body);
  } catch (e) {
    throw badRequest(`can't parse JSON object: ${(e as Error).message}`);
  }
  if (typeof v === 'string') {
    if (!args.has('content')) args.set('content', v);
    return;
  }
  if (!isObject(v)) throw badRequest('JSON object expected');
  for (const [k, val] of Object.entries(v)) {
    if (args.has(k)) continue;
    args.set(k, typeof val === 'string' ? val : JSON.stringify(val));
  }
}

const MAX_PARTS = 200;

/** A bounded multipart/form-data parser (the whole body is already in memory and bounded). */
function parseMultipart(body: Buffer, contentType: string, args: Args, files: Map<string, UploadedFile>): void {
  const m = /boundary=(?:"([^"]*)"|([^;\s]*))/i.exec(contentType);
  if (!m) throw badRequest('boundary not found');
  const boundary = m[1] ?? m[2] ?? '';
  if (boundary === '' || boundary.length > 200) throw badRequest('boundary too big or empty');
  const delimiter = Buffer.from(`--${boundary}`);
  let pos = body.indexOf(delimiter);
  if (pos === -1) throw badRequest('unexpected end of request content');
  let parts = 0;
  for (;;) {
    pos += delimiter.length;
    if (body[pos] === 0x2d && body[pos + 1] === 0x2d) return; // closing delimiter
    // Transport padding, then CRLF.
    while (body[pos] === 0x20 || body[pos] === 0x09) pos++;
    if (body[pos] === 0x0d && body[pos + 1] === 0x0a) pos += 2;
    else throw badRequest('unexpected end of request content');
    if (++parts > MAX_PARTS) throw new TelegramApiError(413, 'Request Entity Too Large: too many parameters in form data');
    const headerEnd = body.indexOf('\r\n\r\n', pos);
    if (headerEnd === -1 || headerEnd - pos > 16 * 1024) throw badRequest("can't parse form data headers");
    const headers = body.subarray(pos, headerEnd).toString('utf8').split('\r\n');
    const contentStart = headerEnd + 4;
    const next = body.indexOf(Buffer.concat([Buffer.from('\r\n'), delimiter]), contentStart);
    if (next === -1) throw badRequest('unexpected end of request content');
    const content = body.subarray(contentStart, next);
    pos = next + 2;

    let name: string | undefined;
    let filename: string | undefined;
    let partType: string | undefined;
    for (const h of headers) {
      const colon = h.indexOf(':');
      if (colon === -1) continue;
      const key = h.slice(0, colon).trim().toLowerCase();
      const value = h.slice(colon + 1).trim();
      if (key === 'content-type') partType = value;
      if (key !== 'content-disposition') continue;
      if (!/^form-data\b/i.test(value)) throw badRequest('expected form-data content disposition');
      const re = /;\s*([A-Za-z0-9_*-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^;]*))/g;
      for (let p = re.exec(value); p; p = re.exec(value)) {
        const k = p[1]!.toLowerCase();
        const raw = p[2] !== undefined ? p[2].replace(/\\(.)/g, '$1') : (p[3] ?? '').trim();
        if (k === 'name') name = raw;
        else if (k === 'filename' && filename === undefined) filename = raw;
        else if (k === 'filename*') {
          const ext = /^[^']*'[^']*'(.*)$/.exec(raw);
          try {
            filename = decodeURIComponent(ext ? ext[1]! : raw);
          } catch {
            filename = raw;
          }
        }
      }
    }
    if (name === undefined || name === '') throw badRequest('field name in multipart/form-data not found');
    if (filename !== undefined) {
      if (!files.has(name))
        files.set(name, { field: name, filename, ...(partType ? { contentType: partType } : {}), data: Buffer.from(content) });
    } else if (!args.has(name)) {
      args.set(name, content.toString('utf8'));
    }
  }
}

// ---------------------------------------------------------------------------------------------
// The fake

interface ChatState {
  chat: Chat;
  nextMessageId: number;
  messages: Map<number, Message>;
  blocked: boolean;
}

interface Ctx {
  req: http.IncomingMessage;
  res: http.ServerResponse;
  call: ApiCall;
  args: Args;
  files: Map<string, UploadedFile>;
  done: boolean;
}

interface LongPoll {
  ctx: Ctx;
  offset: number;
  limit: number;
  timer: NodeJS.Timeout;
}

interface FailureRule extends Failure {
  method: string;
  remaining: number;
}

class InjectedFailure extends Error {
  constructor(readonly rule: FailureRule) {
    super('injected failure');
  }
}

interface WebhookState {
  url: string;
  secretToken: string;
  maxConnections: number;
  generation: number;
}

const DEFAULT_TOKEN = '7000000001:AAF4keT0kenForBerthTestsOnly-0123456';
const CHAT_ACTIONS = new Set([
  'cancel',
  'typing',
  'record_video',
  'upload_video',
  'record_audio',
  'record_voice',
  'upload_audio',
  'upload_voice',
  'upload_photo',
  'upload_document',
  'choose_sticker',
  'pick_up_location',
  'find_location',
  'record_video_note',
  'upload_video_note',
]);
const ALL_UPDATE_TYPES = [
  'message',
  'edited_message',
  'channel_post',
  'edited_channel_post',
  'business_connection',
  'business_message',
  'edited_business_message',
  'deleted_business_messages',
  'message_reaction',
  'message_reaction_count',
  'inline_query',
  'chosen_inline_result',
  'callback_query',
  'shipping_query',
  'pre_checkout_query',
  'purchased_paid_media',
  'poll',
  'poll_answer',
  'my_chat_member',
  'chat_member',
  'chat_join_request',
  'chat_boost',
  'removed_chat_boost',
];
const NOT_BY_DEFAULT = new Set(['chat_member', 'message_reaction', 'message_reaction_count']);
const MIME_BY_EXT: Record<string, string> = {
  txt: 'text/plain',
  md: 'text/markdown',
  json: 'application/json',
  pdf: 'application/pdf',
  zip: 'application/zip',
  png: 'image/png',
  jpg: 'image/jpeg',
  jpeg: 'image/jpeg',
  gif: 'image/gif',
  html: 'text/html',
  csv: 'text/csv',
  log: 'text/plain',
  diff: 'text/x-diff',
  patch: 'text/x-diff',
};
const REASON: Record<number, string> = { 400: 'Bad Request', 401: 'Unauthorized', 403: 'Forbidden', 404: 'Not Found', 409: 'Conflict' };

const unixNow = (): number => Math.floor(Date.now() / 1000);
const updateType = (u: Update): string => Object.keys(u).find((k) => k !== 'update_id') ?? '';

export async function startFakeTelegram(opts: FakeTelegramOptions = {}): Promise<FakeTelegram> {
  const token = opts.token ?? DEFAULT_TOKEN;
  const botId = Number(token.split(':')[0]);
  if (!Number.isSafeInteger(botId) || botId <= 0) throw new Error(`startFakeTelegram: bad token ${token}`);
  const bot: User = {
    id: botId,
    is_bot: true,
    first_name: opts.bot?.first_name ?? 'Berth Test',
    username: opts.bot?.username ?? 'berth_test_bot',
  };
  const maxBody = opts.maxBodyBytes ?? 1024 * 1024;
  const maxUpload = opts.maxUploadBytes ?? 10 * 1024 * 1024;
  const backoffMs = opts.webhookBackoffMs ?? 50;
  const maxBackoffMs = opts.webhookMaxBackoffMs ?? 1000;
  const webhookTimeoutMs = opts.webhookTimeoutMs ?? 10_000;

  const calls: ApiCall[] = [];
  const sent: SentMessage[] = [];
  const actions: ChatActionCall[] = [];
  const webhookDeliveries: WebhookDelivery[] = [];
  const injected: Update[] = [];
  const filtered: Update[] = [];
  const failures: FailureRule[] = [];
  const handlers = new Map<string, MethodHandler>();

  const chats = new Map<number, ChatState>();
  const byUsername = new Map<string, number>();
  /** Uploaded documents by file_id, for re-sends. */
  const fileIds = new Map<
    string,
    { fileName?: string; mimeType?: string; bytes?: Buffer; size: number; uniqueId: string; declared?: number | null; path?: string }
  >();
  /** Files by the path getFile gave them. */
  const filePaths = new Map<string, Buffer>();
  const downloads: string[] = [];

  /** Unconfirmed updates, sorted by update_id. */
  let queue: Update[] = [];
  let nextUpdateId = opts.firstUpdateId ?? 100_000_001;
  let allowedUpdates: Set<string> | undefined; // undefined: the default set
  let longPoll: LongPoll | undefined;
  let wakeScheduled = false;
  let webhook: WebhookState | undefined;
  let webhookGeneration = 0;
  let lastWebhookError: { date: number; message: string } | undefined;
  let inFlight: http.ClientRequest | undefined;
  let pumpTimer: NodeJS.Timeout | undefined;
  let retry: { updateId: number; fails: number; wakeAt: number } | undefined;
  let closed = false;
  const sockets = new Set<Socket>();
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });

  // -------------------------------------------------------------------------------------------
  // Chats and messages

  function learnChat(chat: Chat): ChatState {
    let st = chats.get(chat.id);
    if (!st) {
      st = { chat: { ...chat }, nextMessageId: 1, messages: new Map(), blocked: false };
      chats.set(chat.id, st);
    } else {
      st.chat = { ...st.chat, ...chat };
    }
    if (typeof chat.username === 'string') byUsername.set(chat.username.toLowerCase(), chat.id);
    return st;
  }

  function rememberMessage(msg: Message): void {
    if (!isObject(msg) || !isObject(msg.chat) || typeof msg.chat.id !== 'number') return;
    const st = learnChat(msg.chat);
    if (Number.isSafeInteger(msg.message_id)) {
      const prev = st.messages.get(msg.message_id);
      st.messages.set(msg.message_id, prev && msg.edit_date !== undefined ? { ...prev, ...msg } : msg);
      st.nextMessageId = Math.max(st.nextMessageId, msg.message_id + 1);
    }
    if (isObject(msg.reply_to_message)) rememberMessage(msg.reply_to_message);
  }

  for (const c of opts.chats ?? []) learnChat(c);

  /** check_chat: '' → chat_id is empty; @username or a numeric id the fake knows. */
  function resolveChat(chatIdParam: string): ChatState {
    if (chatIdParam === '') throw badRequest('chat_id is empty');
    if (chatIdParam.startsWith('@')) {
      const id = byUsername.get(chatIdParam.slice(1).toLowerCase());
      const st = id === undefined ? undefined : chats.get(id);
      if (!st) throw badRequest('chat not found');
      return st;
    }
    const st = chats.get(toInteger(chatIdParam));
    if (!st) throw badRequest('chat not found');
    return st;
  }

  function chatJson(o: DeliverTextOptions['chat'], from: DeliverTextOptions['from']): Chat {
    if (o.type === 'private') {
      return {
        id: o.id,
        first_name: o.first_name ?? from.first_name,
        ...((o.last_name ?? from.last_name) !== undefined ? { last_name: (o.last_name ?? from.last_name)! } : {}),
        ...((o.username ?? from.username) !== undefined ? { username: (o.username ?? from.username)! } : {}),
        type: 'private',
      };
    }
    return {
      id: o.id,
      title: o.title ?? chats.get(o.id)?.chat.title ?? 'Group',
      ...(o.username !== undefined ? { username: o.username } : {}),
      type: o.type,
      ...(o.is_forum ? { is_forum: true as const } : {}),
    };
  }

  const userJson = (f: DeliverTextOptions['from']): User => ({
    id: f.id,
    is_bot: f.is_bot ?? false,
    first_name: f.first_name,
    ...(f.last_name !== undefined ? { last_name: f.last_name } : {}),
    ...(f.username !== undefined ? { username: f.username } : {}),
    ...(f.language_code !== undefined ? { language_code: f.language_code } : {}),
  });

  /** reply_to_message as the API nests it: one level, no reply_to_message of its own. */
  function replyCopy(m: Message): Message {
    const { reply_to_message: _drop, ...rest } = m;
    return structuredClone(rest) as Message;
  }

  // -------------------------------------------------------------------------------------------
  // The update queue

  const isAllowed = (type: string): boolean => (allowedUpdates ? allowedUpdates.has(type) : !NOT_BY_DEFAULT.has(type));

  function queueUpdate(u: Update): Update {
    for (const key of ['message', 'edited_message', 'channel_post', 'edited_channel_post', 'business_message']) {
      const m = u[key];
      if (isObject(m)) rememberMessage(m as Message);
    }
    for (const key of ['my_chat_member', 'chat_member', 'chat_join_request']) {
      const m = u[key];
      if (isObject(m) && isObject(m.chat)) learnChat(m.chat as Chat);
    }
    const cbMsg = isObject(u.callback_query) ? u.callback_query.message : undefined;
    if (isObject(cbMsg)) rememberMessage(cbMsg as Message);
    nextUpdateId = Math.max(nextUpdateId, u.update_id + 1);
    if (!isAllowed(updateType(u))) {
      filtered.push(u);
      return u;
    }
    injected.push(u);
    const idx = queue.findIndex((q) => q.update_id > u.update_id);
    if (idx === -1) queue.push(u);
    else queue.splice(idx, 0, u);
    scheduleWake();
    pump();
    return u;
  }

  function confirmBelow(offset: number): void {
    let k = 0;
    while (k < queue.length && queue[k]!.update_id < offset) k++;
    if (k) queue = queue.slice(k);
  }

  // -------------------------------------------------------------------------------------------
  // Answers

  function write(ctx: Ctx, status: number, payload: unknown, extraHeaders: Record<string, string> = {}): void {
    if (ctx.done) return;
    ctx.done = true;
    ctx.call.status = status;
    ctx.call.response = payload;
    if (ctx.res.destroyed || ctx.res.writableEnded) return;
    const body = Buffer.from(JSON.stringify(payload));
    ctx.res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': String(body.length), ...extraHeaders });
    ctx.res.end(body);
  }

  const answerOk = (ctx: Ctx, result: unknown, description?: string): void =>
    write(ctx, 200, { ok: true, result, ...(description !== undefined ? { description } : {}) });

  function answerError(ctx: Ctx, code: number, description: string, parameters?: Record<string, unknown>): void {
    const headers: Record<string, string> = {};
    if (code === 429 && parameters && typeof parameters.retry_after === 'number') headers['Retry-After'] = String(parameters.retry_after);
    write(
      ctx,
      code,
      { ok: false, error_code: code, description, ...(parameters && Object.keys(parameters).length ? { parameters } : {}) },
      headers,
    );
  }

  function rawError(res: http.ServerResponse, code: number, description: string): void {
    if (res.headersSent || res.destroyed) return;
    const body = Buffer.from(JSON.stringify({ ok: false, error_code: code, description }));
    res.writeHead(code, { 'Content-Type': 'application/json', 'Content-Length': String(body.length) });
    res.end(body);
  }

  function takeFailure(method: string, chatId: number | undefined): FailureRule | undefined {
    const rule = failures.find((f) => (f.method === '*' || f.method === method) && (f.chatId === undefined || f.chatId === chatId));
    if (!rule) return undefined;
    if (--rule.remaining <= 0) failures.splice(failures.indexOf(rule), 1);
    return rule;
  }

  function applyFailure(ctx: Ctx, rule: FailureRule): void {
    if (rule.reset) {
      ctx.done = true;
      ctx.call.status = 0;
      ctx.req.socket.destroy();
      return;
    }
    if (rule.body !== undefined) {
      ctx.done = true;
      ctx.call.status = rule.code;
      ctx.call.response = rule.body;
      const body = Buffer.from(rule.body);
      ctx.res.writeHead(rule.code, { 'Content-Type': 'text/html', 'Content-Length': String(body.length) });
      ctx.res.end(body);
      return;
    }
    const { description, parameters } = failureAnswer(rule);
    answerError(ctx, rule.code, description, parameters);
  }

  function failureAnswer(rule: Failure): { description: string; parameters?: Record<string, unknown> } {
    const parameters: Record<string, unknown> = { ...(rule.parameters ?? {}) };
    let description = rule.description;
    if (rule.code === 429) {
      const fromText = description ? /retry after (\d+)/.exec(description)?.[1] : undefined;
      const retryAfter = rule.retryAfter ?? (fromText ? Number(fromText) : 1);
      parameters.retry_after = retryAfter;
      description ??= `Too Many Requests: retry after ${retryAfter}`;
    }
    description ??=
      rule.code === 403
        ? 'Forbidden: bot was blocked by the user'
        : (REASON[rule.code] ?? http.STATUS_CODES[rule.code] ?? `Error ${rule.code}`);
    return { description, ...(Object.keys(parameters).length ? { parameters } : {}) };
  }

  // -------------------------------------------------------------------------------------------
  // getUpdates

  function scheduleWake(): void {
    if (wakeScheduled || !longPoll) return;
    wakeScheduled = true;
    setImmediate(() => {
      wakeScheduled = false;
      const lp = longPoll;
      if (!lp || closed) return;
      if (!queue.some((u) => u.update_id >= lp.offset)) return;
      longPoll = undefined;
      clearTimeout(lp.timer);
      doGetUpdates(lp.ctx, lp.offset, lp.limit, 0);
    });
  }

  function abortLongPoll(description: string): void {
    const lp = longPoll;
    if (!lp) return;
    longPoll = undefined;
    clearTimeout(lp.timer);
    answerError(lp.ctx, 409, description);
  }

  function doGetUpdates(ctx: Ctx, offsetIn: number, limit: number, timeout: number): void {
    let offset = offsetIn;
    if (offset < 0) queue = queue.slice(Math.max(0, queue.length + offset));
    const head = queue[0]?.update_id ?? nextUpdateId;
    if (offset <= 0 || offset > nextUpdateId + 10) offset = head;
    else confirmBelow(offset);
    const result = queue.filter((u) => u.update_id >= offset).slice(0, limit);
    if (timeout !== 0 && result.length === 0) {
      abortLongPoll('Conflict: terminated by other getUpdates request; make sure that only one bot instance is running');
      const ms = Math.min(timeout * 1000, opts.longPollCapMs ?? Infinity);
      const lp: LongPoll = {
        ctx,
        offset,
        limit,
        timer: setTimeout(() => {
          if (longPoll !== lp) return;
          longPoll = undefined;
          doGetUpdates(ctx, offset, limit, 0);
        }, ms),
      };
      longPoll = lp;
      ctx.res.on('close', () => {
        if (longPoll === lp && !ctx.done) {
          clearTimeout(lp.timer);
          longPoll = undefined;
        }
      });
      return;
    }
    answerOk(ctx, structuredClone(result));
  }

  function updateAllowedUpdates(raw: string): void {
    if (raw === '') return;
    let v: unknown;
    try {
      v = JSON.parse(raw);
    } catch {
      return;
    }
    if (!Array.isArray(v)) return;
    const set = new Set<string>();
    for (const t of v) {
      if (typeof t !== 'string') return;
      const lower = t.toLowerCase();
      if (ALL_UPDATE_TYPES.includes(lower)) set.add(lower);
    }
    allowedUpdates = set.size === 0 ? undefined : set;
  }

  function getUpdates(ctx: Ctx): void {
    if (webhook) {
      return answerError(
        ctx,
        409,
        "Conflict: can't use getUpdates method while webhook is active; use deleteWebhook to delete the webhook first",
      );
    }
    const a = ctx.args;
    const offset = a.get('offset') ? toInteger(a.get('offset')!) : 0;
    const limit = Math.min(100, Math.max(1, a.get('limit') ? toInteger(a.get('limit')!) : 100));
    const timeout = Math.min(50, Math.max(0, a.get('timeout') ? toInteger(a.get('timeout')!) : 0));
    updateAllowedUpdates(a.get('allowed_updates') ?? '');
    doGetUpdates(ctx, offset, limit, timeout);
  }

  // -------------------------------------------------------------------------------------------
  // Webhooks

  function stopWebhookDelivery(): void {
    webhookGeneration++;
    if (pumpTimer) clearTimeout(pumpTimer);
    pumpTimer = undefined;
    retry = undefined;
    if (inFlight) {
      const r = inFlight;
      inFlight = undefined;
      r.destroy();
    }
  }

  function setWebhook(ctx: Ctx, isSet: boolean): void {
    const a = ctx.args;
    const newUrl = isSet ? (a.get('url') ?? '') : '';
    const secret = newUrl ? (a.get('secret_token') ?? '') : '';
    const drop = toBool(a.get('drop_pending_updates') ?? '');
    const maxConnections = newUrl ? Math.min(100, Math.max(1, a.get('max_connections') ? toInteger(a.get('max_connections')!) : 40)) : 0;
    const currentUrl = webhook?.url ?? '';
    if (currentUrl === newUrl && (webhook?.secretToken ?? '') === secret && (webhook?.maxConnections ?? 0) === maxConnections && !drop) {
      updateAllowedUpdates(a.get('allowed_updates') ?? '');
      return answerOk(ctx, true, newUrl ? 'Webhook is already set' : 'Webhook is already deleted');
    }
    if (newUrl) abortLongPoll('Conflict: terminated by setWebhook request');
    const wasSet = webhook !== undefined;
    if (wasSet) {
      webhook = undefined;
      lastWebhookError = undefined;
      stopWebhookDelivery();
    }
    if (drop) queue = [];
    if (!newUrl) return answerOk(ctx, true, wasSet ? 'Webhook was deleted' : 'Webhook is already deleted');

    let parsed: URL;
    try {
      parsed = new URL(newUrl.includes('://') ? newUrl : `https://${newUrl}`);
    } catch {
      throw badRequest('invalid webhook URL specified');
    }
    if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') throw badRequest('invalid webhook URL specified');
    if (secret.length > 256) throw badRequest('secret token is too long');
    if (!/^[A-Za-z0-9_-]*$/.test(secret)) throw badRequest('secret token contains unallowed characters');
    if (parsed.protocol === 'https:') throw badRequest('bad webhook: this fake delivers over plain http only');
    webhook = { url: parsed.href, secretToken: secret, maxConnections, generation: ++webhookGeneration };
    lastWebhookError = undefined;
    updateAllowedUpdates(a.get('allowed_updates') ?? '');
    answerOk(ctx, true, 'Webhook was set');
    pump();
  }

  function getWebhookInfo(ctx: Ctx): void {
    const info: WebhookInfo = { url: webhook?.url ?? '', has_custom_certificate: false, pending_update_count: queue.length };
    if (lastWebhookError) {
      info.last_error_date = lastWebhookError.date;
      info.last_error_message = lastWebhookError.message;
    }
    if (webhook) {
      info.max_connections = webhook.maxConnections;
      info.ip_address = '127.0.0.1';
    }
    if (allowedUpdates) info.allowed_updates = [...allowedUpdates];
    answerOk(ctx, info);
  }

  function pump(): void {
    if (closed || !webhook || inFlight || pumpTimer) return;
    const next = queue[0];
    if (!next) return;
    if (retry && retry.updateId === next.update_id) {
      const wait = retry.wakeAt - Date.now();
      if (wait > 0) {
        pumpTimer = setTimeout(() => {
          pumpTimer = undefined;
          pump();
        }, wait);
        return;
      }
    } else retry = undefined;
    post(webhook, next);
  }

  function post(hook: WebhookState, update: Update): void {
    const attempt = (retry?.updateId === update.update_id ? retry.fails : 0) + 1;
    const started = Date.now();
    const body = Buffer.from(JSON.stringify(update));
    const headers: Record<string, string> = {
      'Content-Type': 'application/json',
      'Content-Length': String(body.length),
      'Accept-Encoding': 'gzip, deflate',
    };
    if (hook.secretToken) headers['X-Telegram-Bot-Api-Secret-Token'] = hook.secretToken;
    let finished = false;
    const finish = (status: number | undefined, error: string | undefined, retryAfterS = 0): void => {
      if (finished) return;
      finished = true;
      if (inFlight === req) inFlight = undefined;
      webhookDeliveries.push({
        url: hook.url,
        updateId: update.update_id,
        update: structuredClone(update),
        attempt,
        ...(hook.secretToken ? { secretToken: hook.secretToken } : {}),
        ...(status !== undefined ? { status } : {}),
        ...(error !== undefined ? { error } : {}),
        ok: error === undefined,
        at: started,
        ms: Date.now() - started,
      });
      if (closed || webhook !== hook || hook.generation !== webhookGeneration) return; // webhook changed: result ignored
      if (error === undefined) {
        queue = queue.filter((u) => u.update_id !== update.update_id);
        retry = undefined;
      } else {
        lastWebhookError = { date: unixNow(), message: error };
        const delay =
          retryAfterS > 0
            ? Math.min(retryAfterS * 1000, maxBackoffMs)
            : attempt === 1
              ? 0
              : Math.min(maxBackoffMs, backoffMs * 2 ** (attempt - 2));
        retry = { updateId: update.update_id, fails: attempt, wakeAt: Date.now() + delay };
      }
      pump();
    };
    const req = http.request(hook.url, { method: 'POST', headers, agent, timeout: webhookTimeoutMs });
    inFlight = req;
    req.on('response', (res) => {
      let size = 0;
      res.on('data', (c: Buffer) => {
        size += c.length;
        if (size > 1024 * 1024) res.destroy();
      });
      res.on('end', () => {
        const code = res.statusCode ?? 0;
        if (code >= 200 && code <= 299) finish(code, undefined);
        else {
          const ra = Number(res.headers['retry-after']);
          finish(code, `Wrong response from the webhook: ${code} ${res.statusMessage ?? ''}`.trimEnd(), Number.isFinite(ra) ? ra : 0);
        }
      });
      res.on('error', () => finish(res.statusCode, 'Webhook connection closed'));
      res.on('aborted', () => finish(res.statusCode, 'Webhook connection closed'));
    });
    req.on('timeout', () => {
      finish(undefined, 'Read timeout expired');
      req.destroy();
    });
    req.on('error', (e: NodeJS.ErrnoException) => {
      const message =
        e.code === 'ECONNREFUSED'
          ? 'Connection refused'
          : e.code === 'ENOTFOUND' || e.code === 'EAI_AGAIN'
            ? 'Failed to resolve host: Name or service not known'
            : 'Webhook connection closed';
      finish(undefined, message);
    });
    req.end(body);
  }

  // -------------------------------------------------------------------------------------------
  // Sending

  interface ReplyTarget {
    messageId: number;
    allowWithout: boolean;
    chatIdParam?: string;
  }

  /** get_reply_parameters: reply_parameters (JSON object) or legacy reply_to_message_id. */
  function replyParameters(a: Args): ReplyTarget | undefined {
    if (!a.has('reply_parameters')) {
      const id = toInteger(a.get('reply_to_message_id') ?? '');
      return id > 0 ? { messageId: id, allowWithout: toBool(a.get('allow_sending_without_reply') ?? '') } : undefined;
    }
    const raw = a.get('reply_parameters')!;
    if (raw === '') return undefined;
    let v: unknown;
    try {
      v = JSON.parse(raw);
    } catch {
      throw badRequest("can't parse reply parameters JSON object");
    }
    if (!isObject(v)) throw badRequest('object expected as reply parameters');
    if (Object.keys(v).length === 0) return undefined;
    const id = v.message_id;
    if (id === undefined) throw badRequest('can\'t find field "message_id"');
    if (typeof id !== 'number' && typeof id !== 'string') throw badRequest('field "message_id" must be a valid Number');
    const messageId = typeof id === 'number' ? Math.trunc(id) : toInteger(id);
    const chatId = v.chat_id;
    return {
      messageId,
      allowWithout: v.allow_sending_without_reply === true,
      ...(typeof chatId === 'number' || typeof chatId === 'string' ? { chatIdParam: String(chatId) } : {}),
    };
  }

  function linkPreviewOptions(a: Args): unknown {
    const raw = a.get('link_preview_options') ?? '';
    if (raw === '') return toBool(a.get('disable_web_page_preview') ?? '') ? { is_disabled: true } : undefined;
    let v: unknown;
    try {
      v = JSON.parse(raw);
    } catch {
      throw badRequest("can't parse link preview options JSON object");
    }
    if (!isObject(v)) throw badRequest('object expected as link preview options');
    return v;
  }

  /** Resolve the reply target in a chat (after the chat check); undefined: send without reply. */
  function resolveReply(st: ChatState, target: ReplyTarget | undefined): Message | undefined {
    if (!target || target.messageId <= 0) return undefined;
    const where = target.chatIdParam !== undefined ? resolveChat(target.chatIdParam) : st;
    const m = where.messages.get(target.messageId);
    if (m) return where === st ? m : undefined;
    if (target.allowWithout) return undefined;
    throw badRequest('message to be replied not found');
  }

  function checkBlocked(st: ChatState): void {
    if (st.blocked) throw new TelegramApiError(403, 'Forbidden: bot was blocked by the user');
  }

  function baseMessage(st: ChatState, threadId: number, reply: Message | undefined): Message {
    const msg: Message = { message_id: st.nextMessageId++, from: { ...bot }, chat: { ...st.chat }, date: unixNow() };
    if (threadId > 0 && st.chat.is_forum) {
      msg.message_thread_id = threadId;
      msg.is_topic_message = true;
    }
    if (reply) msg.reply_to_message = replyCopy(reply);
    return msg;
  }

  function recordError(entry: { ok: boolean; error?: { code: number; description: string } }, e: unknown): void {
    if (e instanceof TelegramApiError) entry.error = { code: e.code, description: e.description };
    else if (e instanceof InjectedFailure) {
      const { description } = failureAnswer(e.rule);
      entry.error = { code: e.rule.code, description: e.rule.body ?? description };
    }
  }
  /** Run a send method's body; a failure is recorded on its entry, then answered as Telegram would. */
  function recording(entry: { ok: boolean; error?: { code: number; description: string } }, body: () => void): void {
    try {
      body();
    } catch (e) {
      recordError(entry, e);
      throw e;
    }
  }

  /** A message sent: kept for later calls, noted on its entry, answered. */
  function delivered(ctx: Ctx, entry: SentMessage, msg: Message): void {
    rememberMessage(msg);
    entry.ok = true;
    entry.message = structuredClone(msg);
    answerOk(ctx, msg);
  }

  function sendMessage(ctx: Ctx): void {
    const a = ctx.args;
    const entry: SentMessage = {
      method: 'sendMessage',
      chatIdParam: a.get('chat_id') ?? '',
      text: a.get('text') ?? '',
      ...(a.get('parse_mode') ? { parseMode: a.get('parse_mode')! } : {}),
      ok: false,
      params: Object.fromEntries(a),
      at: ctx.call.at,
    };
    sent.push(entry);
    recording(entry, () => {
      const threadId = Math.max(0, toInteger(a.get('message_thread_id') ?? ''));
      if (threadId) entry.messageThreadId = threadId;
      const preview = linkPreviewOptions(a);
      if (preview !== undefined) entry.linkPreviewOptions = preview;
      if (entry.text === '') throw badRequest('message text is empty');
      // tdlib checks the text is UTF-8 before parsing it: half a surrogate pair is not.
      if (/\p{Cs}/u.test(entry.text!)) throw badRequest('text must be encoded in UTF-8');
      const formatted = formatText(entry.text!, a.get('parse_mode') ?? '', a.get('entities') ?? '');
      const target = replyParameters(a);
      if (target) entry.replyToMessageId = target.messageId;
      const st = resolveChat(entry.chatIdParam);
      entry.chatId = st.chat.id;
      const reply = resolveReply(st, target);
      const fixed = fixText(formatted.text, formatted.entities, false);
      if (codePoints(fixed.text) > 4096) throw badRequest('message is too long');
      const rule = takeFailure('sendmessage', st.chat.id);
      if (rule) throw new InjectedFailure(rule);
      checkBlocked(st);
      const msg = baseMessage(st, threadId, reply);
      msg.text = fixed.text;
      if (fixed.entities.length) msg.entities = fixed.entities;
      if (isObject(preview)) msg.link_preview_options = preview;
      delivered(ctx, entry, msg);
    });
  }

  function sendUpload(ctx: Ctx, field: 'document' | 'photo'): void {
    const a = ctx.args;
    const entry: SentMessage = {
      method: field === 'photo' ? 'sendPhoto' : 'sendDocument',
      chatIdParam: a.get('chat_id') ?? '',
      ...(a.has('caption') ? { caption: a.get('caption')! } : {}),
      ...(a.get('parse_mode') ? { parseMode: a.get('parse_mode')! } : {}),
      ok: false,
      params: Object.fromEntries(a),
      at: ctx.call.at,
    };
    sent.push(entry);
    recording(entry, () => {
      // get_input_file: a string value (file_id, URL or attach://name) or a file part named as the field.
      const ref = a.get(field) ?? '';
      let file: UploadedFile | undefined;
      let doc: SentDocument | undefined;
      if (ref.startsWith('attach://')) file = ctx.files.get(ref.slice('attach://'.length));
      else if (ref === '') file = ctx.files.get(field);
      if (file) {
        doc = { source: 'upload', fileName: file.filename, bytes: file.data };
        const ext = /\.([A-Za-z0-9]+)$/.exec(file.filename)?.[1]?.toLowerCase();
        const mime =
          (ext && MIME_BY_EXT[ext]) ||
          (file.contentType && file.contentType !== 'application/octet-stream' ? file.contentType.split(';')[0]!.trim() : undefined);
        if (mime) doc.mimeType = mime;
      } else if (ref !== '' && !ref.startsWith('attach://')) {
        const known = fileIds.get(ref);
        if (known) {
          doc = {
            source: 'file_id',
            ref,
            ...(known.fileName ? { fileName: known.fileName } : {}),
            ...(known.mimeType ? { mimeType: known.mimeType } : {}),
            ...(known.bytes ? { bytes: known.bytes } : {}),
          };
        } else if (/^https?:\/\/[^\s]+$/i.test(ref)) {
          const name = decodeURIComponent(new URL(ref).pathname.split('/').pop() ?? '') || 'file';
          doc = { source: 'url', ref, fileName: name };
        }
      }
      if (!doc && (ref === '' || ref.startsWith('attach://'))) throw badRequest(`there is no ${field} in the request`);
      entry.document = doc;
      const caption = formatText(a.get('caption') ?? '', a.get('parse_mode') ?? '', a.get('caption_entities') ?? '');
      const threadId = Math.max(0, toInteger(a.get('message_thread_id') ?? ''));
      if (threadId) entry.messageThreadId = threadId;
      const target = replyParameters(a);
      if (target) entry.replyToMessageId = target.messageId;
      const st = resolveChat(entry.chatIdParam);
      entry.chatId = st.chat.id;
      const reply = resolveReply(st, target);
      if (!doc) throw badRequest('wrong file identifier/HTTP URL specified');
      if (doc.source === 'upload' && doc.bytes!.length === 0) throw badRequest('file must be non-empty');
      const fixed = fixText(caption.text, caption.entities, true);
      if (codePoints(fixed.text) > 1024) throw badRequest('message caption is too long');
      const picture = field === 'photo' && doc.bytes ? imageSize(doc.bytes) : undefined;
      if (field === 'photo' && doc.bytes && doc.bytes.length > 10_000_000) throw badRequest('PHOTO_SAVE_FILE_INVALID');
      if (field === 'photo' && doc.bytes && !picture) throw badRequest('IMAGE_PROCESS_FAILED');
      const rule = takeFailure(field === 'photo' ? 'sendphoto' : 'senddocument', st.chat.id);
      if (rule) throw new InjectedFailure(rule);
      checkBlocked(st);

      const fileId = doc.source === 'file_id' ? doc.ref! : `BQACAgIAAxkDAAI${randomBytes(24).toString('base64url')}`;
      const uniqueId = fileIds.get(fileId)?.uniqueId ?? `AgAD${randomBytes(8).toString('base64url')}`;
      const size = doc.bytes?.length ?? 0;
      if (!fileIds.has(fileId)) {
        fileIds.set(fileId, {
          ...(doc.fileName ? { fileName: doc.fileName } : {}),
          ...(doc.mimeType ? { mimeType: doc.mimeType } : {}),
          ...(doc.bytes ? { bytes: doc.bytes } : {}),
          size,
          uniqueId,
        });
      }
      const msg = baseMessage(st, threadId, reply);
      if (field === 'photo')
        msg.photo = [
          {
            file_id: fileId,
            file_unique_id: uniqueId,
            width: picture?.width ?? 1,
            height: picture?.height ?? 1,
            ...(size ? { file_size: size } : {}),
          },
        ];
      else
        msg.document = {
          ...(doc.fileName ? { file_name: doc.fileName } : {}),
          ...(doc.mimeType ? { mime_type: doc.mimeType } : {}),
          file_id: fileId,
          file_unique_id: uniqueId,
          ...(size ? { file_size: size } : {}),
        };
      if (fixed.text !== '') {
        msg.caption = fixed.text;
        if (fixed.entities.length) msg.caption_entities = fixed.entities;
      }
      delivered(ctx, entry, msg);
    });
  }

  /** getFile: a path to download the file at, valid as long as the fake runs (Telegram: at least an hour). */
  function getFile(ctx: Ctx): void {
    const fileId = ctx.args.get('file_id') ?? '';
    const known = fileIds.get(fileId);
    if (!known || !known.bytes) throw badRequest('invalid file_id');
    if (known.bytes.length > 20 << 20) throw badRequest('file is too big'); // Client.h: MAX_DOWNLOAD_FILE_SIZE = 20 << 20
    if (!known.path) {
      known.path = `${known.mimeType?.startsWith('image/') ? 'photos' : 'documents'}/file_${filePaths.size}${/\.[A-Za-z0-9]{1,8}$/.exec(known.fileName ?? '')?.[0] ?? ''}`;
      filePaths.set(known.path, known.bytes);
    }
    const declared = known.declared === undefined ? known.size : known.declared;
    answerOk(ctx, {
      file_id: fileId,
      file_unique_id: known.uniqueId,
      ...(declared === null ? {} : { file_size: declared }),
      file_path: known.path,
    });
  }

  /** GET /file/bot<token>/<path>: the bytes (404 for an unknown token or path). */
  function serveFile(res: http.ServerResponse, tokenPart: string, path: string): void {
    const bytes = tokenPart === token ? filePaths.get(path) : undefined;
    if (!bytes) return rawError(res, 404, 'Not Found');
    downloads.push(path);
    if (!opts.chunkedFiles) {
      res.writeHead(200, { 'Content-Type': 'application/octet-stream', 'Content-Length': String(bytes.length) });
      return void res.end(bytes);
    }
    res.writeHead(200, { 'Content-Type': 'application/octet-stream' });
    let at = 0;
    const more = (): void => {
      while (at < bytes.length && !res.destroyed) {
        const chunk = bytes.subarray(at, (at += 64 * 1024));
        if (!res.write(chunk)) return void res.once('drain', more);
      }
      if (!res.destroyed) res.end();
    };
    more();
  }

  function sendChatAction(ctx: Ctx): void {
    const a = ctx.args;
    const entry: ChatActionCall = { chatIdParam: a.get('chat_id') ?? '', action: a.get('action') ?? '', ok: false, at: ctx.call.at };
    actions.push(entry);
    recording(entry, () => {
      const threadId = Math.max(0, toInteger(a.get('message_thread_id') ?? ''));
      if (threadId) entry.messageThreadId = threadId;
      if (!CHAT_ACTIONS.has(entry.action.toLowerCase())) throw badRequest('wrong parameter action in request');
      const st = resolveChat(entry.chatIdParam);
      entry.chatId = st.chat.id;
      const rule = takeFailure('sendchataction', st.chat.id);
      if (rule) throw new InjectedFailure(rule);
      checkBlocked(st);
      entry.ok = true;
      answerOk(ctx, true);
    });
  }

  function getMe(ctx: Ctx): void {
    answerOk(ctx, {
      ...bot,
      can_join_groups: opts.bot?.can_join_groups ?? true,
      can_read_all_group_messages: opts.bot?.can_read_all_group_messages ?? false,
      supports_inline_queries: opts.bot?.supports_inline_queries ?? false,
      can_connect_to_business: false,
      has_main_web_app: false,
    });
  }

  const methods: Record<string, (ctx: Ctx) => void> = {
    getme: getMe,
    getupdates: getUpdates,
    setwebhook: (ctx) => setWebhook(ctx, true),
    deletewebhook: (ctx) => setWebhook(ctx, false),
    getwebhookinfo: getWebhookInfo,
    sendmessage: sendMessage,
    senddocument: (ctx) => sendUpload(ctx, 'document'),
    sendphoto: (ctx) => sendUpload(ctx, 'photo'),
    sendchataction: sendChatAction,
    getfile: getFile,
  };
  /** Methods whose injected failures fire after validation (inside the handler). */
  const FAIL_INSIDE = new Set(['sendmessage', 'senddocument', 'sendphoto', 'sendchataction']);

  // -------------------------------------------------------------------------------------------
  // HTTP

  /** Reads the body up to `limit`; past it, drains (up to 8× the limit) and reports the size. */
  function readBody(req: http.IncomingMessage, limit: number): Promise<{ body: Buffer } | { tooLarge: number } | { aborted: true }> {
    return new Promise((resolve) => {
      const declared = req.headers['content-length'] !== undefined ? Number(req.headers['content-length']) : undefined;
      const chunks: Buffer[] = [];
      let size = 0;
      let over = declared !== undefined && Number.isFinite(declared) && declared > limit;
      let settled = false;
      const settle = (v: { body: Buffer } | { tooLarge: number } | { aborted: true }): void => {
        if (!settled) {
          settled = true;
          resolve(v);
        }
      };
      req.on('data', (c: Buffer) => {
        size += c.length;
        if (!over && size > limit) {
          over = true;
          chunks.length = 0;
        }
        if (over) {
          if (size > limit * 8) req.destroy();
          return;
        }
        chunks.push(c);
      });
      req.on('end', () => settle(over ? { tooLarge: declared ?? size } : { body: Buffer.concat(chunks) }));
      req.on('error', () => settle({ aborted: true }));
      req.on('close', () => settle({ aborted: true }));
    });
  }

  function tokenError(t: string): string | undefined {
    if (t === token) return undefined;
    const colon = t.indexOf(':');
    if (t === '' || t[0] === '0' || t.length > 80 || colon === -1 || !/^\d+$/.test(t.slice(0, colon)))
      return 'Unauthorized: invalid token specified';
    return 'Unauthorized';
  }

  async function handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://fake');
    const path = url.pathname;
    const contentType = String(req.headers['content-type'] ?? '').toLowerCase();
    const isMultipart = contentType.includes('multipart/form-data');

    const read = await readBody(req, isMultipart ? maxUpload : maxBody);
    if ('aborted' in read) return;
    if ('tooLarge' in read) return rawError(res, 413, `Request Entity Too Large: content length is ${read.tooLarge}`);

    if (path.startsWith('/file/bot')) {
      const rest = path.slice('/file/bot'.length);
      const slash = rest.indexOf('/');
      try {
        return serveFile(res, decodeURIComponent(rest.slice(0, Math.max(0, slash))), decodeURIComponent(rest.slice(slash + 1)));
      } catch {
        return rawError(res, 404, 'Not Found');
      }
    }
    if (!path.startsWith('/bot')) return rawError(res, 404, 'Not Found');
    const rest = path.slice(4);
    const slash = rest.indexOf('/');
    if (slash === -1) return rawError(res, 404, 'Not Found');
    let tokenPart: string;
    let methodPart: string;
    try {
      tokenPart = decodeURIComponent(rest.slice(0, slash));
      methodPart = decodeURIComponent(rest.slice(slash + 1));
    } catch {
      return rawError(res, 404, 'Not Found');
    }
    if (methodPart.startsWith('test/')) methodPart = methodPart.slice(5); // the test-DC form /bot<token>/test/<method>

    const encoding = String(req.headers['content-encoding'] ?? 'identity').toLowerCase();
    if (encoding !== 'identity' && encoding !== '') return rawError(res, 415, 'Unsupported Media Type: unsupported content-encoding');

    const args: Args = new Map();
    const files = new Map<string, UploadedFile>();
    for (const [k, v] of url.searchParams) if (!args.has(k)) args.set(k, v);
    try {
      const body = read.body;
      if (body.length) {
        if (isMultipart) parseMultipart(body, String(req.headers['content-type']), args, files);
        else if (contentType.includes('application/x-www-form-urlencoded')) {
          for (const [k, v] of new URLSearchParams(body.toString('utf8'))) if (!args.has(k)) args.set(k, v);
        } else if (contentType.includes('application/json')) parseJsonArgs(body.toString('utf8'), args);
      }
    } catch (e) {
      if (e instanceof TelegramApiError) return rawError(res, e.code, e.description);
      throw e;
    }
    for (const [k, v] of args) args.set(k, v.toWellFormed());

    const tokenErr = tokenError(tokenPart);
    if (tokenErr) return rawError(res, 401, tokenErr);

    const method = (methodPart === '' ? (args.get('method') ?? '') : methodPart).toLowerCase();
    const call: ApiCall = {
      method,
      httpMethod: req.method ?? 'GET',
      params: Object.fromEntries(args),
      files: [...files.keys()],
      at: Date.now(),
    };
    calls.push(call);
    const ctx: Ctx = { req, res, call, args, files, done: false };
    try {
      const custom = handlers.get(method);
      const builtin = Object.hasOwn(methods, method) ? methods[method] : undefined;
      if (!custom && !builtin) return answerError(ctx, 404, 'Not Found: method not found');
      if (custom || !FAIL_INSIDE.has(method)) {
        const rule = takeFailure(method, undefined);
        if (rule) return applyFailure(ctx, rule);
      }
      if (custom) {
        const fileRecord: Record<string, UploadedFile> = Object.fromEntries(files);
        return answerOk(ctx, await custom(Object.fromEntries(args), fileRecord));
      }
      builtin!(ctx);
    } catch (e) {
      if (e instanceof InjectedFailure) return applyFailure(ctx, e.rule);
      if (e instanceof TelegramApiError) return answerError(ctx, e.code, e.description, e.parameters);
      answerError(ctx, 500, `Internal Server Error: ${(e as Error).message}`);
    }
  }

  const server = http.createServer((req, res) => {
    req.on('error', () => {});
    res.on('error', () => {});
    handle(req, res).catch((e: unknown) => rawError(res, 500, `Internal Server Error: ${(e as Error).message}`));
  });
  server.on('connection', (s: Socket) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  server.on('clientError', (_e, socket) => {
    if (socket.writable) socket.end('HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n');
    else socket.destroy();
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, opts.host ?? '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  const host = opts.host ?? '127.0.0.1';
  const baseUrl = `http://${host.includes(':') ? `[${host}]` : host}:${port}`;

  // -------------------------------------------------------------------------------------------
  // Test-facing API

  function buildTextMessage(o: DeliverTextOptions | DeliverEditOptions, messageId: number, date: number): Message {
    const chat = chatJson(o.chat, o.from);
    const msg: Message = { message_id: messageId, from: userJson(o.from), chat, date };
    const threadId = 'message_thread_id' in o ? o.message_thread_id : undefined;
    if (threadId !== undefined) {
      msg.message_thread_id = threadId;
      if (o.chat.is_forum) msg.is_topic_message = true;
    }
    msg.text = o.text;
    const entities = o.entities ?? findAutoEntities(o.text);
    if (entities.length) msg.entities = entities;
    return msg;
  }

  const api: FakeTelegram = {
    url: baseUrl,
    token,
    apiBase: `${baseUrl}/bot${token}`,
    bot,
    calls,
    sent,
    actions,
    webhookDeliveries,
    updates: injected,
    filtered,
    repliesTo: (chatId) => sent.filter((s) => s.ok && s.chatId === chatId),

    deliverText(o) {
      const st = learnChat(chatJson(o.chat, o.from));
      const messageId = o.message_id ?? st.nextMessageId;
      const msg = buildTextMessage(o, messageId, o.date ?? unixNow());
      if (o.reply_to_message !== undefined) {
        const target = typeof o.reply_to_message === 'number' ? st.messages.get(o.reply_to_message) : o.reply_to_message;
        if (!target) throw new Error(`deliverText: no message ${String(o.reply_to_message)} in chat ${o.chat.id}`);
        // Key order as the API writes it: reply_to_message before text.
        const { text, entities, ...head } = msg;
        const withReply: Message = { ...head, reply_to_message: replyCopy(target), text: text! };
        if (entities) withReply.entities = entities;
        return queueUpdate({ update_id: nextUpdateId++, message: withReply });
      }
      return queueUpdate({ update_id: nextUpdateId++, message: msg });
    },

    deliverEdit(o) {
      const st = learnChat(chatJson(o.chat, o.from));
      const original = st.messages.get(o.message_id);
      const msg = buildTextMessage(o, o.message_id, original?.date ?? unixNow());
      const { text, entities, ...head } = msg;
      const edited: Message = { ...head, edit_date: o.edit_date ?? unixNow(), text: text! };
      if (original?.message_thread_id !== undefined) edited.message_thread_id = original.message_thread_id;
      if (original?.reply_to_message) edited.reply_to_message = original.reply_to_message;
      if (entities) edited.entities = entities;
      return queueUpdate({ update_id: nextUpdateId++, edited_message: edited });
    },

    deliverRaw(u) {
      const { update_id: given, ...rest } = structuredClone(u);
      const id = given !== undefined && Number.isSafeInteger(given) ? given : nextUpdateId++;
      return queueUpdate({ update_id: id, ...rest } as Update);
    },

    addChat: (chat) => void learnChat(chat),
    addFile(data, o = {}) {
      const fileId = `BQACAgIAAxkBAAI${randomBytes(24).toString('base64url')}`;
      const uniqueId = `AgAD${randomBytes(8).toString('base64url')}`;
      const declared = o.fileSize === undefined ? data.length : o.fileSize;
      fileIds.set(fileId, { bytes: data, size: data.length, uniqueId, declared });
      return { file_id: fileId, file_unique_id: uniqueId, ...(declared === null ? {} : { file_size: declared }) };
    },
    downloads,
    blockChat(chatId, blocked = true) {
      const st = chats.get(chatId);
      if (!st) throw new Error(`blockChat: unknown chat ${chatId}`);
      st.blocked = blocked;
    },
    failNext(method, failure) {
      failures.push({ ...failure, method: method === '*' ? '*' : method.toLowerCase(), remaining: failure.count ?? 1 });
    },
    clearFailures() {
      failures.length = 0;
    },
    setHandler(method, handler) {
      if (handler) handlers.set(method.toLowerCase(), handler);
      else handlers.delete(method.toLowerCase());
    },
    pending: () => structuredClone(queue),
    pendingCount: () => queue.length,
    webhook: () => (webhook ? { url: webhook.url, ...(webhook.secretToken ? { secretToken: webhook.secretToken } : {}) } : undefined),
    longPolling: () => longPoll !== undefined,
    messages: (chatId) => [...(chats.get(chatId)?.messages.values() ?? [])].sort((a, b) => a.message_id - b.message_id),

    waitFor: <T>(pred: () => T | undefined | null | false | 0 | '', timeoutMs = 5_000): Promise<T> => pollUntil(pred, timeoutMs),

    async close() {
      if (closed) return;
      const lp = longPoll;
      longPoll = undefined;
      closed = true;
      if (lp) {
        clearTimeout(lp.timer);
        // Let the answer reach the socket before the connections are torn down.
        await new Promise<void>((resolve) => {
          const t = setTimeout(resolve, 200);
          lp.ctx.res.once('finish', () => {
            clearTimeout(t);
            resolve();
          });
          answerOk(lp.ctx, []);
        });
      }
      stopWebhookDelivery();
      agent.destroy();
      server.closeAllConnections();
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  return api;
}
