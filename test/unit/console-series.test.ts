import { describe, expect, it } from 'vitest';
import { createMetricsHistory } from '../../src/admin/metrics-history.js';
import { seriesOf } from '../../src/api/console/state.js';
import { createMetrics } from '../../src/base/metrics.js';

const NOW = Date.parse('2026-11-24T12:30:30Z');
const at = (minutesAgo: number) => new Date(NOW - minutesAgo * 60_000).toISOString();
const run = (minutesAgo: number, total: number) => ({ finished_at: at(minutesAgo), timings_ms: { create: 0, start: 0, run: 0, total } });

describe("the console's last hour", () => {
  it('runs per minute and their p50/p95 from the run records; nothing older than the hour', () => {
    const s = seriesOf([run(0, 100), run(0, 300), run(0, 200), run(5, 50), run(61, 9999)], [], NOW);
    expect(s.minutes).toHaveLength(60);
    expect(s.minutes.at(-1)).toBe(Math.floor(NOW / 60_000) * 60);
    expect(s.runs.at(-1)).toBe(3);
    expect([s.p50_ms.at(-1), s.p95_ms.at(-1)]).toEqual([200, 300]);
    expect(s.runs.at(-6)).toBe(1);
    expect(s.runs.reduce((a, b) => a + b, 0)).toBe(4);
    expect(s.p50_ms[0]).toBeNull();
  });

  it('warm containers and refusals per minute from the samples (refusals as increments of the counter)', async () => {
    const metrics = createMetrics({ processMetrics: false });
    let clock = NOW - 90_000;
    const history = createMetricsHistory(metrics.registry, { everyMs: 3600_000, now: () => clock });
    metrics.setWarmContainers(2);
    await history.sample();
    clock = NOW - 10_000;
    metrics.setWarmContainers(3);
    metrics.authFailure('http');
    metrics.permissionDenied('http');
    metrics.gatewayCall({ kind: 'egress', outcome: 'refused' });
    metrics.gatewayCall({ kind: 'egress', outcome: 'allowed' });
    await history.sample();
    history.stop();
    const s = seriesOf([], history.samples(), NOW);
    expect([s.warm.at(-2), s.warm.at(-1)]).toEqual([2, 3]);
    expect([s.refusals.at(-2), s.refusals.at(-1)]).toEqual([0, 3]);
  });
});
