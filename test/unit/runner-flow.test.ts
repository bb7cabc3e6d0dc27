import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { ProjectMetadataInput } from '../../src/config/metadata.js';
import { parseJsonLine, readJsonLines } from '../../src/fs/json-file.js';
import { createBerth, type Berth } from '../../src/main.js';
import { JournalEntrySchema, openRuns, type JournalEntry } from '../../src/store/journal.js';
import { createFakeLauncher, type FakeLauncher, type FakeLauncherOptions } from '../helpers/fake-launcher.js';
import { createMemoryImages } from '../helpers/memory-images.js';
import { until } from '../helpers/until.js';

/**
 * The run path (runner, warm sessions, fleet, journal) on the in-memory launcher: what berth does
 * around a launcher, with no engine. The project's agent is the shell preset, so a message is
 * the fake's program to run ("sleep MS", "exit N", ...).
 */

/** Disposing it releases warm containers, reaps leftovers and removes its home. */
interface Harness extends AsyncDisposable {
  berth: Berth;
  fake: FakeLauncher;
  home: string;
  run(message: string, opts?: { level?: 'low' | 'medium' | 'high'; session?: string }): ReturnType<Berth['runner']['run']>;
  /** The project's journal, line by line, of one run or all. */
  journal(run?: string): JournalEntry[];
}

function harness(
  opts: { launcher?: FakeLauncherOptions; warm?: boolean; config?: string; project?: Partial<ProjectMetadataInput> } = {},
): Harness {
  const home = fs.realpathSync(fs.mkdtempSync(join(os.tmpdir(), 'berth-flow-')));
  if (opts.config) fs.writeFileSync(join(home, 'berth.yaml'), opts.config);
  const fake = createFakeLauncher(opts.launcher);
  const berth = createBerth({ home, logLevel: 'silent', launcher: fake, images: createMemoryImages(), warm: opts.warm });
  berth.admin.createProject({ name: 'p', ...opts.project });
  const sessionsDir = berth.store.get('p').paths.sessionsDir;
  return {
    berth,
    fake,
    home,
    run: (message, o = {}) => berth.runner.run({ project: 'p', tenantKey: 'web:alice', message, level: o.level, sessionId: o.session }),
    journal: (run) =>
      readJsonLines(join(sessionsDir, 'journal.jsonl'))
        .flatMap((line) => parseJsonLine(line, JournalEntrySchema) ?? [])
        .filter((e) => run === undefined || e.run === run),
    async [Symbol.asyncDispose]() {
      await berth.runner.releaseWarm();
      await berth.runner.reapLeftovers();
      await berth.audit.flush(); // its head record is written off the event loop after a run's receipt line
      fs.rmSync(home, { recursive: true, force: true });
    },
  };
}

const phases = (entries: JournalEntry[]) => entries.map((e) => e.phase);
const started = (fake: FakeLauncher) => fake.events.filter((e) => e.op === 'run' || e.op === 'startIdle' || e.op === 'execIn');

describe('the journal of a run', () => {
  it('a run that ends is accepted, started in its container, finished with its exit code (a failing command too)', async () => {
    await using h = harness();
    const out = await h.run('exit 3');
    expect(out).toMatchObject({ exitCode: 3, warm: false });
    const entries = h.journal(out.runId);
    expect(phases(entries)).toEqual(['accepted', 'started', 'finished']);
    expect(entries[0]).toMatchObject({ kind: 'message', session: out.sessionId });
    expect(entries[0]!.owner).toMatch(/^\d+\./);
    expect(entries[1]).toMatchObject({ container: out.containerId });
    expect(entries[2]).toMatchObject({ exit_code: 3 });
    expect(h.fake.containers()).toEqual([]); // a cold run's container goes with it
  });

  it('a run the launcher cannot start is accepted, then failed with the error code; never started', async () => {
    await using h = harness({ launcher: { images: ['some/other:image'] } });
    await expect(h.run('echo hi')).rejects.toMatchObject({ code: 'IMAGE_MISSING' });
    expect(h.journal().map(({ phase, reason }) => ({ phase, reason }))).toEqual([
      { phase: 'accepted', reason: undefined },
      { phase: 'failed', reason: 'IMAGE_MISSING' },
    ]);
    expect(openRuns(h.berth.store.get('p').paths.sessionsDir)).toEqual([]);
    expect(h.berth.sessions.list(h.berth.store.get('p'), { tenantKey: 'web:alice' }).map((s) => s.runs)).toEqual([0]); // never counted
  });
});

describe('drain', () => {
  it('past its deadline it stops a long run: exit 137, journaled as interrupted', async () => {
    await using h = harness();
    const running = h.run('sleep 30000');
    await until(() => h.fake.containers().length === 1);
    // The drain returns with the run stopped at its deadline, not at the sleep's own end (exit 0,
    // journaled finished): both said by the outcome, no wall-clock bound.
    expect(await h.berth.runner.drain(50)).toEqual({ interrupted: 1 });
    const out = await running;
    expect(out.exitCode).toBe(137);
    expect(phases(h.journal(out.runId))).toEqual(['accepted', 'started', 'interrupted']);
    expect(h.berth.admin.listRuns('p', {}).interrupted).toEqual([
      expect.objectContaining({ run: out.runId, reason: 'berth stopped: the drain deadline passed' }),
    ]);
    expect(h.fake.containers()).toEqual([]);
  });

  it('a run that comes once the drain began is refused (SHUTTING_DOWN): not journaled, nothing started', async () => {
    await using h = harness();
    expect(await h.berth.runner.drain(1000)).toEqual({ interrupted: 0 });
    await expect(h.run('echo late')).rejects.toMatchObject({ code: 'SHUTTING_DOWN' });
    expect(h.journal()).toEqual([]);
    expect(started(h.fake)).toEqual([]);
  });
});

describe('warm session containers', () => {
  it("the session's second message is an exec into the first one's container; a level change recycles it", async () => {
    await using h = harness({ warm: true });
    const first = await h.run('echo one', { level: 'low' });
    expect(first).toMatchObject({ exitCode: 0, stdout: 'one\n', warm: false });
    const second = await h.run('echo two', { level: 'low' });
    expect(second).toMatchObject({ exitCode: 0, stdout: 'two\n', warm: true, containerId: first.containerId });
    expect(h.fake.events.filter((e) => e.op === 'startIdle')).toHaveLength(1);
    expect(h.journal(second.runId)[1]).toMatchObject({ phase: 'started', container: first.containerId });

    // Another level is another plan (egress, memory): the old container must not serve it.
    const third = await h.run('echo three', { level: 'medium' });
    expect(third).toMatchObject({ exitCode: 0, stdout: 'three\n', warm: false });
    expect(third.containerId).not.toBe(first.containerId);
    expect(h.fake.containers().map((c) => c.id)).toEqual([third.containerId]);
  });

  it('a message that leaves a process running gets its answer, and the container is not kept', async () => {
    await using h = harness({ warm: true });
    const first = await h.run('bg');
    expect(first).toMatchObject({ exitCode: 0, warm: false });
    await until(() => h.fake.containers().length === 0);
    const second = await h.run('echo again');
    expect(second).toMatchObject({ stdout: 'again\n', warm: false });
    expect(second.containerId).not.toBe(first.containerId);
  });

  it.each(['removed', 'exited'] as const)('a container %s between messages: the next message gets a new one, not an error', async (how) => {
    await using h = harness({ warm: true });
    const first = await h.run('echo one');
    h.fake.vanish(first.containerId, how);
    const second = await h.run('echo two');
    expect(second).toMatchObject({ exitCode: 0, stdout: 'two\n', warm: false });
    expect(second.containerId).not.toBe(first.containerId);
    expect(phases(h.journal(second.runId))).toEqual(['accepted', 'started', 'finished']);
    expect(h.fake.containers().map((c) => c.id)).toEqual([second.containerId]);
  });
});

describe('what the launcher cannot do is refused before anything starts', () => {
  it('a project whose runtime the launcher lacks: RUNTIME_MISSING, journaled as failed', async () => {
    await using h = harness({ config: 'runtimes: [runc, runsc]\n', project: { runtime: 'runsc' }, launcher: { runtimes: ['runc'] } });
    await expect(h.run('echo hi')).rejects.toMatchObject({ code: 'RUNTIME_MISSING' });
    expect(started(h.fake)).toEqual([]);
    expect(phases(h.journal())).toEqual(['accepted', 'failed']);
    expect(h.journal()[1]).toMatchObject({ reason: 'RUNTIME_MISSING' });
  });

  it('a launcher without Unix sockets: a run with sockets is LAUNCHER_UNSUPPORTED; a run without any still runs', async () => {
    await using h = harness({ launcher: { unixSockets: false } });
    // An agent message always has berth's tools socket.
    await expect(h.run('echo hi')).rejects.toMatchObject({ code: 'LAUNCHER_UNSUPPORTED', message: expect.stringMatching(/Unix sockets/) });
    expect(started(h.fake)).toEqual([]);
    // The shell tool at level low has none (no tools, no egress): the same launcher runs it.
    const session = h.berth.admin.openSession('p', 'tool', 'web:alice');
    h.berth.admin.updateSession('p', session.id, { permission_level: 'low' });
    const out = await h.berth.runner.exec({ project: 'p', session: session.id }, ['echo', 'tool']);
    expect(out).toMatchObject({ exitCode: 0, stdout: 'tool\n' });
  });
});

describe('the session a run carries', () => {
  it('counts the run while its container runs it, not after; once per run, an exec into a warm container too', async () => {
    await using h = harness({ warm: true });
    const runsOf = () => h.berth.sessions.list(h.berth.store.get('p'), { tenantKey: 'web:alice' }).map((s) => [s.runs, s.title]);
    let ended = false;
    const running = h.run('sleep 300').then((out) => ((ended = true), out));
    await until(() => runsOf()[0]?.[0] === 1);
    expect(ended).toBe(false);
    expect(runsOf()).toEqual([[1, 'sleep 300']]); // a first message names the session
    expect((await running).exitCode).toBe(0);
    expect((await h.run('exit 0')).warm).toBe(true);
    expect(runsOf()).toEqual([[2, 'sleep 300']]);
  });

  it('is read once when the run starts; what changes while it runs (a level, an approved host) is kept when the run is counted', async () => {
    await using h = harness();
    const running = h.run('sleep 1000');
    await until(() => started(h.fake).length === 1);
    const { sessions, store } = h.berth;
    const [session] = sessions.list(store.get('p'), { tenantKey: 'web:alice' });
    sessions.approveHost('p', session!.id, 'example.com:443');
    sessions.setLevel(store.get('p'), sessions.get('p', session!.id).session, 'high'); // read after the host was approved
    const out = await running;
    expect(out.permissionLevel).toBe('medium'); // the run kept the level it started with
    expect(sessions.get('p', session!.id).session).toMatchObject({
      runs: 1,
      approved_hosts: ['example.com:443'],
      settings: { permission_level: 'high' },
    });
  });
});
