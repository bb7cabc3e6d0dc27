import { createHmac } from 'node:crypto';
import { WebSocket } from 'ws';
import { z } from 'zod';
import { BerthError, isBerthError } from '../base/errors.js';
import {
  backoffDelay,
  ChannelApiError,
  defineChannel,
  takeOrBusy,
  senderFields,
  threadProfileKeys,
  reach,
  sendPartsFrom,
  withOneRetry,
  type ChannelContext,
  type ChannelMessage,
  type ChannelTransport,
} from './contract.js';
import { aloneAdmission, type HookAdmission } from './hook-admission.js';
import { obj, str, type Json } from './json.js';
import { oneSecret, readSecret, sameSecret, secretFields, secretIdentity } from './secrets.js';
import { splitParts } from './text-cut.js';
import { SLACK_FILE_LIMIT_BYTES, SLACK_FILE_ORIGIN, slackAttachments, slackFiles } from './slack-files.js';

/**
 * Slack, as a Slack app's bot (https://docs.slack.dev). Two ways in:
 * - events: the Events API POSTs to berth serve's /hooks/slack; each request is checked against
 *   the signing secret (X-Slack-Signature over "v0:<timestamp>:<body>", the timestamp within 5
 *   minutes) before anything is read from it (its body is read as a stranger's until then: see
 *   hook-admission.ts), and answered 200 only once journaled (Slack retries otherwise; the retry
 *   is known to the inbox).
 * - socket: Socket Mode, for hosts without a public URL: apps.connections.open with the app-level
 *   token, a WebSocket, each envelope acknowledged once journaled (unacknowledged, Slack sends it
 *   again); reconnects when Slack asks or the socket drops.
 * Direct messages are one tenant per person; in a channel berth answers when mentioned, in a
 * thread of the message (a thread is one conversation), and the channel is one tenant. Replies
 * are escaped for mrkdwn (&, <, >): no agent text becomes a mention or a link markup.
 */
export const SLACK_TEXT_LIMIT = 3900;
/** Past this many parts a reply is cut (Slack truncates one message at 40,000 characters anyway). */
const SLACK_MAX_PARTS = 10;
export const SLACK_MAX_EVENT_BYTES = 1024 * 1024;
const SIGNATURE_WINDOW_SECONDS = 5 * 60;
/** What Slack sends in X-Slack-Signature: anything else is refused before the body is read. */
const SIGNATURE = /^v0=[0-9a-f]{64}$/;
const SOCKET_SILENCE_MS = 60_000;

export const SlackBridgeSchema = z
  .object({
    ...secretFields('bot_token', "The bot's token (xoxb-…), from the app's OAuth page"),
    mode: z
      .enum(['events', 'socket'])
      .default('events')
      .describe(
        'events: Slack POSTs to <public URL>/hooks/slack (berth serve); socket: Socket Mode over a WebSocket (no public URL; needs app_token).',
      ),
    ...secretFields('signing_secret', "events mode: the app's signing secret (Basic Information)"),
    ...secretFields('app_token', 'socket mode: an app-level token with connections:write (xapp-…)'),
    api_url: z
      .url({ protocol: /^https?$/, error: 'must be an http(s) URL' })
      .default('https://slack.com/api')
      .describe('The Web API base (a test fake).'),
    ...senderFields('Slack user ids (or tenant keys slack:<id>)'),
  })
  .strict()
  .superRefine((c, ctx) => {
    oneSecret(c, 'bot_token', ctx);
    if (c.mode === 'events') oneSecret(c, 'signing_secret', ctx);
    else oneSecret(c, 'app_token', ctx);
  });
type SlackConfig = z.output<typeof SlackBridgeSchema>;

const ID = /^[A-Z0-9]{2,32}$/;
const TS = /^[0-9]{1,12}\.[0-9]{1,9}$/;

/** Text for mrkdwn: only &, < and > are control characters there. */
export const escapeMrkdwn = (text: string) => text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
/**
 * A labelled link as words: "label (url)", so the agent gets the address too; a label that is
 * the address itself (Slack links a bare URL, domain or mail address so) once; a channel or user
 * group (no scheme) by its name.
 */
function linkText(target: string, label: string): string {
  if (!/^[a-z][a-z0-9+.-]{0,31}:/i.test(target)) return label;
  const bare = target.replace(/^(?:https?:\/\/|mailto:)/i, '').replace(/\/$/, '');
  return label === target || label === bare ? label : `${label} (${target})`;
}
/** What a person wrote, as words: mentions and links as Slack shows them, entities decoded. */
const plainText = (text: string) =>
  text
    // Classes without "<": a text of many "<" is read in one pass, not once per "<".
    .replace(/<@([A-Z0-9]+)(\|[^<>]*)?>/g, '@$1')
    .replace(/<([^<>|]+)\|([^<>]+)>/g, (_, target: string, label: string) => linkText(target, label))
    .replace(/<([^<>]+)>/g, '$1')
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&amp;/g, '&');

/** A chat: the channel, and the thread in it (a thread is one conversation). */
const chatOf = (channel: string, thread?: string) => (thread ? `${channel}/${thread}` : channel);
const parseChat = (chat: string) => {
  const [channel = '', thread] = chat.split('/');
  return { channel, ...(thread ? { thread_ts: thread } : {}) };
};

/** The origins a file's URL may have for the bot token to go with it: Slack's file host and the configured Web API's. */
export const slackFileOrigins = (apiUrl: string): string[] => [SLACK_FILE_ORIGIN, new URL(apiUrl).origin];

/** An event_callback body as berth takes it (text, files, or both), or undefined for what is not a message to answer. */
export function slackMessage(
  body: unknown,
  botUser?: string,
  fileOrigins: readonly string[] = [SLACK_FILE_ORIGIN],
): ChannelMessage | undefined {
  const event = obj(obj(body)?.event);
  const type = str(event?.type);
  const user = str(event?.user);
  const channel = str(event?.channel);
  const ts = str(event?.ts);
  const raw = str(event?.text);
  if (!event || !user || !channel || !ts || raw === undefined || !ID.test(user) || !ID.test(channel) || !TS.test(ts)) return undefined;
  // berth's own, edits, joins; a message sharing files is "file_share".
  if (
    event.bot_id !== undefined ||
    (event.subtype !== undefined && event.subtype !== 'file_share') ||
    (botUser !== undefined && user === botUser)
  )
    return undefined;
  const thread = str(event.thread_ts);
  const direct = type === 'message' && event.channel_type === 'im';
  if (!direct && type !== 'app_mention') return undefined; // a channel's other messages are not for berth
  const text = plainText(direct ? raw : raw.replace(/^\s*<@[A-Z0-9]+>\s*/, '')).trim();
  const attachments = slackAttachments(event, fileOrigins);
  if (text === '' && attachments.length === 0) return undefined;
  return {
    id: `${channel}:${ts}`,
    // In a channel every mention starts (or continues) a thread: that thread is the conversation.
    chat: direct
      ? chatOf(channel, thread && TS.test(thread) ? thread : undefined)
      : chatOf(channel, thread && TS.test(thread) ? thread : ts),
    tenant: direct ? `slack:${user}` : `slack-channel:${channel}`,
    sender: `slack:${user}`,
    text,
    ...(attachments.length > 0 ? { attachments } : {}),
  };
}

/** Web API errors that may pass when tried again (https://api.slack.com/methods/chat.postMessage#errors); any other is a refusal. */
const SLACK_PASSING_ERRORS = new Set(['internal_error', 'fatal_error', 'service_unavailable', 'request_timeout', 'ratelimited']);

export function createSlackBridge(ctx: ChannelContext<SlackConfig>): ChannelTransport {
  const config = ctx.config;
  const botToken = readSecret(config, 'bot_token');
  const log = ctx.logger.child({ bridge: 'slack' });
  let stopped = false;
  let live = config.mode === 'events';
  let loop: Promise<void> | undefined;
  let socket: WebSocket | undefined;
  let botUser: string | undefined;

  /** A Web API call; `form`: as application/x-www-form-urlencoded (methods whose docs name no JSON, the file methods among them). */
  async function call(method: string, params: Json, token = botToken, form = false): Promise<Json> {
    const res = await reach(`${method}: Slack`, `${config.api_url}/${method}`, {
      method: 'POST',
      headers: {
        'content-type': form ? 'application/x-www-form-urlencoded' : 'application/json; charset=utf-8',
        authorization: `Bearer ${token}`,
      },
      body: form
        ? new URLSearchParams(Object.entries(params).map(([k, v]): [string, string] => [k, String(v)])).toString()
        : JSON.stringify(params),
      signal: AbortSignal.timeout(30_000),
    });
    if (res.status === 429) {
      await res.body?.cancel();
      throw new ChannelApiError(`${method}: rate limited`, 429, Number(res.headers.get('retry-after') ?? 1));
    }
    const body = obj(await res.json().catch(() => undefined));
    if (body?.ok === true) return body;
    // Slack answers its errors with HTTP 200 and ok: false: as a status, the core's policy reads them (refused, or may pass).
    const error = str(body?.error);
    const status = !res.ok || error === undefined ? res.status : SLACK_PASSING_ERRORS.has(error) ? 503 : 400;
    throw new ChannelApiError(`${method}: ${error ?? `HTTP ${res.status}`}`, status);
  }

  const fileOrigins = slackFileOrigins(config.api_url);
  const files = slackFiles({
    botToken,
    origins: fileOrigins,
    call: (method, params) => withOneRetry(log, method, () => call(method, params, botToken, true)),
  });

  const signingSecret = config.mode === 'events' ? readSecret(config, 'signing_secret') : '';
  async function http(req: Request, _subpath = '', admission: HookAdmission = aloneAdmission('slack')): Promise<Response> {
    if (config.mode !== 'events') throw new BerthError('NOT_FOUND', 'the slack bridge is in socket mode: it takes no events by HTTP');
    if (req.method !== 'POST') throw new BerthError('METHOD_NOT_ALLOWED', `${req.method} is not served at /hooks/slack (allowed: POST)`);
    const timestamp = req.headers.get('x-slack-request-timestamp') ?? '';
    if (!/^[0-9]{1,12}$/.test(timestamp) || Math.abs(Date.now() / 1000 - Number(timestamp)) > SIGNATURE_WINDOW_SECONDS) {
      throw new BerthError('UNAUTHORIZED', 'X-Slack-Request-Timestamp is missing or more than 5 minutes off: refused as a replay');
    }
    const signature = req.headers.get('x-slack-signature') ?? '';
    if (!SIGNATURE.test(signature)) throw new BerthError('UNAUTHORIZED', 'X-Slack-Signature is missing (or not v0=<64 hex digits>)');
    const raw = await admission.unverifiedBody(req, SLACK_MAX_EVENT_BYTES);
    const expected = `v0=${createHmac('sha256', signingSecret).update(`v0:${timestamp}:`).update(raw).digest('hex')}`;
    if (!sameSecret(signature, expected)) {
      log.warn('a request to /hooks/slack with a wrong signature was refused');
      throw new BerthError('UNAUTHORIZED', 'X-Slack-Signature does not match the body');
    }
    admission.verified();
    let body: Json | undefined;
    try {
      body = obj(JSON.parse(raw.toString('utf8')));
    } catch {
      throw new BerthError('CONFIG_INVALID', 'the event is not JSON', { issues: [{ field: 'body', reason: 'not JSON' }] });
    }
    if (body?.type === 'url_verification') return Response.json({ challenge: str(body.challenge) ?? '' });
    const message = body?.type === 'event_callback' ? slackMessage(body, botUser, fileOrigins) : undefined;
    if (message) takeOrBusy(ctx.take, log, message);
    return new Response(null, { status: 200 });
  }

  /** One Socket Mode connection, until it closes. Envelopes are acknowledged once journaled. */
  async function connectOnce(): Promise<void> {
    const opened = await call('apps.connections.open', {}, readSecret(config, 'app_token'));
    const url = str(opened.url);
    if (!url) throw new ChannelApiError('apps.connections.open: no url', 0);
    if (stopped) return;
    await new Promise<void>((resolve) => {
      const ws = new WebSocket(url, { maxPayload: SLACK_MAX_EVENT_BYTES });
      socket = ws;
      // Slack pings every few seconds: a socket silent for a minute is half-open, and given up.
      let silence: NodeJS.Timeout | undefined;
      const heard = () => {
        clearTimeout(silence);
        silence = setTimeout(() => ws.terminate(), SOCKET_SILENCE_MS);
      };
      heard();
      ws.on('ping', heard);
      ws.on('message', (data) => {
        heard();
        let frame: Json | undefined;
        try {
          frame = obj(JSON.parse(String(data)));
        } catch {
          return;
        }
        if (frame?.type === 'hello') {
          live = true;
          log.info('connected to slack (socket mode)');
        } else if (frame?.type === 'disconnect') ws.close(1000);
        else if (frame?.type === 'events_api' && typeof frame.envelope_id === 'string') {
          const message = slackMessage(frame.payload, botUser, fileOrigins);
          try {
            if (message) takeOrBusy(ctx.take, log, message);
            ws.send(JSON.stringify({ envelope_id: frame.envelope_id }));
          } catch {
            // not acknowledged: Slack sends it again
          }
        } else if (typeof frame?.envelope_id === 'string') ws.send(JSON.stringify({ envelope_id: frame.envelope_id })); // slash commands, interactivity: not used, but acknowledged
      });
      ws.on('error', (err) => log.warn({ err: String(err.message).slice(0, 200) }, 'slack socket error'));
      ws.on('close', () => {
        clearTimeout(silence);
        live = false;
        socket = undefined;
        resolve();
      });
    });
  }

  async function runSocket() {
    let attempt = 0;
    while (!stopped) {
      const began = Date.now();
      try {
        await connectOnce();
        if (Date.now() - began > 30_000) attempt = 0;
      } catch (err) {
        log.warn({ err: String((err as Error).message).slice(0, 200), attempt }, 'slack socket mode failed');
      }
      if (stopped) break;
      attempt++;
      await new Promise((r) => setTimeout(r, backoffDelay(attempt, ctx.backoffMs)));
    }
  }

  async function whoAmI() {
    try {
      botUser = str((await call('auth.test', {})).user_id);
    } catch (err) {
      log.warn({ err: String((err as Error).message).slice(0, 200) }, 'slack auth.test failed');
    }
  }

  /** `from`: the first part not yet delivered (SendAbout.fromPart); a failed part says how many went through (PartsSentError). */
  async function postParts(chat: string, text: string, mrkdwn: boolean, from?: number): Promise<void> {
    const where = parseChat(chat);
    const parts = splitParts(text, { units: SLACK_TEXT_LIMIT, parts: SLACK_MAX_PARTS });
    await sendPartsFrom(parts, from, (part) =>
      withOneRetry(log, 'chat.postMessage', () => call('chat.postMessage', { ...where, text: escapeMrkdwn(part), mrkdwn })),
    );
  }

  return {
    name: 'slack',
    start() {
      loop ??= whoAmI().then(() => (config.mode === 'socket' ? runSocket() : undefined));
    },
    async stop() {
      stopped = true;
      socket?.terminate();
      await loop;
    },
    connected: () => live,
    http,
    send: (chat, text, about) => postParts(chat, text, true, about?.fromPart),
    // The core's next try after a send that failed: no mrkdwn formatting (&, < and > stay escaped: Slack asks it of every text).
    sendPlain: (chat, text, about) => postParts(chat, text, false, about?.fromPart),
    sendFile: (chat, file, caption) => files.sendFile(parseChat(chat), file, escapeMrkdwn(caption)),
    fileLimitBytes: SLACK_FILE_LIMIT_BYTES,
    fetchAttachment: (ref, limits) => files.fetchAttachment(ref, limits),
    async typing() {
      // Slack has no typing indicator for a bot outside its assistant threads.
    },
    async acknowledge() {
      // events: the 200; socket: the envelope's ack.
    },
    profileKeys: (chat) => {
      const { channel, thread_ts } = parseChat(chat);
      return threadProfileKeys('slack', channel, thread_ts);
    },
  };
}

export const slackChannel = defineChannel({
  name: 'slack',
  title: 'Slack',
  schema: SlackBridgeSchema,
  receives: (c) => (c.mode === 'events' ? 'http' : 'stream'),
  sends: {
    typing: false,
    inlineLimit: `${SLACK_TEXT_LIMIT} characters`,
    longReplies: `split into up to ${SLACK_MAX_PARTS} messages in the thread`,
    files:
      'in: shared files, from files.slack.com with the bot token (files:read); out: an external upload into the channel or thread (files:write), up to 1 GB',
  },
  tenants: {
    direct: 'slack:<user id> (direct messages)',
    groups: 'slack-channel:<channel id> when mentioned in a channel; each mention starts a thread, and a thread is one conversation',
  },
  senderKey: /^slack:[A-Z0-9]{2,32}$/,
  pairing: true,
  senders: (c) => c,
  guide: 'docs/slack.md',
  label: (c) => `${c.mode} at ${c.api_url} with ${secretIdentity(c, 'bot_token')}`,
  describe: (c) =>
    `${c.mode === 'events' ? 'the Events API at /hooks/slack' : 'Socket Mode'}, Web API at ${c.api_url} (senders: ${c.senders})`,
  create: createSlackBridge,
  async doctor(c, route) {
    const name = 'bridge slack';
    try {
      const res = await fetch(`${c.api_url}/auth.test`, {
        method: 'POST',
        headers: { authorization: `Bearer ${readSecret(c, 'bot_token')}` },
        signal: AbortSignal.timeout(5000),
      });
      const body = obj(await res.json().catch(() => undefined));
      if (body?.ok !== true)
        return [
          {
            name,
            status: 'fail',
            detail: `Slack refuses the bot token (${str(body?.error) ?? `HTTP ${res.status}`}): check bridges.slack.bot_token`,
          },
        ];
      return [
        {
          name,
          status: route ? 'ok' : 'warn',
          detail: `bot ${str(body.user) ?? '?'} in ${str(body.team) ?? '?'} ${route ?? 'has no "slack" route: only chats named in routes are answered'}; ${c.mode}; senders: ${c.senders}`,
        },
      ];
    } catch (err) {
      return [
        {
          name,
          status: 'fail',
          detail: isBerthError(err) ? err.message : `Slack cannot be reached at ${c.api_url} (${(err as Error).name})`,
        },
      ];
    }
  },
});
