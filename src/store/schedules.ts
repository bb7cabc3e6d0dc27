import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { BerthError } from '../base/errors.js';
import { own } from '../base/own.js';
import { fileStamp, readJsonFile } from '../fs/json-file.js';
import { withOwnerLockSync } from '../fs/lock.js';
import { atomicWriteFile } from '../fs/tree.js';
import { nextRun, ScheduleSpecSchema } from '../plan/schedule-spec.js';

/**
 * Schedules, durable: one file in berth's state (schedules/schedules.json), rewritten whole and
 * atomically (synced temp file, rename) under a cross-process lock, so the CLI, serve and a
 * bridge share it. A due time is *claimed* before anything runs: in one write the schedule's
 * next time moves past now and a firing (keyed "<schedule>.<due ms>") is journaled beside it.
 * The firing is then handed on — into a chat's inbox, whose `receive` deduplicates by that key,
 * or marked `started` before a run without a chat begins — and dropped. A berth killed at any
 * point leaves either the old next time (the claim never happened: it is claimed again, once) or
 * the firing (handed again: the inbox says duplicate; a started one is not run twice). So a time
 * berth missed runs once, late, and never twice.
 */
export const SCHEDULE_TASK_MAX = 4000;
/** Every schedule of a home, whatever the per-tenant bound says. */
export const SCHEDULES_MAX = 10_000;
/** People's time zones a home keeps (one per tenant and project that set one). */
export const ZONES_MAX = 100_000;

const Iso = z.string().datetime();

export const ScheduleChatSchema = z
  .object({
    channel: z.string().min(1).max(64).describe('The channel whose bridge posts the answer (its transport name).'),
    chat: z.string().min(1).max(512).describe('The chat the answer goes to.'),
    sender: z.string().min(1).max(512).describe('Whose message the run stands for (the person who made it).'),
  })
  .strict();
export type ScheduleChat = z.infer<typeof ScheduleChatSchema>;

export const ScheduleSchema = z
  .object({
    id: z.string().regex(/^s[0-9a-f]{8}$/),
    project: z.string(),
    tenant: z.string().describe('The tenant whose session runs it (a chat user or team).'),
    session: z.string().optional().describe("The session it runs in; absent: the chat's (or the tenant's default) at each run."),
    chat: ScheduleChatSchema.optional().describe('Where the answer is posted; absent: only the run log has it.'),
    spec: ScheduleSpecSchema,
    zone: z.string().describe('The IANA time zone its times of day are in.'),
    task: z.string().min(1).max(SCHEDULE_TASK_MAX).describe('The message the agent is given at each run.'),
    created_at: Iso,
    created_by: z.string().describe('"tenant:<key>", "agent:<session>" or "operator".'),
    next_at: Iso.nullable().describe('Its next run; null: it will not run again (a once that ran).'),
    runs: z.number().int().min(0),
    last: z.object({ due: Iso, fired_at: Iso, outcome: z.string().optional() }).strict().optional(),
  })
  .strict();
export type Schedule = z.infer<typeof ScheduleSchema>;

export const FiringSchema = z
  .object({
    key: z.string(),
    schedule: z.string(),
    due: Iso,
    phase: z.enum(['claimed', 'started']),
  })
  .strict();
export type Firing = z.infer<typeof FiringSchema>;

const FileSchema = z
  .object({
    schedules: z.array(ScheduleSchema).max(SCHEDULES_MAX),
    firings: z.array(FiringSchema),
    zones: z.record(z.string(), z.string()).describe('A person\'s time zone, by "<project>/<tenant>".'),
  })
  .strict();
type ScheduleFile = z.infer<typeof FileSchema>;

export type NewSchedule = Omit<Schedule, 'id' | 'created_at' | 'next_at' | 'runs' | 'last'>;

export interface ScheduleStore {
  /** Add one (bounded by `perTenant` for its tenant and project); its first run is computed from `now`. */
  add(input: NewSchedule, bounds: { perTenant: number }, now: number): Schedule;
  list(filter?: { project?: string; tenant?: string }): Schedule[];
  get(id: string): Schedule;
  /** Remove it (and any firing of it not handed on yet); `owner`: only if it is that tenant's of that project. */
  cancel(id: string, owner?: { project: string; tenant: string }): Schedule;
  /** Claim every due time (journaled, next times moved on) and return the firings not handed on yet, old ones first. */
  claimDue(now: number): Array<{ firing: Firing; schedule: Schedule }>;
  /** A firing whose run starts now (one without a chat): a restart will not start it again. */
  markStarted(key: string): void;
  /** A firing handed on (into an inbox) or ended: dropped, its outcome kept on the schedule. */
  settle(key: string, outcome: string): void;
  zoneOf(project: string, tenant: string): string | undefined;
  setZone(project: string, tenant: string, zone: string): void;
}

const EMPTY: ScheduleFile = { schedules: [], firings: [], zones: {} };

export function openScheduleStore(stateDir: string): ScheduleStore {
  const dir = join(stateDir, 'schedules');
  const file = join(dir, 'schedules.json');
  const read = (): ScheduleFile => readJsonFile(file, FileSchema) ?? EMPTY;
  /** Read, change, write back whole — all under the lock. */
  const change = <T>(fn: (state: ScheduleFile) => T): T => {
    fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
    return withOwnerLockSync(join(dir, 'lock'), () => {
      const state = structuredClone(read());
      const result = fn(state);
      atomicWriteFile(file, `${JSON.stringify(FileSchema.parse(state))}\n`, 0o600);
      return result;
    });
  };
  const notFound = (id: string) =>
    new BerthError('NOT_FOUND', `no schedule ${id.slice(0, 20)}`, {
      issues: [{ field: 'id', reason: 'no such schedule (cancelled, done, or never made)' }],
    });
  const find = (state: ScheduleFile, id: string) => {
    const s = state.schedules.find((x) => x.id === id);
    if (!s) throw notFound(id);
    return s;
  };
  const zoneKey = (project: string, tenant: string) => `${project}/${tenant}`;
  /** The firings claimed and not handed on yet, with their schedules, oldest first. */
  const unhanded = (state: ScheduleFile) =>
    state.firings.flatMap((firing) => {
      const schedule = state.schedules.find((s) => s.id === firing.schedule);
      return firing.phase === 'claimed' && schedule ? [{ firing, schedule }] : [];
    });
  /** claimDue's last look found nothing due before `until` in the file as it was (`stamp`). */
  let quiet: { stamp: string | undefined; until: number } | undefined;

  return {
    add(input, bounds, now) {
      return change((state) => {
        const mine = state.schedules.filter((s) => s.project === input.project && s.tenant === input.tenant).length;
        if (mine >= bounds.perTenant)
          throw new BerthError(
            'LIMIT_REACHED',
            `${input.tenant} has ${mine} schedules in ${input.project}, the most berth.yaml allows (schedules.per_tenant: ${bounds.perTenant}); cancel one first`,
          );
        if (state.schedules.length >= SCHEDULES_MAX)
          throw new BerthError('LIMIT_REACHED', `this berth keeps at most ${SCHEDULES_MAX} schedules`);
        const next = nextRun(input.spec, input.zone, now, now);
        if (next === undefined)
          throw new BerthError('CONFIG_INVALID', 'that schedule would never run', {
            issues: [{ field: 'spec', reason: 'its time has passed' }],
          });
        const schedule: Schedule = {
          ...input,
          id: `s${randomBytes(4).toString('hex')}`,
          created_at: new Date(now).toISOString(),
          next_at: new Date(next).toISOString(),
          runs: 0,
        };
        state.schedules.push(schedule);
        return schedule;
      });
    },

    list(filter = {}) {
      return read().schedules.filter(
        (s) =>
          (filter.project === undefined || s.project === filter.project) && (filter.tenant === undefined || s.tenant === filter.tenant),
      );
    },

    get: (id) => find(read(), id),

    cancel(id, owner) {
      return change((state) => {
        const s = find(state, id);
        // Someone else's is as good as not there: its id says nothing to them.
        if (owner && (s.project !== owner.project || s.tenant !== owner.tenant)) throw notFound(id);
        state.schedules = state.schedules.filter((x) => x.id !== id);
        state.firings = state.firings.filter((f) => f.schedule !== id || f.phase === 'started');
        return s;
      });
    },

    claimDue(now) {
      // Asked every tick: the file is parsed again only when it changed or its earliest time came.
      const stamp = fileStamp(file);
      if (quiet && quiet.stamp === stamp && now < quiet.until) return [];
      const before = read();
      if (!before.schedules.some((s) => s.next_at !== null && Date.parse(s.next_at) <= now)) {
        // Nothing to claim: nothing is written; what was claimed and not handed on yet is handed again.
        const waiting = unhanded(before);
        quiet = waiting.length
          ? undefined
          : { stamp, until: Math.min(...before.schedules.map((s) => (s.next_at === null ? Infinity : Date.parse(s.next_at)))) };
        return waiting;
      }
      quiet = undefined;
      return change((state) => {
        for (const s of state.schedules) {
          if (s.next_at === null || Date.parse(s.next_at) > now) continue;
          const dueMs = Date.parse(s.next_at);
          const key = `${s.id}.${dueMs}`;
          if (!state.firings.some((f) => f.key === key)) state.firings.push({ key, schedule: s.id, due: s.next_at, phase: 'claimed' });
          // Missed times are not run one by one: the next is the first after now.
          const next = nextRun(s.spec, s.zone, now, Date.parse(s.created_at));
          s.next_at = next === undefined ? null : new Date(next).toISOString();
          s.runs++;
          s.last = { due: new Date(dueMs).toISOString(), fired_at: new Date(now).toISOString() };
        }
        return unhanded(state);
      });
    },

    markStarted(key) {
      change((state) => {
        const f = state.firings.find((x) => x.key === key);
        if (f) f.phase = 'started';
      });
    },

    settle(key, outcome) {
      change((state) => {
        const f = state.firings.find((x) => x.key === key);
        state.firings = state.firings.filter((x) => x.key !== key);
        const s = f && state.schedules.find((x) => x.id === f.schedule);
        if (s?.last && s.last.due === f?.due) s.last.outcome = outcome.slice(0, 300);
        // A once that ran is done: it leaves the list (its runs stay in the run log).
        if (s && s.next_at === null) state.schedules = state.schedules.filter((x) => x !== s);
      });
    },

    zoneOf: (project, tenant) => own(read().zones, zoneKey(project, tenant)),
    setZone(project, tenant, zone) {
      change((state) => {
        const key = zoneKey(project, tenant);
        if (own(state.zones, key) === undefined && Object.keys(state.zones).length >= ZONES_MAX)
          throw new BerthError('LIMIT_REACHED', `this berth keeps at most ${ZONES_MAX} time zones`);
        state.zones = { ...state.zones, [key]: zone };
      });
    },
  };
}

/** What `started` firings a dead berth left: ended as interrupted (never run again). */
export function startedFirings(store: Pick<ScheduleStore, 'settle'>, stateDir: string): string[] {
  const state = readJsonFile(join(stateDir, 'schedules', 'schedules.json'), FileSchema) ?? EMPTY;
  const keys = state.firings.filter((f) => f.phase === 'started').map((f) => f.key);
  for (const key of keys) store.settle(key, 'interrupted: berth stopped while it ran');
  return keys;
}
