import type { Logger } from 'pino';
import type { BerthConfig } from '../config/berth-config.js';
import { openBridgeState } from '../store/bridge-state.js';
import { openInbox } from '../store/inbox.js';
import { APPROVED_HELD_NOTICE, APPROVED_NOTICE } from './core.js';
import { createSignalBridge } from './signal.js';
import { bridgeDir } from './start.js';

/**
 * The operator's answer to a stranger of the Signal bot (`berth bridge approve|deny`, the
 * console): approved, they may talk, and one message tells them so (their kept first message is
 * answered by the running bridge within seconds); turned away, they are no longer pending, never
 * asked about again, and their kept first message is dropped unrun. Any process of the home.
 */
export interface SenderAnswer {
  was_pending: boolean;
  /** Approved: their first message was kept and is now answered. */
  held?: boolean;
  /** Approved and told; a reason when telling them failed (they can talk all the same). */
  told?: true | string;
}

export async function approveSender(deps: { config: BerthConfig; stateDir: string; logger: Logger }, sender: string): Promise<SenderAnswer> {
  const dir = bridgeDir(deps.stateDir);
  const r = openBridgeState(dir, 'signal').approve(sender);
  const held = openInbox(dir, 'signal').open().some((e) => e.phase === 'held' && e.sender === sender);
  const signal = deps.config.bridges.signal;
  // They wrote, were refused, and wait to hear: one message says they can talk now.
  if (!signal || !r.was_pending || r.already) return { was_pending: r.was_pending, held };
  try {
    await createSignalBridge({ url: signal.url, account: signal.account, logger: deps.logger, onMessage: () => undefined }).send(sender.slice('signal:'.length), held ? APPROVED_HELD_NOTICE : APPROVED_NOTICE);
    return { was_pending: true, held, told: true };
  } catch (err) {
    return { was_pending: true, held, told: String(err).slice(0, 200) };
  }
}

export function denySender(stateDir: string, sender: string): SenderAnswer {
  return openBridgeState(bridgeDir(stateDir), 'signal').deny(sender);
}
