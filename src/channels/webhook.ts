import { join } from 'node:path';
import { z } from 'zod';
import { BerthError } from '../base/errors.js';
import { defineChannel, takeOrBusy, type ChannelContext, type ChannelMessage, type ChannelTransport } from './contract.js';
import { aloneAdmission, type HookAdmission } from './hook-admission.js';
import { oneSecret, readSecret, secretFields, secretIdentity } from './secrets.js';
import { createFileStage, filesBodyBytes, HookFileSchema, WEBHOOK_FILE_BOUNDS } from './webhook-files.js';
import { berthHeaders, callbackSignature, secretProblem, standardHeaders } from './webhook-signing.js';
import { createSyncWaits, SYNC_NOTICES } from './webhook-sync.js';

/**
 * Signed webhooks, for any system that is not a messenger: `POST /hooks/<name>` on berth serve.
 * - Signed: `X-Berth-Timestamp: <unix seconds>` and `X-Berth-Signature: v1=<hex HMAC-SHA256 of
 *   "<timestamp>.<raw body>" under the hook's secret>`; a timestamp outside the window is a
 *   replay and refused, before the body is read as anything; until the signature matches, the
 *   body is read as a stranger's (see hook-admission.ts).
 * - Or, with `signing: standard-webhooks`, the Standard Webhooks format (standardwebhooks.com):
 *   `webhook-id`, `webhook-timestamp` and `webhook-signature: v1,<base64 HMAC-SHA256 of
 *   "<id>.<timestamp>.<raw body>">` (several, space-separated: one must match), the key being the
 *   base64 after `whsec_`; so a sender's off-the-shelf library signs. One scheme per hook.
 * - Body: `{"id": stable message id, "user": who, "text": …, "conversation"?: …, "files"?: [{name,
 *   content_base64, mime?}]}`; the id dedupes re-sends (the same id is answered once: a second
 *   gets status "duplicate"). Files are bounded per request (max_file_bytes together) and staged
 *   under the channel's directory until the core fetches them (webhook-files.ts).
 * - Answered in the request (`reply: sync`: 200 with the reply and berth's notices about the
 *   message, or 202 if it takes longer than reply_timeout_seconds), or at once with 202 and later
 *   by a POST to callback_url, signed the same way, on the egress proxy's address rules.
 * A signed request is already authenticated: no pairing. Each (hook, user) is a tenant; a
 * conversation is a chat of its own, with its own session.
 */
export const WEBHOOK_MAX_BODY_BYTES = 256 * 1024;
const HOOK_NAME = /^[a-z0-9][a-z0-9_-]{0,62}$/;

const HookSchema = z
  .object({
    ...secretFields(
      'secret',
      'The HMAC-SHA256 key the caller signs with (at least 32 characters; for standard-webhooks, "whsec_" and the base64 of a 24-64 byte key)',
    ),
    signing: z
      .enum(['berth', 'standard-webhooks'])
      .default('berth')
      .describe(
        "berth: X-Berth-Timestamp and X-Berth-Signature (v1=<hex>); standard-webhooks: webhook-id, webhook-timestamp and webhook-signature (v1,<base64>) as standardwebhooks.com specifies, so a sender's library signs. Callbacks are signed the same way.",
      ),
    reply: z
      .enum(['sync', 'callback'])
      .default('sync')
      .describe(
        'sync: the answer is the HTTP response (202 if it takes longer than reply_timeout_seconds); callback: 202 at once, the answer POSTed to callback_url.',
      ),
    callback_url: z
      .url({ protocol: /^https?$/, error: 'must be an http(s) URL' })
      .optional()
      .describe(
        'Where answers are POSTed (signed like the requests); needed for reply: callback, used by sync for answers that came too late.',
      ),
    window_seconds: z
      .number()
      .int()
      .min(10)
      .max(3600)
      .default(300)
      .describe("A request whose timestamp is further from berth's clock than this is refused as a replay."),
    reply_timeout_seconds: z.number().int().min(1).max(900).default(120).describe('sync: how long the request is held for the answer.'),
    max_file_bytes: z
      .number()
      .int()
      .min(0)
      .max(WEBHOOK_FILE_BOUNDS.maxBytes)
      .default(WEBHOOK_FILE_BOUNDS.defaultBytes)
      .describe(
        `The most a request's files may hold together, decoded (0, the default: the hook takes no files). The request body may then be that much larger (as base64), and it is read before its signature is checked: raise it for hooks that send files. At most ${WEBHOOK_FILE_BOUNDS.files} files a request.`,
      ),
  })
  .strict()
  .superRefine((c, ctx) => {
    oneSecret(c, 'secret', ctx);
    const bad = typeof c.secret === 'string' ? secretProblem(c.signing, c.secret) : undefined;
    if (bad) ctx.addIssue({ code: 'custom', path: ['secret'], message: bad });
    if (c.reply === 'callback' && !c.callback_url)
      ctx.addIssue({ code: 'custom', path: ['callback_url'], message: 'reply: callback needs callback_url' });
  });

export const WebhookBridgeSchema = z
  .object({
    hooks: z
      .record(z.string().regex(HOOK_NAME, 'must be 1-63 characters of a-z, 0-9, "_" and "-"'), HookSchema)
      .refine((h) => Object.keys(h).length <= 64, 'at most 64 hooks')
      .describe('Named webhooks: POST /hooks/<name>.'),
  })
  .strict();
type WebhookConfig = z.output<typeof WebhookBridgeSchema>;
type HookConfig = z.output<typeof HookSchema>;

/** What a caller sends (bounded: ids and names short, text as long as a chat message may be). */
const MessageId = z.string().min(1).max(200).describe('A stable id of this message: a re-send with the same id is answered once.');
const BodySchema = z
  .object({
    id: MessageId,
    user: z
      .string()
      .min(1)
      .max(200)
      .regex(/^[^\u0000-\u001f]+$/, 'must be printable')
      .describe('Who sent it (their tenant: hook:<name>:<user>).'),
    text: z.string().max(16_000).default('').describe('The message (may be empty when files come with it).'),
    conversation: z
      .string()
      .min(1)
      .max(200)
      .regex(/^[^\u0000-\u001f/]+$/, 'must be printable, without "/"')
      .optional()
      .describe("A conversation of the user's own: its own session."),
    files: z.array(HookFileSchema).max(WEBHOOK_FILE_BOUNDS.files).optional().describe('Files sent with the message, inline.'),
  })
  .strict();
/** What a signed request is answered with (docs/webhooks.md "The answer"). */
export const HookAnswerSchema = z
  .object({
    id: MessageId,
    status: z
      .enum(['answered', 'accepted', 'duplicate'])
      .describe('answered: 200 with the reply; accepted: 202, the answer goes to callback_url; duplicate: this id was taken before'),
    reply: z.string().optional().describe('The answer (answered).'),
    notices: z
      .array(z.string())
      .max(SYNC_NOTICES.count)
      .optional()
      .describe(
        "berth's own words about the message (answered): files it did not save and why, what a voice note said, the links of the agent's files; [] when none",
      ),
  })
  .strict();
const answer = (a: z.input<typeof HookAnswerSchema>, status: 200 | 202) => Response.json(a, { status });

/** Standard Webhooks carries the message's id in webhook-id: the body may leave it out. */
const StandardBodySchema = BodySchema.extend({ id: MessageId.optional() }).strict();
/** A message is its text, its files, or both. */
const saysSomething = (b: { text: string; files?: unknown[] }) => b.text !== '' || (b.files?.length ?? 0) > 0;
const needsWords = () => ({ path: ['text'], message: 'a message needs text or files' });
const BodyCheck = BodySchema.refine(saysSomething, needsWords());
const StandardBodyCheck = StandardBodySchema.refine(saysSomething, needsWords());

/** A chat of a hook: its name, the user and the conversation, JSON-encoded (a user name may hold any character). */
const chatOf = (hook: string, user: string, conversation?: string) => JSON.stringify([hook, user, conversation ?? null]);
const parseChat = (chat: string) => JSON.parse(chat) as [string, string, string | null];

/** A message's id in the inbox: the hook's and the user's own (another user's same id is another message). */
const messageId = (hook: string, user: string, id: string) => `${hook}:${JSON.stringify([user, id])}`;
/** The caller's id of a message; a message berth posted itself (a scheduled run's) keeps berth's id. */
const callerId = (messageId: string) => {
  try {
    return (JSON.parse(messageId.slice(messageId.indexOf(':') + 1)) as [string, string])[1];
  } catch {
    return messageId;
  }
};

export function createWebhookBridge(ctx: ChannelContext<WebhookConfig>): ChannelTransport {
  const log = ctx.logger.child({ bridge: 'webhook' });
  // Read once, at start: a hook whose secret cannot be read (or is short) answers 500 and says why in berth's log, never to the caller.
  const secrets = new Map<string, string>();
  for (const [name, hook] of Object.entries(ctx.config.hooks)) {
    try {
      const secret = readSecret(hook, 'secret');
      const bad = secretProblem(hook.signing, secret);
      if (bad) throw new Error(`its secret ${bad}`);
      secrets.set(name, secret);
    } catch (err) {
      log.error({ hook: name, err: (err as Error).message }, 'this webhook is not served: its secret cannot be used');
    }
  }
  const secretOf = (name: string) => {
    const secret = secrets.get(name);
    if (secret === undefined) throw new BerthError('INTERNAL', `webhook "${name}" is not available: berth's log says why`);
    return secret;
  };
  const sync = createSyncWaits();

  const files = createFileStage(join(ctx.dir, 'files'));

  const hookOf = (name: string): HookConfig | undefined => (Object.hasOwn(ctx.config.hooks, name) ? ctx.config.hooks[name] : undefined);

  async function http(req: Request, subpath: string, admission: HookAdmission = aloneAdmission('webhook')): Promise<Response> {
    const name = subpath;
    const hook = hookOf(name);
    if (!hook) throw new BerthError('NOT_FOUND', `no webhook named "${name}" (berth.yaml bridges.webhook.hooks)`);
    if (req.method !== 'POST') throw new BerthError('METHOD_NOT_ALLOWED', `${req.method} is not served at /hooks/${name} (allowed: POST)`);
    const signed =
      hook.signing === 'standard-webhooks' ? standardHeaders(req, hook.window_seconds) : berthHeaders(req, hook.window_seconds);
    const secret = secretOf(name);
    const raw = await admission.unverifiedBody(req, WEBHOOK_MAX_BODY_BYTES + filesBodyBytes(hook.max_file_bytes));
    if (!signed.matches(secret, raw)) {
      log.warn({ hook: name }, 'a webhook request with a wrong signature was refused');
      throw signed.mismatch;
    }
    admission.verified();
    let json: unknown;
    try {
      json = JSON.parse(raw.toString('utf8'));
    } catch {
      throw new BerthError('CONFIG_INVALID', 'the body is not JSON', { issues: [{ field: 'body', reason: 'not JSON' }] });
    }
    const parsed = hook.signing === 'standard-webhooks' ? StandardBodyCheck.safeParse(json) : BodyCheck.safeParse(json);
    if (!parsed.success) {
      // Each field at fault by its name, an unknown key too; the body itself when it is no object.
      const issues = parsed.error.issues.flatMap((i) =>
        i.code === 'unrecognized_keys'
          ? i.keys.map((key) => ({ field: key, reason: 'unknown field' }))
          : [{ field: i.path.join('.') || 'body', reason: i.message }],
      );
      throw new BerthError('CONFIG_INVALID', `the webhook body is not valid: ${issues.map((i) => `${i.field}: ${i.reason}`).join('; ')}`, {
        issues,
      });
    }
    const body = { ...parsed.data, id: parsed.data.id ?? (signed.id as string) };
    if (body.files?.length && hook.max_file_bytes === 0)
      throw new BerthError('CONFIG_INVALID', `webhook "${name}" takes no files (its max_file_bytes is 0)`, {
        issues: [{ field: 'files', reason: 'not taken by this hook' }],
      });
    const chat = chatOf(name, body.user, body.conversation);
    const attachments = files.stage(body.files ?? [], hook.max_file_bytes);
    const message: ChannelMessage = {
      id: messageId(name, body.user, body.id),
      chat,
      tenant: `hook:${name}:${body.user}`,
      sender: `hook:${name}:${body.user}`,
      text: body.text,
      ...(attachments.length > 0 ? { attachments } : {}),
    };
    let taken: 'accepted' | 'duplicate';
    try {
      taken = takeOrBusy(ctx.take, log, message);
    } catch (err) {
      files.drop(attachments);
      throw err;
    }
    if (taken === 'duplicate') {
      files.drop(attachments);
      return answer({ id: body.id, status: 'duplicate' }, 200);
    }
    // Waited for only once taken (its answer comes later, never within this tick); a caller that hangs up leaves it to the callback.
    const got = hook.reply === 'sync' ? await sync.wait(message.id, hook.reply_timeout_seconds * 1000, req.signal) : undefined;
    if (got?.reply !== undefined) return answer({ id: body.id, status: 'answered', reply: got.reply, notices: got.notices }, 200);
    // Not answered in time: what berth said of it so far goes the answer's way, to the callback.
    for (const notice of got?.notices ?? []) void callback(chat, message.id, { notice });
    return answer({ id: body.id, status: 'accepted' }, 202);
  }

  /** The answer to a message (or a notice about it: refused files, the agent's files' links) POSTed to the hook's callback_url, signed like the requests (none: nowhere). */
  async function callback(chat: string, id: string, said: { reply: string } | { notice: string }) {
    let name = '?';
    try {
      const [hookName, user, conversation] = parseChat(chat);
      name = hookName;
      const hook = hookOf(name);
      if (!hook?.callback_url) return;
      const body = JSON.stringify({ id: callerId(id), user, ...(conversation === null ? {} : { conversation }), ...said });
      const timestamp = String(Math.floor(Date.now() / 1000));
      const res = await ctx.postOut(hook.callback_url, body, {
        'content-type': 'application/json',
        ...callbackSignature(hook, secretOf(name), id, timestamp, body),
      });
      if (res.status >= 300) log.warn({ hook: name, status: res.status }, 'the webhook callback did not take the answer');
    } catch (err) {
      log.warn({ hook: name, err: String((err as Error).message).slice(0, 200) }, 'the answer could not be posted to the webhook callback');
    }
  }

  return {
    name: 'webhook',
    start() {},
    async stop() {},
    connected: () => true,
    http,
    // Notices on the way ("queued", "still working") are not part of a webhook's answer: answered() carries that.
    async send() {},
    // berth's words about a message: in its sync answer while the request waits, else to the callback.
    async sendPlain(chat, text, about) {
      if (about?.answerTo && !sync.notice(about.answerTo, text)) await callback(chat, about.answerTo, { notice: text });
    },
    async typing() {},
    async acknowledge() {},
    fetchAttachment: async (ref, limits) => files.fetch(ref, limits),
    profileKeys: (chat) => [`webhook:${parseChat(chat)[0]}`, 'webhook'],
    answered(id, chat, text) {
      // A waiting request is answered at the message's end (finished): the agent's files' links come after the answer.
      // Else: callback mode, a sync request that stopped waiting, or a message a dead berth took.
      if (!sync.answer(id, text)) void callback(chat, id, { reply: text });
    },
    finished: (id) => sync.end(id),
  };
}

export const webhookChannel = defineChannel({
  name: 'webhook',
  title: 'Signed webhooks',
  schema: WebhookBridgeSchema,
  receives: () => 'http',
  sends: {
    typing: false,
    inlineLimit: 'the whole reply',
    longReplies: 'the whole reply, in the response or the callback',
    files:
      'in: files: [{name, content_base64}] in the body, up to max_file_bytes together (off by default); out: links in a notice (in the sync answer, or to the callback)',
  },
  tenants: { direct: 'hook:<name>:<user>; a conversation is a session of its own', groups: 'none: every signed request names its user' },
  senderKey: /^hook:[a-z0-9][a-z0-9_-]{0,62}:.{1,200}$/,
  pairing: false,
  senders: () => undefined,
  namedHooks: (c) => Object.keys(c.hooks),
  guide: 'docs/webhooks.md',
  label: (c) =>
    Object.entries(c.hooks)
      .map(([name, h]) => `${name} (${secretIdentity(h, 'secret')})`)
      .join(', '),
  describe: (c) => `${Object.keys(c.hooks).length} hook(s) at /hooks/<name>: ${Object.keys(c.hooks).join(', ')}`,
  create: createWebhookBridge,
  async doctor(c, route) {
    return Object.entries(c.hooks).map(([name, h]) => {
      try {
        const bad = secretProblem(h.signing, readSecret(h, 'secret'));
        if (bad) throw new Error(`the secret of hook ${name} ${bad}`);
      } catch (err) {
        return { name: `bridge webhook ${name}`, status: 'fail' as const, detail: (err as Error).message };
      }
      return {
        name: `bridge webhook ${name}`,
        status: route ? ('ok' as const) : ('warn' as const),
        detail: `POST /hooks/${name} (reply: ${h.reply}${h.callback_url ? `, callback ${new URL(h.callback_url).host}` : ''}); ${route ?? 'no "webhook" route: only hooks named in routes (webhook:<chat>) are answered'}`,
      };
    });
  },
});
