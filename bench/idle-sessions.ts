/**
 * 1,000 idle warm sessions on one host (issue 24, item 6): what each costs the host, and what
 * admission does under them, against bare idle containers measured in the same run.
 *
 * - Bare: BARE idle busybox containers (`sleep`, network none) started with dockerode: the host's
 *   MemAvailable before and after, per container; their cgroups' charge; their shims' PSS.
 * - berth: SESSIONS people each send one message (`true`, level low) through `runner.run()`
 *   with warm containers, 8 at a time; each leaves its session's container idle. The same
 *   measures, plus berth's own heap after a GC, per session.
 * - Under that load: a returning person's message and a new person's first message (p50 of 20
 *   each), against the same before the load.
 *
 * Run: node --expose-gc --import tsx bench/idle-sessions.ts   (BENCH_SESSIONS, BENCH_BARE)
 */
import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import Docker from 'dockerode';
import { createBerth } from '../src/main.js';
import { BENCH_IMAGE } from './bare.js';
import { fmt, summary } from './stats.js';

const SESSIONS = Number(process.env.BENCH_SESSIONS ?? 1000);
const BARE = Number(process.env.BENCH_BARE ?? 200);
const CONCURRENCY = 8;
const MiB = 2 ** 20;
const docker = new Docker();

const memAvailable = () => Number(/MemAvailable:\s+(\d+)/.exec(fs.readFileSync('/proc/meminfo', 'utf8'))?.[1]) * 1024;

async function pidOf(id: string): Promise<number> {
  return (await docker.getContainer(id).inspect()).State.Pid;
}
/** The container's memory cgroup charge (cgroup v1), bytes. */
function cgroupCharge(pid: number): number {
  const line = fs
    .readFileSync(`/proc/${pid}/cgroup`, 'utf8')
    .split('\n')
    .find((l) => l.includes(':memory:'));
  const path = line?.split(':')[2] ?? '';
  return Number(fs.readFileSync(`/sys/fs/cgroup/memory${path}/memory.usage_in_bytes`, 'utf8'));
}
/** Its containerd shim's proportional set size, bytes (shared pages split among the shims). */
function shimPss(pid: number): number {
  const ppid = Number(fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ')[1]);
  const rollup = fs.readFileSync(`/proc/${ppid}/smaps_rollup`, 'utf8');
  return Number(/^Pss:\s+(\d+)/m.exec(rollup)?.[1]) * 1024;
}

async function settle(): Promise<void> {
  (globalThis as { gc?: () => void }).gc?.();
  await new Promise((r) => setTimeout(r, 3000)); // let the engine's own work end
}

async function inBatches<T>(n: number, fn: (i: number) => Promise<T>): Promise<T[]> {
  const out: T[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < n) {
        const i = next++;
        out[i] = await fn(i);
      }
    }),
  );
  return out;
}

function perContainer(ids: number[], before: number, after: number) {
  const charge = ids.map(cgroupCharge).reduce((a, b) => a + b, 0) / ids.length;
  const pss = ids.map(shimPss).reduce((a, b) => a + b, 0) / ids.length;
  return { host: (before - after) / ids.length, charge, pss };
}

const home = fs.mkdtempSync(join(os.tmpdir(), 'berth-bench-idle-'));
fs.writeFileSync(
  join(home, 'berth.yaml'),
  `runs: { warm_max: ${SESSIONS + 100}, warm_idle_seconds: 7200, max_concurrent: ${CONCURRENCY}, pool: 0 }\n`,
);
const berth = createBerth({ home, logLevel: 'silent', warm: true });
berth.store.create({ name: 'idle', workspace_isolation: true });
const message = (who: string) => berth.runner.run({ project: 'idle', tenantKey: who, message: 'true', level: 'low' });
const bareIds: string[] = [];
try {
  console.error(`berth bench (idle sessions): ${BARE} bare idle containers, then ${SESSIONS} idle warm sessions ...`);
  await message('bench:first'); // images, the project's first workspace
  const timed = async (n: number, who: (i: number) => string) => {
    const ms: number[] = [];
    for (let i = 0; i < n; i++) {
      const t0 = performance.now();
      await message(who(i));
      ms.push(performance.now() - t0);
    }
    return summary(ms);
  };
  const returningBefore = await timed(20, () => 'bench:first');
  const newBefore = await timed(20, (i) => `bench:before-${i}`);

  // Bare idle containers.
  await settle();
  let before = memAvailable();
  await inBatches(BARE, async () => {
    const c = await docker.createContainer({ Image: BENCH_IMAGE, Cmd: ['sleep', '7200'], HostConfig: { NetworkMode: 'none' } });
    await c.start();
    bareIds.push(c.id);
  });
  await settle();
  const barePids = await Promise.all(bareIds.map(pidOf));
  const bare = perContainer(barePids, before, memAvailable());
  await Promise.all(bareIds.splice(0).map((id) => docker.getContainer(id).remove({ force: true })));

  // berth's idle warm sessions.
  await settle();
  before = memAvailable();
  const heapBefore = process.memoryUsage().heapUsed;
  const t0 = performance.now();
  const results = await inBatches(SESSIONS, (i) => message(`bench:idle-${i}`));
  const startSeconds = (performance.now() - t0) / 1000;
  await settle();
  const heapPer = Math.max(0, process.memoryUsage().heapUsed - heapBefore) / SESSIONS;
  const pids = await Promise.all(results.map((r) => pidOf(r.containerId)));
  const warm = perContainer(pids, before, memAvailable());
  const returningAfter = await timed(20, (i) => `bench:idle-${i * 37}`);
  const newAfter = await timed(20, (i) => `bench:after-${i}`);

  const row = (what: string, v: { host: number; charge: number; pss: number }, extra = 0) =>
    `| ${what} | ${(v.host / MiB).toFixed(2)} MiB | ${(v.charge / MiB).toFixed(2)} MiB | ${(v.pss / MiB).toFixed(2)} MiB | ${extra ? `${(extra / 1024).toFixed(1)} KiB` : ''} | ${((v.host + extra) / bare.host).toFixed(2)} |`;
  console.log(
    `\n| per idle container (${SESSIONS} sessions; ${BARE} bare) | host MemAvailable drop | cgroup charge | shim PSS | berth heap | ÷ bare (host) |`,
  );
  console.log('| --- | --- | --- | --- | --- | --- |');
  console.log(row('bare idle container (`sleep`)', bare));
  console.log(row('idle warm session of berth', warm, heapPer));
  console.log(
    `\n${SESSIONS} sessions started in ${startSeconds.toFixed(0)} s (${(SESSIONS / startSeconds).toFixed(1)} per second, ${CONCURRENCY} at a time); berth's RSS now ${(process.memoryUsage().rss / MiB).toFixed(0)} MiB`,
  );
  console.log('\n| message | before the load, p50 / p95 | with them idle, p50 / p95 |');
  console.log('| --- | --- | --- |');
  console.log(
    `| a returning person's (warm exec) | ${fmt(returningBefore.p50)} / ${fmt(returningBefore.p95)} | ${fmt(returningAfter.p50)} / ${fmt(returningAfter.p95)} |`,
  );
  console.log(
    `| a new person's first (container start) | ${fmt(newBefore.p50)} / ${fmt(newBefore.p95)} | ${fmt(newAfter.p50)} / ${fmt(newAfter.p95)} |`,
  );
  console.log(`\ntarget: an idle session ≤ 1.5× a bare idle container: ${((warm.host + heapPer) / bare.host).toFixed(2)}×`);
} finally {
  await Promise.all(
    bareIds.map((id) =>
      docker
        .getContainer(id)
        .remove({ force: true })
        .catch(() => undefined),
    ),
  );
  await berth.runner.drain(10_000);
  await berth.runner.reapLeftovers();
  fs.rmSync(home, { recursive: true, force: true });
}
