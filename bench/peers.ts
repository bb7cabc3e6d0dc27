/**
 * berth beside the hosted sandboxes (issue 45, item 4), in ComputeSDK's published format
 * (github.com/computesdk/benchmarks, METHODOLOGY.md): time to interactive (TTI) = from asking for
 * a new sandbox to the first command's answer, 100 runs each of
 * - sequential: one at a time, each answered before the next is asked;
 * - staggered: one every 200 ms, each answered whenever it is;
 * - burst: all at once;
 * reported as p50 / p95 / p99 (ComputeSDK trims the top and bottom 5 % before its score; its
 * published medians and percentiles, printed beside ours, are its own). berth's "new sandbox" is
 * a new person's first message over the HTTP API (POST /api/projects/:name/runs, level low, a
 * tenant berth has never seen: its workspace is made, and a pre-started container takes it or
 * one is started), the command `echo ok` (ComputeSDK runs `node -v`; the shell image has no
 * node). Against bare Docker on the same host in the same run: create + start a container of the
 * same image, then exec the same command into it (the container's removal is not timed, as
 * ComputeSDK's teardown is not). Then message → first output per chat channel: bench/chat-first-output.ts.
 * BENCH_PEERS_RUNS (100) changes the runs per mode; BENCH_PEERS_CHAT=0 leaves the chat part out.
 */
import { execFileSync } from 'node:child_process';
import os from 'node:os';
import Docker from 'dockerode';
import { BENCH_IMAGE } from './bare.js';
import { serveHttpBerth } from './http-berth.js';
import { summary } from './stats.js';

const RUNS = Number(process.env.BENCH_PEERS_RUNS ?? 100);
const STAGGER_MS = 200;
const docker = new Docker();

/**
 * ComputeSDK's published runs (theirs, on their hardware: GitHub Actions / Namespace runners calling
 * each provider's cloud API over the internet), results/{sequential,staggered,burst}_tti/2026-05-05.json
 * at github.com/computesdk/benchmarks commit 0a010e00: median, p95, p99 in ms.
 */
export const PEERS: Record<string, Record<'sequential' | 'staggered' | 'burst', [number, number, number]>> = {
  Declaw: { sequential: [42, 131, 160], staggered: [44, 47, 48], burst: [351, 487, 493] },
  Daytona: { sequential: [186, 492, 560], staggered: [210, 446, 487], burst: [367, 611, 741] },
  E2B: { sequential: [491, 685, 740], staggered: [454, 675, 708], burst: [822, 965, 1048] },
  Vercel: { sequential: [671, 1062, 1315], staggered: [641, 974, 1074], burst: [832, 1308, 1323] },
  Modal: { sequential: [1723, 2309, 2494], staggered: [1711, 2027, 2243], burst: [2261, 2943, 3023] },
};

/** Bare Docker's TTI: create + start + exec of the command, to its exit; the container removed after (untimed). */
async function bareTti(): Promise<number> {
  const t0 = performance.now();
  const c = await docker.createContainer({ Image: BENCH_IMAGE, Cmd: ['sleep', '600'], HostConfig: { NetworkMode: 'none' } });
  await c.start();
  const exec = await c.exec({ Cmd: ['sh', '-c', 'echo ok'], AttachStdout: true, AttachStderr: true });
  const stream = await exec.start({ hijack: true, stdin: false });
  await new Promise<void>((r) => {
    stream.on('end', r);
    stream.on('close', r);
    stream.resume();
  });
  const ms = performance.now() - t0;
  await c.remove({ force: true });
  return ms;
}

type Mode = 'sequential' | 'staggered' | 'burst';
async function inMode(mode: Mode, tti: () => Promise<number>): Promise<number[]> {
  if (mode === 'sequential') {
    const out: number[] = [];
    for (let i = 0; i < RUNS; i++) out.push(await tti());
    return out;
  }
  return Promise.all(
    Array.from({ length: RUNS }, async (_, i) => {
      if (mode === 'staggered') await new Promise((r) => setTimeout(r, i * STAGGER_MS));
      return tti();
    }),
  );
}

const berth = await serveHttpBerth('{ pool: 4, warm_idle_seconds: 600 }');
let person = 0;
const berthTti = () => berth.message(`bench:peer-${++person}`, 'echo ok');
const rows: string[] = [];
const load: number[] = [];
try {
  console.error(`berth bench (peers): ${RUNS} runs each, sequential, staggered (${STAGGER_MS} ms), burst; bare Docker and berth ...`);
  await berth.message('bench:first', 'echo ok'); // teaches the pool the shape
  for (const mode of ['sequential', 'staggered', 'burst'] as const) {
    load.push(os.loadavg()[0] as number);
    const bare = summary(await inMode(mode, bareTti));
    await berth.poolAt(4, true);
    const ours = summary(await inMode(mode, berthTti));
    await berth.berth.runner.releaseWarm();
    const cell = (s: { p50: number; p95: number; p99: number }) => `${s.p50.toFixed(0)} / ${s.p95.toFixed(0)} / ${s.p99.toFixed(0)}`;
    const peers = Object.entries(PEERS).map(([, v]) => cell({ p50: v[mode][0], p95: v[mode][1], p99: v[mode][2] }));
    rows.push(`| ${mode} | ${cell(bare)} | ${cell(ours)} | ${(ours.p50 / bare.p50).toFixed(2)} | ${peers.join(' | ')} |`);
  }
  load.push(os.loadavg()[0] as number);
} finally {
  await berth.close();
}
console.log(
  `\n| TTI, ${RUNS} runs, p50 / p95 / p99 ms | bare Docker here | berth here | berth ÷ bare (p50) | ${Object.keys(PEERS).join(' | ')} (ComputeSDK, theirs) |`,
);
console.log(`| --- | --- | --- | --- |${' --- |'.repeat(Object.keys(PEERS).length)}`);
console.log(rows.join('\n'));
console.log(
  `\nhere: ${os.cpus().length} cores, load average ${Math.min(...load).toFixed(1)}–${Math.max(...load).toFixed(1)} during the run`,
);

if (process.env.BENCH_PEERS_CHAT !== '0') {
  // Message → first output per channel: the chat bench, as it is.
  const out = execFileSync(process.execPath, ['--import', 'tsx', 'bench/chat-first-output.ts'], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  console.log(out.trim());
}
