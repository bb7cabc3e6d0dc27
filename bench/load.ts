/**
 * Speed and scale (issue 13), against bare dockerode measured in the same process and run:
 * 1. a warm message (library and HTTP API, level low, `true`) against a bare exec into a running container;
 * 2. memory of an idle warm session (its container's cgroup plus berth's own heap, per session);
 * 3. 100 tenants × 5 messages through the HTTP API at concurrency 20 — cold (a container per
 *    message), warm (each session's container kept) — against bare create/start/wait/remove;
 * 4. fairness: one tenant sends 200 messages at once; how much later is another tenant's one?
 * BENCH_TENANTS / BENCH_MESSAGES / BENCH_CONCURRENCY / BENCH_ITERATIONS shrink it.
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

const TENANTS = Number(process.env.BENCH_TENANTS ?? 100);
const MESSAGES = Number(process.env.BENCH_MESSAGES ?? 5);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 20);
const ITERATIONS = Number(process.env.BENCH_ITERATIONS ?? 30);
const BURST = 200;
const TOKEN = 'bench-token-0123456789abcdef';
const docker = new Docker();
const homes: string[] = [];
/** Every berth served here: drained at the end, so their warm containers' idle timers do not keep the process up. */
const served: Berth[] = [];

async function serveBerth(config: string, warm: boolean) {
  const home = fs.realpathSync(fs.mkdtempSync(join(os.tmpdir(), 'berth-bench-load-')));
  homes.push(home);
  fs.writeFileSync(join(home, 'berth.yaml'), config);
  const berth = createBerth({ home, logLevel: 'silent', warm });
  served.push(berth);
  berth.store.create({ name: 'load', workspace_isolation: true });
  const app = createApp(appDepsFrom(berth, { token: TOKEN, logger: pino({ level: 'silent' }) }));
  const server = serve({ fetch: app.fetch, hostname: '127.0.0.1', port: 0 });
  await new Promise((r) => server.once('listening', r));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const message = async (user: string, text = 'true') => {
    const res = await fetch(`${base}/api/projects/load/runs`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ user, message: text, level: 'low' }),
    });
    const body = (await res.json()) as { exit_code?: number; warm?: boolean };
    return { status: res.status, body };
  };
  return { berth, message, close: () => server.close() };
}

/** `jobs` run by `workers` at once; failures counted, never thrown. */
async function pool<T>(jobs: T[], workers: number, fn: (job: T) => Promise<boolean>): Promise<{ ms: number; failures: number }> {
  let next = 0;
  let failures = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: workers }, async () => {
      while (next < jobs.length) {
        const job = jobs[next++] as T;
        if (!(await fn(job).catch(() => false))) failures++;
      }
    }),
  );
  return { ms: performance.now() - t0, failures };
}

/** Message-major: every tenant's first message, then every tenant's second, ... */
const jobs = Array.from({ length: TENANTS * MESSAGES }, (_, i) => `bench:t${i % TENANTS}`);

async function cgroupMemory(id: string): Promise<number> {
  const { State } = await docker.getContainer(id).inspect();
  const line = fs
    .readFileSync(`/proc/${State.Pid}/cgroup`, 'utf8')
    .split('\n')
    .find((l) => l.includes(':memory:'));
  const path = line?.split(':')[2];
  return Number(fs.readFileSync(`/sys/fs/cgroup/memory${path}/memory.usage_in_bytes`, 'utf8'));
}

const rows: string[] = [];
try {
  // 1. A warm message against a bare exec into a running container, interleaved.
  console.error(`berth bench (load): warm message vs bare exec, ${ITERATIONS} rounds ...`);
  const warmBerth = await serveBerth('runs: { warm_idle_seconds: 600, warm_max: 500 }\n', true);
  const bareIdle = await docker.createContainer({ Image: BENCH_IMAGE, Cmd: ['berth-bridge', 'idle'], HostConfig: { NetworkMode: 'none' } });
  await bareIdle.start();
  const warmTimes: number[] = [];
  const libTimes: number[] = [];
  const bareExecTimes: number[] = [];
  const lib = () => warmBerth.berth.runner.run({ project: 'load', tenantKey: 'bench:lib', message: 'true', level: 'low' });
  await warmBerth.message('bench:warm'); // their containers
  await lib();
  for (let i = 0; i < ITERATIONS + 2; i++) {
    let t0 = performance.now();
    const r = await warmBerth.message('bench:warm');
    if (r.status !== 200 || !r.body.warm) throw new Error(`warm message answered ${r.status} (warm: ${r.body.warm})`);
    if (i >= 2) warmTimes.push(performance.now() - t0);
    t0 = performance.now();
    if (!(await lib()).warm) throw new Error('the library message was not warm');
    if (i >= 2) libTimes.push(performance.now() - t0);
    t0 = performance.now();
    await bareExec(bareIdle);
    if (i >= 2) bareExecTimes.push(performance.now() - t0);
  }
  await bareIdle.remove({ force: true });
  const w = summary(warmTimes);
  const wl = summary(libTimes);
  const be = summary(bareExecTimes);

  // 2. Memory of idle warm sessions: their containers' cgroups, and berth's heap per session.
  const SESSIONS = 20;
  global.gc?.();
  const heapBefore = process.memoryUsage().heapUsed;
  const ids: string[] = [];
  for (let i = 0; i < SESSIONS; i++) {
    const r = await warmBerth.message(`bench:idle${i}`, 'true');
    if (r.status !== 200) throw new Error(`idle session ${i}: ${r.status}`);
  }
  for (const c of await warmBerth.berth.runner.listContainers('load')) ids.push(c.id);
  global.gc?.();
  const heapPer = Math.max(0, process.memoryUsage().heapUsed - heapBefore) / SESSIONS;
  const cgroups = await Promise.all(ids.map(cgroupMemory));
  const cgroupMean = cgroups.reduce((a, b) => a + b, 0) / cgroups.length;
  await warmBerth.berth.runner.releaseWarm();

  // 3. 100 tenants × 5 messages at concurrency 20: bare, berth cold, berth warm.
  console.error(`berth bench (load): ${TENANTS} tenants × ${MESSAGES} messages at concurrency ${CONCURRENCY}: bare, cold, warm ...`);
  const bare = await pool(jobs, CONCURRENCY, async () => {
    await bareRun(docker, 'true');
    return true;
  });
  const coldBerth = await serveBerth('runs: { warm_idle_seconds: 0 }\n', false);
  const cold = await pool(jobs, CONCURRENCY, async (user) => (await coldBerth.message(user)).body.exit_code === 0);
  const warm = await pool(jobs, CONCURRENCY, async (user) => (await warmBerth.message(user)).body.exit_code === 0);
  const warmKept = (await warmBerth.berth.runner.listContainers('load')).length;
  await warmBerth.berth.runner.releaseWarm();

  // 4. Fairness: a quiet tenant's one message, alone and while a noisy tenant sends 200 at once.
  console.error(`berth bench (load): fairness, ${BURST} messages at once from one tenant ...`);
  const quietAlone: number[] = [];
  for (let i = 0; i < 5; i++) {
    const t0 = performance.now();
    await coldBerth.message('bench:quiet');
    quietAlone.push(performance.now() - t0);
  }
  const burst = Array.from({ length: BURST }, () => coldBerth.message('bench:noisy', 'sleep 1'));
  await new Promise((r) => setTimeout(r, 200));
  const t0 = performance.now();
  const quiet = await coldBerth.message('bench:quiet');
  const quietUnderBurst = performance.now() - t0;
  const noisy = await Promise.all(burst);
  const busy = noisy.filter((n) => n.status === 429).length;
  const ran = noisy.filter((n) => n.status === 200).length;
  if (quiet.status !== 200) throw new Error(`the quiet tenant's message answered ${quiet.status}`);
  const alone = summary(quietAlone).p50;
  coldBerth.close();
  warmBerth.close();

  rows.push(`\n| measure | value | against bare | target |`, `| --- | --- | --- | --- |`);
  rows.push(`| bare dockerode exec into a running container (\`true\`) | p50 ${fmt(be.p50)}, p95 ${fmt(be.p95)} | 1.00 | |`);
  rows.push(
    `| warm message, \`runner.run()\` (\`true\`, level low: admission, journal, workspace, plan, gateway socket, exec, leftover check, record) | p50 ${fmt(wl.p50)}, p95 ${fmt(wl.p95)} | ${(wl.p50 / be.p50).toFixed(2)} (p50) | ≤ 1.2 |`,
  );
  rows.push(
    `| the same over HTTP, POST /api/projects/:name/runs | p50 ${fmt(w.p50)}, p95 ${fmt(w.p95)} | ${(w.p50 / be.p50).toFixed(2)} (p50) | |`,
  );
  rows.push(`| idle warm session: container cgroup memory | ${(cgroupMean / 2 ** 20).toFixed(2)} MiB (mean of ${cgroups.length}) | | |`);
  rows.push(`| idle warm session: berth's heap | ${(heapPer / 1024).toFixed(1)} KiB | | sum ≤ 20 MiB |`);
  rows.push(
    `| ${TENANTS * MESSAGES} runs (${TENANTS} tenants × ${MESSAGES}) at concurrency ${CONCURRENCY}, bare create/start/wait/remove | ${(bare.ms / 1000).toFixed(1)} s, ${bare.failures} failed | 1.00 | |`,
  );
  rows.push(
    `| the same through the HTTP API, cold | ${(cold.ms / 1000).toFixed(1)} s, ${cold.failures} failed | ${(cold.ms / bare.ms).toFixed(2)} | ≤ 1.2, 0 failed |`,
  );
  rows.push(
    `| the same through the HTTP API, warm (${warmKept} kept after) | ${(warm.ms / 1000).toFixed(1)} s, ${warm.failures} failed | ${(warm.ms / bare.ms).toFixed(2)} | ≤ 0.5, 0 failed |`,
  );
  rows.push(
    `| a quiet tenant's message while another sends ${BURST} at once (${ran} ran, ${busy} got 429) | ${fmt(quietUnderBurst)} (alone: ${fmt(alone)}) | +${fmt(quietUnderBurst - alone)} | < one run (${fmt(alone)}) |`,
  );
  console.log(rows.join('\n'));
} finally {
  for (const b of served) await b.runner.drain(5000);
  for (const home of homes) {
    const b: Berth = createBerth({ home, logLevel: 'silent' });
    await b.runner.reapLeftovers();
    fs.rmSync(home, { recursive: true, force: true });
  }
}
