import { join } from 'node:path';
import type { Logger } from 'pino';
import type { BerthConfig } from '../config/berth-config.js';
import { channelConfig, configuredChannels } from '../config/bridges.js';
import { channelOfSender } from '../channels/registry.js';
import type { ChannelModule } from '../channels/contract.js';
import { BerthError } from '../base/errors.js';
import { openBridgeState } from '../store/bridge-state.js';
import { openInbox } from '../store/inbox.js';
import { createPostOut } from './post-out.js';
import { bridgeDir } from './start.js';
import { APPROVED_HELD_NOTICE, APPROVED_NOTICE } from './strangers.js';

/**
 * The operator's answer to a stranger of a chat channel (`berth bridge approve|deny`, the
 * console): approved, they may talk, and one message tells them so (their kept first message is
 * answered by the running bridge within seconds); turned away, they are no longer pending, never
 * asked about again, and their kept first message is dropped unrun. Any process of the home. The
 * sender's key names its channel (signal:<uuid>, telegram:<id>).
 */
export interface SenderAnswer {
  was_pending: boolean;
  /** Approved: their first message was kept and is now answered. */
  held?: boolean;
  /** Approved and told; a reason when telling them failed (they can talk all the same). */
  told?: true | string;
}

/** The channel a sender key belongs to, among those with pairing; a clear error for anything else. */
export function pairingChannelOf(sender: string): ChannelModule {
  const channel = channelOfSender(sender) as ChannelModule | undefined;
  if (!channel?.pairing) {
    throw new BerthError('CONFIG_INVALID', `"${sender.slice(0, 80)}" is not a sender key`, {
      issues: [{ field: 'sender', reason: 'must be a sender key as "berth bridge pending" shows it, e.g. signal:<uuid> or telegram:<id>' }],
    });
  }
  return channel;
}

export async function approveSender(
  deps: { config: BerthConfig; stateDir: string; logger: Logger },
  sender: string,
): Promise<SenderAnswer> {
  const channel = pairingChannelOf(sender);
  const dir = bridgeDir(deps.stateDir);
  const r = openBridgeState(dir, channel.name).approve(sender);
  const inbox = openInbox(dir, channel.name);
  const kept = inbox.open().find((e) => e.phase === 'held' && e.sender === sender);
  const held = kept !== undefined;
  // Told where they wrote (a Matrix room, a Signal group), else in a direct chat.
  const chat = kept?.chat ?? inbox.all().findLast((e) => e.sender === sender)?.chat ?? sender.slice(channel.name.length + 1);
  const config = channelConfig(deps.config.bridges, channel.name);
  // They wrote, were refused, and wait to hear: one message says they can talk now.
  if (config === undefined || !r.was_pending || r.already) return { was_pending: r.was_pending, held };
  try {
    const transport = channel.create({
      config,
      logger: deps.logger,
      dir: join(dir, channel.name),
      take: () => 'duplicate',
      postOut: createPostOut(() => deps.config),
    });
    await transport.send(chat, held ? APPROVED_HELD_NOTICE : APPROVED_NOTICE);
    return { was_pending: true, held, told: true };
  } catch (err) {
    return { was_pending: true, held, told: String((err as Error).message ?? err).slice(0, 200) };
  }
}

export function denySender(stateDir: string, sender: string): SenderAnswer {
  return openBridgeState(bridgeDir(stateDir), pairingChannelOf(sender).name).deny(sender);
}

/** What of a stranger's kept first message the operator is shown (their own text: the page writes it as text). */
export const FIRST_MESSAGE_CHARS = 500;

/** Every channel's senders waiting for approval, with the first message of theirs kept (held) when there is one. */
export function pendingSenders(
  config: BerthConfig,
  stateDir: string,
): Array<{ channel: string; sender: string; name?: string; first_seen: string; first_message?: string }> {
  const dir = bridgeDir(stateDir);
  return channelsWithPairing(config).flatMap((channel) => {
    const pending = openBridgeState(dir, channel.name).pending();
    if (!pending.length) return [];
    const held = new Map(
      openInbox(dir, channel.name)
        .open()
        .filter((e) => e.phase === 'held' && e.sender !== undefined && e.text !== undefined)
        .map((e) => [e.sender as string, (e.text as string).slice(0, FIRST_MESSAGE_CHARS)]),
    );
    return pending.map((p) => ({ channel: channel.name, ...p, ...(held.has(p.sender) ? { first_message: held.get(p.sender) } : {}) }));
  });
}

/** The configured channels where strangers wait for the operator. */
export function channelsWithPairing(config: BerthConfig): ChannelModule[] {
  return configuredChannels(config.bridges)
    .filter(({ channel }) => channel.pairing)
    .map((c) => c.channel);
}
