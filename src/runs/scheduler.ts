import fs from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { tryOwnerLock, type OwnerLock } from '../fs/lock.js';
import { startedFirings, type Firing, type Schedule, type ScheduleStore } from '../store/schedules.js';

/**
 * The schedules' timer: every tick it claims what is due (store/schedules.ts: journaled before
 * anything runs) and hands each firing to `dispatch` — into a chat's inbox, or a run of its own.
 * One berth process of a home fires (an owner lock; another takes over when it dies), so a firing
 * is never handed twice at once. The clock is injected: tests call tick() with a clock they move.
 */
export interface Scheduler {
  /** Claim what is due and hand it on; resolves once every handing-on begun here has ended. */
  tick(): Promise<void>;
  start(): void;
  stop(): Promise<void>;
}

/** 'handed': the firing is on its way (or done); 'wait': it cannot be handed on here now (its chat's bridge is not running): tried again next tick. */
export type Dispatch = (firing: Firing, schedule: Schedule) => Promise<'handed' | 'wait'>;

export function createScheduler(deps: {
  store: ScheduleStore;
  stateDir: string;
  dispatch: Dispatch;
  logger: Logger;
  now?: () => number;
  everyMs?: () => number;
  owner?: string;
}): Scheduler {
  const now = deps.now ?? Date.now;
  const log = deps.logger.child({ component: 'scheduler' });
  const busy = new Map<string, Promise<void>>();
  const waiting = new Set<string>();
  let lock: OwnerLock | undefined;
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;

  /** The firing lock: held by this process from its first tick until it stops. */
  function holds(): boolean {
    if (lock) return true;
    const taken = tryOwnerLock(join(deps.stateDir, 'schedules', 'scheduler.lock'), deps.owner ? { owner: deps.owner } : {});
    if (!('release' in taken)) return false;
    lock = taken;
    // A run a dead holder had started is not started again: it ends as interrupted.
    const interrupted = startedFirings(deps.store, deps.stateDir);
    if (interrupted.length) log.warn({ firings: interrupted }, 'scheduled runs a stopped berth left running: not run again');
    return true;
  }

  function hand(firing: Firing, schedule: Schedule): Promise<void> {
    return deps
      .dispatch(firing, schedule)
      .then((result) => {
        if (result === 'wait' && !waiting.has(firing.key)) {
          waiting.add(firing.key);
          log.warn(
            { schedule: schedule.id, channel: schedule.chat?.channel },
            "a schedule is due but its chat's bridge is not running here: it waits for it",
          );
        }
        if (result === 'handed') waiting.delete(firing.key);
      })
      .catch((err: unknown) => {
        log.error({ schedule: schedule.id, err: String(err).slice(0, 300) }, 'a scheduled run could not be handed on');
        try {
          deps.store.settle(firing.key, `failed: ${String(err).slice(0, 200)}`);
        } catch {
          // the store is unreadable: the firing stays claimed and is tried again
        }
      })
      .finally(() => busy.delete(firing.key));
  }

  /** Claim what is due and hand on each firing not already on its way. */
  function fire(): void {
    if (!holds()) return;
    for (const { firing, schedule } of deps.store.claimDue(now())) if (!busy.has(firing.key)) busy.set(firing.key, hand(firing, schedule));
  }

  async function tick(): Promise<void> {
    ensureDir(deps.stateDir);
    fire();
    await Promise.all(busy.values());
  }

  const loop = () => {
    if (stopped) return;
    // A tick waits for nothing it handed on: runs end in their own time.
    try {
      fire();
    } catch (err) {
      log.error({ err: String(err).slice(0, 300) }, 'schedules could not be read');
    }
    timer = setTimeout(loop, deps.everyMs?.() ?? 1000);
    timer.unref();
  };

  return {
    tick,
    start() {
      stopped = false;
      ensureDir(deps.stateDir);
      loop();
    },
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await Promise.all(busy.values());
      lock?.release();
      lock = undefined;
    },
  };
}

function ensureDir(stateDir: string) {
  fs.mkdirSync(join(stateDir, 'schedules'), { recursive: true, mode: 0o700 });
}
