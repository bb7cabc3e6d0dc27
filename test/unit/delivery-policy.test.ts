import { describe, expect, it } from 'vitest';
import { ChannelApiError } from '../../src/channels/contract.js';
import { DELIVERY_BOUNDS, nextDelivery, sendFailureOf, type DeliveryAt, type SendFailure } from '../../src/bridges/delivery-policy.js';

/** The deliver step's policy, as a table: what is tried after each way a send fails. */
const refused: SendFailure = { kind: 'refused' };
const mayPass: SendFailure = { kind: 'may-pass' };
const all = { plain: true, file: true };
const at = (step: DeliveryAt['step'], attempt = 1): DeliveryAt => ({ step, attempt });

describe('delivery policy', () => {
  it('reads a service error: a 4xx is refused (but 408 and 429), a 5xx, no answer or a rate limit may pass', () => {
    expect(sendFailureOf(new ChannelApiError("sendMessage: Bad Request: can't parse entities", 400))).toEqual({ kind: 'refused' });
    expect(sendFailureOf(new ChannelApiError('M_TOO_LARGE', 413))).toEqual({ kind: 'refused' });
    expect(sendFailureOf(new ChannelApiError('M_UNKNOWN', 500))).toEqual({ kind: 'may-pass' });
    expect(sendFailureOf(new ChannelApiError('cannot be reached', 0))).toEqual({ kind: 'may-pass' });
    expect(sendFailureOf(new ChannelApiError('rate limited', 429, 7))).toEqual({ kind: 'may-pass', retryAfterMs: 7000 });
    expect(sendFailureOf(new Error('socket hang up'))).toEqual({ kind: 'may-pass' });
  });

  it('a failure that may pass: the send again with doubling backoff, then plain, file, notice, give up', () => {
    expect([
      nextDelivery(at('send', 1), mayPass, all, 0),
      nextDelivery(at('send', 2), mayPass, all, 2000),
      nextDelivery(at('send', 3), mayPass, all, 6000),
      nextDelivery(at('plain'), mayPass, all, 6000),
      nextDelivery(at('file'), mayPass, all, 6000),
      nextDelivery(at('notice'), mayPass, all, 6000),
    ]).toEqual([
      { step: 'send', attempt: 2, afterMs: 2000 },
      { step: 'send', attempt: 3, afterMs: 4000 },
      { step: 'plain', attempt: 1, afterMs: 0 },
      { step: 'file', attempt: 1, afterMs: 0 },
      { step: 'notice', attempt: 1, afterMs: 0 },
      { step: 'give-up' },
    ]);
  });

  it('refused (bad markup, too large): never the same send again, straight to plain', () => {
    expect(nextDelivery(at('send'), refused, all, 0)).toEqual({ step: 'plain', attempt: 1, afterMs: 0 });
  });

  it('a rate limit waits what the service asked; one past the bound is not waited for', () => {
    expect(nextDelivery(at('send'), { kind: 'may-pass', retryAfterMs: 7000 }, all, 0)).toEqual({ step: 'send', attempt: 2, afterMs: 7000 });
    expect(nextDelivery(at('send'), { kind: 'may-pass', retryAfterMs: DELIVERY_BOUNDS.maxRetryAfterMs + 1 }, all, 0)).toEqual({
      step: 'plain',
      attempt: 1,
      afterMs: 0,
    });
  });

  it('what the transport cannot do is skipped', () => {
    expect(nextDelivery(at('send'), refused, { plain: false, file: true }, 0)).toEqual({ step: 'file', attempt: 1, afterMs: 0 });
    expect(nextDelivery(at('send'), refused, { plain: false, file: false }, 0)).toEqual({ step: 'notice', attempt: 1, afterMs: 0 });
    // A step journaled by a berth whose transport could do it (a restart resumes there): the next one this transport can do.
    expect(nextDelivery(at('plain'), refused, { plain: false, file: false }, 0)).toEqual({ step: 'notice', attempt: 1, afterMs: 0 });
  });

  it('bounded in time: no wait past the total, and past it the person is told at once', () => {
    const near = DELIVERY_BOUNDS.totalMs - 1000;
    expect(nextDelivery(at('send'), mayPass, all, near)).toEqual({ step: 'plain', attempt: 1, afterMs: 0 });
    expect(nextDelivery(at('send'), mayPass, all, DELIVERY_BOUNDS.totalMs)).toEqual({ step: 'notice', attempt: 1, afterMs: 0 });
    expect(nextDelivery(at('plain'), mayPass, all, DELIVERY_BOUNDS.totalMs)).toEqual({ step: 'notice', attempt: 1, afterMs: 0 });
  });
});
