import type { Logger } from 'pino';
import { z } from 'zod';
import { BerthError, isBerthError } from '../base/errors.js';

/**
 * What a chat channel is to berth: one module that declares its berth.yaml schema, how it
 * receives and sends, its tenant keys and its doctor check, and turns its wire protocol into
 * ChannelMessages. Everything else (the durable inbox, lanes, pairing, commands, approvals,
 * the console) is the bridge core's, the same for every channel. A new channel is a module here
 * and one entry in registry.ts.
 */

/** A message as a channel hands it over: the core journals it before anything else happens. */
export interface ChannelMessage {
  /** The channel's identity of this message (stable across re-deliveries: it dedupes them). */
  id: string;
  /** Where the answer goes (the channel's address: a uuid, a chat id, a room, a thread). */
  chat: string;
  /** Whose workspace and session: the sender in a direct chat, the group in a group. */
  tenant: string;
  /** The sender's own key, `<prefix>:<id>` (who is paired, who may raise levels); a pairing channel's prefix is its name. */
  sender: string;
  senderName?: string;
  text: string;
  /** What the channel needs to acknowledge it once journaled (its own fields; Signal: a read receipt's). */
  receipt?: Readonly<Record<string, string | number>>;
  /** Files sent with it, as the channel knows them: journaled with the message, fetched (bounded) by the core before the run. */
  attachments?: ChannelAttachment[];
}

/** A file a person sent, as its channel names it. Nothing of it is trusted: the core bounds, names and writes it. */
export interface ChannelAttachment {
  /** The channel's handle to fetch it (a file id, an mxc:// URI, a path under its own dir): JSON, so it survives a restart in the inbox. */
  ref: string;
  /** As the sender named it (unsafe until the core sanitises it). */
  name?: string;
  mime?: string;
  /** Bytes, as the service declares them: a hint (the fetch is bounded anyway). */
  size?: number;
  /** A voice note rather than a file. */
  voice?: boolean;
}

/** How the core answers through a channel. */
export interface ChannelSender {
  /** The channel's name: names its inbox, its route ("telegram", "telegram:<chat>") and tenant keys. */
  readonly name: string;
  /** `about.answerTo`: the message this text answers (its inbox id), so a channel can make a re-send after a crash the same send. */
  send(chat: string, text: string, about?: SendAbout): Promise<void>;
  /**
   * The text as it is, without the channel's markup (Telegram's MarkdownV2, Slack's mrkdwn): the
   * core's next try when a send failed, the service refusing its markup. Absent where a send is plain already.
   */
  sendPlain?(chat: string, text: string, about?: SendAbout): Promise<void>;
  /** A file in the chat (a document, an upload, an attachment) with a short caption: a long reply as text after the plain try failed, or a file the agent sent. */
  sendFile?(chat: string, file: ReplyFile, caption: string, about?: SendAbout): Promise<void>;
  /**
   * The largest file `sendFile` takes on this service (its own upload limit, or a smaller one
   * berth keeps to): a bigger file is for the core to send as a link. Absent with sendFile: no
   * limit known. Read it when sending: a channel may learn it once started (Matrix asks its
   * homeserver). Each channel module exports its constant (docs/<channel>.md says its source).
   */
  readonly fileLimitBytes?: number;
  /** The bytes of an attachment this channel handed over (ChannelAttachment.ref), at most `maxBytes` (more: a BerthError TOO_LARGE, nothing kept; a ref it did not hand out: NOT_FOUND). */
  fetchAttachment?(ref: string, limits: { maxBytes: number; signal: AbortSignal }): Promise<Uint8Array>;
  typing(chat: string, on: boolean): Promise<void>;
  /** The message is safe with berth (journaled): a read receipt, a confirmed offset, an HTTP 200. */
  acknowledge(message: ChannelMessage): Promise<void>;
  /** A message's answer (or the notice it failed with) was sent: a webhook returns it in its request, or posts it to its callback. */
  answered?(id: string, chat: string, text: string): void;
  /** The message has ended, answered or failed, its notices and files sent too (a webhook's sync answer goes now; web chat: its connection may send the next). */
  finished?(id: string, chat: string): void;
  /** The routes that may answer a chat, most specific first (default: "<name>:<chat>", then "<name>"). */
  profileKeys?(chat: string): string[];
  /** How often typing is said again while the agent works (the service's indicator fades). */
  readonly typingEveryMs?: number;
}

export interface SendAbout {
  answerTo?: string;
  /** A reply in several parts: the first part not yet delivered (0-based; an earlier try sent the ones before it). */
  fromPart?: number;
}

/**
 * A send of several parts that failed at one: how many parts of the whole went through before it
 * (`partsSent`), so the core's next try starts there and the person never sees a part twice. The
 * failure's status and retry-after are the cause's (the delivery policy reads them).
 */
export class PartsSentError extends Error {
  readonly status?: number;
  readonly retryAfterSeconds?: number;
  constructor(
    readonly partsSent: number,
    override readonly cause: unknown,
  ) {
    super(String((cause as Error)?.message ?? cause));
    const c = cause as { status?: unknown; retryAfterSeconds?: unknown } | undefined;
    if (typeof c?.status === 'number') this.status = c.status;
    if (typeof c?.retryAfterSeconds === 'number') this.retryAfterSeconds = c.retryAfterSeconds;
  }
}

/** Send `parts` in order from `from` (SendAbout.fromPart); a part that fails throws a PartsSentError counting the ones before it. */
export async function sendPartsFrom<T>(
  parts: readonly T[],
  from: number | undefined,
  sendOne: (part: T, index: number) => Promise<unknown>,
): Promise<void> {
  for (let i = Math.max(0, from ?? 0); i < parts.length; i++) {
    try {
      await sendOne(parts[i]!, i);
    } catch (err) {
      throw new PartsSentError(i, err);
    }
  }
}

/** How many parts a failed send delivered in all (0 when the error does not say). */
export function partsSentOf(err: unknown): number {
  const n = (err as { partsSent?: unknown } | undefined)?.partsSent;
  return typeof n === 'number' && Number.isInteger(n) && n > 0 ? n : 0;
}

/** A file going to a chat: its name there (already safe: berth chose or sanitised it), its media type, its bytes. */
export interface ReplyFile {
  name: string;
  mime: string;
  /** ArrayBuffer-backed (never shared memory): what fetch and Blob take under both the Node and DOM libs. */
  data: Uint8Array<ArrayBuffer>;
}

/** A reply's text as a file. */
export const textFile = (name: string, text: string): ReplyFile => ({ name, mime: 'text/plain; charset=utf-8', data: Buffer.from(text) });

/** An HTTP request for a channel that receives by webhook (berth serve's /hooks/<channel>[/…]). */
export type ChannelHttp = (req: Request, subpath: string) => Promise<Response>;

export interface ChannelTransport extends ChannelSender {
  start(): void;
  /** Receive no more (sending still works: runs in flight answer). */
  stop(): Promise<void>;
  /** Receiving now (a stream or long poll is up; a webhook channel: its endpoint is served). */
  connected(): boolean;
  /** Set for a channel that receives by HTTP: berth serve routes /hooks/<name>[/…] here. */
  http?: ChannelHttp;
}

/** What the core does with a message: journal it (synchronously) or know it as a re-delivery. */
export type Take = (message: ChannelMessage) => 'accepted' | 'duplicate';

export interface ChannelContext<C> {
  config: C;
  logger: Logger;
  /** The channel's own directory under the home's bridge state (offsets, sync tokens). */
  dir: string;
  take: Take;
  /** A POST to a URL the operator configured, on the egress proxy's address rules (no private address unless egress.private_hosts names it). */
  postOut: PostOut;
  /** Reconnect backoff bounds (tests make them small). */
  backoffMs?: { min: number; max: number };
}

export type PostOut = (url: string, body: string, headers: Record<string, string>) => Promise<{ status: number }>;

export interface ChannelCheck {
  name: string;
  status: 'ok' | 'warn' | 'fail';
  detail: string;
}

/** Who may talk: every chat channel with strangers in it has the same two settings. */
export const senderFields = (who: string) => ({
  senders: z
    .enum(['pairing', 'open'])
    .default('pairing')
    .describe(
      'pairing: unknown senders get a short refusal and wait for the operator\'s approval ("berth bridge approve"); open: anyone may talk.',
    ),
  allow: z.array(z.string().min(1).max(256)).max(10_000).default([]).describe(`${who} always allowed.`),
});

export type SenderRules = z.output<z.ZodObject<ReturnType<typeof senderFields>>>;

export interface ChannelModule<N extends string = string, S extends z.ZodType = z.ZodType> {
  readonly name: N;
  /** As people know it ("Signal"). */
  readonly title: string;
  /** berth.yaml `bridges.<name>`, described (the reference and `berth config` read it). */
  readonly schema: S;
  /** How it receives: a stream it holds open, a long poll, or HTTP requests into berth serve. */
  receives(config: z.output<S>): 'stream' | 'poll' | 'http';
  /**
   * How it sends: the longest text in one message, and what a longer reply becomes; `files`: what
   * files it carries each way and their limits, in words (the numbers are the transport's
   * `fileLimitBytes` and each module's exported constants).
   */
  readonly sends: { typing: boolean; inlineLimit: string; longReplies: string; files: string };
  /** Tenant keys it makes: direct chats, groups, and what a group is. */
  readonly tenants: { direct: string; groups: string };
  /** A sender key of this channel, as `bridge approve` takes it. */
  readonly senderKey: RegExp;
  /** Strangers wait for the operator's approval (`berth bridge pending/approve`); false: every message is already authenticated (a signed webhook). */
  readonly pairing: boolean;
  /** Pairing rules as berth.yaml has them now (pairing channels). */
  senders(config: z.output<S>): SenderRules | undefined;
  /** The names it serves at /hooks/<name> (signed webhooks), besides its own /hooks/<channel>. */
  namedHooks?(config: z.output<S>): string[];
  /** Its step-by-step guide. */
  readonly guide: string;
  /** How the running bridge is named in berth's messages ("telegram bridge restarted: <label>"): its service and account, a credential only by a hash or file name. */
  label(config: z.output<S>): string;
  /** One line for berth serve's start and the logs (never a secret). */
  describe(config: z.output<S>): string;
  create(ctx: ChannelContext<z.output<S>>): ChannelTransport;
  /** doctor: is the service there, and does it take berth's credentials? `route` says which project answers. */
  doctor(config: z.output<S>, route: string | undefined): Promise<ChannelCheck[]>;
}

/** A channel module, its name kept as a literal (berth.yaml's types come from the registry). */
export const defineChannel = <const N extends string, S extends z.ZodType>(m: ChannelModule<N, S>): ChannelModule<N, S> => m;

/** Profiles of a chat that is a thread of a channel ("<channel>/<thread>"): the thread, the channel, every chat. */
export const threadProfileKeys = (name: string, channel: string, thread?: string): string[] => [
  ...(thread ? [`${name}:${channel}/${thread}`] : []),
  `${name}:${channel}`,
  name,
];

/** How long a request to /hooks may take to send its body. */
export const HOOK_BODY_DEADLINE_MS = 10_000;

/** Characters of a cut: a character split in half is dropped. */
export function cutUtf8(text: string, maxBytes: number): string {
  return Buffer.from(text)
    .subarray(0, maxBytes)
    .toString('utf8')
    .replace(/\uFFFD$/, '');
}

/** An outside API's error, with how long it asks to wait when it rate-limits. */
export class ChannelApiError extends Error {
  constructor(
    message: string,
    readonly status: number,
    readonly retryAfterSeconds?: number,
  ) {
    super(message);
  }
}

/**
 * Journal a message now, or BUSY: logged by sender and id (never its text), and the service,
 * told no (a non-2xx, no ack, no offset), sends it again.
 */
export function takeOrBusy(take: Take, log: Logger, message: ChannelMessage): 'accepted' | 'duplicate' {
  try {
    return take(message);
  } catch (err) {
    log.error(
      { sender: message.sender, id: message.id, code: isBerthError(err) ? err.code : (err as Error)?.name },
      'could not take a message; it comes again',
    );
    throw new BerthError('BUSY', 'the message could not be journaled; send it again', { retry_after: 1 });
  }
}

/**
 * A call to the channel's service; a failure to connect is said by the service's name and the
 * cause's code, never the URL (a token may be in it). An abort is the caller's own: it passes.
 */
export async function reach(service: string, url: string, init: RequestInit): Promise<Response> {
  try {
    return await fetch(url, init);
  } catch (err) {
    if ((err as Error).name === 'AbortError') throw err;
    throw new ChannelApiError(
      `${service} cannot be reached (${(err as { cause?: { code?: string } }).cause?.code ?? (err as Error).name})`,
      0,
    );
  }
}

/** Send once more after one rate limit the service names a short wait for (bounded); anything else is thrown. */
export async function withOneRetry<T>(log: Logger, what: string, call: () => Promise<T>, maxWaitSeconds = 60): Promise<T> {
  try {
    return await call();
  } catch (err) {
    if (!(err instanceof ChannelApiError) || err.retryAfterSeconds === undefined || err.retryAfterSeconds > maxWaitSeconds) throw err;
    log.warn({ retryAfter: err.retryAfterSeconds, what }, 'rate limited: waiting once');
    await new Promise((r) => setTimeout(r, err.retryAfterSeconds! * 1000));
    return call();
  }
}

/** Reconnect and re-poll delays: exponential, capped, with jitter (many berths never retry in step). */
export function backoffDelay(attempt: number, bounds = { min: 1000, max: 10_000 }): number {
  const base = Math.min(bounds.max, bounds.min * 2 ** Math.min(attempt, 10));
  return base / 2 + Math.random() * (base / 2);
}
