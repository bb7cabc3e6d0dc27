/**
 * A new person's first message, as they feel it, against bare Docker measured in the same run
 * (issue 24, item 2a): POST /api/projects/:name/runs for a tenant berth has never seen (shell
 * preset, `true`, level low), through the HTTP API of a berth with warm containers,
 * - with the pre-started pool warm (runs.pool; each round waits until it is refilled),
 * - without a pool (runs.pool: 0: the message creates and starts its container),
 * against a bare dockerode `docker run` (create/start/wait/remove) and a bare `docker exec` into a
 * running container of the same image and command, interleaved round by round. Then a burst: 50
 * new people in 5 s against a warm pool (refills and admission under load).
 */
import fs from 'node:fs';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import { join } from 'node:path';
import { serve } from '@hono/node-server';
import Docker from 'dockerode';
import { pino } from 'pino';
import { appDepsFrom, createApp } from '../src/api/app.js';
import { createBerth, type Berth } from '../src/main.js';
import { BENCH_IMAGE, bareExec, bareRun } from './bare.js';
import { fmt, summary } from './stats.js';

const ROUNDS = Number(process.env.BENCH_ITERATIONS ?? 30);
const POOL = Number(process.env.BENCH_POOL ?? 4);
const BURST = 50;
const BURST_SECONDS = 5;
const TOKEN = 'bench-token-0123456789abcdef';
const docker = new Docker();

interface Server {
  berth: Berth;
  base: string;
  close(): Promise<void>;
}

async function start(pool: number): Promise<Server> {
  const home = fs.mkdtempSync(join(os.tmpdir(), 'berth-bench-first-'));
  fs.writeFileSync(join(home, 'berth.yaml'), `runs: { pool: ${pool}, warm_idle_seconds: 600, max_concurrent: 8, per_tenant: 2 }\n`);
  const berth = createBerth({ home, logLevel: 'silent', warm: true });
  berth.store.create({ name: 'bench', workspace_isolation: true });
  const app = createApp(appDepsFrom(berth, { token: TOKEN, logger: pino({ level: 'silent' }) }));
  const server = serve({ fetch: app.fetch, hostname: '127.0.0.1', port: 0 });
  await new Promise((r) => server.once('listening', r));
  return {
    berth,
    base: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    async close() {
      server.close();
      await berth.runner.drain(5000);
      await berth.runner.reapLeftovers();
      fs.rmSync(home, { recursive: true, force: true });
    },
  };
}

let tenant = 0;
/** One new person's first message; its round trip in ms. */
async function firstMessage(s: Server): Promise<number> {
  const t0 = performance.now();
  const res = await fetch(`${s.base}/api/projects/bench/runs`, {
    method: 'POST',
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify({ user: `bench:new-${++tenant}`, message: 'true', level: 'low' }),
  });
  const body = (await res.json()) as { exit_code?: number };
  const ms = performance.now() - t0;
  if (res.status !== 200 || body.exit_code !== 0) throw new Error(`a first message answered ${res.status}: ${JSON.stringify(body)}`);
  return ms;
}

async function poolSize(s: Server): Promise<number> {
  return (await s.berth.metrics.registry.getSingleMetric('berth_pool_containers')?.get())?.values[0]?.value ?? 0;
}

async function refilled(s: Server, n: number): Promise<void> {
  const end = Date.now() + 60_000;
  while ((await poolSize(s)) < n) {
    if (Date.now() > end) throw new Error(`the pool did not refill to ${n} within 60 s`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

const idle = await docker.createContainer({ Image: BENCH_IMAGE, Cmd: ['sleep', '3600'], HostConfig: { NetworkMode: 'none' } });
await idle.start();
const pooled = await start(POOL);
const cold = await start(0);
try {
  console.error(
    `berth bench (first message): ${ROUNDS} interleaved rounds (pool of ${POOL}, no pool, bare run, bare exec), then ${BURST} new people in ${BURST_SECONDS} s ...`,
  );
  // Each server's first session teaches it the shape (and builds the mount helper).
  await firstMessage(pooled);
  await firstMessage(cold);
  await refilled(pooled, POOL);
  const t = { pool: [] as number[], cold: [] as number[], run: [] as number[], exec: [] as number[] };
  for (let i = 0; i < ROUNDS + 2; i++) {
    const keep = i >= 2;
    await refilled(pooled, POOL);
    const p = await firstMessage(pooled);
    const c = await firstMessage(cold);
    let t0 = performance.now();
    await bareRun(docker, 'true');
    const r = performance.now() - t0;
    t0 = performance.now();
    await bareExec(idle);
    const e = performance.now() - t0;
    if (keep) {
      t.pool.push(p);
      t.cold.push(c);
      t.run.push(r);
      t.exec.push(e);
    }
  }
  // The burst: one new person every 100 ms for 5 s, each answered whenever it is.
  await refilled(pooled, POOL);
  const burst = await Promise.all(
    Array.from({ length: BURST }, async (_, i) => {
      await new Promise((r) => setTimeout(r, (i * BURST_SECONDS * 1000) / BURST));
      return firstMessage(pooled);
    }),
  );

  const run = summary(t.run);
  const exec = summary(t.exec);
  const row = (what: string, v: number[]) => {
    const s = summary(v);
    return `| ${what} | ${fmt(s.p50)} | ${fmt(s.p95)} | ${fmt(s.p99)} | ${(s.p50 / run.p50).toFixed(2)} | ${(s.p50 / exec.p50).toFixed(2)} |`;
  };
  console.log(
    `\n| measure (${ROUNDS} rounds; burst: ${BURST} in ${BURST_SECONDS} s) | p50 | p95 | p99 | p50 ÷ bare run | p50 ÷ bare exec |`,
  );
  console.log('| --- | --- | --- | --- | --- | --- |');
  console.log(row('bare dockerode run of `true` (create, start, wait, remove)', t.run));
  console.log(row('bare dockerode exec of `true` into a running container', t.exec));
  console.log(row(`new person's first message over HTTP, pool of ${POOL} warm`, t.pool));
  console.log(row("new person's first message over HTTP, no pool", t.cold));
  console.log(row(`burst: ${BURST} new people in ${BURST_SECONDS} s, pool of ${POOL}`, burst));
  const p = summary(t.pool);
  const b = summary(burst);
  console.log(
    `\ntargets: pool warm p50 ≤ 100 ms: ${fmt(p.p50)} ${p.p50 <= 100 ? 'met' : 'MISSED'}; p99 ≤ 250 ms: ${fmt(p.p99)} ${p.p99 <= 250 ? 'met' : 'MISSED'}; burst p99 ≤ 1 s: ${fmt(b.p99)} ${b.p99 <= 1000 ? 'met' : 'MISSED'}; bare exec p50 ${fmt(exec.p50)}`,
  );
} finally {
  await pooled.close();
  await cold.close();
  await idle.remove({ force: true });
}
