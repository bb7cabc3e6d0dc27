import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import type { BerthError } from '../../base/errors.js';
import { LABELS } from '../../plan/labels.js';
import { clusterError, unlessGone } from './calls.js';
import { VOLUME_LABEL } from './volumes.js';

/** Volume ids per list call: a label selector `berth.volume in (...)` of at most this many. */
const RETIRE_CHUNK = 50;

/**
 * Delete the claims of these volume ids (kubernetes/volumes.ts: their session or project was deleted).
 * Returns the ids whose claims are gone (deleted now, or not there at all), and the error that
 * stopped the rest, if any: they are asked again at the next pass.
 */
export async function deleteVolumeClaims(
  kubeConfig: KubeConfig,
  namespace: string,
  ids: readonly string[],
): Promise<{ gone: string[]; error?: BerthError }> {
  const core = kubeConfig.makeApiClient(CoreV1Api);
  const gone: string[] = [];
  try {
    for (let i = 0; i < ids.length; i += RETIRE_CHUNK) {
      const chunk = ids.slice(i, i + RETIRE_CHUNK);
      const list = await core.listNamespacedPersistentVolumeClaim({
        namespace,
        labelSelector: `${LABELS.managed}=true,${VOLUME_LABEL} in (${chunk.join(',')})`,
      });
      for (const claim of list.items) {
        if (claim.metadata?.deletionTimestamp) continue;
        await unlessGone(core.deleteNamespacedPersistentVolumeClaim({ name: claim.metadata?.name ?? '', namespace }));
      }
      gone.push(...chunk);
    }
    return { gone };
  } catch (err) {
    return { gone, error: clusterError('deleting volumes', err) };
  }
}
