/**
 * A sync webhook request waiting for its message (webhook.ts, `reply: sync`): it is answered
 * once the message has ended (`finished`: the agent's files' links come after its answer), with
 * the answer and berth's notices about it (refused files, links, what a voice note said). When
 * the request stops waiting first (reply_timeout_seconds, or its caller hung up), what had come
 * is what it gets (without an answer, webhook.ts sends its notices the callback's way, as the answer will).
 */

/** A sync answer's notices: past these, the rest go to the callback. */
export const SYNC_NOTICES = { count: 16, chars: 64 * 1024 } as const;

export interface SyncAnswer {
  /** The answer, if it came while the request waited. */
  reply?: string;
  notices: string[];
}

export interface SyncWaits {
  /** Hold a request for message `id` until it ends, `ms` pass or `gone` aborts. */
  wait(id: string, ms: number, gone: AbortSignal): Promise<SyncAnswer>;
  /** Take the message's answer into its waiting request: false when none waits. */
  answer(id: string, text: string): boolean;
  /** Take a notice into the message's waiting request: false when none waits (or it is full). */
  notice(id: string, text: string): boolean;
  /** The message has ended: its request is answered now. */
  end(id: string): void;
}

interface Waiting {
  reply?: string;
  notices: string[];
  chars: number;
  end(): void;
}

export function createSyncWaits(): SyncWaits {
  /** By message id: one per message (a duplicate waits for nothing). */
  const waiting = new Map<string, Waiting>();
  return {
    wait(id, ms, gone) {
      return new Promise((resolve) => {
        const w: Waiting = { notices: [], chars: 0, end };
        function end() {
          if (waiting.get(id) !== w) return;
          waiting.delete(id);
          clearTimeout(timer);
          gone.removeEventListener('abort', end);
          resolve({ ...(w.reply !== undefined ? { reply: w.reply } : {}), notices: w.notices });
        }
        const timer = setTimeout(end, ms);
        timer.unref();
        gone.addEventListener('abort', end, { once: true });
        waiting.set(id, w);
      });
    },
    answer(id, text) {
      const w = waiting.get(id);
      if (w) w.reply = text;
      return w !== undefined;
    },
    notice(id, text) {
      const w = waiting.get(id);
      if (!w || w.notices.length >= SYNC_NOTICES.count || w.chars + text.length > SYNC_NOTICES.chars) return false;
      w.notices.push(text);
      w.chars += text.length;
      return true;
    },
    end: (id) => waiting.get(id)?.end(),
  };
}
