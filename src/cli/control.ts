import { BerthError } from '../base/errors.js';
import { printable } from '../base/printable.js';
import { need, type Command } from './command.js';

/** The operator's actions the console has, for scripts: stop a run, open one, pause and resume a project, open a tenant. */
export const CONTROL_COMMANDS: Record<string, Command> = {
  'runs stop': {
    usage:
      'runs stop <project> <run> [--reason TEXT]\n  Stop a run going on (the id "berth runs" or the console shows): at once in this process, else the berth serve of this home running it stops it within a second. Its record and answer say it was stopped.',
    options: { reason: { type: 'string' } },
    async run(berth, v, pos, io) {
      need(pos, 2, 'project name and run id');
      const reason = typeof v.reason === 'string' ? `the operator stopped it: ${v.reason.slice(0, 300)}` : 'the operator stopped it';
      const r = berth().admin.stopRun(pos[0] as string, pos[1] as string, reason);
      io.out(`stopping run ${r.run}${r.here ? '' : ' (asked of the berth process running it)'}\n`);
      return 0;
    },
  },
  'runs show': {
    usage:
      'runs show <project> <run> [--json]\n  One run: who (tenant, channel, session), what (message, steps, answer, stderr), how (level, runtime, warm/pool/cold, timings, exit), what it touched (egress hosts, secrets by name, files out).',
    options: { json: { type: 'boolean' } },
    async run(berth, v, pos, io) {
      need(pos, 2, 'project name and run id');
      const d = berth().admin.runDetail(pos[0] as string, pos[1] as string);
      if (v.json) {
        io.out(`${JSON.stringify(d, null, 2)}\n`);
        return 0;
      }
      const r = d.record;
      const line = (k: string, value: string | number | null | undefined) =>
        io.out(`${k.padEnd(10)} ${value === null || value === undefined ? '-' : printable(String(value))}\n`);
      line('run', `${d.run} (${d.state})`);
      line('who', `${d.tenant ?? '-'} via ${d.channel}, session ${d.session?.id ?? '-'}${d.session?.title ? ` "${d.session.title}"` : ''}`);
      line('message', r?.message);
      if (r)
        line(
          'how',
          `level ${r.permission_level}, ${r.runtime ?? '?'}, ${d.start ?? '?'} start, exit ${r.exit_code}${r.timed_out ? ' (timed out)' : ''}, ${Math.round(r.timings_ms.total)} ms (create ${r.timings_ms.create}, start ${r.timings_ms.start}, run ${r.timings_ms.run})`,
        );
      for (const s of r?.steps ?? [])
        line('  step', `${s.state === 'failed' ? '✗' : '·'} ${s.tool} ${s.detail}${s.ms === undefined ? '' : ` (${s.ms} ms)`}`);
      for (const w of r?.warnings ?? []) line('warning', w);
      if (d.interrupted) line('interrupted', `${d.interrupted.at}: ${d.interrupted.reason}`);
      for (const e of d.egress)
        line(
          'egress',
          `${e.method} ${e.host}:${e.port} → ${e.status}${e.reason ? ` (${e.reason})` : ''}${e.secret ? ` secret ${e.secret}` : ''}`,
        );
      if (d.secrets.granted.length) line('secrets', `granted ${d.secrets.granted.join(', ')}; used ${d.secrets.used.join(', ') || 'none'}`);
      for (const f of r?.files_in ?? []) line('file in', `${printable(f.path)} (${f.size} bytes)`);
      for (const f of d.files_out) line('file out', `${f.name} (${f.size} bytes)`);
      if (r?.answer) io.out(`--- answer\n${r.answer.split('\n').map(printable).join('\n')}\n`);
      if (r?.stderr) io.out(`--- stderr\n${r.stderr.split('\n').map(printable).join('\n')}\n`);
      return 0;
    },
  },
  'project pause': {
    usage:
      'project pause <name> [--reason TEXT]\n  No new run of the project starts (a chat message is refused in words, the API and the CLI with PROJECT_PAUSED) until "project resume"; runs going on finish.',
    options: { reason: { type: 'string' } },
    async run(berth, v, pos, io) {
      need(pos, 1, 'project name');
      if (typeof v.reason === 'string' && v.reason.length > 500) throw new BerthError('USAGE', '--reason must be at most 500 characters');
      const p = berth().admin.pauseProject(pos[0] as string, v.reason as string | undefined);
      io.out(`paused ${p.project} (since ${p.since}): new runs are refused until "berth project resume ${p.project}"\n`);
      return 0;
    },
  },
  'project resume': {
    usage: 'project resume <name>\n  New runs of a paused project start again.',
    options: {},
    async run(berth, _v, pos, io) {
      need(pos, 1, 'project name');
      const p = berth().admin.resumeProject(pos[0] as string);
      io.out(p.was_paused ? `resumed ${p.project}\n` : `${p.project} was not paused\n`);
      return 0;
    },
  },
  'session end': {
    usage:
      'session end <project> <session-id>\n  End a session, keeping it: its runs going on stopped, its warm container let go, its session tokens revoked. Its history, settings and files stay.',
    options: {},
    async run(berth, _v, pos, io) {
      need(pos, 2, 'project name and session id');
      const r = await berth().admin.endSession(pos[0] as string, pos[1] as string);
      io.out(`ended session ${r.session}: ${r.runs_stopped} run(s) stopped, ${r.revoked} token(s) revoked\n`);
      return 0;
    },
  },
  'tenant show': {
    usage:
      "tenant show <project> <tenant-key> [--json]\n  One tenant: their sessions, today's runs and model use against the budget (UTC day).",
    options: { json: { type: 'boolean' } },
    async run(berth, v, pos, io) {
      need(pos, 2, 'project name and tenant key');
      const t = berth().admin.tenantDetail(pos[0] as string, pos[1] as string);
      if (v.json) {
        io.out(`${JSON.stringify(t, null, 2)}\n`);
        return 0;
      }
      io.out(`${printable(t.tenant)} (${t.channel}) in ${t.project}${t.pause.paused ? ' — the project is PAUSED' : ''}\n`);
      io.out(`today: ${t.today.runs} run(s), ${t.today.run_ms} ms, ${t.today.model_requests} model request(s), ${t.today.tokens} tokens\n`);
      for (const s of t.sessions) io.out(`session ${s.id}  level=${s.level}  runs=${s.runs}  ${printable(s.title ?? '')}\n`);
      for (const s of t.schedules)
        io.out(`schedule ${s.id}  next ${s.next_at ?? 'never'}  runs=${s.runs}  ${printable(s.task.slice(0, 80))}\n`);
      if (!t.sessions.length) io.out('no session yet\n');
      return 0;
    },
  },
};
