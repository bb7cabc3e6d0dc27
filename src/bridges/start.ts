import type { ScheduleService } from '../admin/schedules.js';
import { createChatCost } from './chat-cost.js';
import { openBudgetDays } from '../store/budget-days.js';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'pino';
import type { AdminService } from '../admin/service.js';
import type { BerthConfig } from '../config/berth-config.js';
import { channelConfig, configuredChannels } from '../config/bridges.js';
import type { ChannelModule } from '../channels/contract.js';
import { createHookGate, HOOK_BOUNDS, type HookAdmission } from '../channels/hook-admission.js';
import { BerthError } from '../base/errors.js';
import { tryOwnerLock, type OwnerLock } from '../fs/lock.js';
import { openBridgeState, type BridgeState } from '../store/bridge-state.js';
import { openInbox, type Inbox } from '../store/inbox.js';
import type { Approvals } from '../outbound/approvals.js';
import type { PersonChat } from './person-commands.js';
import type { Metrics } from '../base/metrics.js';
import { createBridgeCore, type BridgeCore } from './core.js';
import { createPostOut } from './post-out.js';
import { createWebChat, type WebChat } from './web.js';

/** A chat channel running on the bridge core. */
export interface RunningBridge {
  name: string;
  core: BridgeCore;
  inbox: Inbox;
  state: BridgeState;
  connected(): boolean;
}

/** The bridges berth.yaml configures, started together (by `berth serve` or `berth bridge <name>`). */
export interface RunningBridges {
  /** A channel running now (berth.yaml's, as of the last reconfigure). */
  channel(name: string): RunningBridge | undefined;
  /** The chat bridges running in this process: the web chat first (when served), then the channels. */
  running(): RunningBridge[];
  /** The web chat, when asked for (berth serve: it needs the HTTP server). */
  web?: WebChat;
  /**
   * berth serve's /hooks/<path>: a channel's own (/hooks/telegram), else a signed webhook's name.
   * `source`: the caller's address as the socket has it (behind a reverse proxy, the proxy's);
   * undefined is one source shared by all. See hook-admission.ts for what each request may hold.
   */
  hook(req: Request, path: string, source?: string): Promise<Response>;
  /**
   * Follow berth.yaml's bridges as they are now: a channel added is started, one removed is
   * stopped, one whose settings or credential files changed is restarted (the pairing rules are
   * read per message: no restart for them). Messages in flight finish and are answered. Says what
   * it did, if anything.
   */
  reconfigure(): string | undefined;
  stop(): Promise<void>;
}

/** Authenticated /hooks requests each channel answers at once (a sync webhook's wait included). */
export const HOOKS_IN_FLIGHT_MAX = HOOK_BOUNDS.inFlightPerChannel;

export function bridgeDir(stateDir: string): string {
  return join(stateDir, 'bridges');
}

/** The owner lock of a channel's one consumer (claimBridges). */
export function consumerLock(stateDir: string, channel: string): string {
  return join(bridgeDir(stateDir), `${channel}.consumer`);
}

/** A channel that pulls its messages (a stream, a long poll) has one consumer per home; one that is sent them by HTTP needs none. */
export const needsConsumerLock = (channel: ChannelModule, config: unknown) => channel.receives(config) !== 'http';

/** The bridges this process may consume, claimed for its whole life (released by stop or by its death). */
export interface BridgeClaim {
  release(): void;
  /** The claim's lock of a channel, handed to the bridge that runs it. */
  take(channel: string): OwnerLock | undefined;
}

type Selection = { only?: string };

/**
 * One consumer per pulling channel per home: signal-cli hands every event to every connected
 * client, and Telegram ends one getUpdates with the next, so a second process of this home on
 * the same channel would answer every message twice or fight for it. Claims the configured
 * channels with an owner lock each (a dead holder's is taken over at once), or throws
 * ALREADY_RUNNING naming the live holder. Channels sent their messages by HTTP (the web chat, signed
 * webhooks) need none: their messages come only through this process's own server.
 */
export function claimBridges(deps: { config: () => BerthConfig; stateDir: string } & Selection): BridgeClaim {
  const held = new Map<string, OwnerLock>();
  const release = () => {
    for (const lock of held.values()) lock.release();
    held.clear();
  };
  try {
    for (const { channel, config } of selected(deps.config(), deps)) {
      if (!needsConsumerLock(channel, config)) continue;
      const lock = lockConsumer(deps.stateDir, channel.name);
      if (!('release' in lock)) {
        throw new BerthError(
          'ALREADY_RUNNING',
          `the ${channel.name} bridge of this home already runs in berth process ${lock.heldBy.split('.')[0]} ("berth serve" or "berth bridge ${channel.name}"); one consumer per bridge, else every message is answered twice: stop that one first`,
        );
      }
      held.set(channel.name, lock);
    }
  } catch (err) {
    release();
    throw err;
  }
  return {
    release,
    take(name) {
      const lock = held.get(name);
      held.delete(name);
      return lock;
    },
  };
}

function lockConsumer(stateDir: string, channel: string) {
  fs.mkdirSync(bridgeDir(stateDir), { recursive: true, mode: 0o700 });
  return tryOwnerLock(consumerLock(stateDir, channel));
}

const selected = (config: BerthConfig, sel: Selection) =>
  configuredChannels(config.bridges).filter((c) => sel.only === undefined || c.channel.name === sel.only);

type BridgeDeps = {
  admin: AdminService;
  config: () => BerthConfig;
  logger: Logger;
  stateDir: string;
  owner?: string;
  backoffMs?: { min: number; max: number };
  web?: boolean;
  /** Where people's answers to their agents' requests go (/yes, /no, a card's buttons). */
  approvals?: Pick<Approvals, 'answer' | 'pending' | 'requestLevel'> & Partial<Pick<Approvals, 'requestBudget'>>;
  /** Where a reply that could not be delivered is counted. */
  metrics?: Pick<Metrics, 'replyUndelivered'>;
  /** Schedules made in the chats (/every, /at …) and by their agents. */
  schedules?: ScheduleService;
  /** A person's /export and /forget (person-commands.ts). */
  person?: PersonChat;
} & Selection;

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

/** A channel's /hooks handler, given its request's admission (a channel that receives by HTTP takes it as a third argument). */
type HookHttp = (req: Request, subpath: string, admission: HookAdmission) => Promise<Response>;
type Started = {
  label: string;
  fingerprint: string;
  lock?: { release(): void };
  view: RunningBridge;
  http?: HookHttp;
  namedHooks?: boolean;
  stop(): Promise<void>;
};
type Built = Started & { go(recovery: { heldOnly: boolean }): void };

function startClaimed(deps: BridgeDeps, claim: BridgeClaim): RunningBridges {
  const dir = bridgeDir(deps.stateDir);
  const web = deps.web ? createWebChat({ ...deps, bridgeDir: dir }) : undefined;
  const running = new Map<string, Started>();
  const stopping = new Set<Promise<void>>();
  // Every channel built before any starts: one that cannot be (a credential file unreadable) fails the start with nothing running.
  const built = selected(deps.config(), deps).map(({ channel, config }) => buildChannel(deps, dir, channel, config, fingerprintOf(config)));
  for (const b of built) {
    b.lock = claim.take(b.view.name);
    running.set(b.view.name, b);
    b.go({ heldOnly: false });
  }

  /** Channels that ran in this process: one started again finishes its own messages (only a dead berth's are recovered). */
  const ranHere = new Set(running.keys());
  /** berth.yaml as it was when a channel could not be built from it: tried again only once it changes. */
  const failed = new Map<string, string>();
  /** What /hooks requests hold: strangers' body reads, and each channel's authenticated work. */
  const hookGate = createHookGate();

  /** Stop a running channel: it receives no more; its messages in flight still answer. Its lock is released, unless it is handed on. */
  function retire(name: string, keepLock = false) {
    const r = running.get(name);
    if (!r) return;
    running.delete(name);
    const done: Promise<void> = r
      .stop()
      .catch((err: unknown) => deps.logger.warn({ bridge: name, err: String(err).slice(0, 200) }, 'a bridge did not stop cleanly'))
      .finally(() => {
        if (!keepLock) r.lock?.release();
        stopping.delete(done);
      });
    stopping.add(done);
  }

  /**
   * A channel as berth.yaml has it now, in place of the running one (if any). Built first, its
   * lock taken next: one that cannot be built or locked leaves the running one as it is.
   */
  function replace(channel: ChannelModule, config: unknown, fingerprint: string): string {
    const was = running.get(channel.name);
    const not = was ? `${channel.name} bridge not restarted` : `${channel.name} bridge not started`;
    let next: Built;
    try {
      next = buildChannel(deps, dir, channel, config, fingerprint);
    } catch (err) {
      const why = (err as Error).message;
      failed.set(channel.name, fingerprint);
      deps.logger.error({ bridge: channel.name, err: why }, 'berth.yaml changed, but the bridge could not be started as it says');
      return `${not}: ${why}${was ? '; the running one goes on' : ''}`;
    }
    failed.delete(channel.name);
    let lock = was?.lock;
    if (!lock && needsConsumerLock(channel, config)) {
      const taken = lockConsumer(deps.stateDir, channel.name);
      if (!('release' in taken)) return `${not}: it already runs in berth process ${taken.heldBy.split('.')[0]}; one consumer per bridge`;
      lock = taken;
    }
    if (was) retire(channel.name, lock === was.lock);
    next.lock = lock;
    running.set(channel.name, next);
    next.go({ heldOnly: ranHere.has(channel.name) });
    ranHere.add(channel.name);
    return was ? `${channel.name} bridge restarted: ${next.label} (was ${was.label})` : `${channel.name} bridge started: ${next.label}`;
  }

  return {
    channel: (name) => running.get(name)?.view,
    running: () => [
      ...(web ? [{ name: 'web', core: web.core, inbox: web.inbox, state: web.state, connected: () => true }] : []),
      ...[...running.values()].map((r) => r.view),
    ],
    web,
    async hook(req, path, source) {
      const [first = '', ...rest] = path.split('/');
      const own = running.get(first)?.http ? running.get(first) : undefined;
      const target = own ?? [...running.values()].find((r) => r.namedHooks);
      if (!target?.http)
        throw new BerthError('NOT_FOUND', `nothing is served at /hooks/${path}`, {
          hint: 'berth.yaml bridges names the channels and webhooks berth serve answers',
        });
      // Anyone may call /hooks: a stranger's body read is bounded on its own, and only an
      // authenticated request takes one of its channel's slots (one channel's callers never crowd out another's).
      const ticket = hookGate.admit(target.view.name, source);
      try {
        return await target.http(req, own ? rest.join('/') : path, ticket);
      } finally {
        ticket.release();
      }
    },
    reconfigure() {
      const said: string[] = [];
      const want = new Map(selected(deps.config(), deps).map((c) => [c.channel.name, c]));
      for (const [name, r] of [...running]) {
        if (want.has(name)) continue;
        retire(name);
        said.push(`${name} bridge stopped (berth.yaml has no bridges.${name} now; it was ${r.label})`);
      }
      for (const [name, { channel, config }] of want) {
        const fingerprint = fingerprintOf(config);
        if (running.get(name)?.fingerprint === fingerprint || failed.get(name) === fingerprint) continue;
        said.push(replace(channel, config, fingerprint));
      }
      return said.length > 0 ? said.join('; ') : undefined;
    },
    async stop() {
      for (const name of [...running.keys()]) retire(name);
      await Promise.all([...stopping]);
      claim.release();
    },
  };
}

/**
 * What a running channel was started with: every setting but the pairing rules (read per
 * message), and what its credential files hold, hashed. Any other change restarts it: a rotated
 * secret, token file or callback takes effect within seconds, never only at the next start.
 */
function fingerprintOf(config: unknown): string {
  const hash = createHash('sha256');
  const walk = (value: unknown, top: boolean): unknown => {
    if (Array.isArray(value)) return value.map((v) => walk(v, false));
    if (value === null || typeof value !== 'object') return value;
    return Object.fromEntries(
      Object.entries(value)
        .filter(([k]) => !(top && (k === 'senders' || k === 'allow')))
        .map(([k, v]) => {
          if (k.endsWith('_file') && typeof v === 'string') hash.update(`${k}\0${fileDigest(v)}\0`);
          return [k, walk(v, false)];
        }),
    );
  };
  hash.update(JSON.stringify(walk(config, true)));
  return hash.digest('hex');
}

function fileDigest(path: string): string {
  try {
    return createHash('sha256').update(fs.readFileSync(path)).digest('hex');
  } catch (err) {
    return `unreadable ${(err as NodeJS.ErrnoException).code ?? ''}`;
  }
}

/** A channel as berth.yaml has it now: its transport and its core on the durable inbox; `go` recovers and starts receiving. */
function buildChannel(deps: BridgeDeps, dir: string, channel: ChannelModule, config: unknown, fingerprint: string): Built {
  const inbox = openInbox(dir, channel.name);
  const state = openBridgeState(dir, channel.name);
  const own = join(dir, channel.name);
  fs.mkdirSync(own, { recursive: true, mode: 0o700 });
  let core: BridgeCore | undefined;
  const transport = channel.create({
    config,
    logger: deps.logger,
    dir: own,
    backoffMs: deps.backoffMs,
    postOut: createPostOut(deps.config),
    take: (m) => {
      if (!core) throw new BerthError('BUSY', `the ${channel.name} bridge is starting`, { retry_after: 1 });
      return core.receive(m);
    },
  });
  const started = createBridgeCore({
    transport,
    inbox,
    state,
    admin: deps.admin,
    config: deps.config,
    logger: deps.logger,
    owner: deps.owner,
    approvals: deps.approvals,
    metrics: deps.metrics,
    senderDenied: (sender) => state.isDenied(sender),
    schedules: deps.schedules,
    person: deps.person,
    cost: createChatCost({ admin: deps.admin, config: deps.config, approvals: deps.approvals, days: openBudgetDays(deps.stateDir) }),
    jobs: deps.admin,
    senderAllowed: (sender) => senderAllowed(channel, channelConfig(deps.config().bridges, channel.name), state, sender),
  });
  return {
    label: channel.label(config),
    fingerprint,
    http: transport.http,
    namedHooks: channel.namedHooks !== undefined,
    view: { name: channel.name, core: started, inbox, state, connected: transport.connected },
    go(recovery) {
      core = started;
      started.recover(recovery);
      transport.start();
    },
    /** Receive no more; held first messages are left to the next core; runs in flight still answer (sending needs no receiver). */
    async stop() {
      started.close();
      await transport.stop();
    },
  };
}

/** Pairing, as berth.yaml says it now: open, allowed by id or tenant key, or approved by the operator. */
function senderAllowed(channel: ChannelModule, config: unknown, state: BridgeState, sender: string): boolean {
  if (config === undefined) return true; // removed from berth.yaml: the messages it took already still answer
  const rules = channel.senders(config);
  if (!rules || rules.senders === 'open') return true;
  const id = sender.slice(channel.name.length + 1);
  return rules.allow.includes(id) || rules.allow.includes(sender) || state.isApproved(sender);
}
