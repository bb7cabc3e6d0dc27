import { describe, expect, it } from 'vitest';
import { arrivalRate, MAX_ARRIVALS, poolTarget, recentArrivals, refillSlots, type PoolSizing } from '../../src/plan/pool-size.js';

/** The pre-started pool's sizing (plan/pool-size.ts): how many wait per shape, how many starts are under way. */
const sizing: PoolSizing = { base: 4, max: 16, global: 8, engineStarts: 3 };
const windows = { shortMs: 2_000, longMs: 30_000 };
/** `n` arrivals spread evenly over the `ms` before `now`. */
const spread = (n: number, ms: number, now = 100_000) => Array.from({ length: n }, (_, i) => now - ms + (i * ms) / n);

describe('arrivalRate: people a millisecond, the faster of a short and a long window', () => {
  it('reads a burst from the short window at once, and a steady trickle from the long one', () => {
    // 20 people in the last 2 s: 10 a second, though the 30 s window averages it to 0.67.
    expect(arrivalRate(spread(20, 2_000), 100_000, windows)).toBeCloseTo(0.01);
    // 30 people over the last 30 s: 1 a second in the long window; the short one holds 2 of them.
    expect(arrivalRate(spread(30, 30_000), 100_000, windows)).toBeCloseTo(0.001);
  });

  it('counts nothing older than the long window, nor a time past now (a clock stepped back)', () => {
    expect(arrivalRate([100_000 - 30_000, 100_000 - 40_000, 100_001], 100_000, windows)).toBe(0);
  });
});

describe('poolTarget: containers a shape keeps waiting', () => {
  it('keeps runs.pool when nobody arrives, and when people arrive slower than one start replaces a claim', () => {
    expect(poolTarget([], 100_000, 500, sizing, windows)).toBe(4);
    // 1 a second, a start of 500 ms: 0.5 arrive during one start, twice over: 1, below the base.
    expect(poolTarget(spread(30, 30_000), 100_000, 500, sizing, windows)).toBe(4);
  });

  it('holds what arrives during one start, twice over: 10 a second and 300 ms starts → 6', () => {
    expect(poolTarget(spread(20, 2_000), 100_000, 300, { ...sizing, global: 100 }, windows)).toBe(6);
  });

  it('grows with the start time the engine shows under load, up to runs.pool_max and no more than admission runs at once', () => {
    const burst = spread(20, 2_000);
    expect(poolTarget(burst, 100_000, 700, { ...sizing, global: 100 }, windows)).toBe(14);
    expect(poolTarget(burst, 100_000, 2_000, { ...sizing, global: 100 }, windows)).toBe(16);
    expect(poolTarget(burst, 100_000, 2_000, sizing, windows)).toBe(8);
  });

  it('never below runs.pool, even where runs.pool is above pool_max or admission (the operator asked for it)', () => {
    expect(poolTarget(spread(20, 2_000), 100_000, 2_000, { base: 12, max: 10, global: 8, engineStarts: 3 }, windows)).toBe(12);
  });

  it('shrinks back to runs.pool once the burst has left both windows', () => {
    const burst = spread(50, 5_000, 100_000);
    expect(poolTarget(burst, 100_000, 700, sizing, windows)).toBe(8);
    expect(poolTarget(burst, 100_000 + 31_000, 700, sizing, windows)).toBe(4);
  });

  it('runs.pool 0 keeps no pool, however fast people arrive', () => {
    expect(poolTarget(spread(20, 2_000), 100_000, 700, { ...sizing, base: 0 }, windows)).toBe(0);
  });
});

describe('refillSlots: starts the refill may begin now', () => {
  it('as many as the engine takes at once, less those under way', () => {
    expect([0, 1, 2, 3, 4].map((inFlight) => refillSlots(inFlight, sizing, false))).toEqual([3, 2, 1, 0, 0]);
  });

  it('one at a time while runs wait for a slot (their own starts get the engine first)', () => {
    expect([0, 1, 2].map((inFlight) => refillSlots(inFlight, sizing, true))).toEqual([1, 0, 0]);
  });
});

describe('recentArrivals: what is kept to read the rate from', () => {
  it('the long window only, and at most MAX_ARRIVALS of it, the newest', () => {
    expect(recentArrivals([60_000, 70_001, 99_000], 100_000, windows)).toEqual([70_001, 99_000]);
    const many = spread(MAX_ARRIVALS + 10, 10_000);
    expect(recentArrivals(many, 100_000, windows)).toEqual(many.slice(10));
  });
});
