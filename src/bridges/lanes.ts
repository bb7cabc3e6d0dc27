/**
 * One lane per chat: a chat's messages run one after another, in arrival order; lanes run in
 * parallel up to a limit (read at each start, so a berth.yaml change applies to the next).
 * Keyed by a Map: chat ids are the transport's strings, never object properties.
 */
export function createLanes(limit: () => number) {
  const tails = new Map<string, { promise: Promise<void>; pending: number }>();
  const waiting: Array<() => void> = [];
  let running = 0;
  let all = new Set<Promise<void>>();

  const slot = () =>
    new Promise<void>((resolve) => {
      if (running < limit()) {
        running++;
        resolve();
      } else waiting.push(() => (running++, resolve()));
    });
  const release = () => {
    running--;
    if (running < limit()) waiting.shift()?.();
  };

  return {
    /** Queue `work` on the chat's lane; says whether it must wait and how many are ahead of it. */
    run(chat: string, work: () => Promise<unknown>): { waiting: boolean; ahead: number } {
      const lane = tails.get(chat) ?? { promise: Promise.resolve(), pending: 0 };
      const ahead = lane.pending + (running >= limit() ? waiting.length + 1 : 0);
      lane.pending++;
      const next = lane.promise.then(async () => {
        await slot();
        try {
          await work();
        } finally {
          release();
          lane.pending--;
          if (lane.pending === 0 && tails.get(chat) === lane) tails.delete(chat);
        }
      });
      lane.promise = next.catch(() => undefined);
      tails.set(chat, lane);
      all.add(next);
      void next.finally(() => all.delete(next)).catch(() => undefined);
      return { waiting: ahead > 0, ahead };
    },
    async idle(): Promise<void> {
      while (all.size > 0) {
        const current = [...all];
        await Promise.allSettled(current);
      }
      all = new Set();
    },
  };
}
