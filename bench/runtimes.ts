/**
 * Cold and warm messages under runc and under gVisor (runsc), each against bare Docker under the
 * same runtime, measured in one process, interleaved, so machine noise hits all alike. Cold:
 * runner.run() with warm containers off, against a bare create/start/wait/remove with
 * `Runtime`. Warm: a session's next message (an exec into its container, the leftover check
 * after it: host /proc under runc, the keep-alive's report under runsc), against a bare exec into
 * a running container of that runtime. Targets: berth's ratio under runsc as under runc (cold
 * <= 1.10, warm <= 1.20); runsc/runc is printed so an operator can choose.
 */
import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import Docker from 'dockerode';
import { createBerth, type Berth } from '../src/main.js';
import { bareExec, bareRun, BENCH_IMAGE as IMAGE } from './bare.js';
import { fmt, summary } from './stats.js';

const ITERATIONS = Number(process.env.BENCH_ITERATIONS ?? 20);
const WARMUP = 3;
const COMMAND = 'true';
const RUNTIMES = ['runc', 'runsc'] as const;

function home(warm: boolean): { berth: Berth; dir: string } {
  const dir = fs.mkdtempSync(join(os.tmpdir(), 'berth-bench-rt-'));
  fs.writeFileSync(join(dir, 'berth.yaml'), 'runtimes: [runc, runsc]\nruns: { warm_idle_seconds: 600 }\n');
  const berth = createBerth({ home: dir, logLevel: 'silent', warm });
  for (const runtime of RUNTIMES) berth.store.create({ name: `bench-${runtime}`, workspace_isolation: true, runtime });
  return { berth, dir };
}

async function main(): Promise<void> {
  const docker = new Docker();
  const cold = home(false);
  const warm = home(true);
  const idle = await Promise.all(
    RUNTIMES.map(async (runtime) => {
      const c = await docker.createContainer({
        Image: IMAGE,
        Cmd: ['sleep', '100000'],
        HostConfig: { NetworkMode: 'none', Runtime: runtime },
      });
      await c.start();
      return c;
    }),
  );
  // Low: no egress relay, so both sides run the command alone. Warm: one tenant, one session.
  const message = (b: Berth, runtime: string, tenant: string) => async () => {
    const o = await b.runner.run({ project: `bench-${runtime}`, tenantKey: tenant, message: COMMAND, level: 'low' });
    if (o.exitCode !== 0) throw new Error(`berth ${runtime}: exit ${o.exitCode}: ${o.stderr}`);
  };
  const variants: Record<string, () => Promise<void>> = {};
  for (const [i, runtime] of RUNTIMES.entries()) {
    variants[`bare run, ${runtime}`] = () => bareRun(docker, COMMAND, 'none', runtime);
    variants[`berth cold, ${runtime}`] = message(cold.berth, runtime, 'bench:cold');
    variants[`bare exec, ${runtime}`] = () => bareExec(idle[i]!);
    variants[`berth warm, ${runtime}`] = message(warm.berth, runtime, 'bench:warm');
  }
  const samples: Record<string, number[]> = Object.fromEntries(Object.keys(variants).map((k) => [k, []]));
  console.error(`berth bench (runtimes): ${ITERATIONS} interleaved rounds of "${COMMAND}" in ${IMAGE} (+${WARMUP} warm-up) ...`);
  try {
    for (let i = 0; i < ITERATIONS + WARMUP; i++) {
      for (const [name, fn] of Object.entries(variants)) {
        const t0 = performance.now();
        await fn();
        if (i >= WARMUP) samples[name]!.push(performance.now() - t0);
      }
      if ((i + 1) % 5 === 0) console.error(`  round ${i + 1}/${ITERATIONS + WARMUP}`);
    }
    const reused = (await warm.berth.runner.listContainers()).length;
    if (reused !== RUNTIMES.length) throw new Error(`expected one warm container per runtime, found ${reused}`);
  } finally {
    for (const b of [cold, warm]) {
      await b.berth.runner.releaseWarm();
      await b.berth.runner.reapLeftovers();
      fs.rmSync(b.dir, { recursive: true, force: true });
    }
    await Promise.all(idle.map((c) => c.remove({ force: true })));
  }
  const p50 = (name: string) => summary(samples[name]!).p50;
  console.log(`\n| runtime | message | berth p50 | bare p50 | berth/bare | berth p95 | bare p95 | target |`);
  console.log(`| --- | --- | --- | --- | --- | --- | --- | --- |`);
  for (const runtime of RUNTIMES) {
    for (const [kind, bare, target] of [
      ['cold', 'bare run', '<= 1.10'],
      ['warm', 'bare exec', '<= 1.20'],
    ] as const) {
      const b = summary(samples[`berth ${kind}, ${runtime}`]!);
      const d = summary(samples[`${bare}, ${runtime}`]!);
      console.log(
        `| ${runtime} | ${kind} | ${fmt(b.p50)} | ${fmt(d.p50)} | ${(b.p50 / d.p50).toFixed(2)} | ${fmt(b.p95)} | ${fmt(d.p95)} | ${target} |`,
      );
    }
  }
  console.log(`\n| runsc / runc (p50) | berth | bare |`);
  console.log(`| --- | --- | --- |`);
  console.log(
    `| cold | ${(p50('berth cold, runsc') / p50('berth cold, runc')).toFixed(2)} | ${(p50('bare run, runsc') / p50('bare run, runc')).toFixed(2)} |`,
  );
  console.log(
    `| warm | ${(p50('berth warm, runsc') / p50('berth warm, runc')).toFixed(2)} | ${(p50('bare exec, runsc') / p50('bare exec, runc')).toFixed(2)} |`,
  );
  console.log(`\n(${ITERATIONS} rounds, ${os.cpus().length} cores, Node ${process.version})`);
}

await main();
