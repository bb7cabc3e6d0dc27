import { own } from '../base/own.js';
import { modelAllowed, type ModelPrices, type ModelUpstreams } from '../config/outbound.js';

/**
 * What model calls cost, and where a tenant stands against its daily budget. Pure: the calls,
 * berth.yaml's prices and the clock's value come in; sums and decisions go out.
 */

/** Tokens (and money, where every call's model has a price) of some model calls. */
export interface Tally {
  calls: number;
  input: number;
  output: number;
  /** US dollars of the priced calls. */
  usd: number;
  /** Calls whose model berth.yaml gives no price: their money is not in `usd`. */
  unpriced: number;
}

export interface CountedCall {
  upstream: string;
  model?: string | undefined;
  input_tokens: number;
  output_tokens: number;
}

/** The price of a model: the first of the upstream's patterns that matches its name. */
export function priceOf(prices: ModelPrices, model: string | undefined): { input: number; output: number } | undefined {
  if (!prices || model === undefined) return undefined;
  for (const pattern of Object.keys(prices)) if (modelAllowed([pattern], model)) return own(prices, pattern);
  return undefined;
}

export function tallyOf(calls: readonly CountedCall[], upstreams: ModelUpstreams): Tally {
  const t: Tally = { calls: 0, input: 0, output: 0, usd: 0, unpriced: 0 };
  for (const c of calls) {
    t.calls++;
    t.input += c.input_tokens;
    t.output += c.output_tokens;
    const price = priceOf(own(upstreams, c.upstream)?.prices, c.model);
    if (price) t.usd += (c.input_tokens * price.input + c.output_tokens * price.output) / 1_000_000;
    else if (c.input_tokens + c.output_tokens > 0) t.unpriced++;
  }
  return t;
}

/** Past this share of the day's budget the person is warned, once a day. */
export const WARN_SHARE = 0.8;

/** What a tenant's day says: go on; tell them they are near (or at) the limit; hold the next run. */
export type BudgetStep = 'go' | 'warn' | 'hold';

/**
 * `allowed`: someone allowed going past the limit today; `warned`: the person heard it today.
 * Before a run only 'hold' matters; after one, 'warn' and 'hold' both mean "tell them, once".
 */
export function budgetStep(day: { used: number; limit: number | undefined; warned: boolean; allowed: boolean }): BudgetStep {
  if (day.limit === undefined) return 'go';
  if (day.used >= day.limit && !day.allowed) return 'hold';
  if (day.used >= WARN_SHARE * day.limit && !day.warned && !day.allowed) return 'warn';
  return 'go';
}

/** Today (UTC) as "YYYY-MM-DD", and the starts of today and of the last seven days, as ISO times. */
export function daysOf(now: number): { day: string; today: string; week: string } {
  const start = Math.floor(now / 86_400_000) * 86_400_000;
  return {
    day: new Date(start).toISOString().slice(0, 10),
    today: new Date(start).toISOString(),
    week: new Date(start - 6 * 86_400_000).toISOString(),
  };
}

/** Whether a project's answers end with their cost: as its chat.show_cost says, else when there is a budget or a price to show. */
export function costShown(
  metadata: {
    chat: { show_cost?: boolean | undefined };
    agent: unknown;
    models: { upstreams: readonly string[]; budget: { tokens_per_day?: number | undefined } };
  },
  upstreams: ModelUpstreams,
): boolean {
  if (metadata.agent !== 'claude' && metadata.agent !== 'codex') return false; // only a real agent's calls are counted
  if (metadata.chat.show_cost !== undefined) return metadata.chat.show_cost;
  return (
    metadata.models.budget.tokens_per_day !== undefined || metadata.models.upstreams.some((u) => own(upstreams, u)?.prices !== undefined)
  );
}
