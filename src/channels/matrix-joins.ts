import type { Logger } from 'pino';
import { ChannelApiError } from './contract.js';
import { obj, type Json } from './json.js';

/**
 * Invites, joined one at a time beside the sync loop (a slow federation join never holds anyone's
 * message), at most JOIN_BOUNDS.queue waiting. A join the homeserver rate-limits (429) is tried
 * again after the wait it names: Synapse counts a join against the bot's message limit
 * (rc_message, 0.2/s and a burst of 10 by default), so a bot that has just answered a burst is
 * refused its next join, and an invite shows in one sync only: given up, the room would never be
 * joined and its person never answered.
 */
export const JOIN_BOUNDS = { queue: 100, tries: 5, maxWaitSeconds: 60, noWaitSaidSeconds: 5, timeoutMs: 15_000 } as const;

export interface MatrixJoins {
  /** The invites of a sync, queued (auto_join). */
  queue(sync: Json): void;
  /** No join starts after this; a wait or join under way ends at once. */
  stop(): Promise<void>;
}

export function matrixJoins(join: (roomId: string, signal: AbortSignal) => Promise<unknown>, log: Logger): MatrixJoins {
  const waiting: string[] = [];
  let joining: Promise<void> | undefined;
  let stopped = false;
  const stopping = new AbortController();

  const sleep = (ms: number) =>
    new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, ms);
      stopping.signal.addEventListener('abort', () => (clearTimeout(timer), resolve()), { once: true });
    });

  async function joinOne(roomId: string): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        await join(roomId, AbortSignal.any([stopping.signal, AbortSignal.timeout(JOIN_BOUNDS.timeoutMs)]));
        return;
      } catch (err) {
        const limited = err instanceof ChannelApiError && err.status === 429;
        const wait = limited ? (err.retryAfterSeconds ?? JOIN_BOUNDS.noWaitSaidSeconds) : undefined;
        if (stopped || wait === undefined || wait > JOIN_BOUNDS.maxWaitSeconds || attempt >= JOIN_BOUNDS.tries) throw err;
        log.warn({ room: roomId, retryAfter: wait, attempt }, 'rate limited joining a room: waiting, then trying again');
        await sleep(wait * 1000);
      }
    }
  }

  function pump() {
    const next = joining || stopped ? undefined : waiting.shift();
    if (next === undefined) return;
    joining = joinOne(next)
      .catch((err: Error) => {
        if (!stopped) log.warn({ room: next, err: err.message.slice(0, 200) }, 'could not join a room berth was invited to');
      })
      .then(() => {
        joining = undefined;
        pump();
      });
  }

  return {
    queue(sync) {
      for (const roomId of Object.keys(obj(obj(sync.rooms)?.invite) ?? {}))
        if (waiting.length < JOIN_BOUNDS.queue && !waiting.includes(roomId)) waiting.push(roomId);
      pump();
    },
    async stop() {
      stopped = true;
      stopping.abort();
      await joining;
    },
  };
}
