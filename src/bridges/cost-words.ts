import type { Tally } from '../outbound/cost.js';

/**
 * What the chat reads about model use: the line an answer ends with, /usage, the warning near
 * the day's limit and the refusal at it. Pure. Days are UTC days.
 */

/** 950 → "950", 12 345 → "12.3k", 2 000 000 → "2M". */
export function tokensWord(n: number): string {
  if (n < 10_000) return n.toLocaleString('en-US');
  if (n < 1_000_000) return `${trim(n / 1000)}k`;
  return `${trim(n / 1_000_000)}M`;
}
/** "1 token", "12.3k tokens". */
const tokens = (n: number) => `${tokensWord(n)} token${n === 1 ? '' : 's'}`;
const trim = (x: number) => (x >= 100 ? String(Math.round(x)) : x.toFixed(1).replace(/\.0$/, ''));

/** Dollars, or undefined when nothing was priced. */
function moneyWord(t: Tally): string | undefined {
  if (t.calls === t.unpriced) return undefined;
  // A message often costs less than a cent: two significant digits then, not "$0.00".
  const usd = t.usd > 0 && t.usd < 0.01 ? `$${Number(t.usd.toPrecision(2))}` : `$${t.usd.toFixed(2)}`;
  return t.unpriced ? `${usd} + ${t.unpriced} unpriced call${t.unpriced === 1 ? '' : 's'}` : usd;
}

const used = (t: Tally) => t.input + t.output;
const left = (day: { used: number; limit: number }) =>
  day.used >= day.limit ? 'none left today' : `${tokens(day.limit - day.used)} left today`;

/** The line an answer ends with: what this message cost, and what is left of the day. */
export function costLine(run: Tally, day: { used: number; limit: number | undefined }): string {
  const parts = [`${tokensWord(run.input)} tokens in, ${tokensWord(run.output)} out`];
  const money = moneyWord(run);
  if (money) parts.push(money);
  if (day.limit !== undefined) parts.push(left({ used: day.used, limit: day.limit }));
  return `[cost: ${parts.join(' · ')}]`;
}

/** /usage: today and the last seven days. */
export function usageReply(today: Tally, week: Tally, limit: number | undefined, allowedPast: boolean): string {
  const line = (name: string, t: Tally) => {
    const money = moneyWord(t);
    return `${name}: ${tokens(used(t))} (${tokensWord(t.input)} in, ${tokensWord(t.output)} out) in ${t.calls} model call${t.calls === 1 ? '' : 's'}${money ? `, ${money}` : ''}`;
  };
  const budget =
    limit === undefined
      ? 'No daily budget is set.'
      : allowedPast
        ? `Daily budget: ${tokens(limit)}; going past it was allowed for today.`
        : `Daily budget: ${tokens(limit)}; ${left({ used: used(today), limit })} (days start at 00:00 UTC).`;
  return [`berth: your model use`, line('today', today), line('last 7 days', week), budget].join('\n');
}

/** Told once a day, after the answer that crossed WARN_SHARE (or the limit itself). */
export function budgetWarning(day: { used: number; limit: number }): string {
  if (day.used >= day.limit)
    return `berth: you have used today's model budget (${tokensWord(day.used)} of ${tokens(day.limit)}). Your next message will wait until going past it is allowed, or until 00:00 UTC.`;
  const share = Math.floor((100 * day.used) / day.limit);
  return `berth: you have used ${share}% of today's model budget (${tokensWord(day.used)} of ${tokens(day.limit)}).`;
}

/** Why a held message was not run. */
export function budgetRefusal(limit: number, why: 'off' | 'denied' | 'timeout' | 'operator-denied'): string {
  const at = `you have used today's model budget (${tokens(limit)})`;
  const again = 'It starts again at 00:00 UTC; /usage shows where you stand.';
  if (why === 'off') return `berth: not run: ${at}. ${again}`;
  if (why === 'timeout') return `berth: not run: ${at}, and nobody allowed going past it in time. ${again}`;
  if (why === 'operator-denied') return `berth: not run: ${at}, and the operator did not allow going past it. ${again}`;
  return `berth: not run: ${at}, and going past it was not allowed. ${again}`;
}

/** The approval's target: the day's limit, as the person and the operator read it. */
export const budgetTarget = (limit: number) => `today's model budget of ${tokens(limit)}`;
