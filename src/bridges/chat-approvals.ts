import { isBerthError } from '../base/errors.js';
import type { Approvals } from '../outbound/approvals.js';
import type { ApprovalDecision, ApprovalEvent, ApprovalView } from '../store/approvals.js';
import { approvalOutcome, approvalQuestion, approvalUnreachable } from './approval-words.js';
import { NOTHING_ASKED } from './commands.js';

/**
 * A run's questions in a chat without cards (Signal): said as text, answered by /yes, /yes
 * session or /no. The answer is taken outside the chat's lane, which the asking run holds; each
 * chat's questions wait oldest first, and an answer goes to the first.
 */
export interface ChatQuestions {
  /** A run's request (or its end), as the chat hears it. */
  ask(chat: string, event: ApprovalEvent): void;
  /** A question waits in the chat: its /yes or /no is answered now, not queued. */
  waiting(chat: string): boolean;
  /** Answer the chat's first question, once: what the person is told. */
  answer(from: { chat: string; sender: string; tenant: string }, decision: ApprovalDecision): string;
}

export function createChatQuestions(
  approvals: Pick<Approvals, 'answer'> | undefined,
  say: (chat: string, text: string) => void,
): ChatQuestions {
  const asked = new Map<string, ApprovalView[]>();
  return {
    ask(chat, event) {
      if (event.type === 'asked') {
        asked.set(chat, [...(asked.get(chat) ?? []), event.approval]);
        say(chat, approvalQuestion(event.approval));
        return;
      }
      if (event.type === 'unreachable') return say(chat, approvalUnreachable(event.target, event.reason));
      const left = (asked.get(chat) ?? []).filter((a) => a.id !== event.id);
      const answered = asked.get(chat)?.find((a) => a.id === event.id);
      if (left.length) asked.set(chat, left);
      else asked.delete(chat);
      // A person's own /yes or /no is confirmed by its reply; the rest is told here.
      if (answered && (event.by === 'timeout' || event.by === 'operator')) say(chat, approvalOutcome(answered, event));
    },

    waiting: (chat) => asked.has(chat),

    answer(from, decision) {
      const first = asked.get(from.chat)?.[0];
      if (!first || !approvals) return NOTHING_ASKED;
      try {
        approvals.answer(first.id, decision, { actor: `tenant:${from.sender}`, project: first.project, tenant: from.tenant });
        return approvalOutcome(first, { decision });
      } catch (err) {
        return `berth: ${isBerthError(err) ? err.message : 'that answer could not be taken'}`;
      }
    },
  };
}
