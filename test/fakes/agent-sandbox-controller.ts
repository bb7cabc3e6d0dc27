/**
 * The agent-sandbox controller (v0.5.6, controllers/sandbox_controller.go) for one namespace of
 * the test cluster, and the garbage collector for what it makes (no controller-manager runs).
 *
 * Per Sandbox (agents.x-k8s.io/v1beta1): PVCs from volumeClaimTemplates, named
 * `<template>-<sandbox>`; a Pod named as the Sandbox (or its `agents.x-k8s.io/pod-name`
 * annotation) from spec.podTemplate, labelled `agents.x-k8s.io/sandbox-name-hash` (FNV-1a of the
 * name) with the template's labels and annotations minus system-reserved keys; a headless Service
 * when spec.service is true; every one with a controller ownerReference to the Sandbox. Status as
 * upstream computes it: conditions Suspended, Ready, PodScheduled and Finished with upstream's
 * reasons, podIPs, nodeName, selector, service; merge-patched on the status subresource.
 * spec.operatingMode Suspended deletes the Pod and keeps the PVCs; spec.shutdownTime expires the
 * Sandbox (shutdownPolicy Delete deletes it). A deleted Sandbox's dependents are deleted
 * (foreground and orphan propagation are honoured), and so is a pod whose owner is gone (the GC's
 * dangling-owner rule). Not played: warm pools, claims and templates (the extensions), tracing,
 * events, the write-behind window.
 *
 * Like upstream, a reconcile reads the Sandbox from a cache fed by its watch, never from the API
 * server (optionally held back: sandboxCacheLagMs), so it can act on a Sandbox already deleted:
 * a pod deleted at the same time as its Sandbox is made again, owned by the deleted Sandbox,
 * until the garbage collector removes it. Pods, PVCs and Services are read live (upstream reads
 * them from its cache too). docs/kubernetes.md's table names the upstream lines each field was
 * checked against (v0.5.6, commit 211b7579).
 */
import {
  CoreV1Api,
  CustomObjectsApi,
  PatchStrategy,
  setHeaderOptions,
  type KubeConfig,
  type V1ContainerPort,
  type V1OwnerReference,
  type V1Pod,
  type V1PodSpec,
  type V1Service,
  type V1ServicePort,
} from '@kubernetes/client-node';
import { listWatch, orNotFound, statusOf } from './kubelet.js';

const GROUP = 'agents.x-k8s.io';
const VERSION = 'v1beta1';
const PLURAL = 'sandboxes';
export const SANDBOX_HASH_LABEL = 'agents.x-k8s.io/sandbox-name-hash';
export const SANDBOX_POD_NAME_ANNOTATION = 'agents.x-k8s.io/pod-name';
const PROPAGATED_LABELS = 'agents.x-k8s.io/propagated-labels';
const PROPAGATED_ANNOTATIONS = 'agents.x-k8s.io/propagated-annotations';
const CREATED_BY = 'agents.x-k8s.io/created-by';
const ADOPTABLE = 'agents.x-k8s.io/adoptable';
const CLUSTER_DOMAIN = 'cluster.local';

interface Condition {
  type: string;
  status: 'True' | 'False' | 'Unknown';
  reason: string;
  message: string;
  lastTransitionTime?: string;
  observedGeneration?: number;
}

interface SandboxStatus {
  serviceFQDN?: string;
  service?: string;
  conditions?: Condition[];
  selector?: string;
  podIPs?: string[];
  nodeName?: string;
}

interface Meta {
  name: string;
  namespace: string;
  uid: string;
  generation?: number;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  finalizers?: string[];
  deletionTimestamp?: string;
  resourceVersion?: string;
}

export interface Sandbox {
  apiVersion: string;
  kind: string;
  metadata: Meta;
  spec: {
    podTemplate: { metadata?: { labels?: Record<string, string>; annotations?: Record<string, string> }; spec: V1PodSpec };
    volumeClaimTemplates?: {
      metadata: { name: string; labels?: Record<string, string>; annotations?: Record<string, string> };
      spec: unknown;
    }[];
    service?: boolean;
    operatingMode?: 'Running' | 'Suspended';
    shutdownTime?: string;
    shutdownPolicy?: 'Delete' | 'Retain';
  };
  status?: SandboxStatus;
}

/** Upstream's NameHash: FNV-1a (32 bits) of the name, as 8 hex digits. */
export function sandboxNameHash(name: string): string {
  let h = 0x811c9dc5;
  for (const b of Buffer.from(name, 'utf8')) h = Math.imul(h ^ b, 0x01000193) >>> 0;
  return h.toString(16).padStart(8, '0');
}

const isSystemKey = (k: string) => k.startsWith('agents.x-k8s.io/') || k.startsWith('extensions.agents.x-k8s.io/');
const isSystemAnnotation = (k: string) => isSystemKey(k) || k === 'opentelemetry.io/trace-context';
const normalizeCreatedBy = (v: string) => (['go-client', 'python-client', 'controller'].includes(v) ? v : 'unknown');
/** metav1.Time: RFC 3339 in seconds. */
const metaNow = () => new Date().toISOString().replace(/\.\d+Z$/, 'Z');
/** An ApiException's Status message (its body), else the error's. */
const errorText = (e: unknown): string => {
  let body = (e as { body?: unknown }).body;
  try {
    if (typeof body === 'string') body = JSON.parse(body);
  } catch {
    // not JSON: the message below
  }
  return (body as { message?: string } | undefined)?.message ?? (e as Error).message ?? String(e);
};

/** JSON with sorted keys: the server returns custom resources' keys sorted, so equal means equal. */
const canonical = (v: unknown): string =>
  JSON.stringify(v, (_k, x: unknown) =>
    x && typeof x === 'object' && !Array.isArray(x) ? Object.fromEntries(Object.entries(x).sort(([a], [b]) => a.localeCompare(b))) : x,
  );

/** The multiple-pods invariant violation upstream reports as Ready=False/MultiplePods. */
class MultiplePods extends Error {}

type Ownership = 'owned' | 'unowned' | 'other';
const controllerOf = (refs: V1OwnerReference[] | undefined) => refs?.find((r) => r.controller);
const ownershipOf = (refs: V1OwnerReference[] | undefined, sb: Sandbox): Ownership => {
  const ref = controllerOf(refs);
  return !ref ? 'unowned' : ref.uid === sb.metadata.uid ? 'owned' : 'other';
};
const ownerRef = (sb: Sandbox): V1OwnerReference => ({
  apiVersion: `${GROUP}/${VERSION}`,
  kind: 'Sandbox',
  name: sb.metadata.name,
  uid: sb.metadata.uid,
  controller: true,
  blockOwnerDeletion: true,
});
const foreign = (what: string, name: string, refs: V1OwnerReference[] | undefined, sb: Sandbox) => {
  const ref = controllerOf(refs)!;
  return new Error(`${what} "${name}" is owned by ${ref.kind}/${ref.name} (UID: ${ref.uid}), not by sandbox "${sb.metadata.name}"`);
};

/** A JSON merge patch turning map `from` into `to` (null removes a key). */
function mapPatch(from: Record<string, string> = {}, to: Record<string, string> = {}): Record<string, string | null> | undefined {
  const patch: Record<string, string | null> = {};
  for (const k of Object.keys(from)) if (!(k in to)) patch[k] = null;
  for (const [k, v] of Object.entries(to)) if (from[k] !== v) patch[k] = v;
  return Object.keys(patch).length ? patch : undefined;
}

/** meta.SetStatusCondition: lastTransitionTime moves only when the status does. */
function setCondition(conditions: Condition[], c: Condition): void {
  const i = conditions.findIndex((x) => x.type === c.type);
  const prev = conditions[i];
  const next = { ...c, lastTransitionTime: prev && prev.status === c.status ? prev.lastTransitionTime : metaNow() };
  if (i < 0) conditions.push(next);
  else conditions[i] = next;
}

/** Upstream's servicePortsForSandbox: one port per (port, protocol), the first explicit name kept, else p-<port>-<protocol>. */
function servicePorts(sb: Sandbox): V1ServicePort[] {
  const spec = sb.spec.podTemplate.spec;
  const sidecars = (spec.initContainers ?? []).filter((c) => c.restartPolicy === 'Always');
  const names = new Map<string, string>();
  const taken = new Set<string>();
  const ports: V1ContainerPort[] = [...spec.containers, ...sidecars].flatMap((c) => c.ports ?? []).filter((p) => p.containerPort);
  for (const p of ports) {
    const k = `${p.containerPort}/${p.protocol ?? 'TCP'}`;
    if (!names.has(k)) names.set(k, '');
    if (p.name && names.get(k) === '' && !taken.has(p.name)) {
      names.set(k, p.name);
      taken.add(p.name);
    }
  }
  const keys = [...names.keys()].sort((a, b) => {
    const [pa, qa] = a.split('/') as [string, string];
    const [pb, qb] = b.split('/') as [string, string];
    return Number(pa) - Number(pb) || qa.localeCompare(qb);
  });
  return keys.map((k) => {
    const [port, protocol] = k.split('/') as [string, string];
    let name = names.get(k) || `p-${port}-${protocol.toLowerCase()}`;
    for (let n = 2; !names.get(k) && taken.has(name); n++) name = `p-${port}-${protocol.toLowerCase()}-${n}`;
    taken.add(name);
    return { name, protocol, port: Number(port), targetPort: Number(port) as unknown as V1ServicePort['targetPort'] };
  });
}

export interface SandboxControllerOptions {
  kubeConfig: KubeConfig;
  namespace: string;
  /**
   * How late the controller's cache of Sandboxes learns of a change (its watch events held back
   * this long; 0: as they come). Upstream reads Sandboxes from an informer cache, never from the
   * API server, so a reconcile can act on a Sandbox already deleted: this widens that window so a
   * test can show what it does (docs/kubernetes.md, the pod-resurrection race).
   */
  sandboxCacheLagMs?: number;
}

export interface SandboxController {
  /** Resolves once nothing is queued, reconciling, or held back in the cache. */
  idle(): Promise<void>;
  stop(): Promise<void>;
}

export async function startSandboxController(opts: SandboxControllerOptions): Promise<SandboxController> {
  const { kubeConfig: kc, namespace } = opts;
  const lagMs = opts.sandboxCacheLagMs ?? 0;
  /** The informer's store: what reconcile reads a Sandbox from (upstream's r.Get is a cache read). */
  const cache = new Map<string, Sandbox>();
  let held = 0;
  const core = kc.makeApiClient(CoreV1Api);
  const custom = kc.makeApiClient(CustomObjectsApi);
  const merge = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
  const crd = { group: GROUP, version: VERSION, namespace, plural: PLURAL };
  let stopped = false;
  const complain = (what: string, e: unknown) => {
    if (!stopped) console.error(`test sandbox controller: ${what}: ${errorText(e)}`);
  };

  const patchSandbox = (name: string, body: object) => custom.patchNamespacedCustomObject({ ...crd, name, body }, merge);

  // -------------------------------------------------------------------------------------------
  // The work queue: one reconcile per Sandbox at a time; events during one run it again.

  const queue = new Map<string, { again: boolean }>();
  const timers = new Set<NodeJS.Timeout>();
  const later = (ms: number, fn: () => void) => {
    const t = setTimeout(() => {
      timers.delete(t);
      if (!stopped) fn();
    }, ms);
    timers.add(t);
  };
  const enqueue = (name: string) => {
    const entry = queue.get(name);
    if (entry) return void (entry.again = true);
    const mine = { again: true };
    queue.set(name, mine);
    void (async () => {
      while (mine.again && !stopped) {
        mine.again = false;
        try {
          await reconcile(name);
        } catch (e) {
          // A 404: the Sandbox went while its cached copy was reconciled; the retry finds the cache caught up.
          if (statusOf(e) !== 404) complain(`reconcile ${name}`, e);
          later(500, () => enqueue(name));
        }
      }
      queue.delete(name);
    })();
  };

  // -------------------------------------------------------------------------------------------
  // Children

  const clearPodNameAnnotation = async (sb: Sandbox) => {
    if (!(SANDBOX_POD_NAME_ANNOTATION in (sb.metadata.annotations ?? {}))) return;
    await patchSandbox(sb.metadata.name, { metadata: { annotations: { [SANDBOX_POD_NAME_ANNOTATION]: null } } });
    delete sb.metadata.annotations![SANDBOX_POD_NAME_ANNOTATION];
  };

  const ensurePodNameAnnotation = async (sb: Sandbox, podName: string) => {
    const tracked = sb.metadata.annotations?.[SANDBOX_POD_NAME_ANNOTATION] ?? '';
    if (tracked !== '') return; // the same pod, or upstream leaves a different tracked name alone
    await patchSandbox(sb.metadata.name, { metadata: { annotations: { [SANDBOX_POD_NAME_ANNOTATION]: podName } } });
    sb.metadata.annotations = { ...sb.metadata.annotations, [SANDBOX_POD_NAME_ANNOTATION]: podName };
  };

  const reconcilePVCs = async (sb: Sandbox, hash: string) => {
    for (const t of sb.spec.volumeClaimTemplates ?? []) {
      const name = `${t.metadata.name}-${sb.metadata.name}`;
      const pvc = await orNotFound(core.readNamespacedPersistentVolumeClaim({ name, namespace }));
      if (pvc) {
        const owner = ownershipOf(pvc.metadata?.ownerReferences, sb);
        if (owner === 'other') throw foreign('PVC', name, pvc.metadata?.ownerReferences, sb);
        if (owner === 'unowned') {
          const labels = pvc.metadata?.labels ?? {};
          if (labels[ADOPTABLE] !== 'true' && labels[SANDBOX_HASH_LABEL] !== hash) {
            throw new Error(
              `cannot adopt unowned PVC "${name}": missing required pool authorization label ("${ADOPTABLE}") or sandbox tracking label ("${SANDBOX_HASH_LABEL}")`,
            );
          }
          const body = { metadata: { ownerReferences: [...(pvc.metadata?.ownerReferences ?? []), ownerRef(sb)] } };
          await core.patchNamespacedPersistentVolumeClaim({ name, namespace, body }, merge);
        }
        continue;
      }
      await core.createNamespacedPersistentVolumeClaim({
        namespace,
        body: {
          apiVersion: 'v1',
          kind: 'PersistentVolumeClaim',
          metadata: {
            name,
            namespace,
            labels: { ...t.metadata.labels, [SANDBOX_HASH_LABEL]: hash },
            ...(t.metadata.annotations ? { annotations: { ...t.metadata.annotations } } : {}),
            ownerReferences: [ownerRef(sb)],
          },
          spec: t.spec as object,
        },
      });
    }
  };

  /** Upstream's updatePodMetadata (less the extensions' labels): the merge patch it would send, if any. */
  const podMetadataPatch = (pod: V1Pod, sb: Sandbox, hash: string) => {
    const template = sb.spec.podTemplate.metadata ?? {};
    const labels: Record<string, string> = { ...pod.metadata?.labels, [SANDBOX_HASH_LABEL]: hash };
    const annotations = { ...pod.metadata?.annotations };
    const managedLabels = Object.keys(template.labels ?? {})
      .filter((k) => !isSystemKey(k))
      .sort();
    const managedAnnotations = Object.keys(template.annotations ?? {})
      .filter((k) => !isSystemAnnotation(k))
      .sort();
    for (const k of managedLabels) labels[k] = template.labels![k]!;
    for (const k of (annotations[PROPAGATED_LABELS] ?? '').split(',').filter(Boolean)) {
      if (k !== SANDBOX_HASH_LABEL && (isSystemKey(k) || !(k in (template.labels ?? {})))) delete labels[k];
    }
    const createdBy = sb.metadata.labels?.[CREATED_BY];
    if (createdBy) labels[CREATED_BY] = normalizeCreatedBy(createdBy);
    else delete labels[CREATED_BY];
    for (const k of managedAnnotations) annotations[k] = template.annotations![k]!;
    for (const k of (annotations[PROPAGATED_ANNOTATIONS] ?? '').split(',').filter(Boolean)) {
      const controllerManaged = k === PROPAGATED_LABELS || k === PROPAGATED_ANNOTATIONS;
      if (!controllerManaged && (isSystemAnnotation(k) || !(k in (template.annotations ?? {})))) delete annotations[k];
    }
    annotations[PROPAGATED_LABELS] = managedLabels.join(',');
    annotations[PROPAGATED_ANNOTATIONS] = managedAnnotations.join(',');
    const l = mapPatch(pod.metadata?.labels, labels);
    const a = mapPatch(pod.metadata?.annotations, annotations);
    return l || a ? { ...(l ? { labels: l } : {}), ...(a ? { annotations: a } : {}) } : undefined;
  };

  const reconcileExistingPod = async (pod: V1Pod, sb: Sandbox, hash: string): Promise<V1Pod> => {
    const name = pod.metadata!.name!;
    const refs = pod.metadata?.ownerReferences;
    const owner = ownershipOf(refs, sb);
    if (owner === 'other') {
      await clearPodNameAnnotation(sb);
      throw foreign('pod', name, refs, sb);
    }
    let metadata: Record<string, unknown> | undefined = podMetadataPatch(pod, sb, hash);
    if (owner === 'unowned') {
      const labels = pod.metadata?.labels ?? {};
      if (labels[ADOPTABLE] !== 'true' && labels[SANDBOX_HASH_LABEL] !== hash) {
        throw new Error(
          `cannot adopt unowned pod "${name}": missing required pool authorization label ("${ADOPTABLE}") or sandbox tracking label ("${SANDBOX_HASH_LABEL}")`,
        );
      }
      metadata = { ...metadata, ownerReferences: [...(refs ?? []), ownerRef(sb)] };
    }
    if (metadata) pod = await core.patchNamespacedPod({ name, namespace, body: { metadata } }, merge);
    await ensurePodNameAnnotation(sb, name);
    return pod;
  };

  const reconcilePod = async (sb: Sandbox, hash: string): Promise<V1Pod | undefined> => {
    const candidates = (await core.listNamespacedPod({ namespace, labelSelector: `${SANDBOX_HASH_LABEL}=${hash}` })).items;
    const owned = candidates.filter((p) => ownershipOf(p.metadata?.ownerReferences, sb) === 'owned');
    const tracked = SANDBOX_POD_NAME_ANNOTATION in (sb.metadata.annotations ?? {});
    const podName = sb.metadata.annotations?.[SANDBOX_POD_NAME_ANNOTATION] || sb.metadata.name;
    let pod = await orNotFound(core.readNamespacedPod({ name: podName, namespace }));
    if (!pod && tracked) await clearPodNameAnnotation(sb);
    if (pod && ownershipOf(pod.metadata?.ownerReferences, sb) === 'owned' && !owned.some((p) => p.metadata?.name === pod!.metadata?.name))
      owned.push(pod);
    if (owned.length > 1)
      throw new MultiplePods(`multiple Pods (${owned.length}) are controlled by this Sandbox; refusing to choose or create a Pod`);
    if (owned.length === 1 && pod?.metadata?.name !== owned[0]!.metadata?.name) {
      if (tracked) await clearPodNameAnnotation(sb);
      pod = owned[0];
    }

    if (sb.spec.operatingMode === 'Suspended') {
      if (pod && ownershipOf(pod.metadata?.ownerReferences, sb) === 'owned') {
        if (!pod.metadata?.deletionTimestamp) await core.deleteNamespacedPod({ name: pod.metadata!.name!, namespace });
        return pod; // the suspending phase lasts until the pod is gone
      }
      await clearPodNameAnnotation(sb);
      return pod;
    }
    if (pod) return reconcileExistingPod(pod, sb, hash);

    const template = sb.spec.podTemplate;
    const labels: Record<string, string> = {};
    const annotations: Record<string, string> = {};
    const managedLabels = Object.keys(template.metadata?.labels ?? {})
      .filter((k) => !isSystemKey(k))
      .sort();
    const managedAnnotations = Object.keys(template.metadata?.annotations ?? {})
      .filter((k) => !isSystemAnnotation(k))
      .sort();
    for (const k of managedLabels) labels[k] = template.metadata!.labels![k]!;
    labels[SANDBOX_HASH_LABEL] = hash; // after the template's: a tenant cannot override it
    const createdBy = sb.metadata.labels?.[CREATED_BY];
    if (createdBy) labels[CREATED_BY] = normalizeCreatedBy(createdBy);
    for (const k of managedAnnotations) annotations[k] = template.metadata!.annotations![k]!;
    if (managedLabels.length) annotations[PROPAGATED_LABELS] = managedLabels.join(',');
    if (managedAnnotations.length) annotations[PROPAGATED_ANNOTATIONS] = managedAnnotations.join(',');
    const spec = structuredClone(template.spec);
    // volumeClaimTemplates' volumes replace same-named ones (StatefulSet semantics).
    const claims = (sb.spec.volumeClaimTemplates ?? []).map((t) => ({
      name: t.metadata.name,
      persistentVolumeClaim: { claimName: `${t.metadata.name}-${sb.metadata.name}` },
    }));
    if (claims.length) spec.volumes = [...(spec.volumes ?? []).filter((v) => !claims.some((c) => c.name === v.name)), ...claims];
    const body: V1Pod = {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: sb.metadata.name, namespace, labels, annotations, ownerReferences: [ownerRef(sb)] },
      spec,
    };
    try {
      pod = await core.createNamespacedPod({ namespace, body });
    } catch (e) {
      if (statusOf(e) !== 409) throw e;
      return reconcileExistingPod(await core.readNamespacedPod({ name: sb.metadata.name, namespace }), sb, hash);
    }
    await ensurePodNameAnnotation(sb, pod.metadata!.name!);
    return pod;
  };

  const reconcileService = async (sb: Sandbox, hash: string, status: SandboxStatus): Promise<V1Service | undefined> => {
    const name = sb.metadata.name;
    const desired = sb.spec.service;
    const set = (svc: V1Service) => {
      status.service = svc.metadata!.name!;
      status.serviceFQDN = `${svc.metadata!.name}.${namespace}.svc.${CLUSTER_DOMAIN}`;
      return svc;
    };
    const clear = () => {
      delete status.service;
      delete status.serviceFQDN;
      return undefined;
    };
    const svc = await orNotFound(core.readNamespacedService({ name, namespace }));
    const selector = { [SANDBOX_HASH_LABEL]: hash };
    if (!svc) {
      if (desired !== true) return clear();
      const body: V1Service = {
        apiVersion: 'v1',
        kind: 'Service',
        metadata: { name, namespace, labels: { ...selector }, ownerReferences: [ownerRef(sb)] },
        spec: { clusterIP: 'None', selector, ports: servicePorts(sb) },
      };
      return set(await core.createNamespacedService({ namespace, body }));
    }
    const owner = ownershipOf(svc.metadata?.ownerReferences, sb);
    if (desired === false) {
      if (owner === 'owned')
        await core
          .deleteNamespacedService({ name, namespace })
          .catch((e: unknown) => (statusOf(e) === 404 ? undefined : Promise.reject(e)));
      return clear();
    }
    if (owner === 'other') throw foreign('service', name, svc.metadata?.ownerReferences, sb);
    if (owner === 'unowned') {
      if (desired === undefined) return clear();
      const labels = svc.metadata?.labels ?? {};
      if (labels[ADOPTABLE] !== 'true' && labels[SANDBOX_HASH_LABEL] !== hash) {
        throw new Error(
          `cannot adopt unowned service "${name}": missing required pool authorization label ("${ADOPTABLE}") or sandbox tracking label ("${SANDBOX_HASH_LABEL}")`,
        );
      }
      if (svc.spec?.clusterIP && svc.spec.clusterIP !== 'None')
        throw new Error(`cannot adopt service "${name}": ClusterIP is "${svc.spec.clusterIP}" (expected "None", field is immutable)`);
      const body = {
        metadata: { labels: selector, ownerReferences: [...(svc.metadata?.ownerReferences ?? []), ownerRef(sb)] },
        spec: { selector, ports: servicePorts(sb) },
      };
      return set(await core.patchNamespacedService({ name, namespace, body }, merge));
    }
    if (svc.metadata?.labels?.[SANDBOX_HASH_LABEL] !== hash || JSON.stringify(svc.spec?.selector) !== JSON.stringify(selector)) {
      const body = { metadata: { labels: selector }, spec: { selector } };
      return set(await core.patchNamespacedService({ name, namespace, body }, merge));
    }
    return set(svc);
  };

  // -------------------------------------------------------------------------------------------
  // Status

  const readyCondition = (sb: Sandbox, err: Error | undefined, svc: V1Service | undefined, pod: V1Pod | undefined): Condition => {
    const c: Condition = {
      type: 'Ready',
      status: 'False',
      reason: 'DependenciesNotReady',
      message: '',
      observedGeneration: sb.metadata.generation ?? 0,
    };
    if (err)
      return {
        ...c,
        ...(err instanceof MultiplePods
          ? { reason: 'MultiplePods', message: err.message }
          : { reason: 'ReconcilerError', message: `Error seen: ${err.message}` }),
      };
    if (sb.spec.operatingMode === 'Suspended')
      return { ...c, reason: 'SandboxSuspended', message: pod ? 'Sandbox is suspending' : 'Sandbox is suspended' };
    if (pod?.status?.phase === 'Succeeded') return { ...c, reason: 'PodSucceeded', message: 'Pod completed successfully' };
    if (pod?.status?.phase === 'Failed') return { ...c, reason: 'PodFailed', message: 'Pod failed' };
    let message = pod ? `Pod exists with phase: ${pod.status?.phase ?? ''}` : 'Pod does not exist';
    let podReady = false;
    if (pod?.status?.phase === 'Running') {
      message = 'Pod is Running but not Ready';
      if (pod.status.conditions?.find((x) => x.type === 'Ready')?.status === 'True') {
        podReady = (pod.status.podIPs ?? []).length > 0;
        message = podReady ? 'Pod is Ready' : 'Pod is Ready but has no podIPs yet';
      }
    }
    const svcRequired = sb.spec.service ?? svc !== undefined;
    if (svcRequired) message += svc ? '; Service Exists' : '; Service does not exist';
    return podReady && (!svcRequired || svc) ? { ...c, status: 'True', reason: 'DependenciesReady', message } : { ...c, message };
  };

  const conditionsFor = (
    sb: Sandbox,
    err: Error | undefined,
    svc: V1Service | undefined,
    pod: V1Pod | undefined,
    podErr: Error | undefined,
  ): Condition[] => {
    const generation = sb.metadata.generation ?? 0;
    const owned = pod !== undefined && ownershipOf(pod.metadata?.ownerReferences, sb) === 'owned';
    const out: Condition[] = [];
    const suspended: Condition = {
      type: 'Suspended',
      status: 'False',
      reason: 'NotSuspended',
      message: 'Sandbox is not suspended',
      observedGeneration: generation,
    };
    if (sb.spec.operatingMode === 'Suspended') {
      if (!pod && podErr)
        Object.assign(suspended, {
          status: 'Unknown',
          reason: 'PodStateUnknown',
          message: 'Pod state is unknown. Sandbox suspension cannot be confirmed',
        });
      else if (!pod)
        Object.assign(suspended, { status: 'True', reason: 'PodTerminated', message: 'Pod has been terminated. Sandbox is suspended' });
      else if (!owned)
        Object.assign(suspended, { reason: 'PodNotOwned', message: 'Refused to delete pod because it is not owned by this sandbox' });
      else Object.assign(suspended, { reason: 'PodTerminating', message: 'Pod is terminating. Sandbox is suspending' });
    }
    out.push(suspended);
    const phase = pod?.status?.phase;
    if (owned && (phase === 'Succeeded' || phase === 'Failed')) {
      const ok = phase === 'Succeeded';
      out.push({
        type: 'Finished',
        status: 'True',
        reason: ok ? 'PodSucceeded' : 'PodFailed',
        message: ok ? 'Pod completed successfully' : 'Pod failed',
        observedGeneration: generation,
      });
    }
    if (!pod && podErr) {
      out.push({
        type: 'PodScheduled',
        status: 'Unknown',
        reason: 'PodSchedulingUnknown',
        message: 'Pod state is unknown. Pod scheduling cannot be determined',
        observedGeneration: generation,
      });
    } else if (owned) {
      const sched = pod.status?.conditions?.find((x) => x.type === 'PodScheduled');
      const status = (sched?.status ?? 'Unknown') as Condition['status'];
      const fallback = status === 'True' ? 'PodScheduled' : 'PodSchedulingUnknown';
      out.push({
        type: 'PodScheduled',
        status,
        reason: sched ? sched.reason || fallback : 'PodSchedulingUnknown',
        message: sched ? (sched.message ?? '') : 'Pod has not reported a PodScheduled condition yet',
        observedGeneration: generation,
      });
    }
    out.push(readyCondition(sb, err, svc, pod));
    return out;
  };

  /** Merge-patch the status subresource when it changed (not for a node name alone before Ready, as upstream). */
  const writeStatus = async (sb: Sandbox, before: SandboxStatus, after: SandboxStatus) => {
    if (canonical(before) === canonical(after)) return;
    const ready = after.conditions?.find((c) => c.type === 'Ready')?.status === 'True';
    if (before.nodeName !== after.nodeName && !ready && canonical({ ...after, nodeName: before.nodeName }) === canonical(before)) return;
    const status: Record<string, unknown> = { ...after };
    for (const k of Object.keys(before)) if (!(k in after)) status[k] = null;
    const patch = (body: object) => orNotFound(custom.patchNamespacedCustomObjectStatus({ ...crd, name: sb.metadata.name, body }, merge));
    await patch({ status });
  };

  // -------------------------------------------------------------------------------------------
  // Garbage collection: what a deleted Sandbox owned goes too.

  const dependents = async (uid: string) => {
    const owns = (o: { metadata?: { ownerReferences?: V1OwnerReference[] } }) => o.metadata?.ownerReferences?.some((r) => r.uid === uid);
    const [pods, pvcs, svcs] = await Promise.all([
      core.listNamespacedPod({ namespace }),
      core.listNamespacedPersistentVolumeClaim({ namespace }),
      core.listNamespacedService({ namespace }),
    ]);
    const del = (fn: () => Promise<unknown>) => () => fn().catch((e: unknown) => (statusOf(e) === 404 ? undefined : Promise.reject(e)));
    return [
      ...pods.items.filter(owns).map((o) => ({
        o,
        patch: (body: object) => core.patchNamespacedPod({ name: o.metadata!.name!, namespace, body }, merge),
        remove: del(() => core.deleteNamespacedPod({ name: o.metadata!.name!, namespace })),
      })),
      ...pvcs.items.filter(owns).map((o) => ({
        o,
        patch: (body: object) => core.patchNamespacedPersistentVolumeClaim({ name: o.metadata!.name!, namespace, body }, merge),
        remove: del(() => core.deleteNamespacedPersistentVolumeClaim({ name: o.metadata!.name!, namespace })),
      })),
      ...svcs.items.filter(owns).map((o) => ({
        o,
        patch: (body: object) => core.patchNamespacedService({ name: o.metadata!.name!, namespace, body }, merge),
        remove: del(() => core.deleteNamespacedService({ name: o.metadata!.name!, namespace })),
      })),
    ];
  };

  /** Delete the owner's dependents; one with another owner only loses this one's reference (as the GC does). */
  const collect = async (uid: string) => {
    for (const d of await dependents(uid)) {
      const refs = d.o.metadata?.ownerReferences ?? [];
      if (refs.every((r) => r.uid === uid)) {
        if (!d.o.metadata?.deletionTimestamp) await d.remove();
      } else await d.patch({ metadata: { ownerReferences: refs.filter((r) => r.uid !== uid) } });
    }
  };

  /** A Sandbox being deleted with foreground or orphan propagation waits on the GC's finalizer. */
  const finalize = async (sb: Sandbox) => {
    const finalizers = sb.metadata.finalizers ?? [];
    const drop = (f: string) => patchSandbox(sb.metadata.name, { metadata: { finalizers: finalizers.filter((x) => x !== f) } });
    if (finalizers.includes('orphan')) {
      for (const d of await dependents(sb.metadata.uid)) {
        await d.patch({ metadata: { ownerReferences: (d.o.metadata?.ownerReferences ?? []).filter((r) => r.uid !== sb.metadata.uid) } });
      }
      await drop('orphan');
    } else if (finalizers.includes('foregroundDeletion')) {
      await collect(sb.metadata.uid);
      if ((await dependents(sb.metadata.uid)).length) later(200, () => enqueue(sb.metadata.name));
      else await drop('foregroundDeletion');
    }
  };

  // -------------------------------------------------------------------------------------------
  // Reconcile

  const expire = async (sb: Sandbox, status: SandboxStatus, before: SandboxStatus) => {
    const expired: Condition = {
      type: 'Ready',
      status: 'False',
      reason: 'SandboxExpired',
      message: 'Sandbox has expired',
      observedGeneration: sb.metadata.generation ?? 0,
    };
    const conditions = [...(status.conditions ?? [])].filter((c) => c.type !== 'PodScheduled');
    if (status.conditions?.find((c) => c.type === 'Ready')?.reason !== 'SandboxExpired') {
      setCondition(conditions, expired);
      await writeStatus(sb, before, { ...status, conditions });
      return void later(1, () => enqueue(sb.metadata.name));
    }
    const pod = await orNotFound(
      core.readNamespacedPod({ name: sb.metadata.annotations?.[SANDBOX_POD_NAME_ANNOTATION] || sb.metadata.name, namespace }),
    );
    if (pod && ownershipOf(pod.metadata?.ownerReferences, sb) === 'owned')
      await orNotFound(core.deleteNamespacedPod({ name: pod.metadata!.name!, namespace }));
    const svc = await orNotFound(core.readNamespacedService({ name: sb.metadata.name, namespace }));
    if (svc && ownershipOf(svc.metadata?.ownerReferences, sb) === 'owned')
      await orNotFound(core.deleteNamespacedService({ name: sb.metadata.name, namespace }));
    if (sb.spec.shutdownPolicy === 'Delete')
      return void (await orNotFound(custom.deleteNamespacedCustomObject({ ...crd, name: sb.metadata.name })));
    setCondition(conditions, expired);
    await writeStatus(sb, before, { conditions });
  };

  const reconcile = async (name: string) => {
    const cached = cache.get(name);
    if (!cached) return; // upstream: "sandbox resource not found. Ignoring since object must be deleted"
    const sb = structuredClone(cached);
    if (sb.metadata.deletionTimestamp) return finalize(sb);
    const before: SandboxStatus = sb.status ?? {};
    const status: SandboxStatus = structuredClone(before);
    const shutdown = sb.spec.shutdownTime ? Date.parse(sb.spec.shutdownTime) : undefined;
    if (shutdown !== undefined && Date.now() >= shutdown) return expire(sb, status, before);
    if (shutdown !== undefined) later(Math.max(shutdown - Date.now(), 2000), () => enqueue(name));
    const hash = sandboxNameHash(name);

    const attempt = async <T>(fn: () => Promise<T>): Promise<[T | undefined, Error | undefined]> => {
      try {
        return [await fn(), undefined];
      } catch (e) {
        return [undefined, e instanceof Error && !(e as { body?: unknown }).body ? e : new Error(errorText(e))];
      }
    };
    const [, pvcErr] = await attempt(() => reconcilePVCs(sb, hash));
    const [pod, podErr] = await attempt(() => reconcilePod(sb, hash));
    let err = pvcErr ?? podErr;
    if (!pod) {
      delete status.podIPs;
      delete status.nodeName;
    } else {
      status.selector = `${SANDBOX_HASH_LABEL}=${hash}`;
      const owned = ownershipOf(pod.metadata?.ownerReferences, sb) === 'owned';
      const ips = (pod.status?.podIPs ?? []).map((p) => p.ip);
      if (owned && ips.length) status.podIPs = ips;
      else delete status.podIPs;
      if (owned && pod.spec?.nodeName) status.nodeName = pod.spec.nodeName;
      else delete status.nodeName;
    }
    let svc: V1Service | undefined;
    let svcErr: Error | undefined;
    // No Service is touched while the pod mapping is ambiguous.
    if (!(podErr instanceof MultiplePods)) [svc, svcErr] = await attempt(() => reconcileService(sb, hash, status));
    err ??= svcErr;
    const conditions = [...(status.conditions ?? [])];
    const computed = conditionsFor(sb, err, svc, pod, podErr);
    for (const c of computed) setCondition(conditions, c);
    status.conditions = conditions.filter((c) => !['Finished', 'PodScheduled'].includes(c.type) || computed.some((x) => x.type === c.type));
    await writeStatus(sb, before, status);
    // Requeued with backoff, as upstream returns them; MultiplePods waits for a pod event instead.
    const retry = pvcErr ?? (podErr instanceof MultiplePods ? undefined : podErr) ?? svcErr;
    if (retry) throw retry;
  };

  // -------------------------------------------------------------------------------------------

  /** A Sandbox event reaches the cache (and the work queue) lagMs after the watch delivered it, in order. */
  const onSandbox = (type: string, sb: Sandbox) => {
    if (type === 'DELETED') {
      if (cache.get(sb.metadata.name)?.metadata.uid === sb.metadata.uid) cache.delete(sb.metadata.name);
      void collect(sb.metadata.uid).catch((e: unknown) => complain(`collect ${sb.metadata.name}`, e));
    } else {
      cache.set(sb.metadata.name, sb);
      enqueue(sb.metadata.name);
    }
  };
  const sandboxes = listWatch<Sandbox>(kc, `/apis/${GROUP}/${VERSION}/namespaces/${namespace}/sandboxes`, {}, (type, sb) => {
    if (lagMs === 0) return onSandbox(type, sb);
    held++;
    const t = setTimeout(() => {
      timers.delete(t);
      held--;
      if (!stopped) onSandbox(type, sb);
    }, lagMs);
    timers.add(t);
  });

  /**
   * The garbage collector's dangling-owner rule: a pod whose controlling Sandbox is gone (or is
   * another one of the same name) is deleted, once the API server confirms the owner is gone.
   */
  const collectOrphan = async (pod: V1Pod, owner: V1OwnerReference) => {
    if (pod.metadata?.deletionTimestamp || cache.get(owner.name)?.metadata.uid === owner.uid) return;
    const live = (await orNotFound(custom.getNamespacedCustomObject({ ...crd, name: owner.name }))) as Sandbox | undefined;
    if (live?.metadata.uid === owner.uid) return;
    await orNotFound(core.deleteNamespacedPod({ name: pod.metadata!.name!, namespace }));
  };
  const pods = listWatch<V1Pod>(kc, `/api/v1/namespaces/${namespace}/pods`, { labelSelector: SANDBOX_HASH_LABEL }, (type, pod) => {
    const owner = controllerOf(pod.metadata?.ownerReferences);
    if (!(owner?.kind === 'Sandbox' && owner.apiVersion.startsWith(`${GROUP}/`))) return;
    enqueue(owner.name);
    if (type !== 'DELETED') void collectOrphan(pod, owner).catch((e: unknown) => complain(`collect pod ${pod.metadata?.name}`, e));
  });

  return {
    async idle() {
      while (queue.size || held) await new Promise((r) => setTimeout(r, 10));
    },
    async stop() {
      stopped = true;
      sandboxes.stop();
      pods.stop();
      for (const t of timers) clearTimeout(t);
      while (queue.size) await new Promise((r) => setTimeout(r, 10));
    },
  };
}
