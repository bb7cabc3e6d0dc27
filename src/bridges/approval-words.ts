import type { PermissionLevel } from '../config/session.js';
import type { Approvals } from '../outbound/approvals.js';
import type { ApprovalDecision, ApprovalView } from '../store/approvals.js';
import type { CommandContext } from './commands.js';

/**
 * Approvals as a chat says them: the question a chat without cards (Signal) asks, the answers a
 * person types (/yes, /yes session, /no), what was decided, and a person's request for a level
 * the project does not let them take (asked of the operator; the chat hears the answer).
 */
/** A person's answer to a run's question: /yes (this run), /yes session (this conversation), /no. */
export function approvalAnswerOf(text: string): ApprovalDecision | undefined {
  const t = text.trim().toLowerCase();
  if (t === '/yes' || t === '/yes once') return 'once';
  if (t === '/yes session') return 'session';
  if (t === '/no') return 'deny';
  return undefined;
}

/** "GITHUB_TOKEN for api.github.com:443" (a secret request's target) as a person reads it. */
const secretWords = (target: string) => {
  const [name, host] = target.split(' for ');
  return `the secret ${name} for ${(host ?? '').replace(/:443$/, '')}`;
};

const seconds = (a: ApprovalView) => Math.max(1, Math.round((Date.parse(a.expires_at) - Date.parse(a.asked_at)) / 1000));
const within = (a: ApprovalView) => (seconds(a) % 60 === 0 ? `${seconds(a) / 60} min` : `${seconds(a)} s`);

/** How a chat without cards asks its person (or tells them the operator was asked). */
export function approvalQuestion(a: ApprovalView): string {
  if (a.kind === 'budget') {
    const held = `berth: your message waits: you have used ${a.target}.`;
    if (a.approver === 'operator')
      return `${held} The operator has been asked to allow going past it for today; it waits up to ${within(a)}.`;
    return `${held} Reply /yes to go past it for the rest of today (UTC), or /no. (No answer within ${within(a)}: no.)`;
  }
  if (a.kind === 'secret') {
    const wants = `berth: your agent wants to use ${secretWords(a.target)} (berth adds it; your agent never sees it).`;
    if (a.approver === 'operator') return `${wants} The operator has been asked; it waits up to ${within(a)}.`;
    return `${wants} Reply /yes to allow it for this message, /yes session for this conversation, or /no. (No answer within ${within(a)}: no.)`;
  }
  if (a.approver === 'operator')
    return `berth: your agent wants to reach ${a.target}, which this project does not allow. The operator has been asked; it waits up to ${within(a)}.`;
  return `berth: your agent wants to reach ${a.target}, which this project does not allow. Reply /yes to allow it for this message, /yes session for this conversation, or /no. (No answer within ${within(a)}: no.)`;
}

/** What was decided, in the chat's words (`by` a tenant: said as "you", for the record of the conversation). */
export function approvalOutcome(
  a: Pick<ApprovalView, 'target'> & Partial<Pick<ApprovalView, 'kind'>>,
  answer: { decision: ApprovalDecision; by?: string },
): string {
  if (a.kind === 'budget') {
    if (answer.decision === 'deny')
      return answer.by === 'timeout'
        ? 'berth: nobody answered in time: your message is not run.'
        : `berth: ${answer.by === 'operator' ? 'the operator ' : ''}did not allow going past today's budget.`;
    return `berth: ${answer.by === 'operator' ? 'the operator ' : ''}allowed going past ${a.target} for today; your message runs now.`;
  }
  if (a.kind === 'secret') {
    const what = secretWords(a.target);
    if (answer.by === 'timeout') return `berth: nobody answered in time: ${what} was not added.`;
    if (answer.by === 'berth') return `berth: your agent finished before anyone allowed ${what}: it was not added.`;
    const who = answer.by === 'operator' ? 'the operator ' : answer.by?.startsWith('tenant:') ? 'you ' : '';
    if (answer.decision === 'deny') return `berth: ${who}denied: ${what} was not added.`;
    return `berth: ${who}allowed ${what} ${answer.decision === 'session' ? 'for this conversation' : 'for this message'}.`;
  }
  if (answer.by === 'timeout') return `berth: nobody answered in time: your agent was not let through to ${a.target}.`;
  if (answer.by === 'berth') return `berth: your agent finished before anyone allowed ${a.target}: it was not let through.`;
  const who = answer.by === 'operator' ? 'the operator ' : answer.by?.startsWith('tenant:') ? 'you ' : '';
  if (answer.decision === 'deny') return `berth: ${who}denied: your agent was not let through to ${a.target}.`;
  return `berth: ${who}allowed ${a.target} ${answer.decision === 'session' ? 'for this conversation' : 'for this message'}.`;
}

/** A host someone allowed that still could not be reached: one line, with the reason. */
export function approvalUnreachable(target: string, reason: string): string {
  return `berth: ${target} was allowed, but your agent could not reach it: ${reason.replace(/\.$/, '')}.`;
}

/**
 * The level request of a chat (Signal's /level, the web page's selector) when its person may not
 * take the level: the operator is asked; the chat hears the answer (and `onRaised` runs when it
 * was raised: the web page's selector follows).
 */
export function levelAsker(
  approvals: Pick<Approvals, 'requestLevel'> | undefined,
  ctx: Pick<CommandContext, 'admin' | 'project' | 'tenant' | 'sessionId'>,
  tell: (text: string) => void,
  onRaised?: (level: PermissionLevel) => void,
): CommandContext['askRaise'] {
  if (!approvals) return undefined;
  return (level) => {
    const timeoutSeconds = ctx.admin.getProjectMetadata(ctx.project).chat.approval_timeout_seconds;
    const a = approvals.requestLevel(
      { project: ctx.project, tenant: ctx.tenant, session: ctx.sessionId, level, timeoutSeconds },
      (answer) => {
        if (answer.decision === 'deny')
          tell(
            answer.by === 'timeout'
              ? `berth: the operator did not answer in time: the level stays as it was (not ${level}).`
              : `berth: the operator did not allow level ${level}: it stays as it was.`,
          );
        else {
          tell(`berth: the operator raised this conversation's level to ${level}.`);
          onRaised?.(level);
        }
      },
    );
    return `I asked the operator to allow ${level}; you will hear here when they answer (it waits up to ${within(a)}).`;
  };
}
