import type { BerthConfig } from '../config/berth-config.js';
import { admissionLimitsOf } from '../config/runs.js';

/**
 * One lane per chat: a chat's messages are handled one after another, in arrival order, and
 * lanes run side by side. A message holds no run slot while it waits for its turn, nor while its
 * run waits for admission and its workspace: it takes one (`slot.take()`) only when its run is
 * about to start. Slots are bounded across the bridge, per tenant and per sender; waiting takers
 * are served round-robin by tenant, so one person's many chats cannot crowd out another's one.
 * Waiting messages are bounded per chat, per tenant, per sender (a person in many groups, each its
 * own tenant) and in all: past a bound a message is
 * refused and the caller tells the sender. Pure bookkeeping: limits are read at each decision
 * (a berth.yaml change applies to the next); keyed by Maps (chat ids are the transport's strings).
 */
export interface LaneLimits {
  /** Runs at once across this bridge's chats. */
  slots: number;
  /** Runs at once of one tenant, and of one sender (a person in several groups). */
  perTenant: number;
  /** Messages one chat may have waiting or running. */
  chatPending: number;
  /** …one tenant, across its chats; and one sender, across their chats and groups. */
  tenantPending: number;
  /** …every chat of the bridge. */
  totalPending: number;
}

/** Messages one chat may have waiting or running; one tenant across its chats (and one sender across theirs and their groups); a whole bridge. */
export const CHAT_PENDING_MAX = 20;
export const TENANT_PENDING_MAX = 50;
export const BRIDGE_PENDING_MAX = 500;

/** The lanes' bounds: berth.yaml's bridges.max_concurrent_runs run slots, at most runs.per_tenant of them per tenant and per sender. */
export function laneLimitsOf(config: BerthConfig): LaneLimits {
  const slots = config.bridges.max_concurrent_runs;
  return {
    slots,
    perTenant: Math.min(slots, admissionLimitsOf(config).perTenant),
    chatPending: CHAT_PENDING_MAX,
    tenantPending: TENANT_PENDING_MAX,
    totalPending: BRIDGE_PENDING_MAX,
  };
}

/** Whose message it is: its chat (the lane), the tenant that chat is, and who sent it. */
export interface LaneKey {
  chat: string;
  tenant: string;
  sender: string;
}

/** A message's run slot; released when its work ends, or earlier by release(). */
export interface Slot {
  /** Resolves once a slot is held (at once when one is free); `onWait` is called if it must wait. Idempotent. */
  take(onWait?: () => void): Promise<void>;
  release(): void;
}

/** Queued, with how many of the same chat's messages are ahead; or refused: which bound is full. */
export type Queued = { accepted: true; ahead: number } | { accepted: false; full: 'chat' | 'tenant' | 'sender' | 'bridge' };

interface Taker {
  key: LaneKey;
  state: 'idle' | 'waiting' | 'held';
  /** Set while it waits or holds: what take() answers. */
  ready?: Promise<void>;
  wake?: () => void;
}

export function createLanes(limits: () => LaneLimits) {
  const tails = new Map<string, { promise: Promise<void>; pending: number }>();
  const pendingOf = { tenant: new Map<string, number>(), sender: new Map<string, number>() };
  let pending = 0;
  let running = 0;
  const runningOf = { tenant: new Map<string, number>(), sender: new Map<string, number>() };
  /** Takers waiting for a slot: one FIFO per tenant, and the tenants in the order the ring visits them. */
  const waiting = new Map<string, Taker[]>();
  const ring: string[] = [];
  let turn = 0;
  let all = new Set<Promise<void>>();

  const count = (map: Map<string, number>, key: string, delta: number) => {
    const n = (map.get(key) ?? 0) + delta;
    if (n > 0) map.set(key, n);
    else map.delete(key);
  };
  const fits = (key: LaneKey, l: LaneLimits) =>
    (runningOf.tenant.get(key.tenant) ?? 0) < l.perTenant && (runningOf.sender.get(key.sender) ?? 0) < l.perTenant;

  const grant = (taker: Taker) => {
    taker.state = 'held';
    running++;
    count(runningOf.tenant, taker.key.tenant, 1);
    count(runningOf.sender, taker.key.sender, 1);
    taker.wake?.();
  };

  /** Free slots go to the waiting tenants' heads, round-robin from after the last one served. */
  const pump = () => {
    const l = limits();
    while (running < l.slots && ring.length > 0) {
      let served = false;
      for (let i = 0; i < ring.length; i++) {
        const index = (turn + i) % ring.length;
        const tenant = ring[index] as string;
        const queue = waiting.get(tenant) as Taker[];
        const head = queue[0] as Taker;
        if (!fits(head.key, l)) continue;
        queue.shift();
        if (queue.length === 0) {
          waiting.delete(tenant);
          ring.splice(index, 1);
          turn = index; // now the tenant after it
        } else turn = index + 1;
        grant(head);
        served = true;
        break;
      }
      if (!served) return;
    }
  };

  const leave = (taker: Taker) => {
    if (taker.state === 'held') {
      running--;
      count(runningOf.tenant, taker.key.tenant, -1);
      count(runningOf.sender, taker.key.sender, -1);
      pump();
    } else if (taker.state === 'waiting') {
      const queue = waiting.get(taker.key.tenant) ?? [];
      queue.splice(queue.indexOf(taker), 1);
      if (queue.length === 0) {
        waiting.delete(taker.key.tenant);
        const index = ring.indexOf(taker.key.tenant);
        ring.splice(index, 1);
        if (index < turn) turn--;
      }
    }
    taker.state = 'idle';
    taker.ready = undefined;
    taker.wake?.(); // a release while waiting: the wait ends, without a slot
    taker.wake = undefined;
  };

  function slotFor(key: LaneKey): Slot {
    const taker: Taker = { key, state: 'idle' };
    return {
      take(onWait) {
        if (taker.ready) return taker.ready;
        taker.ready = new Promise<void>((resolve) => (taker.wake = resolve));
        taker.state = 'waiting';
        const queue = waiting.get(key.tenant);
        if (queue) queue.push(taker);
        else {
          waiting.set(key.tenant, [taker]);
          ring.push(key.tenant);
        }
        pump();
        if (taker.state === 'waiting') onWait?.();
        return taker.ready;
      },
      release: () => leave(taker),
    };
  }

  return {
    /**
     * Queue `work` on its chat's lane. `bounded: false` for what must go out whatever the load
     * (an answer journaled before a restart).
     */
    run(key: LaneKey, work: (slot: Slot) => Promise<unknown>, opts: { bounded?: boolean } = {}): Queued {
      const lane = tails.get(key.chat) ?? { promise: Promise.resolve(), pending: 0 };
      if (opts.bounded !== false) {
        const l = limits();
        if (lane.pending >= l.chatPending) return { accepted: false, full: 'chat' };
        if ((pendingOf.tenant.get(key.tenant) ?? 0) >= l.tenantPending) return { accepted: false, full: 'tenant' };
        if ((pendingOf.sender.get(key.sender) ?? 0) >= l.tenantPending) return { accepted: false, full: 'sender' };
        if (pending >= l.totalPending) return { accepted: false, full: 'bridge' };
      }
      const ahead = lane.pending;
      lane.pending++;
      count(pendingOf.tenant, key.tenant, 1);
      count(pendingOf.sender, key.sender, 1);
      pending++;
      const next = lane.promise.then(async () => {
        const slot = slotFor(key);
        try {
          await work(slot);
        } finally {
          slot.release();
          lane.pending--;
          count(pendingOf.tenant, key.tenant, -1);
          count(pendingOf.sender, key.sender, -1);
          pending--;
          if (lane.pending === 0 && tails.get(key.chat) === lane) tails.delete(key.chat);
        }
      });
      lane.promise = next.catch(() => undefined);
      tails.set(key.chat, lane);
      all.add(next);
      void next.finally(() => all.delete(next)).catch(() => undefined);
      return { accepted: true, ahead };
    },
    /** What waits and runs now (for tests and metrics). */
    stats: () => ({ pending, running, waiting: [...waiting.values()].reduce((n, q) => n + q.length, 0) }),
    async idle(): Promise<void> {
      while (all.size > 0) {
        const current = [...all];
        await Promise.allSettled(current);
      }
      all = new Set();
    },
  };
}
