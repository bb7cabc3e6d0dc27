import fs from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'pino';
import type { AdminService } from '../admin/service.js';
import type { BerthConfig } from '../config/berth-config.js';
import { BerthError } from '../errors.js';
import { tryOwnerLock, type OwnerLock } from '../fs/lock.js';
import { openBridgeState, type BridgeState } from '../store/bridge-state.js';
import { openInbox, type Inbox } from '../store/inbox.js';
import type { Approvals } from '../outbound/approvals.js';
import { createBridgeCore, type BridgeCore } from './core.js';
import { createSignalBridge } from './signal.js';
import { createWebChat, type WebChat } from './web.js';

/** The bridges berth.yaml configures, started together (by `berth serve` or `berth bridge`). */
export interface RunningBridges {
  /** The Signal bridge running now (berth.yaml's, as of the last reconfigure). */
  readonly signal?: { core: BridgeCore; inbox: Inbox; state: BridgeState; connected(): boolean };
  /** The web chat, when asked for (berth serve: it needs the HTTP server). */
  web?: WebChat;
  /**
   * Follow berth.yaml's `bridges.signal` as it is now: a bridge added is started, one removed is
   * stopped, one pointed at another signal-cli or account is restarted (senders and allow are read
   * per message already). Messages in flight finish and are answered. Says what it did, if anything.
   */
  reconfigure(): string | undefined;
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

type BridgeDeps = {
  admin: AdminService;
  config: () => BerthConfig;
  logger: Logger;
  stateDir: string;
  owner?: string;
  backoffMs?: { min: number; max: number };
  web?: boolean;
  /** Where people's answers to their agents' requests go (/yes, /no, a card's buttons). */
  approvals?: Pick<Approvals, 'answer' | 'pending' | 'requestLevel'>;
};

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
  // The consumer lock: the startup claim's while the Signal bridge runs, or one taken when berth.yaml adds it.
  let lock: { release(): void } | undefined = deps.config().bridges.signal ? claim : undefined;
  let signal = deps.config().bridges.signal ? startSignal(deps, dir, { heldOnly: false }) : undefined;
  const stopping: Array<Promise<void>> = [];
  return {
    get signal() {
      return signal?.view;
    },
    web,
    reconfigure() {
      const want = deps.config().bridges.signal;
      const running = signal?.key;
      if ((want && signalKey(want)) === running) return undefined;
      if (signal) stopping.push(signal.stop());
      signal = undefined;
      if (!want) {
        lock?.release();
        lock = undefined;
        return `signal bridge stopped (berth.yaml has no bridges.signal now; it was ${running})`;
      }
      if (!lock) {
        fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
        const taken = tryOwnerLock(signalConsumerLock(deps.stateDir));
        if (!('release' in taken)) return `signal bridge not started: it already runs in berth process ${taken.heldBy.split('.')[0]}; one consumer per bridge`;
        lock = taken;
      }
      // Only a dead berth's messages are recovered at startup; a bridge stopped in this process finishes its own.
      signal = startSignal(deps, dir, { heldOnly: running !== undefined || stopping.length > 0 });
      return running ? `signal bridge restarted: ${signal.key} (was ${running})` : `signal bridge started: ${signal.key}`;
    },
    async stop() {
      if (signal) stopping.push(signal.stop());
      signal = undefined;
      await Promise.all(stopping);
      lock?.release();
      claim.release();
    },
  };
}

/** Which Signal bridge runs: a change of either is a restart (senders and allow are read per message). */
const signalKey = (c: { account: string; url: string }) => `${c.account} at ${c.url}`;

/** The Signal bridge as berth.yaml has it now: its transport, its core on the durable inbox, recovered and receiving. */
function startSignal(deps: BridgeDeps, dir: string, recovery: { heldOnly: boolean }) {
  const signalConfig = deps.config().bridges.signal;
  if (!signalConfig) throw new BerthError('INTERNAL', 'no signal bridge configured');
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
    approvals: deps.approvals,
    senderDenied: (sender) => state.isDenied(sender),
    senderAllowed: (sender) => {
      const now = deps.config().bridges.signal;
      if (!now || now.senders === 'open') return true;
      const uuid = sender.replace(/^signal:/, '');
      return now.allow.includes(uuid) || now.allow.includes(sender) || state.isApproved(sender);
    },
  });
  core.recover(recovery);
  transport.start();
  const started = core;
  return {
    key: signalKey(signalConfig),
    view: { core: started, inbox, state, connected: transport.connected },
    /** Receive no more; held first messages are left to the next core; runs in flight still answer (sending needs no receiver). */
    async stop() {
      started.close();
      await transport.stop();
    },
  };
}
