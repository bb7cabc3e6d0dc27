/**
 * What a checkpoint adds to each message (issue 41.3): the time and the bytes of the copy berth
 * keeps before a run (runs/checkpoint-before.ts → store/checkpoints.ts), on this machine's
 * filesystem, for a 100 MB workspace (1,000 files of 100 KB) and a small agent home:
 * - the first checkpoint of a session (everything copied),
 * - the next ones with nothing changed, and with one file changed (unchanged files are hard links
 *   to the previous checkpoint),
 * - a plain `cp -a` of the same tree for comparison (what a full copy per message costs).
 * Target: ≤ 20 ms added per message. BENCH_ITERATIONS (default 20) rounds each.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { takeCheckpoint, type CheckpointSource } from '../src/store/checkpoints.js';
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
const mib = (n: number) => `${(n / 1048576).toFixed(2)} MiB`;

// A file written less than RACY_NS (2 s) before the previous checkpoint began is copied again: let the tree age first.
await new Promise((r) => setTimeout(r, 2500));

const first: number[] = [];
const firstBytes: number[] = [];
const unchanged: number[] = [];
const unchangedBytes: number[] = [];
const oneChange: number[] = [];
const oneChangeBytes: number[] = [];
const cp: number[] = [];
for (let round = 0; round < ROUNDS; round++) {
  // A new session each round: its first checkpoint has no base.
  const session = { ...src, session: `s${round}` };
  let kept = takeCheckpoint(session, BOUNDS);
  first.push(kept.ms);
  firstBytes.push(kept.owned_bytes);
  // The base's own files are only as old as their ctime allows: wait out the racy window once more.
  await new Promise((r) => setTimeout(r, 2100));
  kept = takeCheckpoint(session, BOUNDS);
  unchanged.push(kept.ms);
  unchangedBytes.push(kept.owned_bytes);
  fs.appendFileSync(join(ws, 'dir3', `f${round}.txt`), 'edit');
  fs.appendFileSync(join(home, '.claude', 'projects', 'conversation.jsonl'), '{"turn":1}\n');
  kept = takeCheckpoint(session, BOUNDS);
  oneChange.push(kept.ms);
  oneChangeBytes.push(kept.owned_bytes);
  const dst = join(root, `cp-${round}`);
  cp.push(time(() => execFileSync('cp', ['-a', ws, dst])));
  fs.rmSync(dst, { recursive: true, force: true });
}

const line = (name: string, ms: number[], bytes?: number[]) => {
  const s = summary(ms);
  const b = bytes ? `   bytes added p50 ${mib(summary(bytes).p50)}` : '';
  console.log(`${name.padEnd(44)} p50 ${fmt(s.p50).padStart(9)}  p95 ${fmt(s.p95).padStart(9)}${b}`);
};
console.log(
  `checkpoints: ${FILES} files × ${FILE_BYTES / 1024} KiB = ${mib(FILES * FILE_BYTES)} workspace, ${ROUNDS} rounds, ${os.cpus().length} CPUs`,
);
line('first checkpoint of a session (full copy)', first, firstBytes);
line('next message, nothing changed', unchanged, unchangedBytes);
line('next message, one 100 KiB file changed', oneChange, oneChangeBytes);
line('cp -a of the same workspace (reference)', cp);
const target = summary(oneChange).p50 <= 20 ? 'met' : 'missed';
console.log(`target ≤ 20 ms added per message (one file changed, p50): ${target}`);
fs.rmSync(root, { recursive: true, force: true });
