import { setTimeout as wait } from 'node:timers/promises';
import { vi } from 'vitest';

/**
 * Waiting for what a test waits for, never a fixed time. The bound is generous (a busy 2-core
 * machine): passing it is a failure that names what did not happen, never a claim about speed.
 */
const BOUND_MS = 20_000;

/** Poll `probe` until it returns something truthy (which is returned); past the bound, fail naming `what`. */
export async function until<T>(probe: () => T | Promise<T>, what = 'the condition', timeoutMs = BOUND_MS): Promise<NonNullable<T>> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value as NonNullable<T>;
    if (Date.now() > end) throw new Error(`waited ${timeoutMs} ms for ${what}`);
    await wait(5);
  }
}

/** Retry `assertion` (expect calls) until it passes; past the bound, its last failure is the test's. */
export const eventually = <T>(assertion: () => T | Promise<T>, timeoutMs = BOUND_MS): Promise<T> =>
  vi.waitFor(assertion, { timeout: timeoutMs, interval: 5 });
