import { z } from 'zod';
import { BerthError, isBerthError } from '../base/errors.js';
import { oneSecret, readSecret, sameSecret, secretFields, secretIdentity } from './secrets.js';
import { readBodyBounded } from '../base/http-body.js';
import { aloneAdmission, type HookAdmission } from './hook-admission.js';
import {
  backoffDelay,
  ChannelApiError,
  defineChannel,
  takeOrBusy,
  senderFields,
  threadProfileKeys,
  HOOK_BODY_DEADLINE_MS,
  reach,
  sendPartsFrom,
  withOneRetry,
  textFile,
  type ChannelContext,
  type ChannelMessage,
  type ChannelTransport,
} from './contract.js';
import { obj, str, int, type Json } from './json.js';
import { planTelegramReply, TELEGRAM_MAX_PARTS, TELEGRAM_TEXT_LIMIT, toMarkdownV2 } from './telegram-text.js';
import { TELEGRAM_FILE_LIMIT_BYTES, telegramAttachments, telegramFiles } from './telegram-files.js';

/**
 * Telegram, through the Bot API (https://core.telegram.org/bots/api). Two ways in:
 * - poll (default): `getUpdates` long polling. An update is confirmed to Telegram only by the
 *   next call's offset, which is sent after the update is journaled: a crash in between gets it
 *   again, and the inbox knows it (exactly once into the inbox). A take that fails stops the
 *   batch there; the rest comes again.
 * - webhook: Telegram POSTs updates to berth serve's /hooks/telegram, with the secret token
 *   header berth gave setWebhook; the 200 goes back only once the update is journaled.
 * Private chats are one tenant per person; a group is one tenant (its members share a
 * workspace), each member still paired on their own. The token is in every API URL: no URL is
 * ever logged.
 */
export { TELEGRAM_TEXT_LIMIT } from './telegram-text.js';
const POLL_SECONDS = 25;
export const TELEGRAM_MAX_UPDATE_BYTES = 1024 * 1024;

export const TelegramBridgeSchema = z
  .object({
    ...secretFields('token', 'The bot token @BotFather gave (123456:ABC…)'),
    api_url: z
      .url({ protocol: /^https?$/, error: 'must be an http(s) URL' })
      .default('https://api.telegram.org')
      .describe('The Bot API server (a local Bot API server, or a test fake).'),
    mode: z
      .enum(['poll', 'webhook'])
      .default('poll')
      .describe(
        'poll: getUpdates long polling (no public URL needed); webhook: Telegram POSTs to public_url + /hooks/telegram (berth serve only).',
      ),
    public_url: z
      .url({ protocol: /^https?$/, error: 'must be an http(s) URL' })
      .optional()
      .describe(
        'webhook mode: the public base URL that reaches berth serve (Telegram calls <public_url>/hooks/telegram; the real Bot API calls https URLs only).',
      ),
    webhook_secret: z
      .string()
      .regex(/^[A-Za-z0-9_-]{16,256}$/, 'must be 16-256 characters of A-Z, a-z, 0-9, "_" and "-"')
      .optional()
      .describe('webhook mode: the secret Telegram sends in X-Telegram-Bot-Api-Secret-Token; requests without it are refused.'),
    ...senderFields('Telegram user ids (or tenant keys telegram:<id>)'),
  })
  .strict()
  .superRefine((c, ctx) => {
    oneSecret(c, 'token', ctx);
    if (c.mode !== 'webhook') return;
    if (!c.public_url) ctx.addIssue({ code: 'custom', path: ['public_url'], message: 'webhook mode needs public_url (or use mode: poll)' });
    if (!c.webhook_secret) ctx.addIssue({ code: 'custom', path: ['webhook_secret'], message: 'webhook mode needs webhook_secret' });
  });
type TelegramConfig = z.output<typeof TelegramBridgeSchema>;

/** A chat address: the chat id, and the forum topic when the message was in one. */
const chatAddress = (chatId: number, thread?: number) => (thread === undefined ? String(chatId) : `${chatId}/${thread}`);
function parseChat(chat: string): { chat_id: number; message_thread_id?: number } {
  const [id, thread] = chat.split('/');
  return { chat_id: Number(id), ...(thread ? { message_thread_id: Number(thread) } : {}) };
}

/** An update as berth takes it (text, or a caption with its file), or undefined for what is not a message to answer. */
export function telegramMessage(update: unknown): ChannelMessage | undefined {
  const u = obj(update);
  const edited = obj(u?.edited_message);
  const m = obj(u?.message) ?? edited;
  const chat = obj(m?.chat);
  const from = obj(m?.from);
  const chatId = int(chat?.id);
  const fromId = int(from?.id);
  const messageId = int(m?.message_id);
  const attachments = m ? telegramAttachments(m) : [];
  let text = str(m?.text) ?? (attachments.length > 0 ? (str(m?.caption) ?? '') : undefined);
  if (
    !m ||
    chatId === undefined ||
    fromId === undefined ||
    messageId === undefined ||
    text === undefined ||
    (text.trim() === '' && attachments.length === 0) ||
    from?.is_bot === true
  )
    return undefined;
  const type = str(chat?.type);
  if (type !== 'private' && type !== 'group' && type !== 'supergroup') return undefined; // channel posts: nobody to answer
  text = text.replace(/^(\/[A-Za-z0-9_]+)@[A-Za-z0-9_]+/, '$1'); // /help@berthbot is /help
  const thread = m.is_topic_message === true ? int(m.message_thread_id) : undefined;
  const name = [str(from?.first_name), str(from?.last_name)].filter(Boolean).join(' ') || str(from?.username);
  const editDate = int(edited?.edit_date);
  return {
    id: `${chatId}:${messageId}${edited ? `:e${editDate ?? 0}` : ''}`,
    chat: chatAddress(chatId, thread),
    tenant: type === 'private' ? `telegram:${fromId}` : `telegram-group:${chatId}`,
    sender: `telegram:${fromId}`,
    senderName: name,
    text: edited ? `(edited) ${text}` : text,
    ...(attachments.length > 0 ? { attachments } : {}),
  };
}

export function createTelegramBridge(ctx: ChannelContext<TelegramConfig>): ChannelTransport {
  const config = ctx.config;
  const token = readSecret(config, 'token');
  const log = ctx.logger.child({ bridge: 'telegram' });
  let stopped = false;
  let loop: Promise<void> | undefined;
  let abort: AbortController | undefined;
  let live = false;

  /** One Bot API call; its error (never its URL: the token is in it) as a ChannelApiError. */
  async function call(method: string, params: Json, signal?: AbortSignal): Promise<unknown> {
    const res = await reach('the Bot API', `${config.api_url}/bot${token}/${method}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(params),
      signal: signal ?? AbortSignal.timeout(30_000),
    });
    const body = obj(await res.json().catch(() => undefined));
    if (body?.ok === true) return body.result;
    const retry = int(obj(body?.parameters)?.retry_after);
    throw new ChannelApiError(`${method}: ${str(body?.description) ?? `HTTP ${res.status}`}`, int(body?.error_code) ?? res.status, retry);
  }

  const sendOnce = (method: string, params: Json) => withOneRetry(log, method, () => call(method, params));

  async function sendText(chat: string, text: string, plain = false): Promise<void> {
    const where = parseChat(chat);
    if (plain) return void (await sendOnce('sendMessage', { ...where, text, link_preview_options: { is_disabled: true } }));
    try {
      await sendOnce('sendMessage', {
        ...where,
        text: toMarkdownV2(text),
        parse_mode: 'MarkdownV2',
        link_preview_options: { is_disabled: true },
      });
    } catch (err) {
      // Markup Telegram will not take is sent as it is: the words matter more than the code blocks.
      if (!(err instanceof ChannelApiError) || !/can't parse entities/.test(err.message)) throw err;
      await sendOnce('sendMessage', { ...where, text, link_preview_options: { is_disabled: true } });
    }
  }

  const files = telegramFiles({ apiUrl: config.api_url, token, log, call, where: parseChat });
  const sendDocument = files.sendDocument;

  /** `from`: the first part not yet delivered (SendAbout.fromPart); a failed part says how many went through (PartsSentError). */
  async function sendReply(chat: string, text: string, plain: boolean, from?: number): Promise<void> {
    const plan = planTelegramReply(text);
    const sends = plan.messages.map((message) => () => sendText(chat, message, plain));
    if (plan.attach) sends.push(() => sendDocument(chat, textFile('reply.txt', text)));
    await sendPartsFrom(sends, from, (send) => send());
  }

  /** Take the updates in order; the offset after the last. A failed take throws: the next poll asks from the old offset, and what was taken already is known to the inbox. */
  function takeAll(updates: unknown, offset: number): number {
    for (const update of Array.isArray(updates) ? updates : []) {
      const id = int(obj(update)?.update_id);
      if (id === undefined || id < offset) continue;
      const message = telegramMessage(update);
      if (message) takeOrBusy(ctx.take, log, message);
      offset = id + 1;
    }
    return offset;
  }

  async function poll() {
    let offset = 0;
    let attempt = 0;
    let webhookCleared = false;
    while (!stopped) {
      abort = new AbortController();
      const timeout = setTimeout(() => abort?.abort(), (POLL_SECONDS + 15) * 1000);
      try {
        // A webhook left from webhook mode blocks getUpdates (409): removed, keeping what it queued.
        if (!webhookCleared) webhookCleared = (await call('deleteWebhook', { drop_pending_updates: false }, abort.signal)) !== undefined;
        const updates = await call(
          'getUpdates',
          { offset, timeout: POLL_SECONDS, allowed_updates: ['message', 'edited_message'] },
          abort.signal,
        );
        live = true;
        attempt = 0;
        offset = takeAll(updates, offset);
      } catch (err) {
        if (stopped) break;
        live = false;
        attempt++;
        const why =
          err instanceof ChannelApiError && err.status === 409
            ? 'another process polls this bot token (or a webhook is set)'
            : String((err as Error).message).slice(0, 200);
        log.warn({ err: why, attempt }, 'telegram getUpdates failed');
        await new Promise((r) => setTimeout(r, backoffDelay(attempt, ctx.backoffMs)));
      } finally {
        clearTimeout(timeout);
      }
    }
    live = false;
  }

  async function registerWebhook() {
    for (let attempt = 0; !stopped; attempt++) {
      try {
        await call('setWebhook', {
          url: `${config.public_url}/hooks/telegram`,
          secret_token: config.webhook_secret,
          allowed_updates: ['message', 'edited_message'],
        });
        live = true;
        log.info('telegram webhook set');
        return;
      } catch (err) {
        log.warn({ err: String((err as Error).message).slice(0, 200), attempt }, 'telegram setWebhook failed');
        await new Promise((r) => setTimeout(r, backoffDelay(attempt + 1, ctx.backoffMs)));
      }
    }
  }

  async function http(req: Request, _subpath = '', admission: HookAdmission = aloneAdmission('telegram')): Promise<Response> {
    if (config.mode !== 'webhook') throw new BerthError('NOT_FOUND', 'the telegram bridge is in poll mode: it takes no webhook');
    if (req.method !== 'POST') throw new BerthError('METHOD_NOT_ALLOWED', `${req.method} is not served at /hooks/telegram (allowed: POST)`);
    if (!sameSecret(req.headers.get('x-telegram-bot-api-secret-token') ?? '', config.webhook_secret ?? '')) {
      throw new BerthError('UNAUTHORIZED', 'missing or wrong X-Telegram-Bot-Api-Secret-Token');
    }
    // Known before a byte of the body is read: the read is authenticated work, within its channel's slots.
    admission.verified();
    let update: unknown;
    try {
      update = JSON.parse((await readBodyBounded(req, TELEGRAM_MAX_UPDATE_BYTES, HOOK_BODY_DEADLINE_MS)).toString('utf8'));
    } catch (err) {
      if (isBerthError(err)) throw err;
      throw new BerthError('CONFIG_INVALID', 'the update is not JSON', { issues: [{ field: 'body', reason: 'not JSON' }] });
    }
    const message = telegramMessage(update);
    // Not a text message: confirmed, nothing to do. One that cannot be journaled: not 2xx, so Telegram sends it again.
    if (message) takeOrBusy(ctx.take, log, message);
    return new Response(null, { status: 200 });
  }

  return {
    name: 'telegram',
    typingEveryMs: 4000, // Telegram shows "typing" for 5 s
    start() {
      loop ??= config.mode === 'poll' ? poll() : registerWebhook();
    },
    async stop() {
      stopped = true;
      abort?.abort();
      await loop;
    },
    connected: () => live,
    http,
    send: (chat, text, about) => sendReply(chat, text, false, about?.fromPart),
    // The core's next try after a send that failed: the words without MarkdownV2 (split the same way: it goes on at the same part).
    sendPlain: (chat, text, about) => sendReply(chat, text, true, about?.fromPart),
    sendFile: (chat, file, caption) => files.sendFile(chat, file, caption),
    fileLimitBytes: TELEGRAM_FILE_LIMIT_BYTES,
    fetchAttachment: (ref, limits) => files.fetchAttachment(ref, limits),
    async typing(chat, on) {
      if (on) await call('sendChatAction', { ...parseChat(chat), action: 'typing' });
    },
    async acknowledge() {
      // poll: the next getUpdates' offset confirms; webhook: the 200.
    },
    profileKeys: (chat) => {
      const { chat_id, message_thread_id } = parseChat(chat);
      return threadProfileKeys('telegram', String(chat_id), message_thread_id === undefined ? undefined : String(message_thread_id));
    },
  };
}

export const telegramChannel = defineChannel({
  name: 'telegram',
  title: 'Telegram',
  schema: TelegramBridgeSchema,
  receives: (c) => (c.mode === 'poll' ? 'poll' : 'http'),
  sends: {
    typing: true,
    inlineLimit: `${TELEGRAM_TEXT_LIMIT} characters`,
    longReplies: `split at line breaks into up to ${TELEGRAM_MAX_PARTS} messages; longer, the start and the whole as reply.txt`,
    files:
      'in: photos, documents, voice, audio, video, up to 20 MB (what a bot may download); out: JPEG/PNG/WebP up to 10 MB as a photo, anything else as a document, up to 50 MB',
  },
  tenants: { direct: 'telegram:<user id>', groups: 'telegram-group:<chat id>: its members share a workspace, each paired on their own' },
  senderKey: /^telegram:[0-9]{1,20}$/,
  pairing: true,
  senders: (c) => c,
  guide: 'docs/telegram.md',
  label: (c) => `${c.mode} at ${c.api_url} with ${secretIdentity(c, 'token')}`,
  describe: (c) =>
    `the Bot API at ${c.api_url}, ${c.mode === 'poll' ? 'long polling' : `webhook at ${c.public_url}/hooks/telegram`} (senders: ${c.senders})`,
  create: createTelegramBridge,
  async doctor(c, route) {
    const name = 'bridge telegram';
    let token: string;
    try {
      token = readSecret(c, 'token');
    } catch (err) {
      return [{ name, status: 'fail', detail: (err as Error).message }];
    }
    try {
      const res = await fetch(`${c.api_url}/bot${token}/getMe`, { signal: AbortSignal.timeout(5000) });
      const body = obj(await res.json().catch(() => undefined));
      if (res.status === 401 || res.status === 404)
        return [
          {
            name,
            status: 'fail',
            detail: `the Bot API at ${c.api_url} refuses the token (HTTP ${res.status}): check bridges.telegram.token`,
          },
        ];
      if (body?.ok !== true) return [{ name, status: 'fail', detail: `the Bot API at ${c.api_url} answered HTTP ${res.status}` }];
      const bot = str(obj(body.result)?.username);
      return [
        {
          name,
          status: route ? 'ok' : 'warn',
          detail: `@${bot ?? '?'} ${route ?? 'has no "telegram" route: only chats named in routes are answered'}; ${c.mode}; senders: ${c.senders}`,
        },
      ];
    } catch (err) {
      return [
        {
          name,
          status: 'fail',
          detail: `the Bot API at ${c.api_url} cannot be reached (${(err as Error).name}): is api_url right, and may berth reach it?`,
        },
      ];
    }
  },
});
