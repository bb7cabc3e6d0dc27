import fs from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'pino';
import type { AdminService } from '../admin/service.js';
import type { BerthConfig } from '../config/berth-config.js';
import { BerthError } from '../errors.js';
import { tryOwnerLock, type OwnerLock } from '../fs/lock.js';
import { openBridgeState, type BridgeState } from '../store/bridge-state.js';
import { openInbox, type Inbox } from '../store/inbox.js';
import { createBridgeCore, type BridgeCore } from './core.js';
import { createSignalBridge } from './signal.js';
import { createWebChat, type WebChat } from './web.js';

/** The bridges berth.yaml configures, started together (by `berth serve` or `berth bridge`). */
export interface RunningBridges {
  signal?: { core: BridgeCore; inbox: Inbox; state: BridgeState; connected(): boolean };
  /** The web chat, when asked for (berth serve: it needs the HTTP server). */
  web?: WebChat;
  stop(): Promise<void>;
}

export function bridgeDir(stateDir: string): string {
  return join(stateDir, 'bridges');
}

/** The owner lock of the Signal bridge's one consumer (claimBridges). */
export function signalConsumerLock(stateDir: string): string {
  return join(bridgeDir(stateDir), 'signal.consumer');
}

/** The bridges this process may consume, claimed for its whole life (released by stop or by its death). */
export interface BridgeClaim {
  release(): void;
}

/**
 * One consumer per bridge per home: signal-cli hands every event to every connected client, so a
 * second process of this home on the Signal bridge (a serve beside `berth bridge signal`, a second
 * serve) would run and answer every message twice. Claims the configured bridges with an owner
 * lock each (a dead holder's is taken over at once), or throws ALREADY_RUNNING naming the live
 * holder. The web chat needs none: its messages come only through this process's own HTTP server.
 */
export function claimBridges(deps: { config: () => BerthConfig; stateDir: string }): BridgeClaim {
  const held: OwnerLock[] = [];
  if (deps.config().bridges.signal) {
    const dir = bridgeDir(deps.stateDir);
    fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
    const lock = tryOwnerLock(signalConsumerLock(deps.stateDir));
    if (!('release' in lock)) {
      const pid = lock.heldBy.split('.')[0];
      throw new BerthError('ALREADY_RUNNING', `the signal bridge of this home already runs in berth process ${pid} ("berth serve" or "berth bridge signal"); one consumer per bridge, else every message is answered twice: stop that one first`);
    }
    held.push(lock);
  }
  return { release: () => held.splice(0).forEach((l) => l.release()) };
}

type BridgeDeps = { admin: AdminService; config: () => BerthConfig; logger: Logger; stateDir: string; owner?: string; backoffMs?: { min: number; max: number }; web?: boolean };

/** Start the configured bridges, holding their claim (taken now unless the caller took it first); stop() gives it back. */
export function startBridges(deps: BridgeDeps & { claim?: BridgeClaim }): RunningBridges {
  const claim = deps.claim ?? claimBridges(deps);
  try {
    return startClaimed(deps, claim);
  } catch (err) {
    claim.release();
    throw err;
  }
}

function startClaimed(deps: BridgeDeps, claim: BridgeClaim): RunningBridges {
  const dir = bridgeDir(deps.stateDir);
  const web = deps.web ? createWebChat({ ...deps, bridgeDir: dir }) : undefined;
  const signalConfig = deps.config().bridges.signal;
  if (!signalConfig) return { web, stop: async () => claim.release() };
  const inbox = openInbox(dir, 'signal');
  const state = openBridgeState(dir, 'signal');
  let core: BridgeCore | undefined;
  const transport = createSignalBridge({
    url: signalConfig.url,
    account: signalConfig.account,
    logger: deps.logger,
    backoffMs: deps.backoffMs,
    onMessage: (m) => core?.receive(m),
  });
  core = createBridgeCore({
    transport,
    inbox,
    state,
    admin: deps.admin,
    config: deps.config,
    logger: deps.logger,
    owner: deps.owner,
    senderAllowed: (sender) => {
      const now = deps.config().bridges.signal;
      if (!now || now.senders === 'open') return true;
      const uuid = sender.replace(/^signal:/, '');
      return now.allow.includes(uuid) || now.allow.includes(sender) || state.isApproved(sender);
    },
  });
  core.recover();
  transport.start();
  return {
    signal: { core, inbox, state, connected: transport.connected },
    web,
    async stop() {
      core.close();
      await transport.stop();
      claim.release();
    },
  };
}
