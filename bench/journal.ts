/**
 * The run journal's syncs (issue 24 item 3), in the same run:
 * - the mechanism: W writers appending journal lines at once, one fsync per line (as berth did,
 *   fs/fsynced-lines.ts) against group commit (fs/group-commit.ts): lines/s and syncs per line;
 * - warm messages in process (shell preset, `true`, level low, warm containers), one tenant at a
 *   time and 8 at once: the journal's syncs per message (it was 3: accepted, started, finished)
 *   and the message's p50 against a bare `docker exec` of the same command.
 */
import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import Docker from 'dockerode';
import { appendFsyncedLine } from '../src/fs/fsynced-lines.js';
import { createGroupCommit, journalCommit } from '../src/fs/group-commit.js';
import { createBerth } from '../src/main.js';
import { BENCH_IMAGE, bareExec } from './bare.js';
import { fmt, summary } from './stats.js';

const LINES = Number(process.env.BENCH_JOURNAL_LINES ?? 400);
const MESSAGES = Number(process.env.BENCH_ITERATIONS ?? 40);
const WIDE = 8;
const dir = fs.mkdtempSync(join(os.tmpdir(), 'berth-bench-journal-'));
const entry = (n: number) => ({
  run: `r-${n}`,
  phase: 'accepted',
  owner: '123.456.boot',
  kind: 'message',
  session: 'default',
  at: new Date().toISOString(),
});

/** W writers, LINES lines in all: lines per second. */
async function perLine(writers: number): Promise<number> {
  const file = join(dir, `per-line-${writers}.jsonl`);
  const t0 = performance.now();
  // appendFsyncedLine is synchronous: writers take turns whatever their number.
  await Promise.all(
    Array.from({ length: writers }, async (_, w) => {
      for (let i = 0; i < LINES / writers; i++) {
        appendFsyncedLine(file, entry(w * LINES + i));
        await Promise.resolve();
      }
    }),
  );
  return LINES / ((performance.now() - t0) / 1000);
}

async function grouped(writers: number): Promise<{ rate: number; syncsPerLine: number }> {
  const file = join(dir, `grouped-${writers}.jsonl`);
  const commit = createGroupCommit();
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: writers }, async (_, w) => {
      for (let i = 0; i < LINES / writers; i++) await commit.append(file, entry(w * LINES + i));
    }),
  );
  return { rate: LINES / ((performance.now() - t0) / 1000), syncsPerLine: commit.syncs() / LINES };
}

const docker = new Docker();
const home = fs.mkdtempSync(join(os.tmpdir(), 'berth-bench-journal-home-'));
fs.writeFileSync(join(home, 'berth.yaml'), `runs: { pool: 0, warm_idle_seconds: 600, max_concurrent: ${WIDE}, per_tenant: 2 }\n`);
const berth = createBerth({ home, logLevel: 'silent', warm: true });
berth.store.create({ name: 'bench', workspace_isolation: true });
const idle = await docker.createContainer({ Image: BENCH_IMAGE, Cmd: ['sleep', '3600'], HostConfig: { NetworkMode: 'none' } });
await idle.start();
const message = async (user: string) => {
  const t0 = performance.now();
  const out = await berth.admin.runMessage('bench', { user, message: 'true', level: 'low' });
  if (out.exit_code !== 0) throw new Error(`a message ended ${out.exit_code}`);
  return performance.now() - t0;
};

try {
  console.error(
    `berth bench (journal): ${LINES} lines by 1, 8 and 32 writers; ${MESSAGES} warm messages one at a time and ${WIDE} at once ...`,
  );
  const rows: string[] = [];
  for (const w of [1, 8, 32]) {
    const old = await perLine(w);
    const g = await grouped(w);
    rows.push(
      `| ${w} writer${w === 1 ? '' : 's'} | ${Math.round(old)} lines/s | ${Math.round(g.rate)} lines/s | ${g.syncsPerLine.toFixed(2)} | ${(g.rate / old).toFixed(2)} |`,
    );
  }
  console.log(`\n| journal lines (${LINES}) | one fsync per line | group commit | syncs per line | speed-up |`);
  console.log('| --- | --- | --- | --- | --- |');
  for (const r of rows) console.log(r);

  // Warm up: each tenant's container exists before anything is counted.
  await Promise.all(Array.from({ length: WIDE }, (_, i) => message(`bench:t${i}`)));
  let syncs = journalCommit.syncs();
  const one: number[] = [];
  const exec: number[] = [];
  for (let i = 0; i < MESSAGES; i++) {
    one.push(await message('bench:t0'));
    const t0 = performance.now();
    await bareExec(idle);
    exec.push(performance.now() - t0);
  }
  const oneSyncs = (journalCommit.syncs() - syncs) / MESSAGES;
  syncs = journalCommit.syncs();
  const wide: number[] = [];
  const wideExec: number[] = [];
  const timedExec = async () => {
    const t0 = performance.now();
    await bareExec(idle);
    return performance.now() - t0;
  };
  for (let i = 0; i < MESSAGES / 4; i++) {
    wide.push(...(await Promise.all(Array.from({ length: WIDE }, (_, t) => message(`bench:t${t}`)))));
    wideExec.push(...(await Promise.all(Array.from({ length: WIDE }, timedExec))));
  }
  const wideSyncs = (journalCommit.syncs() - syncs) / wide.length;
  const e = summary(exec);
  const ew = summary(wideExec);
  console.log(`\n| warm messages in process | journal syncs per message (was 3) | p50 | p99 | p50 ÷ bare exec |`);
  console.log('| --- | --- | --- | --- | --- |');
  console.log(`| bare dockerode exec of \`true\` | – | ${fmt(e.p50)} | ${fmt(e.p99)} | 1.00 |`);
  const s1 = summary(one);
  console.log(`| one tenant at a time | ${oneSyncs.toFixed(2)} | ${fmt(s1.p50)} | ${fmt(s1.p99)} | ${(s1.p50 / e.p50).toFixed(2)} |`);
  const sw = summary(wide);
  console.log(`| bare dockerode exec of \`true\`, ${WIDE} at once into one container | – | ${fmt(ew.p50)} | ${fmt(ew.p99)} | 1.00 |`);
  console.log(
    `| ${WIDE} tenants at once | ${wideSyncs.toFixed(2)} | ${fmt(sw.p50)} | ${fmt(sw.p99)} | ${(sw.p50 / ew.p50).toFixed(2)} (against ${WIDE} bare at once) |`,
  );
} finally {
  await berth.runner.drain(5000);
  await berth.runner.reapLeftovers();
  await idle.remove({ force: true });
  fs.rmSync(dir, { recursive: true, force: true });
  fs.rmSync(home, { recursive: true, force: true });
}
