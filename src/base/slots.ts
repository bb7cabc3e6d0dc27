/**
 * Slots: at most `perKey` holders per key and `total` in all; a taker past either waits its turn
 * (first come, first served among those that fit) until its signal aborts. Memory is bounded by
 * the waiters, each of which holds its caller's own request.
 */
export interface Slots {
  /** Resolves with the release once a slot is free; rejects with the signal's reason if it aborts first. */
  take(key: string, signal: AbortSignal): Promise<() => void>;
}

export function createSlots(limits: () => { perKey: number; total: number }): Slots {
  const held = new Map<string, number>();
  let all = 0;
  const waiting: Array<{ key: string; go: () => void }> = [];

  const fits = (key: string) => {
    const l = limits();
    return all < l.total && (held.get(key) ?? 0) < l.perKey;
  };
  const hold = (key: string) => {
    all++;
    held.set(key, (held.get(key) ?? 0) + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      all--;
      const n = (held.get(key) ?? 1) - 1;
      if (n > 0) held.set(key, n);
      else held.delete(key);
      const next = waiting.findIndex((w) => fits(w.key));
      if (next >= 0) waiting.splice(next, 1)[0]!.go();
    };
  };

  return {
    take(key, signal) {
      if (signal.aborted) return Promise.reject(signal.reason);
      if (fits(key)) return Promise.resolve(hold(key));
      return new Promise((resolve, reject) => {
        const waiter = {
          key,
          go: () => {
            signal.removeEventListener('abort', onAbort);
            resolve(hold(key));
          },
        };
        const onAbort = () => {
          const i = waiting.indexOf(waiter);
          if (i >= 0) waiting.splice(i, 1);
          reject(signal.reason);
        };
        signal.addEventListener('abort', onAbort, { once: true });
        waiting.push(waiter);
      });
    },
  };
}
