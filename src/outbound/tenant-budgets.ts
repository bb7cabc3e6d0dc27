import { readOutbound, type ModelCall } from '../store/outbound-log.js';
import { createBudgets, type BudgetLimits, type BudgetVerdict } from './budget.js';

/**
 * The one bookkeeping of each tenant's hourly model budget in this process: the model gateway's
 * calls and berth's own transcriptions take from it alike. A restart keeps the hour's usage: it
 * is read back from each project's outbound log the first time that project is counted.
 */
export interface BudgetOwner {
  project: string;
  tenantKey: string;
  /** Where the project's outbound log lives. */
  sessionsDir: string;
}

export interface TenantBudgets {
  /** Count one request now if the tenant has budget left, else say why and when it frees up. */
  take(who: BudgetOwner, limits: BudgetLimits): BudgetVerdict;
  /** Add the tokens a finished call used. */
  spend(who: BudgetOwner, tokens: number): void;
}

export function createTenantBudgets(): TenantBudgets {
  const budgets = createBudgets();
  const seeded = new Set<string>();
  const keyOf = (who: BudgetOwner) => `${who.project}\0${who.tenantKey}`;

  function seedFrom(who: BudgetOwner) {
    if (seeded.has(who.sessionsDir)) return;
    seeded.add(who.sessionsDir);
    const since = new Date(Date.now() - 3_600_000).toISOString();
    for (const r of readOutbound(who.sessionsDir, { since, limit: 100_000, keep: (x) => x.kind === 'model' })) {
      const call = r as ModelCall;
      budgets.seed(`${who.project}\0${call.tenant}`, Date.parse(call.at), 1, call.input_tokens + call.output_tokens);
    }
  }

  return {
    take(who, limits) {
      seedFrom(who);
      return budgets.take(keyOf(who), limits);
    },
    spend: (who, tokens) => budgets.spend(keyOf(who), tokens),
  };
}
