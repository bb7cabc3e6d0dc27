import { createHash } from 'node:crypto';
import type { V1PersistentVolumeClaim } from '@kubernetes/client-node';
import { LABELS } from '../../plan/labels.js';
import { VOLUME_LABEL } from './volumes.js';

/**
 * The claims berth makes, pure: a session's home, a tenant's (or the project's) workspace, and a
 * tenant's checkpoint volume. Each is named by what it belongs to and by its host directory's volume
 * id (kubernetes/volumes.ts), so every run finds the same volume, and a session, tenant or project
 * made again under a deleted one's name (a new directory, a new id) never does.
 */

/** A checkpoint volume's (and its copies' and snapshots') tenant: the digest of its key, as berth's state names it. */
export const TENANT_LABEL = 'berth.tenant';

export const nameHash = (...parts: string[]) => createHash('sha256').update(parts.join('\0')).digest('hex').slice(0, 20);

/** A label value for any string: itself when Kubernetes takes it, else a hash (the exact value is an annotation). */
export function kubeLabelValue(value: string): string {
  return value.length <= 63 && LABEL_VALUE.test(value) ? value : `h-${createHash('sha256').update(value).digest('hex').slice(0, 40)}`;
}
const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;

/** Where the exact values of berth's labels go (a label value is at most 63 characters of a small alphabet): annotations `berth.dev/<label>`. */
export const ANNOTATION_PREFIX = 'berth.dev/';

/** An object's labels (kube values) and annotations (the exact ones). */
export function metaOf(labels: Record<string, string>) {
  return {
    labels: Object.fromEntries(Object.entries(labels).map(([k, v]) => [k, kubeLabelValue(v)])),
    annotations: Object.fromEntries(Object.entries(labels).map(([k, v]) => [`${ANNOTATION_PREFIX}${k}`, v])),
  };
}

/** What a session's claims are named by. */
export interface ClaimOwner {
  installation: string;
  project: string;
  /** The volume id of the claim's host directory (kubernetes/volumes.ts). */
  volumeId: string;
  namespace: string;
  storageClass?: string;
  sizeBytes: number;
}

function claimOf(name: string, labels: Record<string, string>, o: ClaimOwner): V1PersistentVolumeClaim {
  return {
    apiVersion: 'v1',
    kind: 'PersistentVolumeClaim',
    metadata: {
      name,
      namespace: o.namespace,
      ...metaOf({
        [LABELS.managed]: 'true',
        [LABELS.installation]: o.installation,
        [LABELS.project]: o.project,
        [VOLUME_LABEL]: o.volumeId,
        ...labels,
      }),
    },
    spec: {
      accessModes: ['ReadWriteOnce'],
      resources: { requests: { storage: String(o.sizeBytes) } },
      ...(o.storageClass ? { storageClassName: o.storageClass } : {}),
    },
  };
}

/** A session's home (/home/agent). */
export const homeClaim = (o: ClaimOwner & { session: string }) =>
  claimOf(`berth-home-${nameHash(o.installation, o.project, o.session, o.volumeId)}`, { [LABELS.session]: o.session }, o);

/** A tenant's (or a session's) own workspace. */
export const workspaceClaim = (o: ClaimOwner & { workspace: string }) =>
  claimOf(`berth-ws-${nameHash(o.installation, o.project, o.workspace, o.volumeId)}`, { [LABELS.workspace]: o.workspace }, o);

/** Shared mode and workflow steps work in the project's tree: one volume for the project. */
export const projectClaim = (o: ClaimOwner) => claimOf(`berth-project-${nameHash(o.installation, o.project, o.volumeId)}`, {}, o);

/**
 * A tenant's checkpoint volume (copies of its sessions' workspaces and homes): bound to the
 * tenant's checkpoint directory in berth's state, which goes when the tenant is forgotten or the
 * project deleted. No tenant pod ever mounts it, only berth's copy pods.
 */
export const checkpointClaim = (o: ClaimOwner & { tenant: string }) =>
  claimOf(`berth-ckpt-${nameHash(o.installation, o.project, o.tenant, o.volumeId)}`, { [TENANT_LABEL]: o.tenant }, o);
