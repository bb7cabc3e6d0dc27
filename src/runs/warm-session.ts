import fs from 'node:fs';
import type { Logger } from 'pino';
import { BerthError } from '../base/errors.js';
import { isGone, type ExecResult, type Launcher, type RunOptions, type RunResult } from '../launch/launcher.js';
import { execVerdict } from '../launch/lifecycle.js';
import type { RunPlan } from '../plan/run-plan.js';
import { warmIdentity } from '../plan/warm.js';
import type { PoolPerson } from './pool-ways.js';
import type { PrestartPool } from './prestart-pool.js';
import type { WarmContainer, WarmPool } from './warm-pool.js';

/** One warm container per session of a project (a project name has no NUL). */
export const warmKeyOf = (project: string, session: string) => `${project}\0${session}`;
export const warmWorkspaceOf = (project: string, workspace: string) => `${project}\0${workspace}`;
/** Is this warm key one of the project's sessions? */
export const isWarmKeyOf = (project: string) => (key: string) => key.startsWith(`${project}\0`);

/**
 * A message's hold on its session's warm container (or on the lack of one). Whoever holds the
 * lease settles it exactly once: the message's run once `run` has it, or `release` if the message
 * never got that far (a plan or mount check failed, berth is stopping).
 */
export interface WarmLease {
  key: string;
  workspace: string;
  reuse?: WarmContainer;
  /** The run directory a new container would show (this run's sockets are opened there). */
  runDir?: string;
  /** The run took it over: from then on it settles the container. */
  taken: boolean;
  /** What the pool's claim must know of the person (a new one's first contact may be adopted), and the lock it lets go once done. */
  first?: FirstContact;
}

/** From the run's workspace step (prepare-workspace.ts). */
export interface FirstContact {
  person: PoolPerson;
  adoptLock?: { release(): void };
}

export interface WarmSessions {
  /** The session's idle container, taken for this message alone (undefined: none, or warm is off). */
  lease(project: string, session: string, workspace: string, first?: FirstContact): WarmLease;
  /** The plan differs from the one the container was made with: let it go, the message gets a new one. */
  recycle(lease: WarmLease, log: Logger): Promise<void>;
  /** Run the message in the lease's container, or in a new one that stays. */
  run(lease: WarmLease, plan: RunPlan, opts: RunOptions, log: Logger): Promise<RunResult & { warm: boolean; pooled?: boolean }>;
  /** The message ended before `run` took the lease: nothing of it is kept. */
  release(lease: WarmLease): Promise<void>;
}

export function createWarmSessions(launcher: Launcher, pool: WarmPool, prestarted?: PrestartPool): WarmSessions {
  /** After a message: a clean container waits for the next one; any other is removed. */
  function settle(lease: WarmLease, warm: WarmContainer, result: ExecResult, log: Logger): void {
    const why = execVerdict(result);
    if (!why) return pool.put(lease.key, warm);
    log.info({ container: warm.containerId.slice(0, 12), why }, 'warm container removed after the message');
    void pool.drop(lease.key, warm).catch(() => undefined);
  }

  /** An exec into a container the lease holds; a launcher failure drops it (the message fails with it). */
  async function execIn(lease: WarmLease, warm: WarmContainer, plan: RunPlan, opts: RunOptions) {
    try {
      return await launcher.execIn(warm.containerId, plan, plan.exec, opts);
    } catch (err) {
      await pool.drop(lease.key, warm);
      throw err;
    }
  }

  return {
    lease(project, session, workspace, first) {
      const key = warmKeyOf(project, session);
      return { key, workspace, reuse: pool.take(key), taken: false, ...(first ? { first } : {}) };
    },

    async recycle(lease, log) {
      const old = lease.reuse;
      if (!old) return;
      log.info({ container: old.containerId.slice(0, 12) }, 'warm container recycled: the plan changed');
      lease.reuse = undefined;
      await pool.discard(old); // the session stays this message's: it gets a new container
    },

    async run(lease, plan, opts, log) {
      lease.taken = true;
      if (lease.reuse) {
        const result = await execIn(lease, lease.reuse, plan, opts);
        if (!isGone(result)) {
          settle(lease, lease.reuse, result, log);
          return { ...runResultOf(result), warm: true };
        }
        // Gone (removed with its project, or by hand): the message gets a new one, on the same run
        // directory (this run's sockets are open there), so only the container goes.
        await launcher.removeContainers([lease.reuse.containerId]);
        log.info({ container: lease.reuse.containerId.slice(0, 12), why: result.reason }, 'warm container unusable; starting a new one');
      }
      // A pre-started container with the plan's mounts attached, else a new one. One that went
      // away between its claim and the message (removed behind berth's back) gives way to a new
      // one, on the same run directory: the person's message is answered all the same.
      for (let fromPool = prestarted !== undefined; ; fromPool = false) {
        // A drain past its deadline (or a disk stop) while the old container was given up: no new one.
        const start = opts.signal?.aborted
          ? Promise.reject(new BerthError('SHUTTING_DOWN', 'berth stopped before this run could start'))
          : (async () => {
              const claimed = fromPool
                ? await prestarted?.claim(plan, log, lease.first?.person).finally(() => lease.first?.adoptLock?.release())
                : undefined;
              return { claimed: claimed !== undefined, container: claimed ?? (await launcher.startIdle(plan, plan.keepAlive)) };
            })();
        const { claimed, container: started } = await start.catch(async (err: unknown) => {
          await pool.drop(lease.key);
          if (lease.runDir) fs.rmSync(lease.runDir, { recursive: true, force: true }); // no container will show it
          throw err;
        });
        const warm: WarmContainer = {
          containerId: started.containerId,
          identity: warmIdentity(plan),
          workspace: lease.workspace,
          runDir: lease.runDir,
          since: Date.now(),
        };
        const result = await execIn(lease, warm, plan, opts);
        if (isGone(result)) {
          if (claimed && !opts.signal?.aborted) {
            log.info(
              { container: started.containerId.slice(0, 12), why: result.reason },
              'a pre-started container went away before the message ran; starting a new one',
            );
            await launcher.removeContainers([started.containerId]);
            continue;
          }
          await pool.drop(lease.key, warm);
          throw new BerthError('RUN_FAILED', `the new warm container went away before the message ran: ${result.reason}`);
        }
        settle(lease, warm, result, log);
        const t = result.timings;
        const timings = {
          ...t,
          createMs: started.timings.createMs + t.createMs,
          startMs: started.timings.startMs + t.startMs,
          totalMs: started.timings.createMs + started.timings.startMs + t.totalMs,
        };
        return { ...runResultOf(result), warm: false, ...(claimed ? { pooled: true } : {}), timings };
      }
    },

    async release(lease) {
      if (lease.taken) return;
      await pool.drop(lease.key, lease.reuse);
      if (!lease.reuse && lease.runDir) fs.rmSync(lease.runDir, { recursive: true, force: true }); // a new directory no container shows
    },
  };
}

/** The run's result without the launcher's report on leftovers (judged above; not the caller's business). */
function runResultOf(r: ExecResult): RunResult {
  const { stopped: _stopped, leftovers: _leftovers, ...result } = r;
  return result;
}
