import type { ApprovalAnswer, ApprovalRequest } from '../store/approvals.js';

/** What approvals.ts says and records of a request: why it is not let through, how it was denied, its audit action. */

/** What a run asks for: a host past its allowlist, or a secret whose grant asks before its first use. */
export type RunAsk = 'egress' | 'secret';

/** Why a run's request is not let through as it is: what an answer of no then adds to. */
export const notAllowedWords = (kind: RunAsk, target: string, project: string) =>
  kind === 'secret'
    ? `secret ${target} is added only once someone allows it (its grant asks first)`
    : `${target} is not in project "${project}"'s egress allowlist`;

/** How a run's request came to be denied. */
export const deniedWords = (kind: RunAsk, by: string, timeoutSeconds: number) =>
  by === 'timeout'
    ? `nobody allowed it within ${timeoutSeconds} s`
    : by === 'berth'
      ? 'the agent answered before anyone allowed it'
      : `${kind === 'secret' ? 'it' : 'the request to reach it'} was denied`;

/** An answer's audit action: timed out, denied, or what was allowed. */
export function auditActionOf(kind: ApprovalRequest['kind'], answer: ApprovalAnswer): string {
  if (answer.by === 'timeout') return 'approval.timeout';
  if (answer.decision === 'deny') return 'approval.deny';
  if (kind === 'egress' || kind === 'secret') return answer.decision === 'once' ? 'approval.allow_once' : 'approval.allow_session';
  return { level: 'approval.raise_level', budget: 'approval.allow_past_budget', forget: 'approval.allow_forget' }[kind];
}
