import type { Context } from 'hono';
import { streamSSE } from 'hono/streaming';
import { BerthError } from '../../base/errors.js';

/**
 * The console's live updates as server-sent events (text/event-stream): a `state` event every
 * EVENT_EVERY_MS with what the page shows. Bounded: EVENTS_PER_CALLER connections per login (a
 * few tabs) and EVENTS_MAX in all (BUSY past either), each closed after EVENTS_LIFETIME_MS (the
 * browser's EventSource connects again, checked again: a login that ended gets no more).
 */
export const EVENT_EVERY_MS = 2000;
export const EVENTS_PER_CALLER = 3;
export const EVENTS_MAX = 32;
export const EVENTS_LIFETIME_MS = 5 * 60_000;

export function createConsoleEvents(opts: { everyMs?: number; lifetimeMs?: number } = {}) {
  const open = new Map<string, number>();
  let all = 0;
  return {
    open: (key: string) => open.get(key) ?? 0,
    /** Stream `state()` to the caller until they go, the lifetime ends, or `still()` says their login ended. */
    serve(c: Context, key: string, state: () => Promise<unknown>, still: () => boolean): Response {
      if ((open.get(key) ?? 0) >= EVENTS_PER_CALLER)
        throw new BerthError('BUSY', `at most ${EVENTS_PER_CALLER} live console connections per login`, { retry_after: 10 });
      if (all >= EVENTS_MAX) throw new BerthError('BUSY', `at most ${EVENTS_MAX} live console connections in all`, { retry_after: 10 });
      open.set(key, (open.get(key) ?? 0) + 1);
      all++;
      c.header('cache-control', 'no-store');
      return streamSSE(c, async (stream) => {
        const until = Date.now() + (opts.lifetimeMs ?? EVENTS_LIFETIME_MS);
        let aborted = false;
        stream.onAbort(() => void (aborted = true));
        try {
          while (!aborted && Date.now() < until && still()) {
            const sent = await state().then(
              (s) => ({ event: 'state', data: JSON.stringify(s) }),
              (err: unknown) => ({ event: 'failed', data: JSON.stringify({ message: String((err as Error).message).slice(0, 300) }) }),
            );
            await stream.writeSSE(sent);
            await stream.sleep(opts.everyMs ?? EVENT_EVERY_MS);
          }
        } finally {
          const left = (open.get(key) ?? 1) - 1;
          if (left > 0) open.set(key, left);
          else open.delete(key);
          all--;
        }
      });
    },
  };
}
export type ConsoleEvents = ReturnType<typeof createConsoleEvents>;
