import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { POOLED } from '../../src/plan/pool.js';
import { RUNTIME, testHome, type TestHome } from '../helpers.js';
import { until } from '../helpers/until.js';

/**
 * The pre-started pool under a burst, on the real engine (runs/prestart-pool.ts, plan/pool-size.ts):
 * new people arriving faster than one start replaces a claim make the pool hold more than
 * runs.pool (up to pool_max), and once they stop it shrinks back to runs.pool, the extra
 * containers removed from the engine. The arrival windows are shortened (3 s, 6 s) so the test
 * does not wait out the 30 s of a real one.
 */
let h: TestHome;
const claimed = new Set<string>();
const gauge = async () => (await h.berth.metrics.registry.getSingleMetric('berth_pool_containers')?.get())?.values[0]?.value ?? 0;
/** Pool containers the engine runs that no message has claimed. */
const unclaimed = async () =>
  (await h.berth.runner.listContainers('p')).filter((c) => c.workspace === POOLED && c.state === 'running' && !claimed.has(c.id)).length;

beforeAll(() => {
  h = testHome({
    warm: true,
    pool: undefined,
    config: 'runs: { warm_idle_seconds: 120, pool: 1, pool_max: 6, engine_starts: 3, max_concurrent: 8 }\n',
    poolWindows: { shortMs: 3_000, longMs: 6_000 },
  });
  h.create({ name: 'p', workspace_isolation: true, limits: { timeout_seconds: 20 } });
});
afterAll(async () => {
  await h[Symbol.asyncDispose]();
});

describe.runIf(RUNTIME !== 'runsc')('the pre-started pool under a burst (runc)', () => {
  it('grows past runs.pool while twelve new people write at once, every one answered, and shrinks back to runs.pool once they stop', async () => {
    await h.run('p', 'web:first', 'true'); // teaches the pool the shape
    await until(async () => (await gauge()) === 1 && (await unclaimed()) === 1, 'the pool at runs.pool (1)');
    let most = 0;
    const watch = setInterval(() => void gauge().then((n) => (most = Math.max(most, n))), 20);
    try {
      const burst = await Promise.all(Array.from({ length: 12 }, (_, i) => h.run('p', `web:burst-${i}`, `echo hi-${i}`)));
      for (const [i, r] of burst.entries()) {
        expect(r.exitCode).toBe(0);
        expect(r.stdout.trim()).toBe(`hi-${i}`);
        claimed.add(r.containerId);
      }
      await until(() => most > 1, 'the pool to hold more than runs.pool');
    } finally {
      clearInterval(watch);
    }
    expect(most).toBeLessThanOrEqual(6);
    // Nobody else comes: past the long window one waits, and the engine runs no other unclaimed one.
    await until(
      async () => (await gauge()) === 1 && (await unclaimed()) === 1,
      'the pool back at runs.pool, the extra containers removed',
      60_000,
    );
  });
});
