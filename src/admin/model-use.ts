import type { ModelUpstreams } from '../config/outbound.js';
import { daysOf, tallyOf } from '../outbound/cost.js';
import type { ModelCall } from '../store/outbound-log.js';

/**
 * Each tenant's model use as the console shows it: the last hour against the hourly budget, and
 * today (UTC) against the daily one, with its money where berth.yaml prices the models. Pure.
 */
export interface ModelUse {
  budget: { requests_per_hour: number; tokens_per_hour: number; tokens_per_day: number | null };
  tenants: Array<{ tenant: string; requests: number; tokens: number; today: { tokens: number; usd: number; unpriced_calls: number } }>;
}

/** `calls`: the project's model calls since the earlier of an hour ago and today's start. */
export function modelUseOf(
  calls: readonly ModelCall[],
  budget: { requests_per_hour: number; tokens_per_hour: number; tokens_per_day?: number | undefined },
  upstreams: ModelUpstreams,
  now: number,
): ModelUse {
  const hourAgo = new Date(now - 3600_000).toISOString();
  const { today } = daysOf(now);
  const byTenant = new Map<string, ModelCall[]>();
  for (const c of calls) byTenant.set(c.tenant, [...(byTenant.get(c.tenant) ?? []), c]);
  const tenants = [...byTenant].map(([tenant, mine]) => {
    const hour = mine.filter((c) => c.at >= hourAgo);
    const day = tallyOf(
      mine.filter((c) => c.at >= today),
      upstreams,
    );
    return {
      tenant,
      requests: hour.length,
      tokens: hour.reduce((n, c) => n + c.input_tokens + c.output_tokens, 0),
      today: { tokens: day.input + day.output, usd: day.usd, unpriced_calls: day.unpriced },
    };
  });
  return {
    budget: {
      requests_per_hour: budget.requests_per_hour,
      tokens_per_hour: budget.tokens_per_hour,
      tokens_per_day: budget.tokens_per_day ?? null,
    },
    tenants: tenants
      .filter((t) => t.requests > 0 || t.today.tokens > 0)
      .sort((a, b) => b.tokens - a.tokens || b.requests - a.requests || b.today.tokens - a.today.tokens),
  };
}
