import { DELIVERY_STEPS, type DeliveryStep } from '../store/inbox.js';

/**
 * What the core's deliver step tries next when a reply's send fails. Pure: the step that failed,
 * how it failed, what the transport can do and the time spent in, the next step and how long to
 * wait before it. The order: the send again with backoff (only a failure that may pass: a 5xx,
 * no answer, a rate limit), then the text without markup, then the text as a file, then a short
 * notice that it could not be delivered. Each step at most once but the first; the whole bounded
 * in time, so a chat service that is down never holds a chat's lane for long.
 */
export { DELIVERY_STEPS, type DeliveryStep };

/** refused: the service will not take it as it is (a 4xx: bad markup, too large); may pass: it may take it later (5xx, unreachable, rate limited). */
export interface SendFailure {
  kind: 'refused' | 'may-pass';
  /** The wait the service asked for (a rate limit's retry-after). */
  retryAfterMs?: number;
}

export interface DeliveryBounds {
  /** Tries of the send itself, the first included. */
  sendAttempts: number;
  /** The first backoff; each next one doubles, up to maxDelayMs. */
  firstDelayMs: number;
  maxDelayMs: number;
  /** A retry-after longer than this is not waited for: the next step is taken. */
  maxRetryAfterMs: number;
  /** No more waiting once this much time has passed since the first try: the notice is next. */
  totalMs: number;
}

export const DELIVERY_BOUNDS: DeliveryBounds = {
  sendAttempts: 3,
  firstDelayMs: 2000,
  maxDelayMs: 30_000,
  maxRetryAfterMs: 60_000,
  totalMs: 120_000,
};

export interface DeliveryAt {
  step: DeliveryStep;
  /** 1 for a step's first try. */
  attempt: number;
}

export type NextDelivery = (DeliveryAt & { afterMs: number }) | { step: 'give-up' };

/** A failed send as the policy sees it: any error with a 4xx `status` (but 408 and 429) is refused; anything else may pass. */
export function sendFailureOf(err: unknown): SendFailure {
  const e = err as { status?: unknown; retryAfterSeconds?: unknown } | undefined;
  const status = typeof e?.status === 'number' ? e.status : undefined;
  const retryAfterMs = typeof e?.retryAfterSeconds === 'number' && e.retryAfterSeconds >= 0 ? e.retryAfterSeconds * 1000 : undefined;
  if (status !== undefined && status >= 400 && status < 500 && status !== 408 && status !== 429) return { kind: 'refused' };
  return { kind: 'may-pass', ...(retryAfterMs !== undefined ? { retryAfterMs } : {}) };
}

/** The step after `at` failed with `failure`, `elapsedMs` after the first try. */
export function nextDelivery(
  at: DeliveryAt,
  failure: SendFailure,
  can: { plain: boolean; file: boolean },
  elapsedMs: number,
  bounds: DeliveryBounds = DELIVERY_BOUNDS,
): NextDelivery {
  if (at.step === 'notice') return { step: 'give-up' };
  if (at.step === 'send' && failure.kind === 'may-pass' && at.attempt < bounds.sendAttempts) {
    const backoff = Math.min(bounds.maxDelayMs, bounds.firstDelayMs * 2 ** (at.attempt - 1));
    const wait = failure.retryAfterMs ?? backoff;
    if (wait <= bounds.maxRetryAfterMs && elapsedMs + wait <= bounds.totalMs)
      return { step: 'send', attempt: at.attempt + 1, afterMs: wait };
  }
  // Out of time: the person is told now, rather than after every other way was tried.
  if (elapsedMs >= bounds.totalMs) return { step: 'notice', attempt: 1, afterMs: 0 };
  const open = (step: DeliveryStep) => (step === 'plain' ? can.plain : step === 'file' ? can.file : true);
  const next = DELIVERY_STEPS.slice(DELIVERY_STEPS.indexOf(at.step) + 1).find(open) ?? 'notice';
  return { step: next, attempt: 1, afterMs: 0 };
}
