import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import Docker from 'dockerode';
import { afterAll, expect, it } from 'vitest';
import { installationId } from '../../src/main.js';
import { JournalEntrySchema } from '../../src/store/journal.js';
import { RunRecordSchema } from '../../src/store/run-log.js';
import { SessionRecordSchema } from '../../src/config/session.js';
import { ProjectMetadataSchema } from '../../src/config/metadata.js';
import { BERTH_BIN, cli, removeContainersOf } from '../helpers.js';

/**
 * Chaos for the run journal: runs come in over the HTTP API, 6 at a time, while `berth serve`
 * is killed with -9 at random points and started again. Afterwards every accepted run has
 * exactly one closing line (finished, failed or interrupted), every answered run a record, no
 * container of a dead berth is left, and every state file parses.
 */
const KILLS = 4;
const RUNS = 60;
const CONCURRENT = 6;
const home = fs.realpathSync(fs.mkdtempSync(join(os.tmpdir(), 'berth-serve-chaos-')));
let proc: ChildProcess | undefined;

afterAll(async () => {
  proc?.kill('SIGKILL');
  await removeContainersOf(home);
  fs.rmSync(home, { recursive: true, force: true });
});

async function startServe(): Promise<{ url: string; token: string }> {
  proc = spawn(process.execPath, [BERTH_BIN, '--home', home, 'serve', '--port', '0'], {
    env: { PATH: process.env.PATH ?? '', BERTH_LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'pipe', 'ignore'],
  });
  const p = proc;
  return new Promise((resolve, reject) => {
    let out = '';
    p.stdout?.on('data', (d: Buffer) => {
      out += d.toString();
      if (out.includes('ready\n'))
        resolve({ url: /serving (\S+)/.exec(out)?.[1] as string, token: fs.readFileSync(join(home, '.berth/admin-token'), 'utf8').trim() });
    });
    p.once('exit', (code) => reject(new Error(`berth serve exited ${code} before ready: ${out}`)));
  });
}

it(`every accepted run is closed exactly once, nothing is orphaned, no file is corrupt, while serve is killed ${KILLS} times under load`, async () => {
  const create = spawn(process.execPath, [BERTH_BIN, '--home', home, 'project', 'create', 'sc', '--isolation'], { stdio: 'ignore' });
  await new Promise((r) => create.once('close', r));
  let server = await startServe();
  let submitted = 0;
  const answered: string[] = [];
  let kills = 0;
  let restarting = Promise.resolve();
  const killAt = new Set(Array.from({ length: KILLS }, (_, i) => Math.floor(((i + 1) * RUNS) / (KILLS + 1))));

  const client = async (n: number) => {
    while (submitted < RUNS) {
      const i = submitted++;
      if (killAt.has(i)) {
        // Kill at a random moment of what is in flight, then bring it back (one restart at a time).
        restarting = restarting.then(async () => {
          await new Promise((r) => setTimeout(r, Math.random() * 500));
          const dying = proc;
          dying?.kill('SIGKILL');
          await new Promise((r) => dying?.once('exit', r));
          kills++;
          server = await startServe();
        });
        await restarting;
      }
      await restarting;
      try {
        const res = await fetch(`${server.url}/api/projects/sc/runs`, {
          method: 'POST',
          headers: { authorization: `Bearer ${server.token}`, 'content-type': 'application/json' },
          body: JSON.stringify({ user: `web:c${n}`, message: `sleep 0.${3 + (i % 5)}; echo run-${i}`, level: 'low' }),
          signal: AbortSignal.timeout(60_000),
        });
        if (res.status === 200) answered.push(((await res.json()) as { run: string }).run);
      } catch {
        // the server died under this request: the journal must still say what became of it
      }
    }
  };
  await Promise.all(Array.from({ length: CONCURRENT }, (_, n) => client(n)));
  // One more restart after the last kill's runs: recovery closes whatever the dead left open.
  proc?.kill('SIGKILL');
  await new Promise((r) => proc?.once('exit', r));
  await startServe();

  const sessionsDir = join(home, 'projects', 'sc', 'sessions');
  const lines = fs.readFileSync(join(sessionsDir, 'journal.jsonl'), 'utf8').split('\n').filter(Boolean);
  const entries = lines.flatMap((l) => {
    const r = JournalEntrySchema.safeParse(JSON.parse(l));
    return r.success ? [r.data] : [];
  });
  const accepted = new Set(entries.filter((e) => e.phase === 'accepted').map((e) => e.run));
  const closings = new Map<string, number>();
  for (const e of entries)
    if (e.phase === 'finished' || e.phase === 'failed' || e.phase === 'interrupted') closings.set(e.run, (closings.get(e.run) ?? 0) + 1);
  const records = fs
    .readFileSync(join(sessionsDir, 'runs.jsonl'), 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => RunRecordSchema.parse(JSON.parse(l)).run);
  const docker = new Docker();
  const leftovers = await docker.listContainers({ all: true, filters: { label: [`berth.installation=${installationId(home)}`] } });
  // Every state file parses (a crash between write and rename never leaves half a file).
  ProjectMetadataSchema.parse(JSON.parse(fs.readFileSync(join(home, 'projects', 'sc', 'metadata.json'), 'utf8')));
  for (const f of fs.readdirSync(sessionsDir).filter((n) => n.endsWith('.json')))
    SessionRecordSchema.parse(JSON.parse(fs.readFileSync(join(sessionsDir, f), 'utf8')));

  const counts = {
    accepted: accepted.size,
    answered: answered.length,
    finished: entries.filter((e) => e.phase === 'finished').length,
    failed: entries.filter((e) => e.phase === 'failed').length,
    interrupted: entries.filter((e) => e.phase === 'interrupted').length,
    unclosed: [...accepted].filter((r) => !closings.has(r)).length,
    closed_twice: [...closings.values()].filter((n) => n > 1).length,
    answered_without_record: answered.filter((r) => !records.includes(r)).length,
    orphans: leftovers.length,
    corrupt_journal_lines: lines.length - entries.length,
    kills,
  };
  console.log(`serve chaos: ${JSON.stringify(counts)}`);
  // The CLI shows the interrupted ones as such.
  const cliRuns = cli(['--home', home, 'runs', 'sc', '--limit', '500']);
  expect(cliRuns.code).toBe(0);
  expect(cliRuns.stdout.match(/INTERRUPTED/g)?.length).toBe(counts.interrupted);
  expect(counts.kills).toBe(KILLS);
  expect(counts.unclosed).toBe(0);
  expect(counts.closed_twice).toBe(0);
  expect(counts.answered_without_record).toBe(0);
  expect(counts.orphans).toBe(0);
  expect(counts.interrupted).toBeGreaterThan(0); // the kills did land mid-run
  expect(counts.accepted).toBe(counts.finished + counts.failed + counts.interrupted);
}, 300_000);
