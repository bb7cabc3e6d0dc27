import fs from 'node:fs';
import { dirname, join } from 'node:path';
import type { Logger } from 'pino';
import { closeQuietly, openNoFollow, openPlannedSource } from '../fs/fd-path.js';
import type { Owner } from '../fs/tree.js';
import type { ContainerGone, IdleContainer, Launcher, LauncherCapabilities } from '../launch/launcher.js';
import { adoptPlanOf, blankPlanOf, freshLayoutOf, PERSON_TARGETS, personBindsOf, poolWayOf, type PoolWay } from '../plan/pool.js';
import type { RunPlan } from '../plan/run-plan.js';
import { adoptFreshDirs, makeFreshDirs, ownAdoptDir, removeFreshDirs, type FreshDirs } from './fresh-dirs.js';
import { newShape, type PoolShape } from './pool-refill.js';

/** What a claim knows of the run's person beyond the plan (the runner's to say). */
export interface PoolPerson {
  /** This run made the person's workspace and the session's agent home: no other container can hold them. */
  isNew: boolean;
  /** The workspace is a filesystem of its own (disk_quotas: loop). */
  ownFilesystem: boolean;
}

/**
 * The two ways a pool container takes its tenant's directories (plan/pool.ts), carried out: which
 * one serves a plan (poolWayOf, given the launcher's and the host's facts), what a shape's
 * containers start from, how one starts, how a claim makes it the plan's, and what goes when one
 * is removed. Attach: blank stand-ins (one set per shape, berth's), mounts attached at the claim.
 * Adopt: fresh directories made for each container alone (fresh-dirs.ts), renamed into place at
 * the claim.
 */
export interface PoolWays {
  /** How the pool serves this plan, or undefined (the run starts its own). */
  wayOf(plan: RunPlan, caps: LauncherCapabilities, person: PoolPerson | undefined): PoolWay | undefined;
  /** A new shape of that way, learnt from this plan. */
  shapeOf(key: string, way: PoolWay, plan: RunPlan): PoolShape;
  start(shape: PoolShape): Promise<IdleContainer>;
  /** Make a waiting container the plan's: gone (take another), or thrown (the container must go). */
  take(shape: PoolShape, containerId: string, plan: RunPlan): Promise<ContainerGone | undefined>;
  /** The container was removed: what was made for it alone goes too. */
  removed(containerId: string): void;
}

export function createPoolWays(deps: {
  launcher: Launcher;
  /** Berth's own directory for the blank stand-ins (home cache). */
  blankDir: string;
  /** Berth's private directory for adopt's fresh directories (never in a project's tree); without it, no adopt. */
  adoptDir?: string;
  /** Who owns what a tenant may write (the agent user): the fresh workspace and home are theirs, as the person's own are. */
  owner?: () => Owner | undefined;
  logger: Logger;
}): PoolWays {
  /** Adopt: each waiting container's fresh directories, by container id. */
  const freshOf = new Map<string, FreshDirs>();
  let ownDir: string | undefined;
  const adoptDir = () => (ownDir ??= ownAdoptDir(deps.adoptDir as string));

  /** Each bind's blank stand-in: an empty directory or file of the source's kind, berth's own. */
  function blankSources(shape: string, plan: RunPlan): string[] {
    const dir = join(deps.blankDir, shape);
    fs.mkdirSync(dir, { recursive: true, mode: 0o755 });
    return plan.mounts.flatMap((m) => {
      if (m.type !== 'bind') return [];
      const { fd, kind } = openNoFollow(m.source);
      closeQuietly(fd);
      const blank = join(dir, `b${plan.mounts.indexOf(m)}-${kind}`);
      if (kind === 'dir') fs.mkdirSync(blank, { recursive: true, mode: 0o755 });
      else if (!fs.existsSync(blank)) fs.writeFileSync(blank, '', { mode: 0o444 });
      return [blank];
    });
  }

  /** A removal that fails is told, never thrown: the claim or removal it follows stands. */
  function removeQuietly(fresh: FreshDirs): void {
    try {
      removeFreshDirs(fresh);
    } catch (err) {
      deps.logger.warn({ dir: fresh.root, err: String(err) }, "a pool container's fresh directories could not be removed");
    }
  }

  /** Person binds whose directory sits on another filesystem than the fresh ones (a rename cannot cross): by target. */
  function otherFilesystem(plan: RunPlan): string[] {
    const dev = fs.statSync(adoptDir()).dev;
    return personBindsOf(plan)
      .filter((m) => fs.statSync(dirname(m.source)).dev !== dev)
      .map((m) => m.target);
  }

  return {
    wayOf(plan, caps, person) {
      const adoptBinds = caps.adoptBinds?.(plan.runtime) === true && deps.adoptDir !== undefined && !!deps.launcher.claimStarted;
      return poolWayOf(plan, {
        lateMounts: caps.lateMounts(plan.runtime),
        adoptBinds,
        ownFilesystem: person?.ownFilesystem === true,
        otherFilesystem: adoptBinds ? otherFilesystem(plan) : [],
      }).way;
    },

    shapeOf(key, way, plan) {
      if (way === 'attach') {
        const blanks = blankSources(key, plan);
        return newShape(
          key,
          way,
          blankPlanOf(plan, (i) => blanks[i] as string),
        );
      }
      // The project-wide sources are the plan's own from the start; each start gives the person binds fresh directories.
      const blank = blankPlanOf(plan, (_, m) => (m.type === 'bind' && !PERSON_TARGETS.includes(m.target) ? m.source : ''));
      return newShape(key, way, blank, freshLayoutOf(plan));
    },

    async start(shape) {
      if (shape.way === 'attach') return deps.launcher.startIdle(shape.blank, shape.blank.keepAlive);
      if (!shape.layout) throw new Error('an adopt shape without its layout');
      // The engine follows links in a source: the project-wide ones are opened as a cold start's are.
      for (const m of shape.blank.mounts)
        if (m.type === 'bind' && !PERSON_TARGETS.includes(m.target)) closeQuietly(openPlannedSource(m.source));
      const fresh = makeFreshDirs(adoptDir(), shape.layout, deps.owner?.());
      try {
        const started = await deps.launcher.startIdle(adoptPlanOf(shape.blank, fresh.byTarget), shape.blank.keepAlive);
        freshOf.set(started.containerId, fresh);
        return started;
      } catch (err) {
        removeQuietly(fresh);
        throw err;
      }
    },

    async take(shape, containerId, plan) {
      if (shape.way === 'attach') return deps.launcher.attachMounts(containerId, plan);
      const fresh = freshOf.get(containerId);
      const claimStarted = deps.launcher.claimStarted?.bind(deps.launcher);
      if (!fresh || !claimStarted) throw new Error('a waiting container without its fresh directories');
      adoptFreshDirs(fresh, personBindsOf(plan));
      freshOf.delete(containerId);
      removeQuietly(fresh); // what is left of them: the merged-away originals
      // Written for every process to read while the message's exec is made, not before it: nothing
      // is mounted, so a sandbox gone meanwhile only fails that exec, and the run starts its own on
      // the same directories (the person's now). Until then it lists as a pool container that is
      // not waiting: one that may hold any workspace.
      void claimStarted(containerId, plan).then(
        (gone) => gone && deps.logger.info({ container: containerId.slice(0, 12), why: gone.reason }, 'a claimed sandbox was gone'),
        (err: unknown) =>
          deps.logger.warn({ container: containerId.slice(0, 12), err: String(err) }, 'a claimed sandbox could not be renamed'),
      );
      return undefined;
    },

    removed(containerId) {
      const fresh = freshOf.get(containerId);
      freshOf.delete(containerId);
      if (fresh?.keep) deps.logger.error({ dir: fresh.root, why: fresh.keep }, "a failed pool claim left a person's entries here: kept");
      else if (fresh) removeQuietly(fresh);
    },
  };
}
