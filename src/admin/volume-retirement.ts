import type { BerthConfig } from '../config/berth-config.js';
import { KubernetesSchema } from '../config/kubernetes.js';
import { forgetRetired, readVolumeId, recordRetired, retiredVolumes, volumeIdsBelow } from '../launch/kubernetes/volumes.js';
import { agentHomesDir } from '../store/agent-homes.js';
import { checkpointsRoot } from '../store/checkpoints.js';
import { trashedProjectPaths } from '../store/projects.js';
import { deleteRetiredClaims } from '../launch/kubernetes/setup.js';

/** Retired volumes asked of the cluster in one pass, and how long a pass may wait for it. */
const RETIRE_PASS_MAX = 1000;
const RETIRE_PASS_MS = 15_000;
/** What the cluster did not take is asked again this much later, while berth runs. */
const RETIRE_RETRY_MS = 5 * 60_000;

/**
 * Every cluster volume a trashed project had: its own, its workspaces', its sessions' homes' and
 * its tenants' checkpoint volumes (each bound to a directory that is in the trash now).
 */
export function trashedVolumeIds(trashedTo: string): string[] {
  const trashed = trashedProjectPaths(trashedTo);
  return [
    readVolumeId(trashed.dir),
    ...volumeIdsBelow(trashed.workspacesDir),
    ...volumeIdsBelow(agentHomesDir(trashed.stateDir)),
    ...volumeIdsBelow(checkpointsRoot(trashed.stateDir)),
  ].filter((id): id is string => id !== undefined);
}

export interface VolumeRetirement {
  /** Volumes of what just went: listed (from now on nothing mounts them: their directories are gone), then a pass. */
  retire(ids: string[]): void;
  /** Wait for the pass under way, or run one (one pass at a time). */
  retireVolumes(): Promise<{ deleted: number; waiting: number }>;
}

/**
 * The cluster volumes (launcher: kubernetes) of deleted sessions and projects: each is recorded
 * in berth's state when its owner goes, and deleted on the cluster by passes, retried later
 * while this process lives when the cluster did not take it.
 */
export function createVolumeRetirement(stateDir: string, config: () => BerthConfig): VolumeRetirement {
  /** One pass over the retired volumes: their claims deleted on the cluster, those it took forgotten. */
  const retirePass = async (): Promise<{ deleted: number; waiting: number }> => {
    const cfg = config();
    const { ids, waiting } = retiredVolumes(stateDir, RETIRE_PASS_MAX);
    // A berth on Docker has no cluster to ask: what a former Kubernetes launcher left waits.
    if (!ids.length || cfg.launcher !== 'kubernetes') return { deleted: 0, waiting };
    let timer: NodeJS.Timeout | undefined;
    const gone = await Promise.race([
      deleteRetiredClaims(cfg.kubernetes ?? KubernetesSchema.parse({}), ids).then((r) => r.gone),
      new Promise<string[]>((resolve) => (timer = setTimeout(() => resolve([]), RETIRE_PASS_MS))),
    ])
      .catch(() => [] as string[]) // the cluster did not answer (or berth.yaml cannot reach it): they wait for the next pass
      .finally(() => clearTimeout(timer));
    forgetRetired(stateDir, gone);
    return { deleted: gone.length, waiting: retiredVolumes(stateDir, 0).waiting };
  };
  let retiring: Promise<unknown> = Promise.resolve();
  let retry: NodeJS.Timeout | undefined;
  const retireVolumes = () => {
    const pass = retiring.then(retirePass);
    retiring = pass.catch(() => undefined);
    // What the cluster did not take is asked again later, while this process lives (never kept alive for it).
    void pass.then(
      (r) => r.waiting > 0 && config().launcher === 'kubernetes' && retryLater(),
      () => undefined,
    );
    return pass;
  };
  const retryLater = () => {
    if (retry) return;
    retry = setTimeout(() => {
      retry = undefined;
      void retireVolumes().catch(() => undefined);
    }, RETIRE_RETRY_MS);
    retry.unref();
  };
  // Volumes an earlier process could not have deleted (the cluster did not answer, the CLI exited).
  if (config().launcher === 'kubernetes' && retiredVolumes(stateDir, 0).waiting > 0) retryLater();
  return {
    retireVolumes,
    retire(ids) {
      if (!ids.length) return;
      try {
        recordRetired(stateDir, ids);
      } catch {
        return; // not listed (a full disk): left on the cluster, unreachable all the same; the delete itself is done
      }
      void retireVolumes().catch(() => undefined);
    },
  };
}
