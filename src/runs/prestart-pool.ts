import type { Logger } from 'pino';
import type { Owner } from '../fs/tree.js';
import type { IdleContainer, Launcher, LauncherCapabilities } from '../launch/launcher.js';
import { LABELS } from '../plan/labels.js';
import { mayClaim, poolShape, type PoolWay } from '../plan/pool.js';
import type { RateWindows } from '../plan/pool-size.js';
import type { RunPlan } from '../plan/run-plan.js';
import { createPoolRefill, type PoolShape, type Waiting } from './pool-refill.js';
import { createPoolWays, type PoolPerson } from './pool-ways.js';
import { MAX_AGE_MS } from './warm-pool.js';

export type { PoolPerson } from './pool-ways.js';

/**
 * Containers started before their tenant is known (plan/pool.ts), so a new person's first
 * message is an attach (runc) or an adopt (gVisor) and an exec, not a container start. A shape
 * is learnt from the first plan that asks for it (that message starts its container as before); from then on containers of
 * that shape wait: `size()` of them, more while people arrive faster (plan/pool-size.ts: what
 * arrives while one start is under way, up to `max()` and admission's `global()`), fewer again
 * once they stop. The refill starts up to `engineStarts()` at once (one at a time while runs wait
 * for a slot: the engine's starts go to them first). A claim that finds none waiting while a start
 * is under way for its shape waits for that one (it is ready sooner than a start of its own);
 * otherwise the run starts its own, beside the refill's. A claimed container
 * is its tenant's (it becomes the session's warm container, and is removed like any other):
 * none ever goes back to the pool. Which way a shape is served, or whether at all, is
 * plan/pool.ts poolWayOf's to say: for a shared-mode plan, with `disk_quotas: loop` under gVisor,
 * or with `runs.pool: 0`, claims return nothing and runs start as before. An adopt shape is
 * learnt from any run of it, but only a new person's run (`person.isNew`) claims from it.
 * A waiting container the engine says ended is dropped at once; when the launcher loses sight of
 * the engine (it restarted), every waiting one is. A claim whose container is gone all the same
 * takes the next one, or returns nothing (the run starts its own).
 */
export interface PrestartPool {
  /** A started container for this plan with its binds showing the plan's directories, or undefined: the caller starts one. */
  claim(plan: RunPlan, log: Logger, person?: PoolPerson): Promise<IdleContainer | undefined>;
  /** The project is gone (or its containers are): its shapes are forgotten and their containers removed. */
  forgetProject(project: string): Promise<void>;
  /** Is this one of the pool's own waiting containers (it holds no workspace)? */
  isWaiting(containerId: string): boolean;
  /** Containers waiting now. */
  size(): number;
  /** Remove every waiting container and stop refilling (berth stops), once the starts under way are done and removed; returns how many were waiting. */
  close(): Promise<number>;
}

/** Shapes kept at once; past it the one claimed least recently lets its containers go. */
export const MAX_SHAPES = 8;
/** How long close() waits for starts under way (each ends removed). */
const CLOSE_WAIT_MS = 30_000;
/** Waiting containers one claim tries before the run starts its own (each found gone). */
const CLAIM_TRIES = 3;

export function createPrestartPool(deps: {
  launcher: Launcher;
  /** Containers kept waiting per shape when nobody arrives (berth.yaml runs.pool); 0: no pool. */
  size: () => number;
  /** Containers kept per shape at most while people arrive fast (runs.pool_max); default size(): a pool of fixed size. */
  max?: () => number;
  /** Runs admission lets in flight at once: the pool grows no larger. Default: unbounded (max() bounds it). */
  global?: () => number;
  /** Starts the refill has under way at once (runs.engine_starts); default 1. */
  engineStarts?: () => number;
  /** The windows the arrival rate is read over (tests shorten them). */
  windows?: RateWindows;
  /** Berth's own directory for the blank stand-ins (home cache). */
  blankDir: string;
  /** Berth's private directory for adopt's fresh directories (never in a project's tree); without it, no adopt. */
  adoptDir?: string;
  /** Who owns what a tenant may write (the agent user): the fresh workspace and home are theirs, as the person's own are. */
  owner?: () => Owner | undefined;
  logger: Logger;
  onSize?: (n: number) => void;
  /** True while runs wait for a slot (admission's queue): the refill has one start under way at most meanwhile, the engine's starts are theirs first. */
  busy?: () => boolean;
  /**
   * Tests: every claim is served from the pool, starting a container at once when none waits,
   * and a failed attach fails the run instead of falling back (the attack tests run on claimed
   * containers alone).
   */
  always?: boolean;
}): PrestartPool {
  const shapes = new Map<string, PoolShape>();
  let closed = false;
  let caps: Promise<LauncherCapabilities> | undefined;
  const ways = createPoolWays(deps);
  const count = () => [...shapes.values()].reduce((n, s) => n + s.waiting.length, 0);
  const changed = () => deps.onSize?.(count());

  /** Waiting containers that ended (the id), or all of them (undefined: the engine was out of sight). */
  function dropEnded(containerId?: string): void {
    const ended = (w: Waiting) => containerId === undefined || w.container.containerId === containerId;
    const dropped: string[] = [];
    for (const shape of shapes.values()) {
      dropped.push(...shape.waiting.filter(ended).map((w) => w.container.containerId));
      shape.waiting = shape.waiting.filter((w) => !ended(w));
    }
    if (!dropped.length) return;
    deps.logger.info(
      { containers: dropped.map((id) => id.slice(0, 12)) },
      containerId ? 'a pre-started container ended; dropped' : 'the engine was out of sight; pre-started containers dropped',
    );
    void remove(dropped);
    refill();
  }
  const unwatch = deps.launcher.watchEnded?.(dropEnded);

  function learn(key: string, way: PoolWay, plan: RunPlan): PoolShape {
    const known = shapes.get(key);
    if (known) {
      shapes.delete(key); // Map order is recency: claimed now
      shapes.set(key, known);
      return known;
    }
    const shape = ways.shapeOf(key, way, plan);
    shapes.set(key, shape);
    for (const [oldKey, old] of shapes) {
      if (shapes.size <= MAX_SHAPES) break;
      shapes.delete(oldKey);
      void remove(old.waiting.map((w) => w.container.containerId));
    }
    return shape;
  }

  async function remove(ids: string[]): Promise<void> {
    if (ids.length) await deps.launcher.removeContainers(ids).catch(() => undefined);
    for (const id of ids) ways.removed(id);
    changed();
  }

  const start = (shape: PoolShape) => ways.start(shape);
  const { refill, nextStarted, stop, idle } = createPoolRefill({
    shapes,
    start,
    remove,
    sizing: () => ({
      base: deps.size(),
      max: deps.max?.() ?? deps.size(),
      global: deps.global?.() ?? Number.MAX_SAFE_INTEGER,
      engineStarts: deps.engineStarts?.() ?? 1,
    }),
    ...(deps.busy ? { busy: deps.busy } : {}),
    ...(deps.windows ? { windows: deps.windows } : {}),
    closed: () => closed,
    changed,
    logger: deps.logger,
  });

  /** The shape's entry, learnt now if new; undefined (the run starts its container) when the pool cannot serve the plan. */
  async function shapeFor(plan: RunPlan, log: Logger, person: PoolPerson | undefined): Promise<PoolShape | undefined> {
    if (closed || (!deps.always && deps.size() <= 0)) return undefined;
    try {
      caps ??= deps.launcher.capabilities();
      const way = ways.wayOf(plan, await caps, person);
      return way && learn(poolShape(plan, way), way, plan);
    } catch (err) {
      caps = undefined; // asked again next time (the engine may have been away)
      if (deps.always) throw err;
      log.warn({ err: String(err) }, 'the pre-started pool could not serve this run; starting a container');
      return undefined;
    }
  }

  return {
    async claim(plan, log, person) {
      const shape = await shapeFor(plan, log, person);
      if (!shape) return undefined;
      if (!mayClaim(shape.way, person)) return void refill(); // learnt (containers start for the next new person), not claimed
      // Older than a warm container may be: perhaps on an image rebuilt since.
      const stale = shape.waiting.filter((w) => Date.now() - w.since > MAX_AGE_MS);
      shape.waiting = shape.waiting.filter((w) => !stale.includes(w));
      void remove(stale.map((w) => w.container.containerId));
      shape.arrivals.push(Date.now());
      for (let tries = 0; tries < CLAIM_TRIES; tries++) {
        const taken = shape.waiting.shift()?.container ?? (await nextStarted(shape)) ?? (deps.always ? await start(shape) : undefined);
        changed();
        refill();
        if (!taken) return undefined;
        const t0 = performance.now();
        try {
          const gone = await ways.take(shape, taken.containerId, plan);
          if (gone) {
            log.info(
              { container: taken.containerId.slice(0, 12), why: gone.reason },
              'a pre-started container was gone at its claim; trying another',
            );
            await remove([taken.containerId]);
            continue;
          }
        } catch (err) {
          await remove([taken.containerId]);
          if (deps.always) throw err;
          log.warn({ err: String(err), way: shape.way }, 'a pre-started container could not take the workspace; starting one');
          return undefined;
        }
        return { containerId: taken.containerId, timings: { createMs: 0, startMs: performance.now() - t0 } };
      }
      return undefined;
    },
    async forgetProject(project) {
      const gone = [...shapes].filter(([, s]) => s.blank.labels[LABELS.project] === project);
      for (const [key] of gone) shapes.delete(key);
      await remove(gone.flatMap(([, s]) => s.waiting.map((w) => w.container.containerId)));
    },
    isWaiting: (id) => [...shapes.values()].some((s) => s.waiting.some((w) => w.container.containerId === id)),
    size: count,
    async close() {
      closed = true;
      unwatch?.();
      stop();
      const ids = [...shapes.values()].flatMap((s) => s.waiting.map((w) => w.container.containerId));
      shapes.clear();
      await remove(ids);
      // A start under way ends removed, none left behind created or running; a start the engine never ends is not waited for.
      await Promise.race([idle(), new Promise((r) => setTimeout(r, CLOSE_WAIT_MS).unref())]);
      return ids.length;
    },
  };
}
