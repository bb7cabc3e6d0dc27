import { BerthError } from '../base/errors.js';
import type { AdmissionLimits } from '../config/runs.js';

export type { AdmissionLimits } from '../config/runs.js';

/** Whose run it is: limits count per project and per tenant of a project. */
export interface AdmissionKey {
  project: string;
  tenant: string;
}

/** One run's place: admitted at once, or waiting in its tenant's queue. */
export interface Ticket {
  /** Resolves when the run may start; rejects with SHUTTING_DOWN on drain (or RUN_FAILED when released while waiting). */
  readonly ready: Promise<void>;
  /** Frees the slot (or leaves the queue). Idempotent: call it in a `finally`. */
  release(): void;
  /** Milliseconds spent waiting for a slot (so far, while still waiting). */
  waitedMs(): number;
}

export interface AdmissionStats {
  inFlight: number;
  queued: number;
  tenantsWaiting: number;
}

export interface Admission {
  /** Admit now, or queue; BUSY when the queue is full, SHUTTING_DOWN once draining. Never waits. */
  enter(key: AdmissionKey): Ticket;
  /** Stop admitting: later enters and every waiting run get SHUTTING_DOWN; runs in flight keep their slot. */
  drain(): void;
  /** Resolves when no run is in flight (at once if none is). */
  idle(): Promise<void>;
  stats(): AdmissionStats;
}

export interface AdmissionOptions {
  /** Read at every decision, so a berth.yaml change applies to the next one. */
  limits: () => AdmissionLimits;
  now?: () => number;
  onChange?: (stats: AdmissionStats) => void;
}

/** Before any run has finished, a run is guessed to take this long (for Retry-After). */
const DEFAULT_RUN_MS = 5_000;
/** Weight of the newest run in the moving mean of run durations. */
const RUN_MS_WEIGHT = 0.2;
const RETRY_AFTER_MAX_SECONDS = 60;
/** How many waiting runs one tenant may hold. */
export const tenantShare = (limits: AdmissionLimits) => Math.max(1, Math.ceil(limits.queue / 4));

type State = 'waiting' | 'admitted' | 'done';

interface Entry {
  key: AdmissionKey;
  tenantKey: string;
  state: State;
  enteredAt: number;
  /** When it was admitted, or left the queue. */
  settledAt?: number;
  resolve: () => void;
  reject: (err: Error) => void;
}

/**
 * Admission control: at most `global` runs at once, `perProject` of one project, `perTenant` of
 * one tenant. Past them a run waits in its tenant's FIFO; a freed slot goes round-robin across
 * the tenants that wait (from after the last one served), so a tenant that starts waiting is
 * served within one turn of the ring, however many runs another tenant has queued. In memory:
 * one instance per process, made by the composition root.
 */
export function createAdmission(opts: AdmissionOptions): Admission {
  const now = opts.now ?? Date.now;
  let inFlight = 0;
  let queued = 0;
  let draining = false;
  let meanRunMs = DEFAULT_RUN_MS;
  let finishedRuns = 0;
  const perProject = new Map<string, number>();
  const perTenant = new Map<string, number>();
  /** Waiting runs, one FIFO per tenant, keyed project + NUL + tenant (a project name has no NUL; TenantKeySchema refuses one). */
  const queues = new Map<string, Entry[]>();
  /** Tenants with waiting runs, in the order the round-robin visits them. */
  let ring: string[] = [];
  let lastServed: string | undefined;
  /** Where the walk resumes when the last tenant served has left the ring. */
  let resumeAt = 0;
  let idleWaiters: Array<() => void> = [];

  const stats = (): AdmissionStats => ({ inFlight, queued, tenantsWaiting: ring.length });
  const changed = () => opts.onChange?.(stats());
  const count = (map: Map<string, number>, key: string, delta: number) => {
    const next = (map.get(key) ?? 0) + delta;
    if (next > 0) map.set(key, next);
    else map.delete(key);
  };

  const fits = (entry: Entry, limits: AdmissionLimits) =>
    inFlight < limits.global &&
    (perProject.get(entry.key.project) ?? 0) < limits.perProject &&
    (perTenant.get(entry.tenantKey) ?? 0) < limits.perTenant;

  const admit = (entry: Entry) => {
    entry.state = 'admitted';
    entry.settledAt = now();
    inFlight += 1;
    count(perProject, entry.key.project, 1);
    count(perTenant, entry.tenantKey, 1);
    entry.resolve();
  };

  const leaveRing = (index: number) => {
    const tenantKey = ring[index];
    ring.splice(index, 1);
    if (tenantKey === lastServed) resumeAt = index;
    else if (index < resumeAt) resumeAt -= 1;
  };

  /** Give free slots to waiting heads, round-robin; a head its own limits hold back is passed over. */
  const pump = () => {
    if (draining) return;
    const limits = opts.limits();
    while (ring.length > 0 && inFlight < limits.global) {
      const served = lastServed === undefined ? -1 : ring.indexOf(lastServed);
      const start = served >= 0 ? served + 1 : resumeAt;
      let admitted = false;
      for (let i = 0; i < ring.length; i += 1) {
        const index = (start + i) % ring.length;
        const tenantKey = ring[index]!;
        const queue = queues.get(tenantKey)!;
        const head = queue[0]!;
        if (!fits(head, limits)) continue;
        queue.shift();
        queued -= 1;
        lastServed = tenantKey;
        if (queue.length === 0) {
          queues.delete(tenantKey);
          leaveRing(index);
        }
        admit(head);
        admitted = true;
        break;
      }
      if (!admitted) return;
    }
  };

  const retryAfterSeconds = (limits: AdmissionLimits) =>
    Math.min(RETRY_AFTER_MAX_SECONDS, Math.max(1, Math.ceil((queued / Math.max(1, limits.global)) * (meanRunMs / 1000))));

  const shuttingDown = () =>
    new BerthError('SHUTTING_DOWN', 'berth is shutting down and starts no new runs', { hint: 'try again once berth is back' });

  const release = (entry: Entry) => {
    if (entry.state === 'done') return;
    const was = entry.state;
    entry.state = 'done';
    if (was === 'waiting') {
      entry.settledAt = now();
      const queue = queues.get(entry.tenantKey);
      const at = queue?.indexOf(entry) ?? -1;
      if (queue && at >= 0) {
        queue.splice(at, 1);
        queued -= 1;
        if (queue.length === 0) {
          queues.delete(entry.tenantKey);
          leaveRing(ring.indexOf(entry.tenantKey));
        }
      }
      entry.reject(new BerthError('RUN_FAILED', 'the run left the queue before it started'));
      changed();
      return;
    }
    inFlight -= 1;
    count(perProject, entry.key.project, -1);
    count(perTenant, entry.tenantKey, -1);
    const ranMs = Math.max(0, now() - (entry.settledAt ?? entry.enteredAt));
    finishedRuns += 1;
    meanRunMs = finishedRuns === 1 ? ranMs : meanRunMs + RUN_MS_WEIGHT * (ranMs - meanRunMs);
    pump();
    if (inFlight === 0) {
      const waiters = idleWaiters;
      idleWaiters = [];
      for (const wake of waiters) wake();
    }
    changed();
  };

  return {
    enter(key) {
      if (draining) throw shuttingDown();
      // A limit raised since the last decision may let waiting runs start before this one is weighed.
      pump();
      const limits = opts.limits();
      let resolve!: () => void;
      let reject!: (err: Error) => void;
      const ready = new Promise<void>((res, rej) => {
        resolve = res;
        reject = rej;
      });
      // Nobody may be awaiting a ticket that is rejected (drained, released): that is not a crash.
      ready.catch(() => undefined);
      const entry: Entry = { key, tenantKey: `${key.project}\0${key.tenant}`, state: 'waiting', enteredAt: now(), resolve, reject };
      const ticket: Ticket = {
        ready,
        release: () => release(entry),
        waitedMs: () => (entry.settledAt ?? now()) - entry.enteredAt,
      };
      // The tenant's own earlier runs go first (its queue is FIFO).
      if (!queues.has(entry.tenantKey) && fits(entry, limits)) {
        if (ring.length === 0) lastServed = entry.tenantKey;
        admit(entry);
        changed();
        return ticket;
      }
      const queue = queues.get(entry.tenantKey);
      // One tenant may hold a quarter of the queue: a burst cannot turn everyone else away.
      const mine = queue?.length ?? 0;
      if (queued >= limits.queue || mine >= tenantShare(limits)) {
        const seconds = retryAfterSeconds(limits);
        const why =
          queued >= limits.queue
            ? `${queued} runs are waiting already (the queue holds ${limits.queue})`
            : `this tenant has ${mine} runs waiting already (its share of the queue)`;
        throw new BerthError('BUSY', why, { retry_after: seconds, hint: `the server is busy; try again in ${seconds} s` });
      }
      if (queue) queue.push(entry);
      else {
        queues.set(entry.tenantKey, [entry]);
        ring.push(entry.tenantKey);
      }
      queued += 1;
      changed();
      return ticket;
    },

    drain() {
      if (draining) return;
      draining = true;
      const waiting = [...queues.values()].flat();
      queues.clear();
      ring = [];
      queued = 0;
      for (const entry of waiting) {
        entry.state = 'done';
        entry.settledAt = now();
        entry.reject(shuttingDown());
      }
      changed();
    },

    idle() {
      return inFlight === 0 ? Promise.resolve() : new Promise<void>((resolve) => idleWaiters.push(resolve));
    },

    stats,
  };
}
