import { StorageV1Api, type V1PersistentVolumeClaim } from '@kubernetes/client-node';
import { BerthError } from '../../base/errors.js';
import type { KubernetesSettings } from '../../config/kubernetes.js';
import { clusterError, statusCode, unlessGone, type KubeApis } from './calls.js';
import { quantity } from './observe.js';
import {
  CHECKPOINT_LABEL,
  pickSnapshotClass,
  SIDE_LABEL,
  SNAPSHOT_API,
  SNAPSHOT_CLASS_API,
  snapshotState,
  type SnapshotClass,
  type SnapshotOffer,
  type SnapshotSide,
  type VolumeSnapshot,
} from './snapshot-plan.js';

/**
 * VolumeSnapshots on the cluster (kubernetes/snapshot-plan.ts plans them): whether the cluster
 * offers them for a volume, and making, waiting for, listing and deleting a tenant's. Untested
 * against a real CSI driver (none runs here): the calls follow the snapshot.storage.k8s.io/v1 API.
 */

/** What the cluster offers is read again after this long (a snapshotter installed meanwhile). */
const OFFER_TTL_MS = 5 * 60_000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export interface SnapshotListing {
  name: string;
  checkpoint: string;
  side: SnapshotSide;
  restoreBytes?: number;
}

export function volumeSnapshots(apis: KubeApis, settings: KubernetesSettings) {
  const { custom, ns } = apis;
  const storage = apis.kubeConfig.makeApiClient(StorageV1Api);
  const offers = new Map<string, { at: number; offer: SnapshotOffer }>();

  /** The snapshot classes, or undefined when the cluster serves no such API (or berth may not read it: the copy pod then). */
  const classes = async (): Promise<SnapshotClass[] | undefined> => {
    try {
      const list = (await custom.listClusterCustomObject({ ...SNAPSHOT_CLASS_API })) as { items?: SnapshotClass[] };
      return list.items ?? [];
    } catch (err) {
      if (statusCode(err) === 404 || statusCode(err) === 403) return undefined;
      throw clusterError('its VolumeSnapshotClasses', err);
    }
  };

  /** The driver of a claim's StorageClass (its provisioner), if it can be read. */
  const driverOf = async (claim: V1PersistentVolumeClaim): Promise<string | undefined> => {
    const name = claim.spec?.storageClassName;
    if (!name) return undefined;
    const sc = await unlessGone(storage.readStorageClass({ name })).catch(() => undefined);
    return sc?.provisioner;
  };

  return {
    /** What the cluster offers for snapshots of this claim (kept a while per StorageClass). */
    async offer(claim: V1PersistentVolumeClaim): Promise<SnapshotOffer> {
      const key = claim.spec?.storageClassName ?? '';
      const hit = offers.get(key);
      if (hit && Date.now() - hit.at < OFFER_TTL_MS) return hit.offer;
      const list = await classes();
      let offer: SnapshotOffer = { served: false };
      if (list) {
        const driver = await driverOf(claim);
        const className = pickSnapshotClass(list, driver, settings.checkpoints.snapshot_class);
        offer = { served: true, ...(driver ? { driver } : {}), ...(className ? { className } : {}) };
      }
      offers.set(key, { at: Date.now(), offer });
      return offer;
    },

    async create(body: VolumeSnapshot): Promise<void> {
      try {
        await custom.createNamespacedCustomObject({ ...SNAPSHOT_API, namespace: ns, body });
      } catch (err) {
        throw clusterError(`VolumeSnapshot ${body.metadata.name}`, err);
      }
    },

    /** Until the snapshot is cut (its content fixed): the size a claim made from it must have; it fails with the driver's words. */
    async waitCut(name: string): Promise<{ restoreBytes?: number }> {
      const end = Date.now() + settings.checkpoints.timeout_seconds * 1000;
      for (let delay = 100; ; delay = Math.min(delay * 2, 1000)) {
        const found = (await unlessGone(custom.getNamespacedCustomObject({ ...SNAPSHOT_API, namespace: ns, name })).catch((err: unknown) =>
          Promise.reject(clusterError(`VolumeSnapshot ${name}`, err)),
        )) as { status?: { readyToUse?: boolean; creationTime?: string; restoreSize?: string; error?: { message?: string } } } | undefined;
        if (!found) throw new BerthError('RUN_FAILED', `VolumeSnapshot ${name} went before it was cut`);
        const state = snapshotState(found.status);
        if (state === 'cut') {
          const bytes = quantity(found.status?.restoreSize);
          return bytes === undefined ? {} : { restoreBytes: Math.ceil(bytes) };
        }
        if (state !== 'pending')
          throw new BerthError('RUN_FAILED', `the CSI driver did not snapshot the volume (${name}): ${state.failed}`);
        if (Date.now() > end)
          throw new BerthError(
            'RUN_FAILED',
            `VolumeSnapshot ${name} was not cut within ${settings.checkpoints.timeout_seconds} s (kubernetes.checkpoints.timeout_seconds)`,
          );
        await sleep(delay);
      }
    },

    /** A tenant's snapshots (the selector: snapshot-plan.ts snapshotSelector); none where the API is not served. */
    async list(labelSelector: string): Promise<SnapshotListing[]> {
      let items: Array<{ metadata?: { name?: string; labels?: Record<string, string> }; status?: { restoreSize?: string } }>;
      try {
        items =
          ((await custom.listNamespacedCustomObject({ ...SNAPSHOT_API, namespace: ns, labelSelector })) as { items?: typeof items })
            .items ?? [];
      } catch (err) {
        if (statusCode(err) === 404) return [];
        throw clusterError('listing VolumeSnapshots', err);
      }
      return items.map((s) => {
        const bytes = quantity(s.status?.restoreSize);
        return {
          name: s.metadata?.name ?? '',
          checkpoint: s.metadata?.labels?.[CHECKPOINT_LABEL] ?? '',
          side: s.metadata?.labels?.[SIDE_LABEL] === 'home' ? 'home' : 'workspace',
          ...(bytes === undefined ? {} : { restoreBytes: Math.ceil(bytes) }),
        };
      });
    },

    async delete(name: string): Promise<void> {
      try {
        await unlessGone(custom.deleteNamespacedCustomObject({ ...SNAPSHOT_API, namespace: ns, name }));
      } catch (err) {
        throw clusterError(`deleting VolumeSnapshot ${name}`, err);
      }
    },
  };
}

export type VolumeSnapshotCalls = ReturnType<typeof volumeSnapshots>;
