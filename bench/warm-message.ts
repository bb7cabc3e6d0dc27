/**
 * A returning person's message (issue 45 item 3: over HTTP ≤ 1.15× a bare exec): the shell preset's
 * `true` at level low into the session's warm container, through `runner.run()` and through
 * `POST /api/projects/:name/runs`, interleaved with a bare dockerode exec into a running container.
 * BENCH_REPEATS runs of BENCH_ITERATIONS rounds each, a ratio per run: on a shared machine the
 * range says more than one figure.
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
import { BENCH_IMAGE, bareExec } from './bare.js';
import { fmt, summary } from './stats.js';

const ROUNDS = Number(process.env.BENCH_ITERATIONS ?? 40);
const REPEATS = Number(process.env.BENCH_REPEATS ?? 3);
const TOKEN = 'bench-token-0123456789abcdef';
const docker = new Docker();
const home = fs.realpathSync(fs.mkdtempSync(join(os.tmpdir(), 'berth-bench-warm-')));
fs.writeFileSync(join(home, 'berth.yaml'), 'runs: { warm_idle_seconds: 600, pool: 0 }\n');
const berth = createBerth({ home, logLevel: 'silent', warm: true });
berth.store.create({ name: 'warm', workspace_isolation: true });
const app = createApp(appDepsFrom(berth, { token: TOKEN, logger: pino({ level: 'silent' }) }));
const server = serve({ fetch: app.fetch, hostname: '127.0.0.1', port: 0 });
await new Promise((r) => server.once('listening', r));
const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

/** One message over HTTP; after the first, it must have gone to the warm container. */
async function overHttp(mustBeWarm = true): Promise<void> {
  const res = await fetch(`${base}/api/projects/warm/runs`, {
    method: 'POST',
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify({ user: 'bench:http', message: 'true', level: 'low' }),
  });
  const body = (await res.json()) as { warm?: boolean; exit_code?: number };
  if (res.status !== 200 || body.exit_code !== 0 || (mustBeWarm && !body.warm)) throw new Error(`a message answered ${res.status}`);
}
async function inProcess(mustBeWarm = true): Promise<void> {
  const out = await berth.runner.run({ project: 'warm', tenantKey: 'bench:lib', message: 'true', level: 'low' });
  if (out.exitCode !== 0 || (mustBeWarm && !out.warm)) throw new Error(`a message ended ${out.exitCode} (warm: ${out.warm})`);
}
const timed = async (fn: () => Promise<void>) => {
  const t0 = performance.now();
  await fn();
  return performance.now() - t0;
};

const idle = await docker.createContainer({ Image: BENCH_IMAGE, Cmd: ['berth-bridge', 'idle'], HostConfig: { NetworkMode: 'none' } });
await idle.start();
try {
  console.error(
    `berth bench (warm message): ${REPEATS} runs of ${ROUNDS} rounds, each a bare exec, a message in process and one over HTTP ...`,
  );
  await overHttp(false); // their containers
  await inProcess(false);
  const rows: string[] = [];
  const ratios = { lib: [] as number[], http: [] as number[] };
  for (let r = 0; r < REPEATS; r++) {
    const bare: number[] = [];
    const lib: number[] = [];
    const http: number[] = [];
    for (let i = 0; i < ROUNDS; i++) {
      bare.push(await timed(() => bareExec(idle)));
      lib.push(await timed(() => inProcess()));
      http.push(await timed(() => overHttp()));
    }
    const [b, l, h] = [summary(bare), summary(lib), summary(http)];
    ratios.lib.push(l.p50 / b.p50);
    ratios.http.push(h.p50 / b.p50);
    rows.push(
      `| ${r + 1} | ${fmt(b.p50)} | ${fmt(l.p50)} (${(l.p50 / b.p50).toFixed(2)}) | ${fmt(h.p50)} (${(h.p50 / b.p50).toFixed(2)}) | ${fmt(b.p95)} / ${fmt(l.p95)} / ${fmt(h.p95)} |`,
    );
  }
  console.log(
    `\n| run (${ROUNDS} rounds) | bare exec p50 | in process p50 (÷ bare) | over HTTP p50 (÷ bare) | p95 bare / in process / HTTP |`,
  );
  console.log('| --- | --- | --- | --- | --- |');
  for (const row of rows) console.log(row);
  const range = (v: number[]) => `${Math.min(...v).toFixed(2)}–${Math.max(...v).toFixed(2)}`;
  console.log(
    `\nwarm message ÷ bare exec, p50: in process ${range(ratios.lib)}, over HTTP ${range(ratios.http)} (target over HTTP ≤ 1.15)`,
  );
} finally {
  server.close();
  await berth.runner.drain(5000);
  await berth.runner.reapLeftovers();
  await idle.remove({ force: true });
  fs.rmSync(home, { recursive: true, force: true });
}
