import { z } from 'zod';
import { BerthError } from '../base/errors.js';
import { parseOrThrow } from '../config/parse.js';
import type { BerthConfig } from '../config/berth-config.js';
import type { ProjectMetadata } from '../config/metadata.js';
import { scheduleRefusal, type ScheduleActorKind } from '../plan/schedule-policy.js';
import { describeSpec, readAt, readEvery } from '../plan/schedule-spec.js';
import { checkZone, shortTime } from '../plan/time-zone.js';
import { ScheduleSchema, SCHEDULE_TASK_MAX, type Schedule, type ScheduleChat, type ScheduleStore } from '../store/schedules.js';

/**
 * Schedules, once, for every surface (chat commands, the agent's schedule tool, CLI, API): read
 * the words, hold berth.yaml's rules (plan/schedule-policy.ts) and the store's per-tenant bound,
 * and say it back in plain words ("every weekday at 09:00 Europe/Berlin: …, next run Mon 30 Nov
 * 09:00"). The clock is injected.
 */
export const ScheduleViewSchema = ScheduleSchema.extend({
  description: z.string().describe('When it runs, in words ("every weekday at 09:00 Europe/Berlin").'),
  next: z.string().nullable().describe('Its next run in words, in its zone ("Mon 30 Nov 09:00"); null: none.'),
});
export type ScheduleView = z.infer<typeof ScheduleViewSchema>;

export const ScheduleAddSchema = z
  .object({
    user: z.string().min(1).max(512).describe("The tenant whose session runs it (a chat user's key, or a team)."),
    session: z.string().min(1).max(256).optional().describe("The session it runs in; default: the tenant's own."),
    every: z
      .string()
      .min(1)
      .max(200)
      .optional()
      .describe('A repeat: "2h", "30 minutes", "weekday at 09:00", "mon,fri 18:30" (a trailing IANA zone allowed).'),
    at: z.string().min(1).max(200).optional().describe('Once: "+30s", "+2h", "14:00", "tomorrow 09:00", "2026-12-24 18:00", an ISO time.'),
    tz: z
      .string()
      .min(1)
      .max(64)
      .optional()
      .describe("The time zone of its times of day; default: the tenant's (/tz), else berth.yaml schedules.time_zone."),
    task: z.string().min(1).max(SCHEDULE_TASK_MAX).describe('What the agent is told at each run.'),
    chat: z
      .object({ channel: z.string().min(1).max(64), chat: z.string().min(1).max(512), sender: z.string().min(1).max(512).optional() })
      .strict()
      .optional()
      .describe('Where its answers are posted (a running bridge of that channel); default: only the run log.'),
  })
  .strict()
  .refine((v) => (v.every === undefined) !== (v.at === undefined), { message: 'give exactly one of every or at', path: ['every'] });
export type ScheduleAdd = z.input<typeof ScheduleAddSchema>;

export interface ScheduleAsk {
  project: string;
  tenant: string;
  session?: string;
  chat?: ScheduleChat;
  kind: 'every' | 'at';
  /** The spec's words; without `task`, the words after the spec are the task (a chat's /every). */
  words: string[];
  task?: string;
  zone?: string;
  actor: { kind: ScheduleActorKind; who: string };
}

export interface ScheduleService {
  add(ask: ScheduleAsk): { schedule: ScheduleView; confirmation: string };
  /** The operator's add (CLI, API): its body as ScheduleAddSchema says. */
  addFor(project: string, body: ScheduleAdd): ScheduleView;
  list(filter?: { project?: string; tenant?: string }): ScheduleView[];
  get(id: string): ScheduleView;
  /** `owner`: a person cancels only their own (another's id is NOT_FOUND to them). */
  cancel(id: string, owner?: { project: string; tenant: string }): ScheduleView;
  zoneOf(project: string, tenant: string): string;
  setZone(project: string, tenant: string, zone: string): string;
  /** The chat a session's last message came from (in this process): where its agent's schedules answer. */
  noteChat(project: string, session: string, chat: ScheduleChat): void;
  chatOf(project: string, session: string): ScheduleChat | undefined;
}

/** Chats remembered per session for the agent's schedules (the oldest forgotten first). */
const CHATS_KEPT = 10_000;

export function createScheduleService(deps: {
  store: ScheduleStore;
  config: () => BerthConfig;
  /** The project's settings (its admins); PROJECT_NOT_FOUND when there is none. */
  project: (name: string) => ProjectMetadata;
  now?: () => number;
}): ScheduleService {
  const now = deps.now ?? Date.now;
  const chats = new Map<string, ScheduleChat>();
  const view = (s: Schedule): ScheduleView => ({
    ...s,
    description: describeSpec(s.spec, s.zone, now()),
    next: s.next_at === null ? null : shortTime(Date.parse(s.next_at), s.zone, now()),
  });
  const zoneOf = (project: string, tenant: string) => deps.store.zoneOf(project, tenant) ?? deps.config().schedules.time_zone;

  function add(ask: ScheduleAsk) {
    const metadata = deps.project(ask.project);
    const rules = deps.config().schedules;
    const at = now();
    const base = ask.zone !== undefined ? checkZone(ask.zone) : zoneOf(ask.project, ask.tenant);
    const read = ask.kind === 'every' ? readEvery(ask.words, base) : readAt(ask.words, base, at);
    const rest = ask.words.slice(read.used).join(' ').trim();
    if (ask.task !== undefined && rest)
      throw new BerthError('CONFIG_INVALID', `"${rest.slice(0, 40)}" is not part of a time`, {
        issues: [{ field: ask.kind, reason: 'the time alone here; the task is given apart' }],
      });
    const task = (ask.task ?? rest).trim();
    if (!task)
      throw new BerthError('CONFIG_INVALID', 'what should the agent do then?', {
        issues: [
          {
            field: 'task',
            reason: `give the task after the time, e.g. /${ask.kind} ${ask.kind === 'every' ? 'weekday at 09:00' : '+2h'} check the build`,
          },
        ],
      });
    if (task.length > SCHEDULE_TASK_MAX)
      throw new BerthError('CONFIG_INVALID', 'that task is too long', {
        issues: [{ field: 'task', reason: `at most ${SCHEDULE_TASK_MAX} characters` }],
      });
    const refusal = scheduleRefusal(rules, {
      actor: ask.actor.kind,
      isAdmin: metadata.admins.includes(ask.chat?.sender ?? ask.tenant),
      spec: read.spec,
    });
    if (refusal) throw new BerthError(refusal.code, refusal.message, { issues: [{ field: refusal.field, reason: refusal.message }] });
    const schedule = view(
      deps.store.add(
        {
          project: ask.project,
          tenant: ask.tenant,
          ...(ask.session ? { session: ask.session } : {}),
          ...(ask.chat ? { chat: ask.chat } : {}),
          spec: read.spec,
          zone: read.zone,
          task,
          created_by: ask.actor.who,
        },
        { perTenant: rules.per_tenant },
        at,
      ),
    );
    const next = schedule.spec.kind === 'once' ? '' : `, next run ${schedule.next}`;
    return {
      schedule,
      confirmation: `${schedule.description}: ${task.length > 80 ? `${task.slice(0, 79)}…` : task}${next} (schedule ${schedule.id})`,
    };
  }

  return {
    add,
    addFor(project, body) {
      const b = parseOrThrow(ScheduleAddSchema, body, 'schedule');
      const chat = b.chat ? { channel: b.chat.channel, chat: b.chat.chat, sender: b.chat.sender ?? b.user } : undefined;
      return add({
        project,
        tenant: b.user,
        session: b.session,
        chat,
        kind: b.every !== undefined ? 'every' : 'at',
        words: (b.every ?? b.at ?? '').trim().split(/\s+/),
        task: b.task,
        zone: b.tz,
        actor: { kind: 'operator', who: 'operator' },
      }).schedule;
    },
    list: (filter) => deps.store.list(filter).map(view),
    get: (id) => view(deps.store.get(id)),
    cancel: (id, owner) => view(deps.store.cancel(id, owner)),
    zoneOf,
    setZone(project, tenant, zone) {
      const canonical = checkZone(zone);
      deps.store.setZone(project, tenant, canonical);
      return canonical;
    },
    noteChat(project, session, chat) {
      const key = `${project}/${session}`;
      chats.delete(key);
      chats.set(key, chat);
      if (chats.size > CHATS_KEPT) chats.delete(chats.keys().next().value as string);
    },
    chatOf: (project, session) => chats.get(`${project}/${session}`),
  };
}
