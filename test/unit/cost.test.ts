import { describe, expect, it } from 'vitest';
import { budgetRefusal, budgetWarning, costLine, tokensWord, usageReply } from '../../src/bridges/cost-words.js';
import { BerthConfigSchema } from '../../src/config/berth-config-schema.js';
import { ProjectMetadataSchema } from '../../src/config/metadata.js';
import { budgetStep, costShown, daysOf, priceOf, tallyOf } from '../../src/outbound/cost.js';
import { modelUseOf } from '../../src/admin/model-use.js';

const models = BerthConfigSchema.parse({
  models: {
    anthropic: {
      api: 'anthropic',
      url: 'https://api.anthropic.com',
      api_key: 'k',
      prices: { 'claude-haiku-*': { input: 1, output: 5 }, 'claude-*': { input: 3, output: 15 } },
    },
    plain: { api: 'openai', url: 'https://api.openai.com', api_key: 'k' },
  },
}).models;

describe('model prices (berth.yaml models.<name>.prices, per million tokens)', () => {
  it('the first pattern that matches the model name prices it; none: no price', () => {
    const prices = models.anthropic?.prices;
    expect(priceOf(prices, 'claude-haiku-4')).toEqual({ input: 1, output: 5 });
    expect(priceOf(prices, 'claude-sonnet-4')).toEqual({ input: 3, output: 15 });
    expect(priceOf(prices, 'gpt-5')).toBeUndefined();
    expect(priceOf(prices, undefined)).toBeUndefined();
    expect(priceOf(undefined, 'claude-sonnet-4')).toBeUndefined();
  });

  it('a tally sums tokens and the money of priced calls, and counts the calls it could not price', () => {
    const t = tallyOf(
      [
        { upstream: 'anthropic', model: 'claude-sonnet-4', input_tokens: 1_000_000, output_tokens: 100_000 },
        { upstream: 'anthropic', model: 'claude-haiku-4', input_tokens: 2_000_000, output_tokens: 0 },
        { upstream: 'plain', model: 'gpt-5', input_tokens: 10, output_tokens: 5 },
        { upstream: 'anthropic', model: 'claude-sonnet-4', input_tokens: 0, output_tokens: 0 }, // a refused call
      ],
      models,
    );
    expect(t).toEqual({ calls: 4, input: 3_000_010, output: 100_005, usd: 3 + 1.5 + 2, unpriced: 1 });
  });

  it('a price is a non-negative number; an unknown key inside a price is refused', () => {
    const at = (prices: unknown) =>
      BerthConfigSchema.safeParse({ models: { a: { api: 'anthropic', url: 'https://x.example', api_key: 'k', prices } } }).success;
    expect(at({ '*': { input: 0, output: 0 } })).toBe(true);
    expect(at({ '*': { input: -1, output: 0 } })).toBe(false);
    expect(at({ '*': { input: 1, output: 2, cached: 1 } })).toBe(false);
    expect(at({ 'bad model!': { input: 1, output: 2 } })).toBe(false);
  });
});

describe('the day of a tenant against its budget', () => {
  const step = (used: number, over: { warned?: boolean; allowed?: boolean; limit?: number } = {}) =>
    budgetStep({ used, limit: 'limit' in over ? over.limit : 1000, warned: over.warned ?? false, allowed: over.allowed ?? false });
  it.each([
    ['no daily limit: always go', step(5000, { limit: undefined }), 'go'],
    ['under 80%: go', step(799), 'go'],
    ['at 80%: warn', step(800), 'warn'],
    ['at 80%, warned today: go', step(900, { warned: true }), 'go'],
    ['at the limit: hold', step(1000), 'hold'],
    ['at the limit, warned: still hold', step(1200, { warned: true }), 'hold'],
    ['past it, allowed today: go', step(5000, { allowed: true }), 'go'],
  ])('%s', (_name, got, want) => expect(got).toBe(want));

  it('days are UTC days; the week is today and the six before', () => {
    expect(daysOf(Date.parse('2026-11-27T23:59:59.999Z'))).toEqual({
      day: '2026-11-27',
      today: '2026-11-27T00:00:00.000Z',
      week: '2026-11-21T00:00:00.000Z',
    });
  });

  it('the cost is shown for claude and codex when a budget or a price is there, unless the project says otherwise', () => {
    const shown = (m: Record<string, unknown>) => costShown(ProjectMetadataSchema.parse({ name: 'p', ...m }), models);
    expect(shown({ agent: 'claude', models: { upstreams: ['anthropic'] } })).toBe(true);
    expect(shown({ agent: 'codex', models: { upstreams: ['plain'] } })).toBe(false);
    expect(shown({ agent: 'codex', models: { upstreams: ['plain'], budget: { tokens_per_day: 10 } } })).toBe(true);
    expect(shown({ agent: 'claude', models: { upstreams: ['anthropic'] }, chat: { show_cost: false } })).toBe(false);
    expect(shown({ agent: 'codex', models: { upstreams: ['plain'] }, chat: { show_cost: true } })).toBe(true);
    expect(shown({ agent: 'shell', models: { upstreams: ['anthropic'] }, chat: { show_cost: true } })).toBe(false);
  });
});

describe('the words about model use', () => {
  const tally = (input: number, output: number, usd = 0, unpriced = 0) => ({ calls: 2, input, output, usd, unpriced });
  it('tokens are short: 950, 12.3k, 2M', () => {
    expect([950, 9999, 12_345, 150_000, 2_000_000, 1_250_000].map(tokensWord)).toEqual(['950', '9,999', '12.3k', '150k', '2M', '1.3M']);
  });
  it('the line an answer ends with', () => {
    expect(costLine(tally(1200, 300, 0.0081), { used: 1500, limit: 100_000 })).toBe(
      '[cost: 1,200 tokens in, 300 out · $0.0081 · 98.5k tokens left today]',
    );
    expect(costLine(tally(1200, 300, 0.125), { used: 1500, limit: 100_000 })).toBe(
      '[cost: 1,200 tokens in, 300 out · $0.13 · 98.5k tokens left today]',
    );
    expect(costLine(tally(1200, 300, 0.001), { used: 200_000, limit: 100_000 })).toBe(
      '[cost: 1,200 tokens in, 300 out · $0.001 · none left today]',
    );
    expect(costLine({ calls: 1, input: 10, output: 2, usd: 0, unpriced: 1 }, { used: 12, limit: undefined })).toBe(
      '[cost: 10 tokens in, 2 out]',
    );
  });
  it('/usage says the day, the week and the budget', () => {
    expect(usageReply(tally(800, 200, 0.5), tally(8000, 2000, 5, 1), 10_000, false)).toBe(
      [
        'berth: your model use',
        'today: 1,000 tokens (800 in, 200 out) in 2 model calls, $0.50',
        'last 7 days: 10k tokens (8,000 in, 2,000 out) in 2 model calls, $5.00 + 1 unpriced call',
        'Daily budget: 10k tokens; 9,000 tokens left today (days start at 00:00 UTC).',
      ].join('\n'),
    );
    expect(usageReply(tally(0, 0), tally(0, 0), undefined, false).split('\n').at(-1)).toBe('No daily budget is set.');
  });
  it('the warning and the refusal', () => {
    expect(budgetWarning({ used: 850, limit: 1000 })).toBe("berth: you have used 85% of today's model budget (850 of 1,000 tokens).");
    expect(budgetWarning({ used: 1000, limit: 1000 })).toMatch(
      /^berth: you have used today's model budget \(1,000 of 1,000 tokens\)\. Your next message will wait/,
    );
    expect(budgetRefusal(1000, 'off')).toBe(
      "berth: not run: you have used today's model budget (1,000 tokens). It starts again at 00:00 UTC; /usage shows where you stand.",
    );
  });
});

describe("the console's model use per tenant", () => {
  it('the last hour against the hourly budget, and today (UTC) with its money against the daily one', () => {
    const now = Date.parse('2026-11-27T10:30:00Z');
    const call = (tenant: string, at: string, input: number, output: number, model = 'claude-sonnet-4') => ({
      kind: 'model' as const,
      at,
      run: 'r',
      tenant,
      session: 's',
      status: 200,
      upstream: 'anthropic',
      model,
      input_tokens: input,
      output_tokens: output,
      ms: 1,
    });
    const use = modelUseOf(
      [
        call('ann', '2026-11-27T10:00:00Z', 1_000_000, 0),
        call('ann', '2026-11-27T02:00:00Z', 0, 100_000),
        call('bob', '2026-11-27T01:00:00Z', 10, 10, 'gpt-5'),
        call('cy', '2026-11-26T23:50:00Z', 5, 5), // yesterday, and more than an hour ago
      ],
      { requests_per_hour: 200, tokens_per_hour: 2_000_000, tokens_per_day: 5_000_000 },
      models,
      now,
    );
    expect(use).toEqual({
      budget: { requests_per_hour: 200, tokens_per_hour: 2_000_000, tokens_per_day: 5_000_000 },
      tenants: [
        { tenant: 'ann', requests: 1, tokens: 1_000_000, today: { tokens: 1_100_000, usd: 4.5, unpriced_calls: 0 } },
        { tenant: 'bob', requests: 0, tokens: 0, today: { tokens: 20, usd: 0, unpriced_calls: 1 } },
      ],
    });
  });
});
