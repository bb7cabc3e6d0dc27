/**
 * A fake of `signal-cli -a +E164 daemon --http` (signal-cli 0.14.x) that speaks its wire protocol,
 * for tests of the Signal bridge. Spec: /work/shared/signal-cli-protocol.md; behaviour checked
 * against signal-cli's HttpServerHandler, JsonRpcReader, SignalJsonRpcCommandHandler,
 * SendMessageResultUtils and json/*.java.
 *
 * Endpoints (anything else → 404 with an empty body):
 * - `GET /api/v1/check` → 200, empty body. Other methods → 405.
 * - `GET /api/v1/events[?account=]` → 200 `text/event-stream`; each event is
 *   `event:receive\ndata:<json>\n\n` (never an `id:` line), a keepalive comment `:\n` every
 *   `keepaliveMs`. Every connected client gets every event. `?account=` is ignored, as in
 *   single-account (`-a`) mode; in multi-account mode (`multiAccount`) an account the daemon does
 *   not hold → 400, empty body. Other methods → 405.
 * - `POST /api/v1/rpc`: JSON-RPC 2.0, a single request or a batch array. Not POST → 405;
 *   Content-Type not starting with `application/json` → 415 (both with empty bodies). Otherwise
 *   always HTTP 200 with a JSON-RPC body (errors too; `"data":null` when an error has no data,
 *   `"id":null` when the id could not be read); a lone request without `id` (notification) →
 *   201 with an empty body; a batch of notifications only → 200 `[]` (as signal-cli does).
 *   Parse error -32700, invalid request -32600, unknown method -32601 "Method not implemented".
 *
 * RPC methods: `send`, `sendTyping`, `sendReceipt` (see the handlers for params), and
 * `getAttachment` (GetAttachmentCommand: `id`, the attachment id a received message named; the
 * result is `{"data": "<base64 of the whole file>"}` in one JSON answer; an id it does not hold
 * → -32603 "An error occurred reading attachment: <id>", as its IOException becomes an unexpected
 * error; no id → -32602). Attachments people send come from `addAttachment`. List params
 * take a single value or an array, singular or plural name (`recipient`/`recipients`,
 * `attachment`/`attachments`, `groupId`/`groupIds`, `targetTimestamp`/`targetTimestamps`),
 * like signal-cli's JsonRpcNamespace. An `account` param is ignored in single-account mode; in
 * multi-account mode it is required and chooses the account (SignalJsonRpcCommandHandler).
 *
 * Incoming messages are injected by the test (`deliverText`, `deliverRaw`, …) and published to
 * SSE clients according to `receiveMode` ('on-start': dropped when nobody listens; 'on-connection':
 * held until a client connects) and the `redeliverUntilReceipt` switch (crash re-delivery).
 *
 * Only node:http; binds to 127.0.0.1:0 unless told otherwise.
 *
 * @example
 * const sig = await startFakeSignalCli({ keepaliveMs: 50 });
 * // start the bridge with SIGNAL_CLI_URL=sig.url, then:
 * await sig.waitForClients(1);
 * const { sourceUuid } = sig.deliverText({ fromUuid: ALICE, fromNumber: '+15551230001', text: 'hi' });
 * await sig.waitFor(() => sig.repliesTo(sourceUuid).length > 0);
 * expect(sig.repliesTo(sourceUuid)[0]!.message).toContain('…');
 * await sig.close();
 */
import http from 'node:http';
import fs from 'node:fs';
import { createHash } from 'node:crypto';
import type { AddressInfo, Socket } from 'node:net';
import { pollUntil } from './poll.js';

// ---------------------------------------------------------------------------------------------
// Wire types (the subset the fake writes)

export type JsonRpcId = string | number | boolean | null;

export interface RecipientAddress {
  uuid: string | null;
  number: string | null;
  username: string | null;
}

export type SendResultType =
  'SUCCESS' | 'NETWORK_FAILURE' | 'UNREGISTERED_FAILURE' | 'IDENTITY_FAILURE' | 'RATE_LIMIT_FAILURE' | 'INVALID_PRE_KEY_FAILURE';

export interface SendResult {
  recipientAddress: RecipientAddress;
  /** Present for sends to a group. */
  groupId?: string;
  type: SendResultType;
  token?: string;
  retryAfterSeconds?: number;
}

/** The `result` of send / sendTyping / sendReceipt. */
export interface SendResponse {
  timestamp: number;
  results: SendResult[];
}

export interface RpcErrorObject {
  code: number;
  message: string;
  data: unknown;
}

export interface Mention {
  name: string;
  number: string | null;
  uuid: string | null;
  start: number;
  length: number;
}

export interface GroupInfo {
  groupId: string;
  groupName: string | null;
  revision: number;
  type: 'DELIVER' | 'UPDATE';
}

export interface DataMessage {
  timestamp: number;
  message: string | null;
  expiresInSeconds: number;
  isExpirationUpdate?: boolean;
  viewOnce?: boolean;
  reaction?: unknown;
  quote?: unknown;
  mentions?: Mention[];
  attachments?: unknown[];
  groupInfo?: GroupInfo;
  [k: string]: unknown;
}

export interface Envelope {
  /** Deprecated by signal-cli: the number, or the uuid when the number is hidden. */
  source: string | null;
  sourceNumber: string | null;
  sourceUuid: string | null;
  sourceName: string | null;
  sourceDevice: number | null;
  timestamp: number;
  serverReceivedTimestamp: number;
  serverDeliveredTimestamp: number;
  dataMessage?: DataMessage;
  editMessage?: { targetSentTimestamp: number; dataMessage: DataMessage };
  syncMessage?: { sentMessage?: Record<string, unknown>; [k: string]: unknown };
  receiptMessage?: { when: number; isDelivery: boolean; isRead: boolean; isViewed: boolean; timestamps: number[] };
  typingMessage?: { action: 'STARTED' | 'STOPPED'; timestamp: number; groupId?: string };
  [k: string]: unknown;
}

/** What one SSE `data:` line carries. */
export interface ReceivePayload {
  account: string;
  envelope?: Envelope;
  exception?: { message: string; type: string };
}

// ---------------------------------------------------------------------------------------------
// Recording types

export interface RpcCall {
  method: string;
  /** Params as received (after signal-cli's `params: null` workaround: then undefined). */
  params: unknown;
  /** undefined for a notification. */
  id: JsonRpcId | undefined;
  at: number;
  result?: unknown;
  error?: RpcErrorObject;
}

export interface SentFile {
  source: 'path' | 'data-uri';
  /** For `source: 'path'`. */
  path?: string;
  contentType?: string;
  filename?: string;
  /** Decoded data URI, or the file's bytes read at send time (when readable). */
  data?: Buffer;
}

export interface SentMessage {
  /** Direct recipients as given (E.164 or UUID), normalised to an array. */
  recipients: string[];
  /** First group id, if any (`groupIds` holds all). */
  groupId?: string;
  groupIds: string[];
  message: string;
  /** Attachment strings as given (paths or data: URIs). */
  attachments: string[];
  files: SentFile[];
  quoteTimestamp?: number;
  quoteAuthor?: string;
  editTimestamp?: number;
  /** Result timestamp (also set on failed sends: the error's data.response.timestamp). */
  timestamp?: number;
  /** false when the RPC answered with an error. */
  ok: boolean;
  error?: RpcErrorObject;
  results: SendResult[];
  params: Record<string, unknown>;
  at: number;
}

export interface TypingCall {
  recipients: string[];
  groupId?: string;
  groupIds: string[];
  stop: boolean;
  ok: boolean;
  error?: RpcErrorObject;
  at: number;
}

export interface ReceiptCall {
  recipient: string;
  targetTimestamps: number[];
  type: 'read' | 'viewed';
  ok: boolean;
  error?: RpcErrorObject;
  at: number;
}

export type SendFailure =
  /** All matching recipients fail with RATE_LIMIT_FAILURE → error -5. */
  | { type: 'rate_limit'; retryAfterSeconds?: number; token?: string }
  /** IDENTITY_FAILURE → error -4 "Failed to send message due to untrusted identities". */
  | { type: 'untrusted' }
  /** UNREGISTERED_FAILURE → error -1 "Failed to send message". */
  | { type: 'unregistered' }
  /** NETWORK_FAILURE → error -1 "Failed to send message". */
  | { type: 'network' }
  /** Any other JSON-RPC error, e.g. { code: -32603, message: '…' } or -3 I/O. */
  | { type: 'rpc'; code: number; message: string; data?: unknown };

export interface FailSendOptions {
  /** How many (matching) sends fail. Default 1. Use Infinity for "until cleared". */
  count?: number;
  /** Only sends addressed to this recipient (E.164 or UUID, either form of a known contact) or
   * group id match; only that recipient's result fails, the others succeed. */
  recipient?: string;
}

export interface DeliverTextOptions {
  fromUuid: string;
  /** null: the sender hides their number (sourceNumber null, source = uuid). */
  fromNumber: string | null;
  /** Profile/contact name (sourceName); default null. */
  name?: string | null;
  text: string;
  /** Sender's timestamp (the message id); default: a fresh unique ms timestamp. */
  timestamp?: number;
  /** Base64 group id: a group message (groupInfo type DELIVER). */
  groupId?: string;
  groupName?: string;
  /** Mentions; the text should carry U+FFFC at each mention's start. `name` defaults to the
   * number, else the uuid (signal-cli's legacy identifier). */
  mentions?: Array<{ uuid: string; number?: string | null; start: number; length: number; name?: string }>;
  attachments?: unknown[];
  quote?: unknown;
  /** Extra dataMessage fields, merged last. */
  dataMessage?: Record<string, unknown>;
  sourceDevice?: number;
}

export interface Delivered {
  sourceUuid: string;
  timestamp: number;
  payload: ReceivePayload;
}

export interface FakeSignalCliOptions {
  /** The bot's number (`-a`). Default '+15550000000'. */
  account?: string;
  /** The bot's ACI. Default '0b0b0b0b-0000-4000-8000-000000000001'. */
  accountUuid?: string;
  /** `daemon` without `-a` (multi-account mode) holding these accounts (none: `[]`): every
   * account command needs an `account` param naming one of them (-32602 "Method requires valid
   * account parameter" / "Specified account does not exist"), `listAccounts` answers
   * `[{number}]`, and `/api/v1/events?account=` of an account it does not hold is 400. Default:
   * single-account mode (`-a`), where `account` is ignored and `listAccounts` is not implemented. */
  multiAccount?: string[];
  /** signal-cli's --receive-mode. Default 'on-start'. */
  receiveMode?: 'on-start' | 'on-connection';
  /** Test switch: a dataMessage/editMessage stays unacknowledged until the bot sends a receipt
   * (sendReceipt, read or viewed) for its (sender, timestamp); every new SSE connection gets all
   * unacknowledged ones again (the crash re-delivery case). Such messages are never dropped:
   * arriving with nobody connected, they wait for the next connection. Default false. */
  redeliverUntilReceipt?: boolean;
  /** Keepalive comment period. Default 15000 (signal-cli's). */
  keepaliveMs?: number;
  /** Known contacts: send results report both uuid and number for them. Senders of delivered
   * messages are added automatically. */
  contacts?: Array<{ uuid: string; number: string | null; name?: string | null }>;
  /** Known groups (base64 id → members). Groups of delivered messages are added automatically;
   * sending to an unknown group fails with -1 like the real daemon. */
  groups?: Record<string, { name?: string; members?: string[] }>;
  /** After every successful send, publish the syncMessage.sentMessage echo of it (as when the
   * bot's account is also linked on another device). Default false. */
  echoSends?: boolean;
  /** Fail sends whose attachment path does not exist (as signal-cli does). Default true. */
  checkAttachmentPaths?: boolean;
  host?: string;
  port?: number;
}

export interface FakeSignalCli {
  /** e.g. http://127.0.0.1:41234 */
  url: string;
  account: string;
  accountUuid: string;
  /** Every JSON-RPC request that named a method, in arrival order. */
  calls: RpcCall[];
  /** Payloads published while no SSE client was connected in 'on-start' mode. */
  dropped: ReceivePayload[];
  /** Every payload published, in order (deliveries; not re-deliveries). */
  published: ReceivePayload[];
  /** `send` calls in order, failed ones included (`ok: false`). */
  sent(): SentMessage[];
  /** Successful sends addressed to this uuid or number (either form of a known contact). */
  repliesTo(uuidOrNumber: string): SentMessage[];
  typing(): TypingCall[];
  receipts(): ReceiptCall[];
  /** Inject an incoming text message; returns its (sourceUuid, timestamp) key. */
  deliverText(opts: DeliverTextOptions): Delivered;
  /** A file a person sent, as signal-cli stores it: the JsonAttachment to put in `attachments` (`size` may say otherwise than the bytes). */
  addAttachment(
    data: Buffer,
    opts: { contentType: string; filename?: string | null; size?: number },
  ): {
    contentType: string;
    filename: string | null;
    id: string;
    size: number;
    width: number | null;
    height: number | null;
    caption: string | null;
    uploadTimestamp: number;
  };
  /** Publish a raw payload (`{envelope?, account?, exception?}`) or a bare envelope. Missing
   * envelope fields are filled (source from sourceNumber/sourceUuid, sourceDevice 1, server
   * timestamps; a syncMessage without a source comes from the bot's own account). */
  deliverRaw(envelopeOrPayload: Record<string, unknown>): ReceivePayload;
  /** An editMessage of an earlier message. */
  deliverEdit(opts: {
    fromUuid: string;
    fromNumber: string | null;
    name?: string | null;
    targetSentTimestamp: number;
    text: string;
    timestamp?: number;
    groupId?: string;
  }): Delivered;
  /** A receiptMessage from a contact about the bot's messages. */
  deliverReceipt(opts: {
    fromUuid: string;
    fromNumber: string | null;
    type: 'delivery' | 'read' | 'viewed';
    timestamps: number[];
  }): ReceivePayload;
  /** A typingMessage from a contact. */
  deliverTyping(opts: { fromUuid: string; fromNumber: string | null; action: 'STARTED' | 'STOPPED'; groupId?: string }): ReceivePayload;
  /** A syncMessage.sentMessage (the bot's account sent this from another device). */
  deliverSyncSent(opts: {
    destinationUuid?: string | null;
    destinationNumber?: string | null;
    groupId?: string;
    text: string;
    timestamp?: number;
  }): ReceivePayload;
  /** Make the next sends fail with the notes' exact error payloads. */
  failNextSend(failure: SendFailure, opts?: FailSendOptions): void;
  clearSendFailures(): void;
  /** Messages still waiting for a receipt (redeliverUntilReceipt). */
  unacknowledged(): ReceivePayload[];
  /** End every open SSE stream (the daemon restarting). `abrupt`: destroy the sockets instead. */
  dropConnections(opts?: { abrupt?: boolean }): void;
  /** Currently connected SSE clients. */
  clients(): number;
  /** SSE connections ever accepted. */
  connections(): number;
  /** Resolves once clients() >= n (=== 0 when n is 0). */
  waitForClients(n: number, timeoutMs?: number): Promise<void>;
  /** Polls pred every 10 ms; resolves with its first truthy value. */
  waitFor<T>(pred: () => T | undefined | null | false | 0 | '', timeoutMs?: number): Promise<T>;
  close(): Promise<void>;
}

// ---------------------------------------------------------------------------------------------
// Helpers

const E164 = /^\+[1-9]\d{4,14}$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

class RpcError extends Error {
  constructor(
    readonly code: number,
    message: string,
    readonly data: unknown = null,
  ) {
    super(message);
  }
}

const INVALID_REQUEST = -32600;
const METHOD_NOT_FOUND = -32601;
const INVALID_PARAMS = -32602;
const PARSE_ERROR = -32700;

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** A stable v4-shaped uuid for a number the fake has not seen. */
function uuidFor(seed: string): string {
  const h = createHash('sha256').update(seed).digest('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-4${h.slice(13, 16)}-8${h.slice(17, 20)}-${h.slice(20, 32)}`;
}

function jacksonType(v: unknown): string {
  if (typeof v === 'string') return 'STRING';
  if (typeof v === 'number') return 'NUMBER';
  if (typeof v === 'boolean') return 'BOOLEAN';
  return 'NULL';
}

function paramsObject(params: unknown): Record<string, unknown> {
  if (params === undefined) return {};
  if (!isObject(params)) throw new RpcError(INVALID_PARAMS, 'params must be an object');
  return params;
}

/** signal-cli's JsonRpcNamespace.getList: a single value or an array, `name` or `name + 's'`. */
function listParam<T>(p: Record<string, unknown>, name: string, check: (v: unknown) => v is T, what: string): T[] {
  const v = p[name] ?? p[`${name}s`];
  if (v === undefined || v === null) return [];
  const arr = Array.isArray(v) ? v : [v];
  for (const x of arr) if (!check(x)) throw new RpcError(INVALID_PARAMS, `${name}: expected ${what}`);
  return arr as T[];
}

function optString(p: Record<string, unknown>, name: string): string | undefined {
  const v = p[name];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'string') throw new RpcError(INVALID_PARAMS, `${name}: expected a string`);
  return v;
}

function optInt(p: Record<string, unknown>, name: string): number | undefined {
  const v = p[name];
  if (v === undefined || v === null) return undefined;
  if (!Number.isSafeInteger(v)) throw new RpcError(INVALID_PARAMS, `${name}: expected an integer`);
  return v as number;
}

const isString = (v: unknown): v is string => typeof v === 'string';
const isInt = (v: unknown): v is number => Number.isSafeInteger(v);

function parseDataUri(uri: string): SentFile | undefined {
  // data:<MIME-TYPE>[;filename=<NAME>][;…];base64,<DATA>  (RFC 2397 + signal-cli's filename)
  const m = /^data:([^;,]*)((?:;[^;,]*)*?);base64,(.*)$/s.exec(uri);
  if (!m) return undefined;
  const filename = /;filename=([^;,]*)/.exec(m[2] ?? '')?.[1];
  return {
    source: 'data-uri',
    contentType: m[1] || 'application/octet-stream',
    ...(filename !== undefined ? { filename: decodeURIComponent(filename) } : {}),
    data: Buffer.from(m[3] ?? '', 'base64'),
  };
}

// ---------------------------------------------------------------------------------------------
// The fake

interface SseClient {
  res: http.ServerResponse;
  timer: NodeJS.Timeout;
}

interface Contact {
  uuid: string;
  number: string | null;
  name: string | null;
}

interface FailureRule {
  failure: SendFailure;
  remaining: number;
  recipient?: string;
}

export async function startFakeSignalCli(opts: FakeSignalCliOptions = {}): Promise<FakeSignalCli> {
  const account = opts.account ?? '+15550000000';
  const accountUuid = opts.accountUuid ?? '0b0b0b0b-0000-4000-8000-000000000001';
  const receiveMode = opts.receiveMode ?? 'on-start';
  const redeliver = opts.redeliverUntilReceipt ?? false;
  const keepaliveMs = opts.keepaliveMs ?? 15_000;
  const checkPaths = opts.checkAttachmentPaths ?? true;

  const calls: RpcCall[] = [];
  const dropped: ReceivePayload[] = [];
  const published: ReceivePayload[] = [];
  const sentLog: SentMessage[] = [];
  const typingLog: TypingCall[] = [];
  const receiptLog: ReceiptCall[] = [];
  const failures: FailureRule[] = [];

  const sse = new Set<SseClient>();
  let connectionCount = 0;
  const sockets = new Set<Socket>();

  /** Publication order, to replay held + unacknowledged events in the order they arrived. */
  const seqOf = new WeakMap<ReceivePayload, number>();
  let seq = 0;
  const held: ReceivePayload[] = [];
  const unacked = new Map<string, ReceivePayload>();

  // Directory: uuid → contact, number → uuid.
  const byUuid = new Map<string, Contact>();
  const byNumber = new Map<string, string>();
  const groups = new Map<string, { name: string | null; members: Set<string> }>();

  let lastTs = 0;
  const nextTimestamp = (): number => {
    lastTs = Math.max(Date.now(), lastTs + 1);
    return lastTs;
  };
  const noteTimestamp = (t: number): void => {
    if (t > lastTs) lastTs = t;
  };

  function learnContact(uuid: string, number: string | null, name?: string | null): void {
    const known = byUuid.get(uuid.toLowerCase());
    const c: Contact = {
      uuid: uuid.toLowerCase(),
      number: number ?? known?.number ?? null,
      name: name ?? known?.name ?? null,
    };
    byUuid.set(c.uuid, c);
    if (c.number) byNumber.set(c.number, c.uuid);
  }

  function address(recipient: string): RecipientAddress {
    if (UUID.test(recipient)) {
      const c = byUuid.get(recipient.toLowerCase());
      return { uuid: recipient.toLowerCase(), number: c?.number ?? null, username: null };
    }
    const uuid = byNumber.get(recipient) ?? uuidFor(recipient);
    return { uuid, number: recipient, username: null };
  }

  function sameRecipient(a: string, b: string): boolean {
    if (a === b) return true;
    const x = address(a);
    const y = address(b);
    return x.uuid === y.uuid || (x.number !== null && x.number === y.number);
  }

  function learnGroup(groupId: string, name: string | null | undefined, member?: string): void {
    let g = groups.get(groupId);
    if (!g) {
      g = { name: name ?? null, members: new Set() };
      groups.set(groupId, g);
    } else if (name) g.name = name;
    if (member && member.toLowerCase() !== accountUuid && member !== account) g.members.add(address(member).uuid!);
  }

  for (const c of opts.contacts ?? []) learnContact(c.uuid, c.number, c.name);
  for (const [id, g] of Object.entries(opts.groups ?? {})) {
    learnGroup(id, g.name);
    for (const m of g.members ?? []) learnGroup(id, undefined, m);
  }

  // -------------------------------------------------------------------------------------------
  // SSE

  function write(client: SseClient, payload: ReceivePayload): void {
    if (client.res.writableEnded || client.res.destroyed) return;
    client.res.write(`event:receive\ndata:${JSON.stringify(payload)}\n\n`);
  }

  function ackKey(payload: ReceivePayload): string | undefined {
    const env = payload.envelope;
    if (!redeliver || !env || !env.sourceUuid) return undefined;
    if (!env.dataMessage && !env.editMessage) return undefined;
    return `${env.sourceUuid.toLowerCase()}|${env.timestamp}`;
  }

  function publish(payload: ReceivePayload): void {
    seqOf.set(payload, seq++);
    published.push(payload);
    const env = payload.envelope;
    if (env?.sourceUuid) learnContact(env.sourceUuid, env.sourceNumber ?? null, env.sourceName);
    const group = env?.dataMessage?.groupInfo ?? env?.editMessage?.dataMessage.groupInfo;
    if (group && env?.sourceUuid) learnGroup(group.groupId, group.groupName, env.sourceUuid);

    const key = ackKey(payload);
    if (key) unacked.set(key, payload);
    if (sse.size > 0) {
      for (const c of sse) write(c, payload);
    } else if (key) {
      // Unacknowledged: delivered at the next connection.
    } else if (receiveMode === 'on-connection') {
      held.push(payload);
    } else {
      dropped.push(payload);
    }
  }

  function openEvents(res: http.ServerResponse): void {
    res.writeHead(200, { 'Content-Type': 'text/event-stream' });
    res.flushHeaders();
    const client: SseClient = {
      res,
      timer: setInterval(() => {
        if (!res.writableEnded && !res.destroyed) res.write(':\n');
      }, keepaliveMs),
    };
    client.timer.unref();
    sse.add(client);
    connectionCount++;
    const gone = (): void => {
      clearInterval(client.timer);
      sse.delete(client);
    };
    res.on('close', gone);

    // Held events (on-connection) and unacknowledged ones (re-delivery), in arrival order.
    const batch = held.splice(0);
    for (const p of unacked.values()) if (!batch.includes(p)) batch.push(p);
    batch.sort((a, b) => (seqOf.get(a) ?? 0) - (seqOf.get(b) ?? 0));
    for (const p of batch) write(client, p);
  }

  // -------------------------------------------------------------------------------------------
  // RPC methods

  function checkRecipients(recipients: string[]): void {
    for (const r of recipients) {
      if (!E164.test(r) && !UUID.test(r)) throw new RpcError(-1, `Invalid recipient: ${r}`);
    }
  }

  function checkGroups(groupIds: string[], prefix = ''): void {
    for (const g of groupIds) if (!groups.has(g)) throw new RpcError(-1, `${prefix}Group not found: ${g}`);
  }

  /** One result per direct recipient, then per member of each group (the bot excluded). */
  function plainResults(recipients: string[], groupIds: string[]): Array<{ addr: RecipientAddress; groupId?: string; key: string }> {
    const out: Array<{ addr: RecipientAddress; groupId?: string; key: string }> = [];
    for (const r of recipients) out.push({ addr: address(r), key: r });
    for (const g of groupIds) {
      for (const m of groups.get(g)?.members ?? []) out.push({ addr: address(m), groupId: g, key: m });
    }
    return out;
  }

  function failureResult(f: SendFailure): Pick<SendResult, 'type' | 'token' | 'retryAfterSeconds'> {
    switch (f.type) {
      case 'rate_limit':
        return {
          type: 'RATE_LIMIT_FAILURE',
          ...(f.token !== undefined ? { token: f.token } : {}),
          ...(f.retryAfterSeconds !== undefined ? { retryAfterSeconds: f.retryAfterSeconds } : {}),
        };
      case 'untrusted':
        return { type: 'IDENTITY_FAILURE' };
      case 'unregistered':
        return { type: 'UNREGISTERED_FAILURE' };
      default:
        return { type: 'NETWORK_FAILURE' };
    }
  }

  function rpcSend(rawParams: unknown, at: number): SendResponse {
    const entry: SentMessage = {
      recipients: [],
      groupIds: [],
      message: '',
      attachments: [],
      files: [],
      ok: false,
      results: [],
      params: isObject(rawParams) ? rawParams : {},
      at,
    };
    sentLog.push(entry);
    try {
      const p = paramsObject(rawParams);
      entry.recipients = listParam(p, 'recipient', isString, 'a string or string array');
      entry.groupIds = listParam(p, 'groupId', isString, 'a string or string array');
      if (entry.groupIds[0] !== undefined) entry.groupId = entry.groupIds[0];
      entry.message = optString(p, 'message') ?? '';
      entry.attachments = listParam(p, 'attachment', isString, 'a string or string array');
      const quoteTimestamp = optInt(p, 'quoteTimestamp');
      const quoteAuthor = optString(p, 'quoteAuthor');
      const editTimestamp = optInt(p, 'editTimestamp');
      if (quoteTimestamp !== undefined) entry.quoteTimestamp = quoteTimestamp;
      if (quoteAuthor !== undefined) entry.quoteAuthor = quoteAuthor;
      if (editTimestamp !== undefined) entry.editTimestamp = editTimestamp;
      const noteToSelf = p.noteToSelf === true;

      if (entry.recipients.length === 0 && entry.groupIds.length === 0 && !noteToSelf) {
        throw new RpcError(-1, 'No recipients given');
      }
      checkRecipients(entry.recipients);
      if (quoteAuthor !== undefined) checkRecipients([quoteAuthor]);
      checkGroups(entry.groupIds);
      if (entry.message === '' && entry.attachments.length === 0 && quoteTimestamp === undefined && p.sticker == null) {
        throw new RpcError(-1, 'Sending empty message is not allowed, either a message, attachment or sticker must be given.');
      }
      for (const a of entry.attachments) {
        if (a.startsWith('data:')) {
          const f = parseDataUri(a);
          if (!f) throw new RpcError(-32603, 'Failed to send message: Invalid data uri (AttachmentInvalidException)');
          entry.files.push(f);
        } else {
          let data: Buffer | undefined;
          try {
            data = fs.readFileSync(a);
          } catch {
            if (checkPaths) {
              throw new RpcError(-32603, `Failed to send message: ${a}: No such file or directory (AttachmentInvalidException)`);
            }
          }
          entry.files.push({ source: 'path', path: a, ...(data ? { data } : {}) });
        }
      }

      const timestamp = nextTimestamp();
      entry.timestamp = timestamp;

      // Failure injection.
      const rule = failures.find(
        (f) =>
          f.recipient === undefined || entry.groupIds.includes(f.recipient) || entry.recipients.some((r) => sameRecipient(r, f.recipient!)),
      );
      if (rule) {
        rule.remaining--;
        if (rule.remaining <= 0) failures.splice(failures.indexOf(rule), 1);
        if (rule.failure.type === 'rpc') throw new RpcError(rule.failure.code, rule.failure.message, rule.failure.data ?? null);
      }
      const plain = plainResults(entry.recipients, entry.groupIds);
      if (noteToSelf) plain.push({ addr: { uuid: accountUuid, number: account, username: null }, key: account });
      const results: SendResult[] = plain.map(({ addr, groupId, key }) => {
        const fails =
          rule !== undefined &&
          (rule.recipient === undefined || groupId === rule.recipient || (groupId === undefined && sameRecipient(key, rule.recipient)));
        return {
          recipientAddress: addr,
          ...(groupId !== undefined ? { groupId } : {}),
          ...(fails ? failureResult(rule.failure) : { type: 'SUCCESS' as const }),
        };
      });
      entry.results = results;
      const response: SendResponse = { timestamp, results };
      // SendMessageResults.hasSuccess(): some success, or nothing to send to at all.
      const anySuccess = results.length === 0 ? rule === undefined : results.some((r) => r.type === 'SUCCESS');
      if (!anySuccess) {
        const types = new Set(results.map((r) => r.type));
        const data = { response };
        if (types.size === 1 && types.has('IDENTITY_FAILURE')) {
          throw new RpcError(-4, 'Failed to send message due to untrusted identities', data);
        }
        if (types.size === 1 && types.has('RATE_LIMIT_FAILURE')) {
          throw new RpcError(-5, 'Failed to send message due to rate limiting', data);
        }
        throw new RpcError(-1, 'Failed to send message', data);
      }
      entry.ok = true;
      if (opts.echoSends) {
        for (const r of entry.recipients) {
          const a = address(r);
          api.deliverSyncSent({ destinationUuid: a.uuid, destinationNumber: a.number, text: entry.message, timestamp });
        }
        for (const g of entry.groupIds) api.deliverSyncSent({ groupId: g, text: entry.message, timestamp });
      }
      return response;
    } catch (e) {
      if (e instanceof RpcError) {
        entry.error = { code: e.code, message: e.message, data: e.data };
        const resp = isObject(e.data) && isObject(e.data.response) ? (e.data.response as unknown as SendResponse) : undefined;
        if (resp) entry.results = resp.results;
      }
      throw e;
    }
  }

  function rpcSendTyping(rawParams: unknown, at: number): SendResponse {
    const entry: TypingCall = { recipients: [], groupIds: [], stop: false, ok: false, at };
    typingLog.push(entry);
    try {
      const p = paramsObject(rawParams);
      entry.recipients = listParam(p, 'recipient', isString, 'a string or string array');
      entry.groupIds = listParam(p, 'groupId', isString, 'a string or string array');
      if (entry.groupIds[0] !== undefined) entry.groupId = entry.groupIds[0];
      if (p.stop !== undefined && p.stop !== null && typeof p.stop !== 'boolean')
        throw new RpcError(INVALID_PARAMS, 'stop: expected a boolean');
      entry.stop = p.stop === true;
      if (entry.recipients.length === 0 && entry.groupIds.length === 0) throw new RpcError(-1, 'No recipients given');
      checkRecipients(entry.recipients);
      checkGroups(entry.groupIds, 'Failed to send to group: ');
      const results: SendResult[] = plainResults(entry.recipients, entry.groupIds).map(({ addr, groupId }) => ({
        recipientAddress: addr,
        ...(groupId !== undefined ? { groupId } : {}),
        type: 'SUCCESS',
      }));
      entry.ok = true;
      return { timestamp: nextTimestamp(), results };
    } catch (e) {
      if (e instanceof RpcError) entry.error = { code: e.code, message: e.message, data: e.data };
      throw e;
    }
  }

  function rpcSendReceipt(rawParams: unknown, at: number): SendResponse {
    const entry: ReceiptCall = { recipient: '', targetTimestamps: [], type: 'read', ok: false, at };
    receiptLog.push(entry);
    try {
      const p = paramsObject(rawParams);
      const recipient = optString(p, 'recipient');
      if (recipient === undefined) throw new RpcError(INVALID_PARAMS, 'recipient: required');
      entry.recipient = recipient;
      entry.targetTimestamps = listParam(p, 'targetTimestamp', isInt, 'an integer or integer array');
      if (entry.targetTimestamps.length === 0) throw new RpcError(INVALID_PARAMS, 'targetTimestamp: required');
      const type = optString(p, 'type') ?? 'read';
      if (type !== 'read' && type !== 'viewed') throw new RpcError(-1, `Unknown receipt type: ${type}`);
      entry.type = type;
      checkRecipients([recipient]);
      const addr = address(recipient);
      for (const t of entry.targetTimestamps) unacked.delete(`${addr.uuid}|${t}`);
      entry.ok = true;
      return { timestamp: nextTimestamp(), results: [{ recipientAddress: addr, type: 'SUCCESS' }] };
    } catch (e) {
      if (e instanceof RpcError) entry.error = { code: e.code, message: e.message, data: e.data };
      throw e;
    }
  }

  /** Attachments signal-cli holds, by id (the file's name in its attachments folder). */
  const attachmentFiles = new Map<string, Buffer>();
  function rpcGetAttachment(rawParams: unknown): { data: string } {
    const p = paramsObject(rawParams);
    const id = optString(p, 'id');
    if (id === undefined) throw new RpcError(INVALID_PARAMS, 'id: required');
    const bytes = attachmentFiles.get(id);
    if (!bytes) throw new RpcError(-32603, `An error occurred reading attachment: ${id}`);
    return { data: bytes.toString('base64') };
  }

  const methods: Record<string, (params: unknown, at: number) => unknown> = {
    getAttachment: rpcGetAttachment,
    send: rpcSend,
    sendTyping: rpcSendTyping,
    sendReceipt: rpcSendReceipt,
  };

  // -------------------------------------------------------------------------------------------
  // JSON-RPC framing (JsonRpcReader)

  const errorResponse = (code: number, message: string, id: JsonRpcId, data: unknown = null): unknown => ({
    jsonrpc: '2.0',
    error: { code, message, data },
    id,
  });

  const readableId = (node: Record<string, unknown>): JsonRpcId => {
    const id = node.id;
    return typeof id === 'string' || typeof id === 'number' || typeof id === 'boolean' ? id : null;
  };

  /** One request object → its response, or undefined for a notification. */
  function handleRequest(node: unknown): unknown {
    if (!isObject(node)) return errorResponse(INVALID_REQUEST, `Cannot deserialize request from ${jacksonType(node)}`, null);
    const id = node.id;
    if (id !== undefined && id !== null && typeof id === 'object') {
      return errorResponse(INVALID_REQUEST, 'id must be a string, number or null', null);
    }
    if (node.jsonrpc !== '2.0') return errorResponse(INVALID_REQUEST, 'only jsonrpc version 2.0 is supported', readableId(node));
    if (typeof node.method !== 'string') return errorResponse(INVALID_REQUEST, 'method field must be set', readableId(node));
    const params = node.params === null ? undefined : node.params;
    const isNotification = id === undefined || id === null;
    const call: RpcCall = { method: node.method, params, id: isNotification ? undefined : (id as JsonRpcId), at: Date.now() };
    calls.push(call);
    const fn = Object.hasOwn(methods, node.method) ? methods[node.method] : undefined;
    let response: unknown;
    try {
      if (opts.multiAccount !== undefined && node.method === 'listAccounts') {
        call.result = opts.multiAccount.map((number) => ({ number }));
        return isNotification ? undefined : { jsonrpc: '2.0', result: call.result, id };
      }
      if (!fn) throw new RpcError(METHOD_NOT_FOUND, 'Method not implemented');
      if (opts.multiAccount !== undefined) {
        const named = isObject(params) ? params.account : undefined;
        if (named === undefined || named === null) throw new RpcError(INVALID_PARAMS, 'Method requires valid account parameter');
        if (!opts.multiAccount.includes(String(named))) throw new RpcError(INVALID_PARAMS, 'Specified account does not exist');
      }
      call.result = fn(params, call.at);
      response = { jsonrpc: '2.0', result: call.result, id };
    } catch (e) {
      const err = e instanceof RpcError ? e : new RpcError(-32603, (e as Error).message);
      call.error = { code: err.code, message: err.message, data: err.data };
      response = errorResponse(err.code, err.message, id as JsonRpcId, err.data);
    }
    return isNotification ? undefined : response;
  }

  function handleRpcBody(body: string): { status: number; json?: unknown } {
    if (body.trim() === '') return { status: 200, json: errorResponse(INVALID_REQUEST, 'invalid request', null) };
    let node: unknown;
    try {
      node = JSON.parse(body);
    } catch (e) {
      return { status: 200, json: errorResponse(PARSE_ERROR, (e as Error).message, null) };
    }
    if (Array.isArray(node)) {
      if (node.length === 0) return { status: 200, json: errorResponse(INVALID_REQUEST, 'invalid request', null) };
      return { status: 200, json: node.map(handleRequest).filter((r) => r !== undefined) };
    }
    if (isObject(node)) {
      // A JSON-RPC response sent to the daemon is accepted silently.
      if ('result' in node || 'error' in node) return { status: 201 };
      const r = handleRequest(node);
      return r === undefined ? { status: 201 } : { status: 200, json: r };
    }
    return { status: 200, json: errorResponse(INVALID_REQUEST, `unexpected type: ${jacksonType(node)}`, null) };
  }

  // -------------------------------------------------------------------------------------------
  // HTTP

  function empty(res: http.ServerResponse, status: number): void {
    res.writeHead(status, { 'Content-Length': '0' });
    res.end();
  }

  function sendJson(res: http.ServerResponse, status: number, json: unknown): void {
    const body = Buffer.from(JSON.stringify(json));
    res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': String(body.length) });
    res.end(body);
  }

  const server = http.createServer((req, res) => {
    const path = new URL(req.url ?? '/', 'http://fake').pathname;
    if (path === '/api/v1/check') {
      if (req.method !== 'GET') return empty(res, 405);
      return empty(res, 200);
    }
    if (path === '/api/v1/events') {
      if (req.method !== 'GET') return empty(res, 405);
      const named = new URL(req.url ?? '/', 'http://fake').searchParams.get('account');
      if (opts.multiAccount !== undefined && named !== null && !opts.multiAccount.includes(named)) return empty(res, 400);
      return openEvents(res);
    }
    if (path === '/api/v1/rpc') {
      if (req.method !== 'POST') {
        req.resume();
        return empty(res, 405);
      }
      const ct = req.headers['content-type'];
      if (!ct || !ct.startsWith('application/json')) {
        req.resume();
        return empty(res, 415);
      }
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const out = handleRpcBody(Buffer.concat(chunks).toString('utf8'));
        if (out.json === undefined) empty(res, out.status);
        else sendJson(res, out.status, out.json);
      });
      return;
    }
    req.resume();
    empty(res, 404);
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

  function envelopeBase(
    fromUuid: string,
    fromNumber: string | null,
    name: string | null | undefined,
    timestamp: number,
    device = 1,
  ): Envelope {
    noteTimestamp(timestamp);
    return {
      source: fromNumber ?? fromUuid,
      sourceNumber: fromNumber,
      sourceUuid: fromUuid,
      sourceName: name ?? byUuid.get(fromUuid.toLowerCase())?.name ?? null,
      sourceDevice: device,
      timestamp,
      serverReceivedTimestamp: timestamp + 3,
      serverDeliveredTimestamp: timestamp + 4,
    };
  }

  function dataMessage(text: string | null, timestamp: number, groupId?: string, groupName?: string): DataMessage {
    return {
      timestamp,
      message: text,
      expiresInSeconds: 0,
      isExpirationUpdate: false,
      viewOnce: false,
      ...(groupId !== undefined
        ? { groupInfo: { groupId, groupName: groupName ?? groups.get(groupId)?.name ?? null, revision: 1, type: 'DELIVER' as const } }
        : {}),
    };
  }

  const api: FakeSignalCli = {
    url,
    account,
    accountUuid,
    calls,
    dropped,
    published,
    sent: () => [...sentLog],
    repliesTo: (who) => sentLog.filter((s) => s.ok && s.recipients.some((r) => sameRecipient(r, who))),
    typing: () => [...typingLog],
    receipts: () => [...receiptLog],

    addAttachment(data, o) {
      const ext =
        /^(?:image|audio|video)\/([a-z0-9]{1,8})$/.exec(o.contentType)?.[1] ?? (o.contentType === 'application/pdf' ? 'pdf' : undefined);
      const id = `${createHash('sha256').update(`${attachmentFiles.size}:${Date.now()}:${Math.random()}`).digest('base64url').slice(0, 20)}${ext ? `.${ext}` : ''}`;
      attachmentFiles.set(id, data);
      return {
        contentType: o.contentType,
        filename: o.filename ?? null,
        id,
        size: o.size ?? data.length,
        width: null,
        height: null,
        caption: null,
        uploadTimestamp: Date.now(),
      };
    },

    deliverText(o) {
      const timestamp = o.timestamp ?? nextTimestamp();
      const env = envelopeBase(o.fromUuid, o.fromNumber, o.name, timestamp, o.sourceDevice);
      const dm = dataMessage(o.text, timestamp, o.groupId, o.groupName);
      if (o.mentions?.length) {
        dm.mentions = o.mentions.map((m) => ({
          name: m.name ?? m.number ?? m.uuid,
          number: m.number ?? null,
          uuid: m.uuid,
          start: m.start,
          length: m.length,
        }));
      }
      if (o.quote !== undefined) dm.quote = o.quote;
      if (o.attachments?.length) dm.attachments = o.attachments;
      Object.assign(dm, o.dataMessage ?? {});
      env.dataMessage = dm;
      const payload: ReceivePayload = { envelope: env, account };
      publish(payload);
      return { sourceUuid: o.fromUuid, timestamp, payload };
    },

    deliverRaw(original) {
      const input = structuredClone(original);
      const isPayload = 'envelope' in input || 'exception' in input || 'account' in input;
      const payload = (isPayload ? { account, ...input } : { envelope: input, account }) as unknown as ReceivePayload;
      const env = payload.envelope as Record<string, unknown> | undefined;
      if (env) {
        if (env.syncMessage !== undefined && env.sourceUuid === undefined && env.sourceNumber === undefined) {
          env.sourceUuid = accountUuid;
          env.sourceNumber = account;
        }
        const ts = typeof env.timestamp === 'number' ? env.timestamp : nextTimestamp();
        noteTimestamp(ts);
        const filled = {
          source: (env.sourceNumber as string | null | undefined) ?? (env.sourceUuid as string | null | undefined) ?? null,
          sourceNumber: null,
          sourceUuid: null,
          sourceName: null,
          sourceDevice: env.sourceUuid || env.sourceNumber ? 1 : null,
          timestamp: ts,
          serverReceivedTimestamp: ts + 3,
          serverDeliveredTimestamp: ts + 4,
        };
        for (const [k, v] of Object.entries(filled)) if (!(k in env)) env[k] = v;
      }
      publish(payload);
      return payload;
    },

    deliverEdit(o) {
      const timestamp = o.timestamp ?? nextTimestamp();
      const env = envelopeBase(o.fromUuid, o.fromNumber, o.name, timestamp);
      env.editMessage = { targetSentTimestamp: o.targetSentTimestamp, dataMessage: dataMessage(o.text, timestamp, o.groupId) };
      const payload: ReceivePayload = { envelope: env, account };
      publish(payload);
      return { sourceUuid: o.fromUuid, timestamp, payload };
    },

    deliverReceipt(o) {
      const timestamp = nextTimestamp();
      const env = envelopeBase(o.fromUuid, o.fromNumber, undefined, timestamp);
      env.receiptMessage = {
        when: timestamp,
        isDelivery: o.type === 'delivery',
        isRead: o.type === 'read',
        isViewed: o.type === 'viewed',
        timestamps: o.timestamps,
      };
      const payload: ReceivePayload = { envelope: env, account };
      publish(payload);
      return payload;
    },

    deliverTyping(o) {
      const timestamp = nextTimestamp();
      const env = envelopeBase(o.fromUuid, o.fromNumber, undefined, timestamp);
      env.typingMessage = { action: o.action, timestamp, ...(o.groupId !== undefined ? { groupId: o.groupId } : {}) };
      const payload: ReceivePayload = { envelope: env, account };
      publish(payload);
      return payload;
    },

    deliverSyncSent(o) {
      const timestamp = o.timestamp ?? nextTimestamp();
      const env = envelopeBase(accountUuid, account, null, timestamp);
      const destNumber = o.groupId !== undefined ? null : (o.destinationNumber ?? null);
      const destUuid = o.groupId !== undefined ? null : (o.destinationUuid ?? null);
      env.syncMessage = {
        sentMessage: {
          destination: destNumber ?? destUuid,
          destinationNumber: destNumber,
          destinationUuid: destUuid,
          ...dataMessage(o.text, timestamp, o.groupId),
        },
      };
      const payload: ReceivePayload = { envelope: env, account };
      publish(payload);
      return payload;
    },

    failNextSend(failure, o = {}) {
      failures.push({ failure, remaining: o.count ?? 1, ...(o.recipient !== undefined ? { recipient: o.recipient } : {}) });
    },
    clearSendFailures() {
      failures.length = 0;
    },

    unacknowledged: () => [...unacked.values()],

    dropConnections(o = {}) {
      for (const c of [...sse]) {
        clearInterval(c.timer);
        sse.delete(c);
        if (o.abrupt) c.res.destroy();
        else c.res.end();
      }
    },
    clients: () => sse.size,
    connections: () => connectionCount,

    async waitForClients(n, timeoutMs = 5_000) {
      await api
        .waitFor(() => (n === 0 ? sse.size === 0 : sse.size >= n), timeoutMs)
        .catch(() => {
          throw new Error(`waitForClients(${n}): ${sse.size} connected after ${timeoutMs} ms`);
        });
    },

    waitFor: <T>(pred: () => T | undefined | null | false | 0 | '', timeoutMs = 5_000): Promise<T> => pollUntil(pred, timeoutMs),

    async close() {
      for (const c of [...sse]) {
        clearInterval(c.timer);
        sse.delete(c);
        c.res.destroy();
      }
      server.closeAllConnections();
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  return api;
}
