/**
 * How many pre-started containers a shape keeps, and how many starts the refill may have under
 * way, as data (runs/prestart-pool.ts carries it out). A burst of new people drains a pool of a
 * fixed size in a second; sized from the recent arrival rate, the pool holds what arrives while
 * one refill start is under way, and shrinks back to its configured size once the arrivals stop.
 * Pure: the arrivals, the clock and the measured start time come in.
 */

/** What bounds the pool: berth.yaml runs.pool (its floor), runs.pool_max, admission's global limit, runs.engine_starts. */
export interface PoolSizing {
  /** Containers kept per shape when nobody arrives (runs.pool); 0: no pool at all. */
  base: number;
  /** Containers kept per shape at most, however fast people arrive (runs.pool_max). */
  max: number;
  /** Runs in flight at once on this host (admission): more waiting containers than runs could use is waste. */
  global: number;
  /** Container starts the engine takes at once before each start only gets slower (runs.engine_starts). */
  engineStarts: number;
}

/**
 * The windows the arrival rate is read over: the short one so a burst is seen within a second or
 * two, the long one so the pool stays sized while it lasts, and shrinks back once it is over.
 */
export interface RateWindows {
  shortMs: number;
  longMs: number;
}

export const RATE_WINDOWS: RateWindows = { shortMs: 2_000, longMs: 30_000 };

/**
 * Arrivals are uneven (a chat group, a shared link): the pool holds twice what arrives on
 * average while one start is under way.
 */
export const HEADROOM = 2;

/** Arrivals kept per shape to read the rate from (the long window at 10 a second is 300). */
export const MAX_ARRIVALS = 512;

/** People arriving per millisecond: the faster of the two windows' rates. */
export function arrivalRate(arrivals: readonly number[], now: number, windows: RateWindows = RATE_WINDOWS): number {
  const within = (ms: number) => arrivals.filter((t) => t <= now && now - t < ms).length / ms;
  return Math.max(within(windows.shortMs), within(windows.longMs));
}

/**
 * Containers a shape keeps waiting now: what arrives while a start is under way (`startMs`, as
 * measured lately), with headroom; never below runs.pool, never above runs.pool_max nor what
 * admission lets run at once (unless runs.pool itself is higher: the operator asked for it).
 */
export function poolTarget(
  arrivals: readonly number[],
  now: number,
  startMs: number,
  sizing: PoolSizing,
  windows: RateWindows = RATE_WINDOWS,
): number {
  if (sizing.base <= 0) return 0;
  const ahead = Math.ceil(arrivalRate(arrivals, now, windows) * Math.max(0, startMs) * HEADROOM);
  const cap = Math.max(sizing.base, Math.min(sizing.max, sizing.global));
  return Math.min(cap, Math.max(sizing.base, ahead));
}

/**
 * Starts the refill may begin now, with `inFlight` under way: as many as the engine takes at once;
 * while runs wait for a slot (admission's queue) one at a time, so those runs' own starts get the
 * engine first and the pool still moves.
 */
export function refillSlots(inFlight: number, sizing: Pick<PoolSizing, 'engineStarts'>, runsWaiting: boolean): number {
  const budget = runsWaiting ? 1 : Math.max(1, sizing.engineStarts);
  return Math.max(0, budget - inFlight);
}

/** Arrivals still worth keeping: inside the long window, the newest MAX_ARRIVALS. */
export function recentArrivals(arrivals: readonly number[], now: number, windows: RateWindows = RATE_WINDOWS): number[] {
  return arrivals.filter((t) => t <= now && now - t < windows.longMs).slice(-MAX_ARRIVALS);
}
