import type { Logger } from 'pino';
import type { IdleContainer } from '../launch/launcher.js';
import { poolTarget, recentArrivals, refillSlots, type PoolSizing, type RateWindows } from '../plan/pool-size.js';
import type { FreshLayout, PoolWay } from '../plan/pool.js';
import type { RunPlan } from '../plan/run-plan.js';

/** A pre-started container waiting for its claim. */
export interface Waiting {
  container: IdleContainer;
  since: number;
}

/** One shape of the pool (runs/prestart-pool.ts): its blank plan, what waits, what is under way. */
export interface PoolShape {
  key: string;
  /** How its containers take their tenant's directories (plan/pool.ts poolWayOf). */
  way: PoolWay;
  blank: RunPlan;
  /** Adopt: the fresh directories each of its containers is started with. */
  layout?: FreshLayout;
  waiting: Waiting[];
  /** Starts under way for this shape. */
  starting: number;
  /** Claims waiting for one of those starts, first come first served (undefined: it failed, start your own). */
  waiters: Array<(container: IdleContainer | undefined) => void>;
  /** When its new people came (claims), for the arrival rate. */
  arrivals: number[];
  failedAt?: number;
}

export const newShape = (key: string, way: PoolWay, blank: RunPlan, layout?: FreshLayout): PoolShape => ({
  key,
  way,
  blank,
  ...(layout ? { layout } : {}),
  waiting: [],
  starting: 0,
  waiters: [],
  arrivals: [],
});

/** While runs wait for a slot, or a shape is sized above its base, the refill looks again this often. */
const RECHECK_MS = 50;
/** A shape whose container would not start is not tried again for this long. */
const RETRY_AFTER_MS = 30_000;
/** Before any start was timed, one is guessed to take this long (a cold runc start here: 236 ms alone, slower at once). */
const DEFAULT_START_MS = 500;
/** Weight of the newest start in the moving mean of start times. */
const START_MS_WEIGHT = 0.3;

export interface PoolRefill {
  /** Start what is missing and remove what is past its target, now and (while needed) again shortly. */
  refill(): void;
  /** None waits: one under way that no earlier claim waits for (undefined: none, or it failed). */
  nextStarted(shape: PoolShape): Promise<IdleContainer | undefined>;
  /** Berth stops: no more looks, and every claim still waiting gets nothing. */
  stop(): void;
  /** Settles once no start is under way (each one that ends after stop() is removed before it counts as ended). */
  idle(): Promise<void>;
}

/**
 * The pool's refill: each shape toward its target (plan/pool-size.ts, from its arrivals and the
 * measured start time), up to refillSlots() starts at once across shapes, the shape furthest below
 * its target first; containers past a shape's target (a burst is over) removed, the longest waiting
 * first. A started container goes to the first claim waiting for one, else it waits itself.
 */
export function createPoolRefill(deps: {
  shapes: Map<string, PoolShape>;
  start: (shape: PoolShape) => Promise<IdleContainer>;
  remove: (ids: string[]) => Promise<void>;
  sizing: () => PoolSizing;
  /** True while runs wait for a slot (admission's queue). */
  busy?: () => boolean;
  windows?: RateWindows;
  closed: () => boolean;
  changed: () => void;
  logger: Logger;
}): PoolRefill {
  /** Starts under way, every shape's. */
  let inFlight = 0;
  /** Told when inFlight falls to 0. */
  const whenIdle: Array<() => void> = [];
  /** Moving mean of the start times: how long a claimed container takes to replace. */
  let startMs = DEFAULT_START_MS;
  let recheck: NodeJS.Timeout | undefined;
  const target = (shape: PoolShape, now: number) => poolTarget(shape.arrivals, now, startMs, deps.sizing(), deps.windows);

  function deliver(shape: PoolShape, container: IdleContainer): void {
    const waiter = shape.waiters.shift();
    if (waiter) waiter(container);
    else shape.waiting.push({ container, since: Date.now() });
  }

  function startOne(shape: PoolShape): void {
    inFlight++;
    shape.starting++;
    const t0 = performance.now();
    void deps
      .start(shape)
      .then(
        async (container) => {
          startMs += START_MS_WEIGHT * (performance.now() - t0 - startMs);
          // A claim waiting for it still takes it (its shape is the claim's), unless berth stops.
          if (!deps.closed() && (shape.waiters.length || deps.shapes.get(shape.key) === shape)) deliver(shape, container);
          else await deps.remove([container.containerId]);
        },
        (err: unknown) => {
          shape.failedAt = Date.now();
          shape.waiters.shift()?.(undefined); // that claim's run starts its own
          deps.logger.warn({ err: String(err) }, 'could not start a pre-started container');
        },
      )
      .finally(() => {
        inFlight--;
        shape.starting--;
        deps.changed();
        refill();
        if (inFlight === 0) for (const told of whenIdle.splice(0)) told();
      });
  }

  /** The shape furthest below its target (counting the claims waiting on it), or none. */
  function shortest(now: number): PoolShape | undefined {
    return [...deps.shapes.values()]
      .filter((s) => !(s.failedAt && now - s.failedAt < RETRY_AFTER_MS))
      .map((s) => ({ s, missing: target(s, now) + s.waiters.length - s.waiting.length - s.starting }))
      .filter((m) => m.missing > 0)
      .sort((x, y) => y.missing - x.missing)[0]?.s;
  }

  function refill(): void {
    if (deps.closed()) return;
    const now = Date.now();
    let again = false;
    for (const shape of deps.shapes.values()) {
      shape.arrivals = recentArrivals(shape.arrivals, now, deps.windows);
      const want = target(shape, now);
      if (want > deps.sizing().base) again = true;
      const excess = shape.waiting.length - want;
      if (excess > 0) void deps.remove(shape.waiting.splice(0, excess).map((w) => w.container.containerId));
    }
    for (let short = shortest(now); short; short = shortest(now)) {
      const runsWaiting = deps.busy?.() ?? false;
      if (refillSlots(inFlight, deps.sizing(), runsWaiting) <= 0) break;
      startOne(short);
    }
    if (deps.busy?.() && inFlight === 0) again = true;
    if (again && !recheck) {
      recheck = setTimeout(() => {
        recheck = undefined;
        refill();
      }, RECHECK_MS);
      recheck.unref();
    }
  }

  return {
    refill,
    async nextStarted(shape) {
      if (shape.starting <= shape.waiters.length) return undefined;
      return new Promise<IdleContainer | undefined>((resolve) => shape.waiters.push(resolve));
    },
    stop() {
      if (recheck) clearTimeout(recheck);
      for (const shape of deps.shapes.values()) for (const waiter of shape.waiters.splice(0)) waiter(undefined);
    },
    idle: () => (inFlight === 0 ? Promise.resolve() : new Promise<void>((r) => whenIdle.push(r))),
  };
}
