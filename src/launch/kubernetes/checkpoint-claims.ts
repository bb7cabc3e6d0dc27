import type { V1PersistentVolumeClaim } from '@kubernetes/client-node';
import type { KubernetesSettings } from '../../config/kubernetes.js';
import type { CheckpointOwner, SessionVolumes } from '../volume-checkpoints.js';
import { clusterError, unlessGone, type KubeApis } from './calls.js';
import { checkpointClaim, homeClaim, workspaceClaim } from './claims.js';
import { volumeIdOf } from './volumes.js';

/**
 * The claims a checkpoint works on: the session's, as its runs name them (kubernetes/objects.ts),
 * from its directories' volume ids, and the tenant's checkpoint claim, from its checkpoint
 * directory's; and whether each is on the cluster.
 */
export function checkpointClaims({ core, ns }: KubeApis, settings: KubernetesSettings) {
  const owner = (o: CheckpointOwner, project: string, volumeId: string, sizeBytes: number) => ({
    installation: o.installation,
    project,
    volumeId,
    namespace: ns,
    storageClass: settings.storage_class,
    sizeBytes,
  });
  return {
    of: (v: SessionVolumes, o: CheckpointOwner) => ({
      workspace: workspaceClaim({ ...owner(o, v.project, volumeIdOf(v.workspaceDir), v.sizeBytes), workspace: v.workspace }),
      home: homeClaim({ ...owner(o, v.project, volumeIdOf(v.homeDir), v.sizeBytes), session: v.session }),
    }),
    store: (o: CheckpointOwner, project: string) =>
      checkpointClaim({ ...owner(o, project, volumeIdOf(o.storeDir), o.storeBytes), tenant: o.tenant }),
    /** The claim as the cluster has it, or undefined when it has none of that name. */
    async read(claim: V1PersistentVolumeClaim): Promise<V1PersistentVolumeClaim | undefined> {
      try {
        return await unlessGone(core.readNamespacedPersistentVolumeClaim({ name: claim.metadata?.name ?? '', namespace: ns }));
      } catch (err) {
        throw clusterError(`volume ${claim.metadata?.name}`, err);
      }
    },
  };
}

export type CheckpointClaims = ReturnType<typeof checkpointClaims>;
export const claimName = (c: V1PersistentVolumeClaim) => c.metadata?.name ?? '';
