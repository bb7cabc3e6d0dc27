import type { ScheduleService } from '../admin/schedules.js';
import { BerthError } from '../base/errors.js';

/**
 * The chat's schedule commands: /every, /at, /schedules, /cancel, /tz. A schedule made here runs
 * in this chat's conversation as the person who made it, and its answer is posted here
 * (bridges/core.ts `post`). The rules (who may, how often, how many) are the schedule service's.
 */
export interface ScheduleCommandContext {
  project: string;
  tenant: string;
  sender: string;
  /** Where the answer goes: this bridge's channel and chat (and the session the person picked, where they pick one). */
  chat?: { channel: string; chat: string; session?: string };
  schedules?: ScheduleService;
}

type ScheduleCommand = (ctx: ScheduleCommandContext, args: string[]) => Promise<string>;

export const SCHEDULE_HELP = [
  '/every <when> <task> — run a task on a repeat: "/every weekday at 09:00 summarise my inbox", "/every 2h check the build"',
  '/at <time> <task> — run a task once: "/at +30m remind me to stretch", "/at tomorrow 09:00 …", "/at 2026-12-24 18:00 …"',
  '/schedules — your schedules here; /cancel <id> ends one',
  '/tz [Europe/Berlin] — your time zone (for /every and /at)',
];

function serviceOf(ctx: ScheduleCommandContext): ScheduleService {
  if (!ctx.schedules || !ctx.chat) throw new BerthError('CONFIG_INVALID', 'schedules are not offered in this chat');
  return ctx.schedules;
}

const make =
  (kind: 'every' | 'at'): ScheduleCommand =>
  async (ctx, args) => {
    const service = serviceOf(ctx);
    if (!args.length) return `berth: ${kind === 'every' ? SCHEDULE_HELP[0] : SCHEDULE_HELP[1]}`;
    const chat = ctx.chat as NonNullable<ScheduleCommandContext['chat']>;
    const { schedule, confirmation } = service.add({
      project: ctx.project,
      tenant: ctx.tenant,
      ...(chat.session ? { session: chat.session } : {}),
      chat: { channel: chat.channel, chat: chat.chat, sender: ctx.sender },
      kind,
      words: args,
      actor: { kind: 'person', who: `tenant:${ctx.sender}` },
    });
    return `berth: ${confirmation}. /cancel ${schedule.id} ends it.`;
  };

export const SCHEDULE_COMMANDS: Record<string, ScheduleCommand> = {
  every: make('every'),
  at: make('at'),
  async schedules(ctx) {
    const mine = serviceOf(ctx).list({ project: ctx.project, tenant: ctx.tenant });
    if (!mine.length) return 'berth: no schedules (/every or /at makes one).';
    const lines = mine.map(
      (s) =>
        `${s.id} — ${s.description}: ${s.task.length > 60 ? `${s.task.slice(0, 59)}…` : s.task}${s.next && s.spec.kind !== 'once' ? ` (next ${s.next})` : ''}`,
    );
    return `berth: your schedules:\n${lines.join('\n')}\n/cancel <id> ends one.`;
  },
  async cancel(ctx, args) {
    const id = args[0];
    if (id === undefined) return 'berth: /cancel <id> (/schedules lists them).';
    const gone = serviceOf(ctx).cancel(id, { project: ctx.project, tenant: ctx.tenant });
    return `berth: cancelled ${gone.id} (${gone.description}: ${gone.task.slice(0, 60)}).`;
  },
  async tz(ctx, args) {
    const service = serviceOf(ctx);
    if (!args[0]) return `berth: your time zone is ${service.zoneOf(ctx.project, ctx.tenant)} (/tz Europe/Berlin changes it).`;
    const zone = service.setZone(ctx.project, ctx.tenant, args[0]);
    return `berth: your time zone is now ${zone}. Schedules made from now on use it; earlier ones keep theirs.`;
  },
};
