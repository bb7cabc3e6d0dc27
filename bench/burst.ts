/**
 * A burst of new people (issue 45, item 2): 50 people berth has never seen write within 5 s
 * (one every 100 ms), each a POST /api/projects/:name/runs (shell, `true`, level low), answered
 * whenever it is. Against the same schedule of bare dockerode runs of the same image and command
 * (create, start, wait, remove), in the same run, interleaved round by round:
 * - berth with the pool sized from the arrival rate (runs.pool 4, pool_max and engine_starts at
 *   their defaults), each burst starting from 4 waiting;
 * - berth with a fixed pool of 4 refilled one start at a time (pool_max 4, engine_starts 1: before
 *   this change).
 * First, the engine's start concurrency: create+start of idle containers, N at once, starts a second.
 * BENCH_ROUNDS (3), BENCH_BURST (50) and BENCH_BURST_SECONDS (5) change it.
 */
import os from 'node:os';
import Docker from 'dockerode';
import { BENCH_IMAGE, bareRun } from './bare.js';
import { serveHttpBerth, type HttpBerth } from './http-berth.js';
import { fmt, summary } from './stats.js';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const BURST = Number(process.env.BENCH_BURST ?? 50);
const SECONDS = Number(process.env.BENCH_BURST_SECONDS ?? 5);
const POOL = 4;
const LABEL = 'berth-bench-burst';
const docker = new Docker();

/** Starts a second with `c` create+start under way at once, and each one's p50. */
async function engineStarts(c: number, n = 18): Promise<{ perSecond: number; p50: number }> {
  let next = 0;
  const each: number[] = [];
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: c }, async () => {
      while (next++ < n) {
        const s = performance.now();
        const ctr = await docker.createContainer({
          Image: BENCH_IMAGE,
          Cmd: ['sleep', '600'],
          Labels: { [LABEL]: '1' },
          HostConfig: { NetworkMode: 'none' },
        });
        await ctr.start();
        each.push(performance.now() - s);
      }
    }),
  );
  const perSecond = n / ((performance.now() - t0) / 1000);
  const mine = await docker.listContainers({ all: true, filters: { label: [`${LABEL}=1`] } });
  await Promise.all(mine.map((m) => docker.getContainer(m.Id).remove({ force: true })));
  return { perSecond, p50: summary(each).p50 };
}

/** `BURST` jobs, one every SECONDS/BURST, each timed from its own start. */
async function burst(job: (i: number) => Promise<number>): Promise<number[]> {
  return Promise.all(
    Array.from({ length: BURST }, async (_, i) => {
      await new Promise((r) => setTimeout(r, (i * SECONDS * 1000) / BURST));
      return job(i);
    }),
  );
}

let tenant = 0;
const newPeople = (s: HttpBerth) => burst(() => s.message(`bench:burst-${++tenant}`));
const bareRuns = () =>
  burst(async () => {
    const t0 = performance.now();
    await bareRun(docker, 'true');
    return performance.now() - t0;
  });

console.error(`berth bench (burst): the engine's start concurrency, then ${ROUNDS} rounds of ${BURST} new people in ${SECONDS} s ...`);
const sweep: string[] = [];
for (const c of [1, 2, 3, 4, 6, 8]) {
  const r = await engineStarts(c);
  sweep.push(`| ${c} | ${r.perSecond.toFixed(1)} | ${fmt(r.p50)} |`);
}
const sized = await serveHttpBerth(`{ pool: ${POOL}, warm_idle_seconds: 600, max_concurrent: 8, per_tenant: 2 }`);
const fixed = await serveHttpBerth(
  `{ pool: ${POOL}, pool_max: ${POOL}, engine_starts: 1, warm_idle_seconds: 600, max_concurrent: 8, per_tenant: 2 }`,
);
const t = { bare: [] as number[], sized: [] as number[], fixed: [] as number[] };
const perRound: string[] = [];
const load: number[] = [];
try {
  // Each server's first new person teaches it the shape (and builds the mount helper).
  await sized.message('bench:first');
  await fixed.message('bench:first');
  for (let round = 0; round < ROUNDS; round++) {
    const b = await bareRuns();
    load.push(os.loadavg()[0] as number);
    // Back to its base: the last burst's arrivals have left the rate's windows, the extra containers are gone.
    await sized.poolAt(POOL, true);
    const s = await newPeople(sized);
    await sized.berth.runner.releaseWarm();
    await fixed.poolAt(POOL, true);
    const f = await newPeople(fixed);
    await fixed.berth.runner.releaseWarm();
    load.push(os.loadavg()[0] as number);
    t.bare.push(...b);
    t.sized.push(...s);
    t.fixed.push(...f);
    const p99 = (v: number[]) => fmt(summary(v).p99);
    perRound.push(`| ${round + 1} | ${p99(b)} | ${p99(s)} | ${p99(f)} |`);
  }
} finally {
  await sized.close();
  await fixed.close();
}

const bare = summary(t.bare);
const row = (what: string, v: number[]) => {
  const s = summary(v);
  return `| ${what} | ${fmt(s.p50)} | ${fmt(s.p95)} | ${fmt(s.p99)} | ${(s.p99 / bare.p99).toFixed(2)} |`;
};
console.log(`\n| create+start at once | starts a second | each start, p50 |`);
console.log('| --- | --- | --- |');
console.log(sweep.join('\n'));
console.log(`\n| ${BURST} new people in ${SECONDS} s (${ROUNDS} rounds pooled) | p50 | p95 | p99 | p99 ÷ bare |`);
console.log('| --- | --- | --- | --- | --- |');
console.log(row('bare dockerode run of `true` (create, start, wait, remove), same schedule', t.bare));
console.log(row(`berth, pool sized from the arrival rate (runs.pool ${POOL}, defaults)`, t.sized));
console.log(row(`berth, fixed pool of ${POOL}, one start at a time (before)`, t.fixed));
console.log(`\n| round | bare p99 | sized p99 | fixed p99 |\n| --- | --- | --- | --- |\n${perRound.join('\n')}`);
const worst = Math.max(...perRound.map((_, i) => summary(t.sized.slice(i * BURST, (i + 1) * BURST)).p99));
console.log(
  `\ntarget: burst p99 ≤ 1 s: ${fmt(summary(t.sized).p99)} over all rounds (worst round ${fmt(worst)}) ${summary(t.sized).p99 <= 1000 ? 'met' : 'MISSED'}; load average ${Math.min(...load).toFixed(1)}–${Math.max(...load).toFixed(1)}`,
);
