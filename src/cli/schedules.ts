import { BerthError } from '../base/errors.js';
import { printable } from '../base/printable.js';
import type { ScheduleView } from '../admin/schedules.js';
import { need, type Command, type Out } from './command.js';

/** `berth schedule add|list|cancel`: the operator's schedules (admin/schedules.ts decides; this only translates). */
function printSchedule(s: ScheduleView, io: Out): void {
  const where = s.chat ? `  chat=${printable(s.chat.channel)}:${printable(s.chat.chat)}` : '';
  io.out(
    `${s.id}  ${s.project}  tenant=${printable(s.tenant)}${s.session ? `  session=${printable(s.session)}` : ''}  ${s.description}  next=${s.next ?? '-'}${where}  runs=${s.runs}  ${printable(s.task.slice(0, 60))}\n`,
  );
}

export const SCHEDULE_COMMANDS: Record<string, Command> = {
  'schedule add': {
    usage:
      'schedule add <project> --user <tenant> [--session S] (--every SPEC | --at TIME) [--tz ZONE] [--chat CHANNEL:CHAT] [--json] -- <task...>\n  Run the agent for a tenant on a repeat (SPEC: "2h", "weekday at 09:00", "mon,fri 18:30") or once (TIME: "+30s", "+2h", "14:00", "2026-12-24 18:00"); --chat posts each answer there (a running bridge).',
    options: {
      user: { type: 'string' },
      session: { type: 'string' },
      every: { type: 'string' },
      at: { type: 'string' },
      tz: { type: 'string' },
      chat: { type: 'string' },
      json: { type: 'boolean' },
    },
    async run(berth, v, pos, io) {
      if (pos.length < 1)
        throw new BerthError('USAGE', 'missing project name', {
          hint: 'berth schedule add <project> --user <tenant> --every 2h -- <task>',
        });
      if (typeof v.user !== 'string') throw new BerthError('USAGE', 'missing --user <tenant-key>');
      const task = pos.slice(1).join(' ').trim();
      if (!task)
        throw new BerthError('USAGE', 'missing task', {
          hint: 'put the task after --: berth schedule add p --user u --at +2h -- check the build',
        });
      let chat: { channel: string; chat: string } | undefined;
      if (typeof v.chat === 'string') {
        const at = v.chat.indexOf(':');
        if (at < 1 || at === v.chat.length - 1)
          throw new BerthError('USAGE', '--chat is CHANNEL:CHAT (e.g. signal:+4915112345678, webhook:ops)');
        chat = { channel: v.chat.slice(0, at), chat: v.chat.slice(at + 1) };
      }
      const s = berth().schedules.addFor(pos[0] as string, {
        user: v.user,
        task,
        ...(typeof v.session === 'string' ? { session: v.session } : {}),
        ...(typeof v.every === 'string' ? { every: v.every } : {}),
        ...(typeof v.at === 'string' ? { at: v.at } : {}),
        ...(typeof v.tz === 'string' ? { tz: v.tz } : {}),
        ...(chat ? { chat } : {}),
      });
      if (v.json) io.out(`${JSON.stringify(s, null, 2)}\n`);
      else io.out(`schedule ${s.id}: ${s.description}${s.next && s.spec.kind !== 'once' ? `, next run ${s.next}` : ''}\n`);
      return 0;
    },
  },
  'schedule list': {
    usage: 'schedule list [<project>] [--user TENANT] [--json]\n  Schedules (of one project, one tenant), with their next run.',
    options: { user: { type: 'string' }, json: { type: 'boolean' } },
    async run(berth, v, pos, io) {
      if (pos.length > 1) need(pos, 1, 'project name');
      const b = berth();
      if (pos[0] !== undefined) b.admin.getProjectMetadata(pos[0]); // PROJECT_NOT_FOUND for a typo, not an empty list
      const list = b.schedules.list({
        ...(pos[0] !== undefined ? { project: pos[0] } : {}),
        ...(typeof v.user === 'string' ? { tenant: v.user } : {}),
      });
      if (v.json) io.out(`${JSON.stringify({ schedules: list }, null, 2)}\n`);
      else if (!list.length) io.out('no schedules\n');
      else for (const s of list) printSchedule(s, io);
      return 0;
    },
  },
  'schedule cancel': {
    usage: 'schedule cancel <id>\n  End a schedule (a run of it going on now finishes).',
    options: {},
    async run(berth, _v, pos, io) {
      need(pos, 1, 'schedule id');
      const s = berth().schedules.cancel(pos[0] as string);
      io.out(`cancelled ${s.id} (${s.description}: ${printable(s.task.slice(0, 60))})\n`);
      return 0;
    },
  },
};
