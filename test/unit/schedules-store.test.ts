import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { createScheduler, type Dispatch } from '../../src/runs/scheduler.js';
import { openScheduleStore, type NewSchedule } from '../../src/store/schedules.js';
import { openInbox } from '../../src/store/inbox.js';
import { BerthConfigSchema } from '../../src/config/berth-config-schema.js';
import { scheduleOfMessage } from '../../src/bridges/scheduled.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});
const tmp = () => {
  const d = fs.mkdtempSync(join(os.tmpdir(), 'berth-sched-'));
  dirs.push(d);
  return d;
};
const silent = pino({ level: 'silent' });
const T0 = Date.parse('2026-11-27T08:00:00Z');
const HOUR = 3600_000;
const base = (over: Partial<NewSchedule> = {}): NewSchedule => ({
  project: 'p',
  tenant: 'signal:+1',
  spec: { kind: 'interval', seconds: 3600 },
  zone: 'UTC',
  task: 'check the build',
  created_by: 'operator',
  ...over,
});

describe('schedule store', () => {
  it("keeps schedules across a reopen, bounds them per tenant, cancels only a tenant's own", () => {
    const dir = tmp();
    const a = openScheduleStore(dir).add(base(), { perTenant: 2 }, T0);
    expect(a.next_at).toBe(new Date(T0 + HOUR).toISOString());
    const store = openScheduleStore(dir);
    expect(store.list().map((s) => s.id)).toEqual([a.id]);
    store.add(base(), { perTenant: 2 }, T0);
    expect(() => store.add(base(), { perTenant: 2 }, T0)).toThrow(expect.objectContaining({ code: 'LIMIT_REACHED' }));
    store.add(base({ tenant: 'signal:+2' }), { perTenant: 2 }, T0); // another tenant's bound is its own
    expect(() => store.cancel(a.id, { project: 'p', tenant: 'signal:+2' })).toThrow(expect.objectContaining({ code: 'NOT_FOUND' }));
    expect(store.cancel(a.id, { project: 'p', tenant: 'signal:+1' }).id).toBe(a.id);
    expect(() => store.get(a.id)).toThrow(expect.objectContaining({ code: 'NOT_FOUND' }));
  });

  it("keeps a person's time zone", () => {
    const dir = tmp();
    openScheduleStore(dir).setZone('p', 'signal:+1', 'Europe/Berlin');
    expect(openScheduleStore(dir).zoneOf('p', 'signal:+1')).toBe('Europe/Berlin');
    expect(openScheduleStore(dir).zoneOf('p', 'signal:+2')).toBeUndefined();
    expect(openScheduleStore(dir).zoneOf('p', '__proto__')).toBeUndefined();
  });
});

describe('scheduler (an injected clock)', () => {
  function rig() {
    const dir = tmp();
    const store = openScheduleStore(dir);
    let now = T0;
    const handed: string[] = [];
    const dispatch: Dispatch = async (firing) => {
      handed.push(firing.key);
      store.settle(firing.key, 'ok');
      return 'handed';
    };
    const scheduler = createScheduler({ store, stateDir: dir, dispatch, logger: silent, now: () => now });
    return { dir, store, scheduler, handed, advance: (ms: number) => (now += ms) };
  }

  it('runs nothing before its time, then once per due time', async () => {
    const t = rig();
    const s = t.store.add(base(), { perTenant: 5 }, T0);
    await t.scheduler.tick();
    expect(t.handed).toEqual([]);
    t.advance(HOUR);
    await t.scheduler.tick();
    await t.scheduler.tick();
    expect(t.handed).toEqual([`${s.id}.${T0 + HOUR}`]);
    expect(t.store.get(s.id)).toMatchObject({ runs: 1, next_at: new Date(T0 + 2 * HOUR).toISOString(), last: { outcome: 'ok' } });
    await t.scheduler.stop();
  });

  it('a schedule another process adds after a quiet look is fired at its time (the file is read again when it changed)', async () => {
    const t = rig();
    t.store.add(base(), { perTenant: 5 }, T0); // due in an hour: the next ticks are quiet
    await t.scheduler.tick();
    const soon = openScheduleStore(t.dir).add(
      base({ spec: { kind: 'once', at: new Date(T0 + 1000).toISOString() } }),
      { perTenant: 5 },
      T0,
    );
    t.advance(1000);
    await t.scheduler.tick();
    expect(t.handed).toEqual([`${soon.id}.${T0 + 1000}`]);
    await t.scheduler.stop();
  });

  it('a berth that was down for hours runs a missed time once, late, not once per missed time', async () => {
    const t = rig();
    const s = t.store.add(base(), { perTenant: 5 }, T0);
    t.advance(5.5 * HOUR);
    await t.scheduler.tick();
    await t.scheduler.tick();
    expect(t.handed).toEqual([`${s.id}.${T0 + HOUR}`]);
    expect(t.store.get(s.id).next_at).toBe(new Date(T0 + 6 * HOUR).toISOString());
    t.advance(0.5 * HOUR);
    await t.scheduler.tick();
    expect(t.handed).toHaveLength(2);
    await t.scheduler.stop();
  });

  it('a once schedule runs once and is gone; a firing whose chat is not running waits and is handed later, once', async () => {
    const t = rig();
    const once = t.store.add(base({ spec: { kind: 'once', at: new Date(T0 + 1000).toISOString() } }), { perTenant: 5 }, T0);
    let up = false;
    const handed: string[] = [];
    const scheduler = createScheduler({
      store: t.store,
      stateDir: tmp(),
      logger: silent,
      now: () => T0 + 2000,
      dispatch: async (firing) => {
        if (!up) return 'wait';
        handed.push(firing.key);
        t.store.settle(firing.key, 'posted');
        return 'handed';
      },
    });
    await scheduler.tick();
    const file = join(t.dir, 'schedules', 'schedules.json');
    const written = fs.statSync(file).mtimeMs;
    await scheduler.tick();
    expect(handed).toEqual([]);
    expect(fs.statSync(file).mtimeMs).toBe(written); // a firing that waits is not written again each tick
    up = true;
    await scheduler.tick();
    await scheduler.tick();
    expect(handed).toEqual([`${once.id}.${T0 + 1000}`]);
    expect(t.store.list()).toEqual([]);
    await scheduler.stop();
  });

  it('one berth process of a home fires: a second scheduler on the same state does nothing while the first lives', async () => {
    const t = rig();
    t.store.add(base(), { perTenant: 5 }, T0);
    await t.scheduler.tick(); // takes the firing lock
    const other: string[] = [];
    const second = createScheduler({
      store: t.store,
      stateDir: t.dir,
      logger: silent,
      now: () => T0 + 2 * HOUR,
      owner: '1.1.other',
      dispatch: async (f) => (other.push(f.key), 'handed'),
    });
    await second.tick();
    expect(other).toEqual([]);
    await t.scheduler.stop();
  });

  it('a run a killed berth had started is not started again: it ends as interrupted', async () => {
    const t = rig();
    const s = t.store.add(base(), { perTenant: 5 }, T0);
    const [claimed] = t.store.claimDue(T0 + HOUR);
    t.store.markStarted(claimed?.firing.key as string);
    // A new berth's scheduler (the first never took the lock: as if it died)
    await t.scheduler.tick();
    expect(t.handed).toEqual([]);
    expect(t.store.get(s.id).last?.outcome).toMatch(/^interrupted/);
    await t.scheduler.stop();
  });
});

describe('schedules across kill -9', () => {
  it('every due time is posted exactly once, however often the berth firing them is killed mid-way', async () => {
    const dir = tmp();
    const store = openScheduleStore(dir);
    const now = Date.now();
    // Due by the time a child is up: each child claims, posts and settles as many as it can before it is killed.
    const ids = Array.from(
      { length: 30 },
      (_, i) => store.add(base({ spec: { kind: 'once', at: new Date(now + 1 + i).toISOString() } }), { perTenant: 100 }, now).id,
    );
    const src = (f: string) => JSON.stringify(join(process.cwd(), 'src', f));
    // The chat dispatch's steps (bridges/scheduled-runs.ts): into the inbox under the firing's id, then settled.
    const script = `
      import { pino } from 'pino';
      import { openScheduleStore } from ${src('store/schedules.ts')};
      import { createScheduler } from ${src('runs/scheduler.ts')};
      import { openInbox } from ${src('store/inbox.ts')};
      import { scheduledMessageId } from ${src('bridges/scheduled.ts')};
      const dir = process.argv[1];
      const store = openScheduleStore(dir);
      const inbox = openInbox(dir, 'test');
      // KILL_AT="<n>:<where>": kill -9 itself at its n-th firing, before it is posted, between posting and settling, or after.
      const [n, where] = (process.env.KILL_AT ?? '-1:none').split(':');
      let seen = 0;
      const die = (at) => seen === Number(n) && where === at && process.kill(process.pid, 'SIGKILL');
      const scheduler = createScheduler({ store, stateDir: dir, logger: pino({ level: 'silent' }), dispatch: async (f, s) => {
        seen++;
        die('before');
        inbox.receive({ id: scheduledMessageId(f.key), chat: 'c', sender: 'u', tenant: 'u', text: s.task });
        die('posted');
        store.settle(f.key, 'posted');
        die('settled');
        return 'handed';
      } });
      for (;;) {
        await scheduler.tick();
        if (store.list().length === 0) process.exit(0);
        await new Promise((r) => setTimeout(r, 1));
      }`;
    // What was posted: the inbox (its entries are the runs), by the schedule each is a firing of.
    const posted = () =>
      openInbox(dir, 'test')
        .all()
        .map((e) => scheduleOfMessage(e.id));
    const kills = ['2:before', '1:posted', '3:settled', '2:posted'];
    const progress: number[] = [];
    for (const at of [...kills, undefined]) {
      const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script, dir], {
        stdio: ['ignore', 'ignore', 'inherit'],
        env: { ...process.env, KILL_AT: at },
      });
      const signal = await new Promise<NodeJS.Signals | null>((resolve) => child.once('exit', (_code, sig) => resolve(sig)));
      expect(signal).toBe(at === undefined ? null : 'SIGKILL');
      progress.push(posted().length);
    }
    // Each killed berth left work for the next.
    expect(progress.slice(0, -1).every((n) => n < ids.length)).toBe(true);
    expect(posted().sort()).toEqual([...ids].sort()); // none lost, none doubled
    expect(openScheduleStore(dir).list()).toEqual([]);
  }, 60_000);
});

describe('berth.yaml schedules:', () => {
  it('has defaults, and refuses a time zone that is not one, naming the field', () => {
    expect(BerthConfigSchema.parse({}).schedules).toEqual({
      who: 'everyone',
      per_tenant: 20,
      min_interval_seconds: 300,
      time_zone: 'UTC',
      tick_seconds: 1,
    });
    const bad = BerthConfigSchema.safeParse({ schedules: { time_zone: 'Berlin/Mars' } });
    expect(bad.success).toBe(false);
    expect(bad.error?.issues[0]).toMatchObject({
      path: ['schedules', 'time_zone'],
      message: 'must be an IANA time zone such as Europe/Berlin, America/New_York or UTC',
    });
    expect(BerthConfigSchema.safeParse({ schedules: { who: 'anyone' } }).success).toBe(false);
    expect(BerthConfigSchema.safeParse({ schedules: { min_interval_seconds: 0 } }).success).toBe(false);
  });
});
