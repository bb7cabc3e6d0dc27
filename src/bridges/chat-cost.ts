import type { AdminService } from '../admin/service.js';
import type { BerthConfig } from '../config/berth-config.js';
import type { Approvals } from '../outbound/approvals.js';
import { budgetStep, costShown, daysOf, tallyOf } from '../outbound/cost.js';
import type { BudgetDays } from '../store/budget-days.js';
import type { ApprovalListener } from '../store/approvals.js';
import { budgetRefusal, budgetTarget, budgetWarning, costLine, usageReply } from './cost-words.js';

/**
 * The cost of a chat's model use, as the chat sees it: before a run, a tenant at its day's
 * budget is held until its approver (chat.approvals) allows going past it for the day; after a
 * run, the answer ends with what it cost and, once a day, a warning near the limit; /usage.
 * The counting is the model gateway's (the outbound log); this file only reads and says it.
 */
export interface ChatCost {
  /** Before a run: undefined to go on, else the words of a refusal (it stays unrun). */
  hold(who: Who, listen: ApprovalListener): Promise<string | undefined>;
  /** After a run: what its answer ends with (the cost line, a warning), or undefined. */
  after(who: Who, run: string): string | undefined;
  usage(who: Who): string;
}

type Who = { project: string; tenant: string; sessionId: string };

export function createChatCost(deps: {
  admin: Pick<AdminService, 'modelCalls' | 'getProjectMetadata'>;
  config: () => BerthConfig;
  approvals?: Partial<Pick<Approvals, 'requestBudget'>>;
  days: BudgetDays;
  now?: () => number;
}): ChatCost {
  const now = deps.now ?? Date.now;
  /** The tenant's day, from one read of the outbound log since `since` (which includes today's start). */
  const dayOf = (who: Who, since: (d: ReturnType<typeof daysOf>, at: number) => string) => {
    const metadata = deps.admin.getProjectMetadata(who.project);
    const at = now();
    const d = daysOf(at);
    const calls = deps.admin.modelCalls(who.project, { since: since(d, at), tenant: who.tenant });
    const today = tallyOf(
      calls.filter((c) => c.at >= d.today),
      deps.config().models,
    );
    const mark = deps.days.get(who.project, who.tenant, d.day);
    return { metadata, d, calls, today, mark, used: today.input + today.output, limit: metadata.models.budget.tokens_per_day };
  };
  const today = (d: ReturnType<typeof daysOf>) => d.today;
  /** A run that began before midnight counts whole: its calls are read back a day at least. */
  const runWindow = (d: ReturnType<typeof daysOf>, at: number) => new Date(Math.min(Date.parse(d.today), at - 86_400_000)).toISOString();

  return {
    async hold(who, listen) {
      // Most projects have no daily budget: their messages never read the outbound log here.
      if (deps.admin.getProjectMetadata(who.project).models.budget.tokens_per_day === undefined) return undefined;
      const { metadata, d, mark, used, limit } = dayOf(who, today);
      if (limit === undefined || budgetStep({ used, limit, warned: mark.warned, allowed: mark.allowed_by !== undefined }) !== 'hold')
        return undefined;
      const approver = metadata.chat.approvals;
      const ask = deps.approvals?.requestBudget;
      if (approver === 'off' || !ask) return budgetRefusal(limit, 'off');
      const answer = await ask(
        {
          project: who.project,
          tenant: who.tenant,
          session: who.sessionId,
          target: budgetTarget(limit),
          approver,
          timeoutSeconds: metadata.chat.approval_timeout_seconds,
        },
        listen,
      );
      if (answer.decision === 'deny')
        return budgetRefusal(limit, answer.by === 'timeout' ? 'timeout' : answer.by === 'operator' ? 'operator-denied' : 'denied');
      deps.days.mark(who.project, who.tenant, d.day, { allowed_by: answer.by });
      return undefined;
    },

    after(who, run) {
      const project = deps.admin.getProjectMetadata(who.project);
      if (project.models.budget.tokens_per_day === undefined && !costShown(project, deps.config().models)) return undefined;
      const { metadata, d, calls, mark, used, limit } = dayOf(who, runWindow);
      const lines: string[] = [];
      if (costShown(metadata, deps.config().models))
        lines.push(
          costLine(
            tallyOf(
              calls.filter((c) => c.run === run),
              deps.config().models,
            ),
            { used, limit },
          ),
        );
      if (
        limit !== undefined &&
        !mark.warned &&
        budgetStep({ used, limit, warned: false, allowed: mark.allowed_by !== undefined }) !== 'go'
      ) {
        deps.days.mark(who.project, who.tenant, d.day, { warned: true });
        lines.push(budgetWarning({ used, limit }));
      }
      return lines.length ? lines.join('\n') : undefined;
    },

    usage(who) {
      const { calls, today, mark, limit } = dayOf(who, (d) => d.week);
      return usageReply(today, tallyOf(calls, deps.config().models), limit, mark.allowed_by !== undefined);
    },
  };
}
