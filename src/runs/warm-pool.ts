import fs from 'node:fs';
import type { Logger } from 'pino';
import type { Launcher } from '../launch/launcher.js';

/** A session's warm container: made from a plan with this identity, its sockets in `runDir`. */
export interface WarmContainer {
  containerId: string;
  identity: string;
  /** Project and workspace id: the workspace it has mounted (shared by a tenant's sessions). */
  workspace: string;
  /** The run directory its /run/berth mount shows (each message's sockets are opened there). */
  runDir?: string;
  /** When it was started (ms since the epoch): past MAX_AGE_MS it is not used again. */
  since: number;
}

/** A warm container serves messages for at most an hour, then the session gets a fresh one. */
export const MAX_AGE_MS = 60 * 60 * 1000;

export interface WarmPool {
  /**
   * The session's idle container, taken out of the pool for one message (nothing else can reap
   * or use it meanwhile); undefined if it has none. Either way the session is the message's until
   * put() or drop().
   */
  take(key: string): WarmContainer | undefined;
  /** Its message is done and it is clean: idle again, until the next message or the idle timeout. */
  put(key: string, warm: WarmContainer): void;
  /** Remove its container and its run directory (one that was never in the pool). */
  discard(warm: WarmContainer): Promise<void>;
  /** The message is done with the session without a container to keep (recycled, unclean, failed): remove it, if any. */
  drop(key: string, warm?: WarmContainer): Promise<void>;
  /**
   * Remove the idle containers `pick` chooses (by key: project + session, or by the workspace they
   * have mounted); one a message holds now (no `warm` given) is removed when it comes back.
   */
  discardWhere(pick: (key: string, warm?: WarmContainer) => boolean): Promise<void>;
  /**
   * The session is gone: remove its idle container, and the one a message in flight holds when
   * it comes back (a new session of that id must never inherit it).
   */
  forget(key: string): Promise<void>;
  /** Remove every idle warm container (berth stops); returns how many. */
  close(): Promise<number>;
  size(): number;
}

/**
 * Warm session containers, one per session (key: project + session), in memory: a berth that
 * stops removes them, and one that dies leaves them to the next one's startup reaper (they carry
 * its owner label). Bounded by `perTenant` (idle containers of one workspace: a tenant's own least
 * recently used goes first), by `max` (the one idle longest goes first) and by the idle timeout.
 * A tenant's containers in use are not counted until they come back: at most its admission
 * limit (runs.per_tenant) more.
 */
export function createWarmPool(deps: {
  launcher: Launcher;
  idleMs: () => number;
  max: () => number;
  perTenant: () => number;
  logger: Logger;
  onSize?: (n: number) => void;
}): WarmPool {
  const idle = new Map<string, { warm: WarmContainer; timer: NodeJS.Timeout; since: number }>();
  /** Sessions whose container a message holds now (taken, not yet put back or dropped). */
  const taken = new Set<string>();
  /** Of those, the sessions deleted meanwhile: their container is removed when it comes back. */
  const forgotten = new Set<string>();
  const changed = () => deps.onSize?.(idle.size);

  async function discard(warm: WarmContainer): Promise<void> {
    await deps.launcher.removeContainers([warm.containerId]);
    if (warm.runDir) fs.rmSync(warm.runDir, { recursive: true, force: true });
  }

  /** Out of the pool and removed; the promise settles once the container is gone (never rejects). */
  function evict(key: string, why: string): Promise<void> {
    const held = idle.get(key);
    if (!held) return Promise.resolve();
    idle.delete(key);
    clearTimeout(held.timer);
    changed();
    deps.logger.info({ container: held.warm.containerId.slice(0, 12), why }, 'warm container removed');
    return discard(held.warm).catch((err: unknown) => deps.logger.warn({ err: String(err) }, 'could not remove a warm container'));
  }

  function take(key: string): WarmContainer | undefined {
    taken.add(key);
    const held = idle.get(key);
    if (!held) return undefined;
    idle.delete(key);
    clearTimeout(held.timer);
    changed();
    if (Date.now() - held.since > MAX_AGE_MS) {
      // Old enough to be on an image rebuilt since, or to have gathered what a fresh one would not.
      void discard(held.warm).catch(() => undefined);
      return undefined;
    }
    return held.warm;
  }

  return {
    take,
    put(key, warm) {
      taken.delete(key);
      const ms = deps.idleMs();
      if (forgotten.delete(key) || ms <= 0 || deps.max() <= 0) {
        void discard(warm).catch(() => undefined);
        return;
      }
      void evict(key, 'replaced'); // never two for one session
      const timer = setTimeout(() => void evict(key, 'idle'), ms);
      timer.unref();
      idle.set(key, { warm, timer, since: warm.since });
      // Map order is insertion order: the first entries have been idle longest. A tenant with
      // many sessions pushes out its own, never another tenant's.
      const tenants = [...idle].filter(([, held]) => held.warm.workspace === warm.workspace).map(([k]) => k);
      for (const oldest of tenants.slice(0, Math.max(0, tenants.length - deps.perTenant()))) void evict(oldest, 'warm_per_tenant');
      for (const oldest of idle.keys()) {
        if (idle.size <= deps.max()) break;
        void evict(oldest, 'warm_max');
      }
      changed();
    },
    discard,
    async drop(key, warm) {
      taken.delete(key);
      forgotten.delete(key);
      if (warm) await discard(warm);
    },
    async discardWhere(pick) {
      // Held by a message now: removed when it comes back (a project deleted under its message).
      for (const key of taken) if (pick(key)) forgotten.add(key);
      const picked = [...idle].filter(([key, held]) => pick(key, held.warm)).map(([key]) => key);
      await Promise.all(picked.map((key) => evict(key, 'let go')));
    },
    async forget(key) {
      if (taken.has(key)) forgotten.add(key); // a message holds it: removed when it comes back
      await evict(key, 'session deleted');
    },
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
