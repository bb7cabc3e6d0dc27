/**
 * The admin API under load, against bare Docker measured in the same run:
 * - GET /api/projects/:name: p50/p99 latency and requests/s with 8 concurrent clients;
 * - POST /api/projects/:name/runs (shell preset, `true`, level low = network none): round trip, interleaved with a bare
 *   dockerode create/start/wait/remove of the same image and command.
 */
import fs from 'node:fs';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import { join } from 'node:path';
import { serve } from '@hono/node-server';
import Docker from 'dockerode';
import { pino } from 'pino';
import { appDepsFrom, createApp } from '../src/api/app.js';
import { createBerth } from '../src/main.js';
import { bareRun } from './bare.js';
import { fmt, summary } from './stats.js';

const GET_SECONDS = Number(process.env.BENCH_GET_SECONDS ?? 3);
const RUNS = Number(process.env.BENCH_ITERATIONS ?? 20);
const TOKEN = 'bench-token-0123456789abcdef';

const home = fs.mkdtempSync(join(os.tmpdir(), 'berth-bench-api-'));
const berth = createBerth({ home, logLevel: 'silent' });
berth.store.create({ name: 'bench', workspace_isolation: true, protected_paths: ['AGENTS.md'] });
const app = createApp(appDepsFrom(berth, { token: TOKEN, logger: pino({ level: 'silent' }) }));
const server = serve({ fetch: app.fetch, hostname: '127.0.0.1', port: 0 });
await new Promise((r) => server.once('listening', r));
const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
const headers = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };
const docker = new Docker();

try {
  console.error(`berth bench (API): GET for ${GET_SECONDS}s with 8 clients, then ${RUNS} interleaved run round trips ...`);
  const latencies: number[] = [];
  const deadline = performance.now() + GET_SECONDS * 1000;
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      while (performance.now() < deadline) {
        const t0 = performance.now();
        const res = await fetch(`${base}/api/projects/bench`, { headers });
        await res.arrayBuffer();
        if (res.status !== 200) throw new Error(`GET answered ${res.status}`);
        latencies.push(performance.now() - t0);
      }
    }),
  );
  const get = summary(latencies);

  const runs: number[] = [];
  const bare: number[] = [];
  for (let i = 0; i < RUNS + 2; i++) {
    let t0 = performance.now();
    const res = await fetch(`${base}/api/projects/bench/runs`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ user: 'bench:user', message: 'true', level: 'low' }),
    });
    await res.json();
    if (i >= 2) runs.push(performance.now() - t0);
    t0 = performance.now();
    await bareRun(docker, 'true');
    if (i >= 2) bare.push(performance.now() - t0);
  }
  const r = summary(runs);
  const b = summary(bare);
  console.log(`\n| measure | p50 | p99 | throughput / ratio |`);
  console.log(`| --- | --- | --- | --- |`);
  console.log(
    `| GET /api/projects/:name (8 clients) | ${fmt(get.p50)} | ${fmt(get.p99)} | ${Math.round(latencies.length / GET_SECONDS)} req/s |`,
  );
  console.log(`| bare dockerode run of \`true\` | ${fmt(b.p50)} | ${fmt(b.p99)} | 1.00 |`);
  console.log(
    `| POST /api/projects/:name/runs round trip | ${fmt(r.p50)} | ${fmt(r.p99)} | ${(r.p50 / b.p50).toFixed(2)} (p50), ${(r.p99 / b.p99).toFixed(2)} (p99) |`,
  );
} finally {
  server.close();
  await berth.runner.reapLeftovers();
  fs.rmSync(home, { recursive: true, force: true });
}
