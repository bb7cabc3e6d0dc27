/**
 * What a checkpoint adds to each message (issue 41.3): the time and the bytes of the copy berth
 * keeps before a run (runs/checkpoint-before.ts → store/checkpoints.ts), on this machine's
 * filesystem, for a 100 MB workspace (1,000 files of 100 KB) and a small agent home:
 * - the first checkpoint of a session (everything copied),
 * - the next ones with nothing changed, and with one file changed (unchanged files are hard links
 *   to the previous checkpoint),
 * - a plain `cp -a` of the same tree for comparison (what a full copy per message costs).
 * Each through the checkpoint thread (store/checkpoint-thread.ts), as a run calls it: the time is
 * the whole call as the run waits for it (wall), and the CPU the process spent on it (both threads:
 * on a loaded machine the wall time is mostly waiting for a CPU). The event loop's longest stall
 * during a first checkpoint is printed beside its duration.
 * Target: ≤ 20 ms added per message. BENCH_ITERATIONS (default 20) rounds each.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { checkpointThread } from '../src/store/checkpoint-thread.js';
import type { CheckpointSource } from '../src/store/checkpoints.js';
import type { Project } from '../src/store/projects.js';
import { fmt, summary } from './stats.js';

const ROUNDS = Number(process.env.BENCH_ITERATIONS ?? 20);
const FILES = 1000;
const FILE_BYTES = 100 * 1024;
const BOUNDS = { keep: 10, bytes: 8 * 1024 ** 3, files: 1_000_000 };

const root = fs.mkdtempSync(join(os.tmpdir(), 'berth-bench-checkpoints-'));
const project = { paths: { stateDir: join(root, 'state') }, metadata: { name: 'bench' } } as unknown as Project;
const ws = join(root, 'ws');
const home = join(root, 'home');
for (let d = 0; d < 10; d++) fs.mkdirSync(join(ws, `dir${d}`), { recursive: true });
fs.mkdirSync(join(home, '.claude', 'projects'), { recursive: true });
for (let i = 0; i < FILES; i++) fs.writeFileSync(join(ws, `dir${i % 10}`, `f${i}.txt`), Buffer.alloc(FILE_BYTES, i % 251));
fs.writeFileSync(join(home, '.claude', 'projects', 'conversation.jsonl'), '{"turn":0}\n'.repeat(2000));
const src: CheckpointSource = { project, tenantKey: 'web:bench', session: 's', workspace: { id: 'w', dir: ws }, home };

const time = (fn: () => void) => {
  const t0 = performance.now();
  fn();
  return performance.now() - t0;
};
const thread = checkpointThread();
/** One checkpoint through the thread: its wall time, the process's CPU time, the bytes it added, the loop's longest stall. */
async function take(session: CheckpointSource) {
  let last = performance.now();
  let stall = 0;
  const beat = setInterval(() => {
    const now = performance.now();
    stall = Math.max(stall, now - last);
    last = now;
  }, 1);
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const kept = await thread.take(session, BOUNDS);
  const wall = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  clearInterval(beat);
  return { wall, cpu: (cpu.user + cpu.system) / 1000, bytes: kept.owned_bytes, stall: Math.max(stall, performance.now() - last) };
}
await thread.take({ ...src, session: 'warm-up' }, BOUNDS); // the thread starts once per process
const mib = (n: number) => `${(n / 1048576).toFixed(2)} MiB`;

// A file written less than RACY_NS (2 s) before the previous checkpoint began is copied again: let the tree age first.
await new Promise((r) => setTimeout(r, 2500));

type Sample = Awaited<ReturnType<typeof take>>;
const first: Sample[] = [];
const unchanged: Sample[] = [];
const oneChange: Sample[] = [];
const cp: number[] = [];
for (let round = 0; round < ROUNDS; round++) {
  // A new session each round: its first checkpoint has no base.
  const session = { ...src, session: `s${round}` };
  first.push(await take(session));
  // The base's own files are only as old as their ctime allows: wait out the racy window once more.
  await new Promise((r) => setTimeout(r, 2100));
  unchanged.push(await take(session));
  fs.appendFileSync(join(ws, 'dir3', `f${round}.txt`), 'edit');
  fs.appendFileSync(join(home, '.claude', 'projects', 'conversation.jsonl'), '{"turn":1}\n');
  oneChange.push(await take(session));
  const dst = join(root, `cp-${round}`);
  cp.push(time(() => execFileSync('cp', ['-a', ws, dst])));
  fs.rmSync(dst, { recursive: true, force: true });
}
await thread.close();

const line = (name: string, ms: number[], more = '') => {
  const s = summary(ms);
  console.log(`${name.padEnd(44)} p50 ${fmt(s.p50).padStart(9)}  p95 ${fmt(s.p95).padStart(9)}${more}`);
};
const p50 = (xs: number[]) => summary(xs).p50;
const of = (samples: Sample[], name: string) => {
  line(
    name,
    samples.map((x) => x.wall),
    `   cpu p50 ${fmt(p50(samples.map((x) => x.cpu)))}   bytes added p50 ${mib(p50(samples.map((x) => x.bytes)))}`,
  );
};
console.log(
  `checkpoints: ${FILES} files × ${FILE_BYTES / 1024} KiB = ${mib(FILES * FILE_BYTES)} workspace, ${ROUNDS} rounds, ${os.cpus().length} CPUs, load ${os.loadavg()[0]?.toFixed(1)}`,
);
of(first, 'first checkpoint of a session (full copy)');
of(unchanged, 'next message, nothing changed');
of(oneChange, 'next message, one 100 KiB file changed');
line('cp -a of the same workspace (reference)', cp);
const stall = p50(first.map((x) => x.stall / x.wall));
console.log(`event loop's longest stall during a first checkpoint, p50: ${(stall * 100).toFixed(0)}% of its time`);
const wall = p50(oneChange.map((x) => x.wall));
const cpu = p50(oneChange.map((x) => x.cpu));
console.log(
  `target ≤ 20 ms added per message (one file changed, p50): ${wall <= 20 ? 'met' : 'missed'} (wall ${fmt(wall)}, cpu ${fmt(cpu)})`,
);
fs.rmSync(root, { recursive: true, force: true });
