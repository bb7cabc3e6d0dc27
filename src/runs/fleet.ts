import fs from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { agentOwner, type BerthConfig } from '../config/berth-config.js';
import type { Launcher, ManagedContainer } from '../launch/launcher.js';
import { appendJournal, openRuns } from '../store/journal.js';
import type { Project, ProjectStore } from '../store/projects.js';
import { mountQuotaImages } from '../store/workspaces.js';
import { ownerAlive } from '../fs/process-identity.js';
import { quotaOf } from './run-context.js';
import type { PrestartPool } from './prestart-pool.js';
import type { WarmPool } from './warm-pool.js';
import { isWarmKeyOf } from './warm-session.js';

/**
 * This home's containers as a whole: listing, removing, and putting things right at startup after
 * a berth process died (its runs closed as interrupted, its containers and sockets removed, the
 * workspace filesystems mounted again).
 */

/** Does this container's writable view hold every workspace of its project? (unlabelled: assume so) */
export const seesAllWorkspaces = (c: ManagedContainer) => c.reach !== 'workspace' && c.reach !== 'private';

export interface Fleet {
  list(project?: string): Promise<ManagedContainer[]>;
  /** Stop and remove one project's containers (runs in flight end with exit 137). */
  removeProject(project: string): Promise<number>;
  /** Remove the project's containers that see every workspace, and its warm ones. */
  retireShared(project: string): Promise<number>;
  /** Remove this process's containers (a drain past its deadline). */
  removeMine(): Promise<number>;
  /** Remove every labelled container of this home, and every run directory. */
  reapAll(): Promise<number>;
  recover(): Promise<{ interrupted: string[]; removed: number }>;
}

export function createFleet(deps: {
  launcher: Launcher;
  store: ProjectStore;
  config: () => BerthConfig;
  installation: string;
  ownerProcess?: string;
  warm?: WarmPool;
  prestarted?: PrestartPool;
  socketsDir?: string;
  logger: Logger;
}): Fleet {
  const { launcher, installation } = deps;
  const list = (project?: string) => launcher.listManaged({ installation, project });
  const discardWarm = (project: string) => deps.warm?.discardWhere(isWarmKeyOf(project));

  return {
    list,
    async removeProject(project) {
      await discardWarm(project);
      await deps.prestarted?.forgetProject(project);
      return launcher.removeManaged({ installation, project });
    },
    async retireShared(project) {
      await discardWarm(project);
      return launcher.removeContainers((await list(project)).filter(seesAllWorkspaces).map((c) => c.id));
    },
    async removeMine() {
      return launcher.removeContainers((await list()).filter((c) => c.owner === deps.ownerProcess).map((c) => c.id));
    },
    async reapAll() {
      const removed = await launcher.removeManaged({ installation });
      // Their sockets went with them (a crashed berth never closed them).
      if (deps.socketsDir) fs.rmSync(deps.socketsDir, { recursive: true, force: true });
      return removed;
    },
    async recover() {
      // Socket directories as they are before anything is looked at: one a live run makes later is not judged.
      const socketDirs = deps.socketsDir ? safeReaddir(deps.socketsDir) : [];
      const liveRuns = new Set<string>();
      // A dead berth's containers go first: nothing may hold a workspace whose filesystem is mounted (or resized) below.
      const containers = await list();
      const removed = await launcher.removeContainers(containers.filter((c) => !ownerAlive(c.owner)).map((c) => c.id));
      const live = containers.filter((c) => ownerAlive(c.owner));
      const interrupted: string[] = [];
      const cfg = deps.config();
      for (const name of deps.store.names()) {
        let project: Project;
        try {
          project = deps.store.get(name);
        } catch {
          continue; // an invalid project is doctor's business, not a reason not to start
        }
        remountQuotas(project, cfg, live);
        const { sessionsDir } = project.paths;
        for (const open of openRuns(sessionsDir)) {
          if (ownerAlive(open.owner)) {
            liveRuns.add(open.run); // its sockets may exist before its container does
            continue;
          }
          await appendJournal(sessionsDir, {
            run: open.run,
            phase: 'interrupted',
            reason: `the berth process that ran it (${open.owner ?? 'unknown'}) is gone`,
          });
          interrupted.push(open.run);
        }
      }
      // Sockets of dead runs: each run's directory is named by its run id.
      if (deps.socketsDir) {
        for (const c of live) liveRuns.add(c.run);
        for (const dir of socketDirs) if (!liveRuns.has(dir)) fs.rmSync(join(deps.socketsDir, dir), { recursive: true, force: true });
      }
      return { interrupted, removed };
    },
  };

  /**
   * After a reboot no quota is mounted: mount them before anything writes a bare workspace (but
   * resize none while a live berth's container sees every workspace of the project).
   */
  function remountQuotas(project: Project, cfg: BerthConfig, live: ManagedContainer[]): void {
    const name = project.metadata.name;
    try {
      const quota = quotaOf(project, cfg, deps.store.home.tmpDir, deps.logger.child({ project: name }));
      quota.holds = { seesAll: live.some((c) => c.project === name && seesAllWorkspaces(c)) };
      for (const { id, err } of mountQuotaImages(project, quota, agentOwner(cfg)).failed) {
        deps.logger.error({ project: name, workspace: id, err: String(err) }, 'could not mount a workspace quota');
      }
    } catch (err) {
      deps.logger.error({ project: name, err: String(err) }, 'could not mount the workspace quotas');
    }
  }
}

function safeReaddir(dir: string): string[] {
  try {
    return fs.readdirSync(dir);
  } catch {
    return [];
  }
}
