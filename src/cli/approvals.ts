import type { ApprovalDecision, ApprovalView } from '../store/approvals.js';
import { printable } from '../base/printable.js';
import { need, type Command, type Out } from './command.js';

const wants = (a: ApprovalView) =>
  a.kind === 'level'
    ? `level ${a.target}`
    : a.kind === 'budget'
      ? `to go past ${printable(a.target)} (a chat message waits)`
      : printable(a.target);
const describe = (a: ApprovalView) =>
  `${a.id}  ${printable(a.project)}  ${printable(a.tenant)}  session ${printable(a.session)}  wants ${wants(a)}  (${a.approver === 'operator' ? 'operator only' : 'its person or the operator'}; denied at ${a.expires_at})`;

function answer(decision: ApprovalDecision, done: string): Command['run'] {
  return async (berth, _v, pos, io: Out) => {
    need(pos, 1, 'approval id (berth approvals list shows them)');
    const a = berth().approvals.answer(pos[0] as string, decision, { operator: true, actor: 'operator' });
    const what =
      a.kind === 'level'
        ? decision === 'deny'
          ? `level ${a.target}`
          : `level ${a.target} (the session is raised)`
        : a.kind === 'budget'
          ? `going past ${printable(a.target)}${decision === 'deny' ? '' : ' for the rest of the day (UTC)'}`
          : a.kind === 'secret'
            ? `secret ${printable(a.target)}`
            : printable(a.target);
    io.out(
      `${a.kind !== 'egress' && a.kind !== 'secret' && decision !== 'deny' ? 'allowed' : done}: ${what} for ${printable(a.tenant)} in ${printable(a.project)} (the berth that asked hears within a second)\n`,
    );
    return 0;
  };
}

/** The operator's answers to what runs ask for beyond their grant (outbound/approvals.ts). */
export const APPROVAL_COMMANDS: Record<string, Command> = {
  'approvals list': {
    usage:
      "approvals list [--project NAME] [--json]\n  What waits for an answer: an agent's host outside its project's egress allowlist, a chat person's level above what the project lets them take, or a chat message past its tenant's daily model budget (the timeout denies each).",
    options: { project: { type: 'string' }, json: { type: 'boolean' } },
    async run(berth, v, pos, io) {
      need(pos, 0, '');
      const waiting = berth().approvals.pending({ project: v.project as string | undefined });
      if (v.json) io.out(`${JSON.stringify(waiting, null, 2)}\n`);
      else if (waiting.length === 0) io.out('nothing waits for an answer\n');
      else for (const a of waiting) io.out(`${describe(a)}\n`);
      return 0;
    },
  },
  'approvals allow': {
    usage:
      'approvals allow <id> [--session]\n  Let the waiting run reach the host (--session: its conversation may, from now on), raise the session to the level asked for, or let a tenant past its daily model budget for the day.',
    options: { session: { type: 'boolean' } },
    async run(berth, v, pos, io, env) {
      return answer(v.session ? 'session' : 'once', v.session ? 'allowed for the session' : 'allowed once')(berth, v, pos, io, env);
    },
  },
  'approvals deny': {
    usage: 'approvals deny <id>\n  Refuse it: the waiting connection gets 403, and the run is not asked again for that host.',
    options: {},
    run: answer('deny', 'denied'),
  },
};
