import { parseOrThrow } from '../config/parse.js';
import { printable } from '../base/printable.js';
import { runVerify } from './verify.js';
import { AuditFilterSchema } from '../store/audit.js';
import { need, type Command } from './command.js';

/** What an operator checks: the audit log and its chain, and this host attacked live. */
export const TRUST_COMMANDS: Record<string, Command> = {
  audit: {
    usage:
      'audit [--since ISO-TIME|10m|2h|7d] [--project P] [--actor A] [--kind admin|auth_failure|permission_denied|sandbox_violation|run_receipt] [--limit N] [--json]\n  The audit log, newest first (one line per event, or JSON).',
    options: {
      since: { type: 'string' },
      project: { type: 'string' },
      actor: { type: 'string' },
      kind: { type: 'string' },
      limit: { type: 'string' },
      json: { type: 'boolean' },
    },
    async run(berth, v, pos, io) {
      need(pos, 0, '');
      const filter = parseOrThrow(
        AuditFilterSchema,
        { since: v.since, project: v.project, actor: v.actor, kind: v.kind, limit: v.limit },
        'audit filter',
      );
      const entries = berth().audit.list(filter);
      if (v.json) {
        io.out(`${JSON.stringify(entries, null, 2)}\n`);
        return 0;
      }
      if (entries.length === 0) io.out('no audit events match\n');
      for (const e of entries) {
        const what = [e.project, e.target].filter(Boolean).join('/');
        const summary =
          e.count === undefined
            ? ''
            : `  ×${e.count} since ${e.first_at ?? '?'}${e.samples?.length ? `: ${e.samples.map(printable).join(', ')}` : ''}`;
        io.out(
          `${e.at}  #${e.seq}  ${e.kind}  ${printable(e.action)}  ${printable(e.actor)}  ${printable(what) || '-'}  ${e.outcome}${e.code ? ` ${e.code}` : ''}${summary}\n`,
        );
      }
      return 0;
    },
  },
  'audit verify': {
    usage:
      "audit verify\n  Walk the audit log's hash chain across its rotated files up to the head berth recorded beside it; exits 1 and names the first line that was cut, edited or reordered, or says how many lines were cut off the end.",
    options: {},
    async run(berth, _v, pos, io) {
      need(pos, 0, '');
      const v = berth().audit.verify();
      if (v.ok)
        io.out(`audit log intact: ${v.lines} line(s) in ${v.files} file(s), every one follows the one before, up to the recorded head\n`);
      else if (v.broken && v.broken.line > 0) io.out(`audit log BROKEN at ${v.broken.file} line ${v.broken.line}: ${v.broken.reason}\n`);
      else io.out(`audit log BROKEN: ${v.broken?.reason}\n`);
      return v.ok ? 0 : 1;
    },
  },
  verify: {
    usage:
      'verify [--runtime NAME] [--json]\n  --runtime: check under that OCI runtime (one berth.yaml offers, e.g. runsc), proven from inside.\n  Attack this host live: a throw-away project under the real config and engine, tried the ways the tests do, then check the confinement of each container from inside (seccomp, no-new-privileges, capabilities, own PID and IPC namespaces, pids and memory limits) and what the engine recorded for it against the plan; one line per check; exits 1 on any escape or weakening (or a check that could not run). Cleans up after itself.',
    options: { json: { type: 'boolean' }, runtime: { type: 'string' } },
    logLevel: 'silent',
    async run(berth, v, pos, io) {
      need(pos, 0, '');
      const mark = { ok: 'ok    ', escape: 'ESCAPE', error: 'ERROR ' } as const;
      const checks = await runVerify(
        berth(),
        v.json ? undefined : (c) => io.out(`${mark[c.status]}  ${c.name.padEnd(24)} ${c.detail}\n`),
        undefined,
        { runtime: v.runtime as string | undefined },
      );
      const held = checks.length > 0 && checks.every((c) => c.status === 'ok');
      if (v.json) io.out(`${JSON.stringify({ ok: held, checks }, null, 2)}\n`);
      else
        io.out(
          held
            ? `\nevery boundary held (${checks.length} checks)\n`
            : `\n${checks.filter((c) => c.status !== 'ok').length} check(s) did not hold: this host is not safe for tenants as it is\n`,
        );
      return held ? 0 : 1;
    },
  },
};
