import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { createScheduleService } from '../../src/admin/schedules.js';
import type { ChatTransport } from '../../src/bridges/chat-transport.js';
import { createBridgeCore } from '../../src/bridges/core.js';
import type { JobsAdmin } from '../../src/bridges/jobs.js';
import { scheduleDispatch } from '../../src/bridges/scheduled-runs.js';
import { BerthConfigSchema } from '../../src/config/berth-config-schema.js';
import { ProjectMetadataSchema } from '../../src/config/metadata.js';
import type { RunRequest } from '../../src/runs/runner.js';
import { createScheduler } from '../../src/runs/scheduler.js';
import { openBridgeState } from '../../src/store/bridge-state.js';
import { openInbox } from '../../src/store/inbox.js';
import { openScheduleStore } from '../../src/store/schedules.js';
import { fakeCoreAdmin, runViewOf, sessionOf } from '../fakes/core-admin.js';

/**
 * Schedules and background jobs through the bridge core with a fake transport: the chat's
 * commands, a firing posted into the chat with no incoming message, /jobs and /stop while a run
 * holds the chat. The clock is injected (Fri 27 Nov 2026, 10:00 in Berlin).
 */
const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});

const FRIDAY_10_BERLIN = Date.parse('2026-11-27T09:00:00Z');

function setup(opts: { schedules?: Record<string, unknown>; admins?: string[]; hold?: boolean } = {}) {
  const dir = fs.mkdtempSync(join(os.tmpdir(), 'berth-sched-chat-'));
  dirs.push(dir);
  let now = FRIDAY_10_BERLIN;
  const sent: Array<{ chat: string; text: string }> = [];
  const transport: ChatTransport = {
    name: 'test',
    send: async (chat, text) => void sent.push({ chat, text }),
    typing: async () => undefined,
    acknowledge: async () => undefined,
    projectOf: () => 'p',
  };
  const config = BerthConfigSchema.parse({ schedules: opts.schedules ?? {} });
  const metadata = ProjectMetadataSchema.parse({ name: 'p', admins: opts.admins ?? [] });
  const requests: RunRequest[] = [];
  const gates: Array<() => void> = [];
  const stopped: Array<{ run: string; reason: string }> = [];
  const admin = fakeCoreAdmin({
    getProjectMetadata: () => metadata,
    getSession: (_p, id) => sessionOf(id, 'test:ann'),
    async runMessage(_project, request) {
      requests.push({
        project: 'p',
        tenantKey: request.user,
        message: request.message,
        sessionId: request.session,
        schedule: request.schedule,
      });
      await request.whenReady?.();
      if (opts.hold) await new Promise<void>((r) => gates.push(r));
      return runViewOf({ stdout: `done ${request.message}`, warnings: stopped.length ? [`stopped: ${stopped[0]?.reason}`] : [] });
    },
  });
  const jobs: JobsAdmin = {
    listSessions: () => [sessionOf('chat-s', 'test:ann')],
    openRuns: () =>
      gates.length
        ? [{ run: 'r1', session: 'chat-s', kind: 'message', phase: 'started', since: new Date(Date.now() - 120_000).toISOString() }]
        : [],
    stopRun(_project, run, reason) {
      stopped.push({ run, reason });
      gates.splice(0).forEach((g) => g());
      return { run, stopped: true, here: true };
    },
  };
  const store = openScheduleStore(dir);
  const schedules = createScheduleService({ store, config: () => config, project: () => metadata, now: () => now });
  const inbox = openInbox(dir, 'test');
  const core = createBridgeCore({
    transport,
    inbox,
    state: openBridgeState(dir, 'test'),
    admin,
    config: () => config,
    logger: pino({ level: 'silent' }),
    senderAllowed: () => true,
    schedules,
    jobs,
  });
  let n = 0;
  const say = async (text: string, sender = 'test:ann') => {
    core.receive({ id: `m${n++}`, chat: sender === 'test:ann' ? 'a' : 'b', tenant: sender, sender, text });
    await core.idle();
    return sent.at(-1)?.text;
  };
  const scheduler = createScheduler({
    store,
    stateDir: dir,
    logger: pino({ level: 'silent' }),
    now: () => now,
    dispatch: scheduleDispatch({
      bridges: () => ({
        channel: (name) =>
          name === 'test' ? { name, core, inbox, state: openBridgeState(dir, 'test'), connected: () => true } : undefined,
        web: undefined,
      }),
      admin,
      store,
      logger: pino({ level: 'silent' }),
    }),
  });
  return {
    core,
    sent,
    say,
    store,
    scheduler,
    requests,
    stopped,
    inbox,
    release: () => gates.splice(0).forEach((g) => g()),
    gates,
    advance: (ms: number) => (now += ms),
    now: () => now,
  };
}

describe('chat: schedules', () => {
  it("/tz, then /every answers in plain words with the next run in the person's zone", async () => {
    const t = setup();
    expect(await t.say('/tz')).toBe('berth: your time zone is UTC (/tz Europe/Berlin changes it).');
    expect(await t.say('/tz Europe/Berlin')).toBe(
      'berth: your time zone is now Europe/Berlin. Schedules made from now on use it; earlier ones keep theirs.',
    );
    const reply = await t.say('/every weekday at 09:00 summarise my inbox');
    const [made] = t.store.list();
    expect(reply).toBe(
      `berth: every weekday at 09:00 Europe/Berlin: summarise my inbox, next run Mon 30 Nov 09:00 (schedule ${made?.id}). /cancel ${made?.id} ends it.`,
    );
    expect(made).toMatchObject({
      project: 'p',
      tenant: 'test:ann',
      chat: { channel: 'test', chat: 'a', sender: 'test:ann' },
      zone: 'Europe/Berlin',
      task: 'summarise my inbox',
      created_by: 'tenant:test:ann',
    });
    expect(await t.say('/tz Mars/Base')).toBe('berth: "Mars/Base" is not a time zone');
    expect(await t.say('/every sometimes do it')).toMatch(/^berth: "sometimes do it" is not a time berth understands/);
  });

  it("/schedules lists a person's own; /cancel ends one, and never someone else's", async () => {
    const t = setup();
    await t.say('/at +2h stretch');
    const [made] = t.store.list();
    expect(await t.say('/schedules', 'test:bob')).toBe('berth: no schedules (/every or /at makes one).');
    expect(await t.say(`/cancel ${made?.id}`, 'test:bob')).toBe(`berth: no schedule ${made?.id}`);
    expect(await t.say('/schedules')).toBe(
      `berth: your schedules:\n${made?.id} — once, Fri 27 Nov 11:00 UTC: stretch\n/cancel <id> ends one.`,
    );
    expect(await t.say(`/cancel ${made?.id}`)).toBe(`berth: cancelled ${made?.id} (once, Fri 27 Nov 11:00 UTC: stretch).`);
    expect(t.store.list()).toEqual([]);
  });

  it('berth.yaml bounds: a repeat under the minimum interval, past the count, or by someone schedules.who leaves out is refused', async () => {
    const t = setup({ schedules: { per_tenant: 1, min_interval_seconds: 600 }, admins: ['test:ann'] });
    expect(await t.say('/every 5m ping')).toBe(
      'berth: a schedule may repeat at most every 600 seconds here (berth.yaml schedules.min_interval_seconds)',
    );
    await t.say('/every 10m ping');
    expect(await t.say('/every 1h ping')).toMatch(/^berth: test:ann has 1 schedules in p, the most berth.yaml allows/);
    const admins = setup({ schedules: { who: 'admins' }, admins: ['test:ann'] });
    expect(await admins.say('/at +1h x', 'test:bob')).toBe(
      "berth: schedules here are for this project's admins (berth.yaml schedules.who)",
    );
    expect(await admins.say('/at +1h x')).toMatch(/^berth: once, /);
  });

  it("a due schedule is a run of the person's conversation, posted to the chat it came from, marked scheduled; never twice", async () => {
    const t = setup();
    await t.say('/at +2s check the build');
    const [made] = t.store.list();
    t.advance(2000);
    await t.scheduler.tick();
    await t.core.idle();
    await t.scheduler.tick(); // nothing more is due
    await t.core.idle();
    expect(t.requests).toEqual([
      { project: 'p', tenantKey: 'test:ann', message: 'check the build', sessionId: expect.stringMatching(/^chat-/), schedule: made?.id },
    ]);
    expect(t.sent.at(-1)).toEqual({ chat: 'a', text: `[scheduled ${made?.id}: check the build]\ndone check the build` });
    expect(t.inbox.all().filter((e) => e.id.startsWith('schedule:'))).toEqual([
      expect.objectContaining({ phase: 'replied', chat: 'a', sender: 'test:ann' }),
    ]);
    expect(t.store.list()).toEqual([]); // a once that ran is done
    // The same firing posted again (a berth killed between posting and settling): a duplicate, not a second run.
    expect(
      t.core.post({
        id: `schedule:${made?.id}.${Date.parse(made?.next_at as string)}`,
        chat: 'a',
        sender: 'test:ann',
        tenant: 'test:ann',
        text: 'check the build',
      }),
    ).toBe('duplicate');
    await t.scheduler.stop();
  });

  it("a scheduled task that looks like a command is the agent's, not a command", async () => {
    const t = setup();
    await t.say('/at +1m /new');
    t.advance(60_000);
    await t.scheduler.tick();
    await t.core.idle();
    expect(t.requests.map((r) => r.message)).toEqual(['/new']);
    await t.scheduler.stop();
  });
});

describe('chat: background jobs', () => {
  it("/jobs and /stop are answered at once while a run holds the chat; the stopped run's answer still arrives, saying why", async () => {
    const t = setup({ hold: true });
    t.core.receive({ id: 'long', chat: 'a', tenant: 'test:ann', sender: 'test:ann', text: 'refactor everything' });
    while (!t.gates.length) await new Promise((r) => setTimeout(r, 2));
    t.core.receive({ id: 'j', chat: 'a', tenant: 'test:ann', sender: 'test:ann', text: '/jobs' });
    while (t.sent.length < 1) await new Promise((r) => setTimeout(r, 2));
    expect(t.sent[0]?.text).toBe(
      'berth: running now:\nr1 — running, 2 min (session chat-s)\n/stop <run> ends one; its answer comes here when it ends.',
    );
    t.core.receive({ id: 's', chat: 'a', tenant: 'test:ann', sender: 'test:ann', text: '/stop' });
    await t.core.idle();
    expect(t.stopped).toEqual([{ run: 'r1', reason: 'test:ann asked it to stop (/stop)' }]);
    expect(t.sent.map((s) => s.text)).toContain('berth: stopping r1; its answer follows.');
    expect(t.sent.at(-1)?.text).toBe('done refactor everything\n\n[berth stopped the agent: test:ann asked it to stop (/stop)]');
    expect(await t.say('/jobs')).toBe('berth: nothing of yours is running.');
    expect(await t.say('/stop r9')).toBe('berth: r9 is not one of your runs going on now (/jobs lists them).');
  });
});
