import { spawn } from 'node:child_process';
import fs from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDockerLauncher } from '../../src/launch/docker/launcher.js';
import { installationId } from '../../src/main.js';
import { JournalEntrySchema } from '../../src/store/journal.js';
import { BERTH_BIN, testHome, type TestHome } from '../helpers.js';

/**
 * The run journal against real processes and a real engine: a `berth run` killed with -9 mid-run
 * leaves its run accepted and started in the journal; the next berth to recover closes it as
 * interrupted and removes its container — and never touches a run another live berth owns.
 */
let h: TestHome;
const engine = createDockerLauncher();
beforeAll(() => {
  h = testHome();
  h.create({ name: 'jr', workspace_isolation: true, limits: { timeout_seconds: 60 } });
});
afterAll(() => h[Symbol.asyncDispose]());

const journal = () =>
  fs
    .readFileSync(join(h.home, 'projects/jr/sessions/journal.jsonl'), 'utf8')
    .trim()
    .split('\n')
    .map((l) => JournalEntrySchema.parse(JSON.parse(l)));

function berthRun(user: string, message: string) {
  const proc = spawn(process.execPath, [BERTH_BIN, '--home', h.home, 'run', 'jr', '--user', user, '--', message], {
    env: { PATH: process.env.PATH ?? '' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  proc.stdout.on('data', (d: Buffer) => (out += d));
  const done = new Promise<number>((resolve) => proc.once('exit', (code, signal) => resolve(code ?? (signal ? 128 : -1))));
  return { proc, done, out: () => out };
}

async function containerOf(user: string): Promise<string> {
  for (let i = 0; i < 200; i++) {
    const started = fs.existsSync(join(h.home, 'projects/jr/sessions/journal.jsonl')) ? journal().filter((e) => e.phase === 'started') : [];
    const mine = (await engine.listManaged({ installation: installationId(h.home), project: 'jr' })).filter((c) =>
      started.some((e) => e.container === c.id),
    );
    const running = mine.find((c) => c.state === 'running' && !seen.has(c.id));
    if (running) {
      seen.add(running.id);
      return running.run;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`no running container for ${user}`);
}
const seen = new Set<string>();

describe('run journal', () => {
  it('a run killed with its berth is closed as interrupted and its container removed; a live one is left alone', async () => {
    const doomed = berthRun('web:doomed', 'echo started; sleep 50');
    const doomedRun = await containerOf('web:doomed');
    const live = berthRun('web:live', 'sleep 4; echo survived');
    const liveRun = await containerOf('web:live');

    doomed.proc.kill('SIGKILL');
    await doomed.done;
    const open = journal()
      .filter((e) => e.run === doomedRun)
      .map((e) => e.phase);
    expect(open).toEqual(['accepted', 'started']); // the trace a dead berth leaves

    const { interrupted, removed } = await h.berth.runner.recover();
    expect(interrupted).toEqual([doomedRun]);
    expect(removed).toBe(1);
    const containers = await engine.listManaged({ installation: installationId(h.home), project: 'jr' });
    expect(containers.map((c) => c.run)).toEqual([liveRun]);
    expect(
      journal()
        .filter((e) => e.run === doomedRun)
        .map((e) => e.phase),
    ).toEqual(['accepted', 'started', 'interrupted']);

    // The other berth process's run finishes normally and is journaled as finished.
    expect(await live.done).toBe(0);
    expect(live.out()).toBe('survived\n');
    expect(
      journal()
        .filter((e) => e.run === liveRun)
        .map((e) => e.phase),
    ).toEqual(['accepted', 'started', 'finished']);

    // The runs API shows it: the finished run as a record, the killed one as interrupted.
    const listed = h.berth.admin.listRuns('jr', {});
    expect(listed.interrupted).toEqual([
      {
        run: doomedRun,
        session: expect.stringMatching(/^t-/),
        kind: 'message',
        interrupted_at: expect.any(String),
        reason: expect.stringContaining('is gone'),
      },
    ]);
    expect(listed.runs.map((r) => r.run)).toContain(liveRun);

    // Recovering again changes nothing: every run has exactly one closing record.
    expect(await h.berth.runner.recover()).toEqual({ interrupted: [], removed: 0 });
    const closing = new Map<string, number>();
    for (const e of journal())
      if (['finished', 'failed', 'interrupted'].includes(e.phase)) closing.set(e.run, (closing.get(e.run) ?? 0) + 1);
    expect([...closing.values()].every((n) => n === 1)).toBe(true);
  }, 90_000);
});
