import { join } from 'node:path';
import type { Logger } from 'pino';
import type { AdminService } from '../admin/service.js';
import type { BerthConfig } from '../config/berth-config.js';
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

export function startBridges(deps: { admin: AdminService; config: () => BerthConfig; logger: Logger; stateDir: string; owner?: string; backoffMs?: { min: number; max: number }; web?: boolean }): RunningBridges {
  const dir = bridgeDir(deps.stateDir);
  const web = deps.web ? createWebChat({ ...deps, bridgeDir: dir }) : undefined;
  const signalConfig = deps.config().bridges.signal;
  if (!signalConfig) return { web, stop: async () => undefined };
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
      await transport.stop();
    },
  };
}
