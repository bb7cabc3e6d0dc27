import { matrixChannel } from './matrix.js';
import { signalChannel } from './signal.js';
import { slackChannel } from './slack.js';
import { telegramChannel } from './telegram.js';
import { webhookChannel } from './webhook.js';

/**
 * Every chat channel berth speaks: berth.yaml's `bridges.<name>`, `berth bridge <name>`, the
 * pairing commands, doctor and berth serve's /hooks all come from this list. A new channel is
 * one module beside these and one entry here.
 */
export const CHANNELS = [signalChannel, telegramChannel, slackChannel, matrixChannel, webhookChannel] as const;

export type Channel = (typeof CHANNELS)[number];
export type ChannelName = Channel['name'];

export const CHANNEL_NAMES: readonly ChannelName[] = CHANNELS.map((c) => c.name);

export function channelNamed(name: string): Channel | undefined {
  return CHANNELS.find((c) => c.name === name);
}

/** The channel whose sender keys this is (`telegram:123` → telegram). */
export function channelOfSender(sender: string): Channel | undefined {
  return CHANNELS.find((c) => c.senderKey.test(sender));
}
