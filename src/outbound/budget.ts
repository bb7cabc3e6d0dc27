/**
 * Each tenant's model budget over a rolling hour, kept as 60 one-minute buckets per tenant (so
 * memory stays bounded whatever the limits), keyed by a Map, never by an object.
 */
export interface BudgetLimits {
  requests_per_hour: number;
  tokens_per_hour: number;
}

export type BudgetVerdict = { ok: true } | { ok: false; reason: string; retryAfterS: number };

const MINUTE = 60_000;
const BUCKETS = 60;

interface Bucket {
  minute: number;
  requests: number;
  tokens: number;
}

export interface Budgets {
  /** Count one request now if the tenant has budget left, else say why and when it frees up. */
  take(key: string, limits: BudgetLimits, now?: number): BudgetVerdict;
  /** Add the tokens a finished call used. */
  spend(key: string, tokens: number, now?: number): void;
  /** Load past usage (e.g. from the outbound log at startup). */
  seed(key: string, at: number, requests: number, tokens: number): void;
}

export function createBudgets(): Budgets {
  const tenants = new Map<string, Bucket[]>();

  function live(key: string, now: number): Bucket[] {
    const since = Math.floor(now / MINUTE) - BUCKETS + 1;
    const kept = (tenants.get(key) ?? []).filter((b) => b.minute >= since);
    tenants.set(key, kept);
    return kept;
  }

  function bucket(key: string, at: number): Bucket {
    const buckets = live(key, at);
    const minute = Math.floor(at / MINUTE);
    let b = buckets.find((x) => x.minute === minute);
    if (!b) {
      b = { minute, requests: 0, tokens: 0 };
      buckets.push(b);
    }
    return b;
  }

  /** When enough of the oldest usage leaves the window for `over` to fall back under the limit. */
  function freesAt(buckets: Bucket[], pick: (b: Bucket) => number, limit: number, now: number): number {
    let total = buckets.reduce((n, b) => n + pick(b), 0);
    for (const b of [...buckets].sort((x, y) => x.minute - y.minute)) {
      total -= pick(b);
      if (total < limit) return Math.max(1, Math.ceil(((b.minute + BUCKETS) * MINUTE - now) / 1000));
    }
    return 1;
  }

  return {
    take(key, limits, now = Date.now()) {
      const buckets = live(key, now);
      const requests = buckets.reduce((n, b) => n + b.requests, 0);
      const tokens = buckets.reduce((n, b) => n + b.tokens, 0);
      if (requests >= limits.requests_per_hour) {
        return {
          ok: false,
          reason: `${limits.requests_per_hour} model calls per hour`,
          retryAfterS: freesAt(buckets, (b) => b.requests, limits.requests_per_hour, now),
        };
      }
      if (tokens >= limits.tokens_per_hour) {
        return {
          ok: false,
          reason: `${limits.tokens_per_hour} tokens per hour`,
          retryAfterS: freesAt(buckets, (b) => b.tokens, limits.tokens_per_hour, now),
        };
      }
      bucket(key, now).requests++;
      return { ok: true };
    },
    spend(key, tokens, now = Date.now()) {
      bucket(key, now).tokens += tokens;
    },
    seed(key, at, requests, tokens) {
      const b = bucket(key, at);
      b.requests += requests;
      b.tokens += tokens;
    },
  };
}
