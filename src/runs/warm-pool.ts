import fs from 'node:fs';
import type { Logger } from 'pino';
import type { Engine } from '../launch/docker.js';

/** A session's warm container: made from a plan with this identity, its sockets in `runDir`. */
export interface WarmContainer {
  containerId: string;
  identity: string;
  /** The run directory its /run/berth mount shows (each message's sockets are opened there). */
  runDir?: string;
}

export interface WarmPool {
  /** The session's idle container, taken out of the pool for one message (nothing else can reap or use it meanwhile). */
  take(key: string): WarmContainer | undefined;
  /** Its message is done and it is clean: idle again, until the next message or the idle timeout. */
  put(key: string, warm: WarmContainer): void;
  /** Remove its container and its run directory (recycled, unclean, reaped). */
  discard(warm: WarmContainer): Promise<void>;
  /** Remove every idle warm container (berth stops); returns how many. */
  close(): Promise<number>;
  size(): number;
}

/**
 * Warm session containers, one per session (key: project + session), in memory: a berth that
 * stops removes them, and one that dies leaves them to the next one's startup reaper (they carry
 * its owner label). Bounded by `max` (the one idle longest goes first) and by the idle timeout.
 */
export function createWarmPool(deps: { engine: Engine; idleMs: () => number; max: () => number; logger: Logger; onSize?: (n: number) => void }): WarmPool {
  const idle = new Map<string, { warm: WarmContainer; timer: NodeJS.Timeout }>();
  const changed = () => deps.onSize?.(idle.size);

  async function discard(warm: WarmContainer): Promise<void> {
    await deps.engine.removeContainers([warm.containerId]);
    if (warm.runDir) fs.rmSync(warm.runDir, { recursive: true, force: true });
  }

  function evict(key: string, why: string) {
    const held = idle.get(key);
    if (!held) return;
    idle.delete(key);
    clearTimeout(held.timer);
    changed();
    deps.logger.info({ container: held.warm.containerId.slice(0, 12), why }, 'warm container removed');
    void discard(held.warm).catch((err: unknown) => deps.logger.warn({ err: String(err) }, 'could not remove a warm container'));
  }

  return {
    take(key) {
      const held = idle.get(key);
      if (!held) return undefined;
      idle.delete(key);
      clearTimeout(held.timer);
      changed();
      return held.warm;
    },
    put(key, warm) {
      const ms = deps.idleMs();
      if (ms <= 0 || deps.max() <= 0) {
        void discard(warm).catch(() => undefined);
        return;
      }
      evict(key, 'replaced'); // never two for one session
      const timer = setTimeout(() => evict(key, 'idle'), ms);
      timer.unref();
      idle.set(key, { warm, timer });
      // Map order is insertion order: the first entries have been idle longest.
      for (const oldest of idle.keys()) {
        if (idle.size <= deps.max()) break;
        evict(oldest, 'warm_max');
      }
      changed();
    },
    discard,
    async close() {
      const all = [...idle.values()];
      idle.clear();
      for (const held of all) clearTimeout(held.timer);
      changed();
      await Promise.all(all.map((held) => discard(held.warm).catch(() => undefined)));
      return all.length;
    },
    size: () => idle.size,
  };
}
