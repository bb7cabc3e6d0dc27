import { z } from 'zod';
import { CHANNELS, type Channel } from '../channels/registry.js';
import type { ChannelModule } from '../channels/contract.js';

/**
 * berth.yaml `bridges`: chat transports in front of berth, one key per channel of the registry
 * (channels/registry.ts), each with its own module's schema. Which project answers a chat comes
 * from `channels` ("telegram" for every Telegram chat, "telegram:<chat>" for one).
 */

/** The web chat (berth serve's /chat): what one person may hold. */
export const WebChatBridgeSchema = z
  .object({
    max_sessions_per_user: z
      .number()
      .int()
      .min(1)
      .max(1000)
      .default(20)
      .describe('Conversations one chat user may hold in a project; past it they delete one first (429 LIMIT_REACHED).'),
    new_sessions_per_minute: z
      .number()
      .int()
      .min(1)
      .max(600)
      .default(10)
      .describe('Conversations one chat user may start per minute (429 LIMIT_REACHED, with retry_after).'),
  })
  .strict()
  .prefault({});

type ChannelShape = { [C in Channel as C['name']]: z.ZodOptional<C['schema']> };
const channelShape = Object.fromEntries(CHANNELS.map((c) => [c.name, c.schema.optional()])) as ChannelShape;

export const BridgesSchema = z
  .object({
    max_concurrent_runs: z
      .number()
      .int()
      .min(1)
      .max(256)
      .default(4)
      .describe('Chats answered at once across bridges; more wait (the sender sees "queued").'),
    progress_message_after_seconds: z
      .number()
      .int()
      .min(0)
      .max(3600)
      .default(30)
      .describe(
        'A chat that cannot show the agent at work live (Signal, Telegram, …) gets one short progress message ("ran 3 commands; now: npm test") once the agent has worked this long since its first step; 0: never.',
      ),
    public_url: z
      .url({ protocol: /^https?$/ })
      .max(512)
      .optional()
      .describe(
        'Where people reach berth serve ("https://berth.example.org"): a file too big for a chat (or a chat that takes no files) is sent as a link below it, which opens the file by itself (the run\'s key). Without it the link is a path on berth\'s address.',
      ),
    web: WebChatBridgeSchema,
    ...channelShape,
  })
  .strict()
  .superRefine((b, ctx) => {
    // Named hooks are served at /hooks/<name>, beside the channels that receive there.
    for (const { channel, config } of configuredChannels(b)) {
      for (const name of channel.namedHooks?.(config) ?? []) {
        if (CHANNELS.some((c) => c.name === name))
          ctx.addIssue({
            code: 'custom',
            path: [channel.name],
            message: `a hook named "${name}" would be served at /hooks/${name}, the ${name} channel's own: name it otherwise`,
          });
      }
    }
  })
  .prefault({});
export type BridgesConfig = z.output<typeof BridgesSchema>;

/** The web chat as doctor and berth serve list it beside the channels: always there when berth serves HTTP, each login's project answering it. */
export const webChatWords = (b: Pick<BridgesConfig, 'public_url' | 'web'>) =>
  `${b.public_url?.replace(/\/+$/, '') ?? "berth serve's address"}/chat; a person logs in by a link (berth chat-link <project> --user <name>: tenant web:<name>, answered by that project), up to ${b.web.max_sessions_per_user} conversations each`;

/** The channels berth.yaml configures, each with its settings (in the registry's order). */
export function configuredChannels(
  bridges: Partial<Record<string, unknown>> | BridgesConfig,
): Array<{ channel: ChannelModule; config: unknown }> {
  const byName = bridges as unknown as Record<string, unknown>;
  return (CHANNELS as readonly ChannelModule[]).flatMap((channel) =>
    Object.hasOwn(byName, channel.name) && byName[channel.name] !== undefined ? [{ channel, config: byName[channel.name] }] : [],
  );
}

/** One channel's settings, when berth.yaml has it. */
export function channelConfig(bridges: BridgesConfig, name: string): unknown {
  const byName = bridges as unknown as Record<string, unknown>;
  return CHANNELS.some((c) => c.name === name) && Object.hasOwn(byName, name) ? byName[name] : undefined;
}
