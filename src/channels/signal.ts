import type { Logger } from 'pino';
import { z } from 'zod';
import { isBerthError } from '../base/errors.js';
import {
  backoffDelay,
  cutUtf8,
  defineChannel,
  reach,
  sendPartsFrom,
  senderFields,
  textFile,
  type ChannelMessage,
  type ChannelTransport,
  type ReplyFile,
} from './contract.js';
import { obj, str, num, type Json } from './json.js';
import { createSseReader, type OversizedEvent } from './sse-events.js';
import { tooLarge } from './attachment-bytes.js';
import { boundedRpcResult, fetchSignalAttachment, SIGNAL_FILE_LIMIT_BYTES, signalAttachments } from './signal-files.js';

/**
 * The Signal adapter: signal-cli's JSON-RPC daemon over HTTP (`signal-cli -a ACCOUNT daemon
 * --http=HOST:PORT`). Events come as SSE from GET /api/v1/events (no ids, keepalive comments,
 * nothing replayed: reconnect with backoff and jitter); sends are JSON-RPC at POST /api/v1/rpc.
 * Only data messages with text or attachments (signal-files.ts) reach the core; receipts, typing,
 * the bot's own sync echoes and reactions are skipped. Tenants are keyed on the sender's uuid (numbers may be hidden).
 */
export const SIGNAL_INLINE_BYTES = 2000;
/** An event bigger than this is skipped (and logged by sender), never buffered. */
export const SIGNAL_MAX_EVENT_BYTES = 1024 * 1024;
const OBJECT_REPLACEMENT = '\uFFFC';

export interface SignalOptions {
  url: string;
  account: string;
  logger: Logger;
  /** Where messages go (the bridge core). */
  onMessage: (message: ChannelMessage) => void;
  /** Reconnect backoff bounds (tests make them small). */
  backoffMs?: { min: number; max: number };
  /** The largest attachment sent (berth.yaml max_file_bytes; default Signal's 100 MiB): a bigger file is for the core to send as a link. */
  maxFileBytes?: number;
}

/** A group chat's address carries its id; a direct chat's is the sender's uuid. */
const GROUP = 'group:';

export class SignalRpcError extends Error {
  constructor(
    readonly code: number,
    message: string,
    readonly retryAfterSeconds?: number,
  ) {
    super(message);
  }
}

export function createSignalBridge(opts: SignalOptions): ChannelTransport {
  const log = opts.logger.child({ bridge: 'signal' });
  const maxFileBytes = opts.maxFileBytes ?? SIGNAL_FILE_LIMIT_BYTES;
  let rpcId = 0;
  let stopped = false;
  let abort: AbortController | undefined;
  let isConnected = false;
  let loop: Promise<void> | undefined;

  async function rpc(method: string, params: Json): Promise<unknown> {
    const res = await fetch(`${opts.url}/api/v1/rpc`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      // The account in every call: a daemon started without -a (multi-account) needs it, one with -a ignores it.
      body: JSON.stringify({ jsonrpc: '2.0', id: ++rpcId, method, params: { ...params, account: opts.account } }),
      signal: AbortSignal.timeout(30_000),
    });
    const body = obj(await res.json().catch(() => undefined));
    const error = obj(body?.error);
    if (error) {
      const results = (obj(obj(obj(error.data)?.response))?.results as unknown[] | undefined) ?? [];
      const retry = results.map((r) => num(obj(r)?.retryAfterSeconds)).find((n) => n !== undefined);
      throw new SignalRpcError(num(error.code) ?? -1, str(error.message) ?? 'signal-cli error', retry);
    }
    if (!res.ok || !body) throw new SignalRpcError(-1, `signal-cli answered HTTP ${res.status}`);
    return body.result;
  }

  /** A call whose answer is read within maxBytes (an attachment's base64 comes whole in one answer). */
  async function boundedRpc(method: string, params: Json, maxBytes: number, signal: AbortSignal): Promise<unknown> {
    const res = await reach('signal-cli', `${opts.url}/api/v1/rpc`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: ++rpcId, method, params: { ...params, account: opts.account } }),
      signal: AbortSignal.any([signal, AbortSignal.timeout(120_000)]),
    });
    return boundedRpcResult(res, maxBytes, (code, message) => new SignalRpcError(code, message));
  }

  const target = (chat: string): Json => (chat.startsWith(GROUP) ? { groupId: chat.slice(GROUP.length) } : { recipient: [chat] });

  /** Send, waiting out one rate limit when Signal says how long (bounded). */
  async function send(params: Json): Promise<void> {
    try {
      await rpc('send', params);
    } catch (err) {
      if (err instanceof SignalRpcError && err.code === -5 && err.retryAfterSeconds !== undefined && err.retryAfterSeconds <= 60) {
        log.warn({ retryAfter: err.retryAfterSeconds }, 'signal rate limit: waiting once');
        await new Promise((r) => setTimeout(r, err.retryAfterSeconds! * 1000));
        await rpc('send', params);
        return;
      }
      throw err;
    }
  }

  function toMessage(payload: Json): ChannelMessage | undefined {
    if (payload.exception) {
      log.warn({ exception: obj(payload.exception)?.type }, 'signal-cli reported an exception with an event');
    }
    const env = obj(payload.envelope);
    if (!env) return undefined;
    const uuid = str(env.sourceUuid);
    // Receipts, typing, and syncMessage (echoes of what this account sent) are not messages to answer.
    const edit = obj(env.editMessage);
    const data = obj(env.dataMessage) ?? obj(edit?.dataMessage);
    if (!uuid || !data) return undefined;
    const attachments = signalAttachments(data);
    let text = str(data.message) ?? '';
    if (text.trim() === '' && attachments.length === 0) return undefined; // reactions, stickers
    for (const mention of (Array.isArray(data.mentions) ? data.mentions : []).map(obj)) {
      if (text.includes(OBJECT_REPLACEMENT))
        text = text.replace(OBJECT_REPLACEMENT, `@${str(mention?.name) ?? str(mention?.number) ?? 'someone'}`);
    }
    const timestamp = num(data.timestamp) ?? num(env.timestamp);
    if (timestamp === undefined) return undefined;
    const groupId = str(obj(data.groupInfo)?.groupId);
    return {
      id: `${uuid}:${timestamp}`,
      chat: groupId ? `${GROUP}${groupId}` : uuid,
      tenant: groupId ? `signal-group:${groupId}` : `signal:${uuid}`,
      sender: `signal:${uuid}`,
      senderName: str(env.sourceName),
      text: edit ? `(edited) ${text}` : text,
      receipt: { recipient: uuid, timestamp },
      ...(attachments.length > 0 ? { attachments } : {}),
    };
  }

  /**
   * One SSE connection until it ends. An event over the bound is skipped where it stands (signal-cli
   * has already taken it off Signal's servers): dropping the connection would lose every event read
   * with it, and the events behind it are what the stream goes on with.
   */
  async function listen(signal: AbortSignal): Promise<void> {
    const res = await fetch(`${opts.url}/api/v1/events?account=${encodeURIComponent(opts.account)}`, {
      headers: { accept: 'text/event-stream' },
      signal,
    });
    if (res.status === 400)
      throw new Error(
        `events: HTTP 400: signal-cli does not hold account ${opts.account} (a daemon started without -a): link or register it there, or start it with -a ${opts.account}`,
      );
    if (!res.ok || !res.body) throw new Error(`events: HTTP ${res.status}`);
    isConnected = true;
    log.info('connected to signal-cli');
    const reader = createSseReader({ maxEventBytes: SIGNAL_MAX_EVENT_BYTES, onEvent: dispatch, onOversized: skipped });
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) reader.push(chunk);
  }

  /** Who sent an event too big to read: its envelope names the sender first (never its text in the log). */
  function skipped(event: OversizedEvent) {
    const uuid = /"sourceUuid"\s*:\s*"([0-9a-fA-F-]{36})"/.exec(event.head)?.[1];
    log.warn(
      { sender: uuid ? `signal:${uuid}` : 'unknown', bytes: event.bytes, bound: SIGNAL_MAX_EVENT_BYTES },
      'skipped a signal-cli event over the size bound',
    );
  }

  function dispatch(text: string) {
    let payload: Json | undefined;
    try {
      payload = obj(JSON.parse(text));
    } catch {
      log.warn('signal-cli sent an event that is not JSON');
      return;
    }
    const message = payload && toMessage(payload);
    if (!message) return;
    // One message the core could not take (its inbox lock timed out) must not lose the events
    // read after it in the same chunk: logged by sender and id, never its text.
    try {
      opts.onMessage(message);
    } catch (err) {
      log.error(
        { sender: message.sender, id: message.id, code: isBerthError(err) ? err.code : (err as Error)?.name },
        'could not take a signal message; it is lost',
      );
    }
  }

  async function run() {
    let attempt = 0;
    while (!stopped) {
      abort = new AbortController();
      try {
        await listen(abort.signal);
        attempt = 0; // a stream that ended cleanly: reconnect at once-ish
      } catch (err) {
        if (stopped) break;
        attempt++;
        log.warn({ err: String(err).slice(0, 200), attempt }, 'signal-cli events stream failed');
      }
      isConnected = false;
      if (stopped) break;
      await new Promise((r) => setTimeout(r, backoffDelay(attempt, opts.backoffMs)));
    }
    isConnected = false;
  }

  return {
    name: 'signal',
    start() {
      loop ??= run();
    },
    async stop() {
      stopped = true;
      abort?.abort();
      await loop;
    },
    connected: () => isConnected,
    async send(chat, text, about) {
      await sendPartsFrom(signalMessages(text), about?.fromPart, (params) => send({ ...target(chat), ...params }));
    },
    // Signal has no markup: a send is plain already. A file is an attachment under a short message.
    async sendFile(chat, file, caption) {
      if (file.data.byteLength > maxFileBytes) throw tooLarge(maxFileBytes, 'Signal');
      await send({ ...target(chat), message: caption, attachments: [dataUri(file)] });
    },
    fileLimitBytes: maxFileBytes,
    fetchAttachment: (ref, limits) => fetchSignalAttachment(boundedRpc, ref, limits),
    async typing(chat, on) {
      await rpc('sendTyping', { ...target(chat), ...(on ? {} : { stop: true }) });
    },
    async acknowledge(message) {
      const receipt = message.receipt;
      if (receipt) await rpc('sendReceipt', { recipient: receipt.recipient, targetTimestamp: [receipt.timestamp], type: 'read' });
    },
  };
}

/** A reply as Signal takes it: up to 2000 bytes inline; longer, the start inline and the whole as a text attachment. */
export function signalMessages(text: string): Array<{ message: string; attachments?: string[] }> {
  if (Buffer.byteLength(text) <= SIGNAL_INLINE_BYTES) return [{ message: text }];
  const note = '\n[… the whole reply is attached as reply.txt]';
  const head = cutUtf8(text, SIGNAL_INLINE_BYTES - Buffer.byteLength(note));
  return [{ message: head + note, attachments: [dataUri(textFile('reply.txt', text))] }];
}

/** A file as signal-cli takes an attachment: a data URI with its name. */
const dataUri = (file: ReplyFile) =>
  `data:${file.mime.split(';')[0]};filename=${file.name};base64,${Buffer.from(file.data).toString('base64')}`;

export const SignalBridgeSchema = z
  .object({
    url: z
      .url({ protocol: /^https?$/, error: 'must be an http(s) URL' })
      .describe("signal-cli's daemon (signal-cli -a ACCOUNT daemon --http=127.0.0.1:8081)."),
    account: z
      .string()
      .regex(/^\+[1-9][0-9]{6,14}$/, "must be the bot's number in E.164 form, e.g. +4915550000")
      .describe("The bot's Signal account."),
    max_file_bytes: z
      .number()
      .int()
      .min(1024)
      .max(SIGNAL_FILE_LIMIT_BYTES)
      .default(SIGNAL_FILE_LIMIT_BYTES)
      .describe(
        "The largest file berth sends as an attachment (Signal's own limit, 100 MiB, is the default and the most): lower it to what your signal-cli, its server or the link to it takes. A bigger file the agent sends comes as a link the person opens.",
      ),
    ...senderFields('Sender uuids (or tenant keys signal:<uuid>)'),
  })
  .strict();

/** Signal, through signal-cli's JSON-RPC daemon (docs/signal.md). */
/**
 * The accounts a daemon started without -a holds (`listAccounts`); undefined for one started
 * with -a (it answers "Method not implemented" and serves its one account) or one that does not say.
 */
async function heldAccounts(url: string): Promise<string[] | undefined> {
  const res = await fetch(`${url}/api/v1/rpc`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'listAccounts' }),
    signal: AbortSignal.timeout(3000),
  });
  const result = obj(await res.json().catch(() => undefined))?.result;
  if (!Array.isArray(result)) return undefined;
  return result.slice(0, 1000).flatMap((a) => str(obj(a)?.number) ?? []);
}

export const signalChannel = defineChannel({
  name: 'signal',
  title: 'Signal',
  schema: SignalBridgeSchema,
  receives: () => 'stream',
  sends: {
    typing: true,
    inlineLimit: `${SIGNAL_INLINE_BYTES} bytes`,
    longReplies: 'the start inline, the whole as reply.txt',
    files: 'in: attachments, read from signal-cli (getAttachment); out: an attachment, up to max_file_bytes (100 MiB), past it a link',
  },
  tenants: { direct: 'signal:<sender uuid>', groups: 'signal-group:<group id>: its members share a workspace, each paired on their own' },
  senderKey: /^signal:[0-9a-fA-F-]{1,64}$/,
  pairing: true,
  senders: (c) => c,
  guide: 'docs/signal.md',
  label: (c) => `${c.account} at ${c.url}`,
  describe: (c) => `${c.account} through signal-cli at ${c.url} (senders: ${c.senders})`,
  create: (ctx) =>
    createSignalBridge({
      url: ctx.config.url,
      account: ctx.config.account,
      logger: ctx.logger,
      backoffMs: ctx.backoffMs,
      maxFileBytes: ctx.config.max_file_bytes,
      onMessage: ctx.take,
    }),
  async doctor(c, route) {
    const routed = route ?? 'no "signal" route: only chats named in routes are answered';
    try {
      const res = await fetch(`${c.url}/api/v1/check`, { signal: AbortSignal.timeout(3000) });
      if (!res.ok) return [{ name: 'bridge signal', status: 'fail', detail: `signal-cli at ${c.url} answered HTTP ${res.status}` }];
      const held = await heldAccounts(c.url);
      if (held !== undefined && !held.includes(c.account)) {
        return [
          {
            name: 'bridge signal',
            status: 'fail',
            detail: `signal-cli at ${c.url} does not hold ${c.account} (it holds ${held.length > 0 ? held.slice(0, 5).join(', ') : 'no account'}): link or register ${c.account} there, or start it with signal-cli -a ${c.account} daemon --http=${new URL(c.url).host}`,
          },
        ];
      }
      return [
        {
          name: 'bridge signal',
          status: route ? 'ok' : 'warn',
          detail: `signal-cli at ${c.url} answers; ${c.account} ${routed}; senders: ${c.senders}`,
        },
      ];
    } catch (err) {
      return [
        {
          name: 'bridge signal',
          status: 'fail',
          detail: `signal-cli does not answer at ${c.url} (${(err as Error).message}); start it: signal-cli -a ${c.account} daemon --http=${new URL(c.url).host}`,
        },
      ];
    }
  },
});
