import { z } from 'zod';

/**
 * berth.yaml `bridges`: chat transports in front of berth. Which project answers a chat comes
 * from `channels` ("signal" for every Signal chat, "signal:<uuid or group id>" for one).
 */
export const SignalBridgeSchema = z
  .object({
    url: z.url({ protocol: /^https?$/, error: 'must be an http(s) URL' }).describe("signal-cli's daemon (signal-cli -a ACCOUNT daemon --http=127.0.0.1:8081)."),
    account: z.string().regex(/^\+[1-9][0-9]{6,14}$/, 'must be the bot\'s number in E.164 form, e.g. +4915550000').describe("The bot's Signal account."),
    senders: z
      .enum(['pairing', 'open'])
      .default('pairing')
      .describe('pairing: unknown senders get a short refusal and wait for the operator\'s approval ("berth bridge approve"); open: anyone may talk.'),
    allow: z.array(z.string().min(1).max(256)).max(10_000).default([]).describe('Sender uuids (or tenant keys signal:<uuid>) always allowed.'),
  })
  .strict();

/** The web chat (berth serve's /chat): what one person may hold. */
export const WebChatBridgeSchema = z
  .object({
    max_sessions_per_user: z.number().int().min(1).max(1000).default(20).describe('Conversations one chat user may hold in a project; past it they delete one first (429 LIMIT_REACHED).'),
    new_sessions_per_minute: z.number().int().min(1).max(600).default(10).describe('Conversations one chat user may start per minute (429 LIMIT_REACHED, with retry_after).'),
  })
  .strict()
  .prefault({});

export const BridgesSchema = z
  .object({
    max_concurrent_runs: z.number().int().min(1).max(256).default(4).describe('Chats answered at once across bridges; more wait (the sender sees "queued").'),
    progress_message_after_seconds: z
      .number()
      .int()
      .min(0)
      .max(3600)
      .default(30)
      .describe('A chat that cannot show the agent at work live (Signal) gets one short progress message ("ran 3 commands; now: npm test") once the agent has worked this long since its first step; 0: never.'),
    signal: SignalBridgeSchema.optional(),
    web: WebChatBridgeSchema,
  })
  .strict()
  .prefault({});
export type BridgesConfig = z.output<typeof BridgesSchema>;
