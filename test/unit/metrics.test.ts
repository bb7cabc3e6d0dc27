import { describe, expect, it } from 'vitest';
import { createMetrics, labelGuard, MAX_PROJECTS, noMetrics, OVERFLOW_LABEL, type Metrics } from '../../src/base/metrics.js';

/** One metric's samples as {labels, value} (prom-client's own reading of the registry). */
async function samples(m: Metrics, name: string) {
  const metric = m.registry.getSingleMetric(name);
  if (!metric) throw new Error(`no metric ${name}`);
  return (await metric.get()).values.map((v) => ({
    name: (v as { metricName?: string }).metricName ?? name,
    labels: v.labels,
    value: v.value,
  }));
}

const run = (project: string, extra: Partial<Parameters<Metrics['runFinished']>[0]> = {}) => ({
  project,
  level: 'low',
  kind: 'message' as const,
  outcome: 'ok' as const,
  warm: false,
  ...extra,
});

describe('labelGuard', () => {
  it('keeps short lowercase slugs; anything else is the overflow value', () => {
    const guard = labelGuard(10);
    expect(['web', 'a', 'team_2', 'x-1', 'a'.repeat(63)].map(guard)).toEqual(['web', 'a', 'team_2', 'x-1', 'a'.repeat(63)]);
    const refused = [
      '',
      'Web',
      '-web',
      '_web',
      'a'.repeat(64),
      'signal:+4915112345678',
      '/home/alice/projects',
      '../etc',
      'web\n# TYPE',
      'ünï',
      'a b',
    ];
    expect(refused.map(guard)).toEqual(refused.map(() => OVERFLOW_LABEL));
  });

  it('keeps at most max distinct values; ones seen before stay themselves', () => {
    const guard = labelGuard(2);
    expect(['a', 'b', 'c', 'a', 'b', 'd'].map(guard)).toEqual(['a', 'b', OVERFLOW_LABEL, 'a', 'b', OVERFLOW_LABEL]);
  });
});

describe('createMetrics', () => {
  it('counts runs by project, level, kind, outcome and warm', async () => {
    const m = createMetrics({ processMetrics: false });
    m.runFinished(run('web'));
    m.runFinished(run('web'));
    m.runFinished(run('web', { level: 'high', kind: 'shell_tool', outcome: 'timeout', warm: true }));
    expect(await samples(m, 'berth_runs_total')).toEqual([
      { name: 'berth_runs_total', labels: { project: 'web', level: 'low', kind: 'message', outcome: 'ok', warm: 'false' }, value: 2 },
      {
        name: 'berth_runs_total',
        labels: { project: 'web', level: 'high', kind: 'shell_tool', outcome: 'timeout', warm: 'true' },
        value: 1,
      },
    ]);
  });

  it(`keeps ${MAX_PROJECTS} project label values, the rest (and unsafe ones) count as "${OVERFLOW_LABEL}"`, async () => {
    const m = createMetrics({ processMetrics: false });
    for (let i = 0; i < MAX_PROJECTS + 50; i++) m.runFinished(run(`p${i}`));
    m.runFinished(run('p0')); // known before the cap: still itself
    m.runFinished(run('tenant:signal:+49151/../../etc'));
    m.sandboxViolation('p1');
    m.sandboxViolation(`p${MAX_PROJECTS + 1}`);
    const runs = await samples(m, 'berth_runs_total');
    const projects = new Set(runs.map((s) => s.labels.project));
    expect(projects.size).toBe(MAX_PROJECTS + 1);
    expect(runs.find((s) => s.labels.project === 'p0')?.value).toBe(2);
    expect(runs.find((s) => s.labels.project === OVERFLOW_LABEL)?.value).toBe(51);
    expect(runs.some((s) => String(s.labels.project).includes(':'))).toBe(false);
    // The cap is shared by every metric with a project label.
    expect((await samples(m, 'berth_sandbox_violations_total')).map((s) => [s.labels.project, s.value])).toEqual([
      ['p1', 1],
      [OVERFLOW_LABEL, 1],
    ]);
  });

  it('histograms observe into 5 ms … 10 min buckets; bad values are dropped, never thrown', async () => {
    const m = createMetrics({ processMetrics: false });
    m.observeQueueWait(0.003);
    m.observeQueueWait(42);
    m.observeQueueWait(Number.NaN);
    m.observeQueueWait(-1);
    m.observeContainerStart(0.02, true);
    m.observeContainerStart(3, false);
    m.observeRun(700);
    m.observeRun(Number.POSITIVE_INFINITY);
    const wait = await samples(m, 'berth_run_queue_wait_seconds');
    const bucket = (le: number | string) => wait.find((s) => s.name.endsWith('_bucket') && s.labels.le === le)?.value;
    expect([bucket(0.005), bucket(30), bucket(60), bucket(600), bucket('+Inf')]).toEqual([1, 1, 2, 2, 2]);
    expect(wait.find((s) => s.name.endsWith('_sum'))?.value).toBeCloseTo(42.003);
    expect(wait.find((s) => s.name.endsWith('_count'))?.value).toBe(2);
    const start = await samples(m, 'berth_container_start_seconds');
    expect(start.filter((s) => s.name.endsWith('_count')).map((s) => [s.labels.warm, s.value])).toEqual([
      ['true', 1],
      ['false', 1],
    ]);
    const runs = await samples(m, 'berth_run_duration_seconds');
    expect(
      runs
        .filter((s) => s.name.endsWith('_bucket'))
        .map((s) => [s.labels.le, s.value])
        .slice(-2),
    ).toEqual([
      [600, 0],
      ['+Inf', 1],
    ]);
  });

  it('gauges hold the last value set; invalid ones leave it', async () => {
    const m = createMetrics({ processMetrics: false });
    m.setQueueDepth(3);
    m.setQueueDepth(Number.NaN);
    m.setRunsInFlight(2);
    m.setWarmContainers(5);
    m.setWarmContainers(4);
    expect((await samples(m, 'berth_run_queue_depth'))[0]?.value).toBe(3);
    expect((await samples(m, 'berth_runs_in_flight'))[0]?.value).toBe(2);
    expect((await samples(m, 'berth_warm_containers'))[0]?.value).toBe(4);
  });

  it('renders every berth metric and the process metrics in Prometheus text', async () => {
    const m = createMetrics();
    m.runFinished(run('web'));
    m.permissionDenied('gateway');
    m.gatewayCall({ kind: 'model', outcome: 'refused' });
    m.authFailure('http');
    m.authFailure('Bearer secret-token'); // not a slug: never echoed
    const { contentType, body } = await m.render();
    expect(contentType).toBe('text/plain; version=0.0.4; charset=utf-8');
    for (const [name, type] of [
      ['berth_runs_total', 'counter'],
      ['berth_run_queue_wait_seconds', 'histogram'],
      ['berth_container_start_seconds', 'histogram'],
      ['berth_run_duration_seconds', 'histogram'],
      ['berth_run_queue_depth', 'gauge'],
      ['berth_runs_in_flight', 'gauge'],
      ['berth_warm_containers', 'gauge'],
      ['berth_sandbox_violations_total', 'counter'],
      ['berth_receipt_violations_total', 'counter'],
      ['berth_permission_denials_total', 'counter'],
      ['berth_gateway_calls_total', 'counter'],
      ['berth_auth_failures_total', 'counter'],
      ['berth_process_cpu_user_seconds_total', 'counter'],
      ['berth_nodejs_heap_size_used_bytes', 'gauge'],
    ]) {
      expect(body, name).toContain(`# TYPE ${name} ${type}\n`);
    }
    expect(body).toContain('berth_runs_total{project="web",level="low",kind="message",outcome="ok",warm="false"} 1\n');
    expect(body).toContain('berth_permission_denials_total{surface="gateway"} 1\n');
    expect(body).toContain('berth_gateway_calls_total{kind="model",outcome="refused"} 1\n');
    expect(body).toContain(`berth_auth_failures_total{surface="${OVERFLOW_LABEL}"} 1\n`);
    expect(body).not.toContain('secret-token');
    // Every sample line is a berth_ metric: nothing unprefixed leaks in.
    const names = body
      .split('\n')
      .filter((l) => l && !l.startsWith('#'))
      .map((l) => l.split(/[{ ]/)[0]);
    expect(names.filter((n) => !n?.startsWith('berth_'))).toEqual([]);
  });

  it('two registries count apart (several berths or tests in one process)', async () => {
    const a = createMetrics();
    const b = createMetrics();
    a.runFinished(run('web'));
    a.runFinished(run('web'));
    b.runFinished(run('api'));
    expect((await samples(a, 'berth_runs_total')).map((s) => [s.labels.project, s.value])).toEqual([['web', 2]]);
    expect((await samples(b, 'berth_runs_total')).map((s) => [s.labels.project, s.value])).toEqual([['api', 1]]);
    expect(a.registry).not.toBe(b.registry);
  });
});

describe('noMetrics', () => {
  it('takes every call and renders nothing', async () => {
    const m = noMetrics();
    m.runFinished(run('web'));
    m.observeQueueWait(1);
    m.observeContainerStart(1, true);
    m.observeRun(1);
    m.setQueueDepth(1);
    m.setRunsInFlight(1);
    m.setWarmContainers(1);
    m.sandboxViolation('web');
    m.permissionDenied('mcp');
    m.gatewayCall({ kind: 'egress', outcome: 'allowed' });
    m.authFailure('http');
    expect(await m.render()).toEqual({ contentType: 'text/plain; version=0.0.4; charset=utf-8', body: '' });
  });
});
