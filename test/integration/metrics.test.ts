import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { appDepsFrom, createApp, type AppSources } from '../../src/api/app.js';
import { createMetrics, type Metrics } from '../../src/base/metrics.js';
import { testHome, type TestHome } from '../helpers.js';

const ADMIN_TOKEN = 'test-admin-token-0123456789';
const METRICS_TOKEN = 'test-metrics-token-9876543210';

/** The app of a berth whose sources carry these metrics, over a real loopback socket. */
async function listen(sources: AppSources) {
  const app = createApp(appDepsFrom(sources, { token: ADMIN_TOKEN, logger: pino({ level: 'silent' }) }));
  const server = serve({ fetch: app.fetch, hostname: '127.0.0.1', port: 0 });
  await new Promise((r) => server.once('listening', r));
  return { base: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, close: () => new Promise((r) => server.close(r)) };
}

const get = (base: string, path: string, token?: string) =>
  fetch(`${base}${path}`, { headers: token ? { authorization: `Bearer ${token}` } : {} });

let h: TestHome;
let metrics: Metrics;
let server: Awaited<ReturnType<typeof listen>>;

beforeAll(async () => {
  h = testHome();
  metrics = createMetrics();
  // What the composition root will hand the app: the berth plus its metrics and the token from BERTH_METRICS_TOKEN.
  server = await listen({ ...h.berth, metrics, metricsToken: METRICS_TOKEN });
});
afterAll(async () => {
  await server?.close();
  await h[Symbol.asyncDispose]();
});

describe('GET /metrics (real HTTP server)', () => {
  it('refuses a missing or wrong token with the admin routes’ 401 body, and counts the refusals', async () => {
    for (const token of [undefined, 'wrong-token', `${METRICS_TOKEN}x`, `${ADMIN_TOKEN}x`]) {
      const res = await get(server.base, '/metrics', token);
      expect(res.status, String(token)).toBe(401);
      expect(res.headers.get('content-type')).toMatch(/^application\/json/);
      expect(await res.json()).toEqual({
        error: { code: 'UNAUTHORIZED', message: 'missing or wrong admin or metrics token', hint: 'send "Authorization: Bearer <token>"' },
      });
    }
    const body = await (await get(server.base, '/metrics', METRICS_TOKEN)).text();
    expect(body).toMatch(/^berth_auth_failures_total\{surface="metrics"\} ([4-9]|\d\d+)$/m);
  });

  it('answers the admin token and the metrics token with Prometheus text', async () => {
    for (const token of [ADMIN_TOKEN, METRICS_TOKEN]) {
      const res = await get(server.base, '/metrics', token);
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toBe('text/plain; version=0.0.4; charset=utf-8');
      const body = await res.text();
      expect(body).toContain('# TYPE berth_runs_total counter\n');
      expect(body).toContain('# TYPE berth_run_queue_wait_seconds histogram\n');
      expect(body).toContain('# TYPE berth_process_cpu_user_seconds_total counter\n');
      // Exposition format: every line is a comment or "name{labels} value" (a float, ±Inf or NaN; prom-client writes "Nan", which Prometheus reads).
      const sample = /^berth_\w+(\{[a-z_]+="[^"\n]*"(,[a-z_]+="[^"\n]*")*\})? ([-+]?(\d+(\.\d+)?(e[-+]?\d+)?|Inf)|NaN)$/i;
      for (const line of body.split('\n').filter((l) => l !== '')) {
        expect(line).toMatch(line.startsWith('#') ? /^# (HELP|TYPE) berth_\w+ .+$/ : sample);
      }
    }
  });

  it('the metrics token opens /metrics only, not the admin API', async () => {
    for (const path of ['/api/projects', '/openapi.json', '/mcp']) {
      const res = await get(server.base, path, METRICS_TOKEN);
      expect(res.status, path).toBe(401);
      expect(((await res.json()) as { error: { code: string } }).error.code).toBe('UNAUTHORIZED');
    }
  });

  it('shows what was recorded: a run, its latencies, the gauges', async () => {
    metrics.runFinished({ project: 'web', level: 'medium', kind: 'message', outcome: 'ok', warm: true });
    metrics.observeRun(1.5);
    metrics.setWarmContainers(2);
    const body = await (await get(server.base, '/metrics', METRICS_TOKEN)).text();
    expect(body).toContain('berth_runs_total{project="web",level="medium",kind="message",outcome="ok",warm="true"} 1\n');
    expect(body).toContain('berth_run_duration_seconds_bucket{le="2.5"} 1\n');
    expect(body).toContain('berth_run_duration_seconds_bucket{le="1"} 0\n');
    expect(body).toContain('berth_warm_containers 2\n');
  });

  it('is in the OpenAPI document as a token-protected operation', async () => {
    const doc = (await (await get(server.base, '/openapi.json', ADMIN_TOKEN)).json()) as {
      paths: Record<string, { get?: { security?: unknown[]; responses: Record<string, unknown> } }>;
    };
    const op = doc.paths['/metrics']?.get;
    expect(op?.security).toBeUndefined();
    expect(Object.keys(op?.responses ?? {}).sort()).toEqual(['200', '401']);
  });
});
