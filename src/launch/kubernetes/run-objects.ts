import { isDeepStrictEqual } from 'node:util';
import { NetworkingV1Api, type V1NetworkPolicy, type V1PersistentVolumeClaim } from '@kubernetes/client-node';
import { BerthError } from '../../base/errors.js';
import { LABELS } from '../../plan/labels.js';
import { clusterError, statusCode, unlessGone, type KubeApis } from './calls.js';
import { runObjectNames, SANDBOX_API, type KubeRunObjects } from './objects.js';
import { VOLUME_LABEL } from './volumes.js';

/**
 * A run's objects on the cluster, made and deleted (docs/kubernetes.md): its claims (made if
 * absent, never deleted with a run), the installation's NetworkPolicy, and per run a ConfigMap, a
 * Secret with the relay token and the Sandbox. Removal deletes the Sandbox alone of what runs: its
 * pod is the garbage collector's, so no controller sees its pod deleted under a live Sandbox and
 * makes it again (kubernetes-reality-4 row 3).
 */

const call = async <T>(what: string, fn: () => Promise<T>): Promise<T> => {
  try {
    return await fn();
  } catch (err) {
    throw clusterError(what, err);
  }
};

/**
 * A run's claim, made if absent. One already there is mounted only if it is this very volume
 * (its volume id, installation and project labels) and not on its way out (a retired claim
 * being deleted: the run fails rather than wait for it or mount it).
 */
export async function ensureClaim({ core, ns }: KubeApis, claim: V1PersistentVolumeClaim): Promise<void> {
  const name = claim.metadata?.name ?? '';
  try {
    await core.createNamespacedPersistentVolumeClaim({ namespace: ns, body: claim });
    return;
  } catch (err) {
    if (statusCode(err) !== 409) throw clusterError(`volume ${name}`, err);
  }
  const found = await call(`volume ${name}`, () => core.readNamespacedPersistentVolumeClaim({ name, namespace: ns }));
  const want = claim.metadata?.labels ?? {};
  const differs = [VOLUME_LABEL, LABELS.installation, LABELS.project].filter((k) => found.metadata?.labels?.[k] !== want[k]);
  if (differs.length)
    throw new BerthError(
      'RUN_FAILED',
      `volume ${name} on the cluster is not this run's (its ${differs.join(', ')} differ): berth does not mount it`,
    );
  if (found.metadata?.deletionTimestamp)
    throw new BerthError('RUN_FAILED', `volume ${name} is being deleted (its session or project was deleted meanwhile)`);
}

/** The installation's NetworkPolicy as rendered: made if absent, its spec replaced if it says otherwise (an older berth's, another address). */
export async function ensurePolicy(apis: KubeApis, body: V1NetworkPolicy): Promise<void> {
  const net = apis.kubeConfig.makeApiClient(NetworkingV1Api);
  const name = body.metadata?.name ?? '';
  try {
    await net.createNamespacedNetworkPolicy({ namespace: apis.ns, body });
    return;
  } catch (err) {
    if (statusCode(err) !== 409) throw clusterError("the tenants' NetworkPolicy", err);
  }
  const found = await call("the tenants' NetworkPolicy", () => net.readNamespacedNetworkPolicy({ name, namespace: apis.ns }));
  if (isDeepStrictEqual(JSON.parse(JSON.stringify(found.spec)), JSON.parse(JSON.stringify(body.spec)))) return;
  await call("the tenants' NetworkPolicy", () =>
    net.replaceNamespacedNetworkPolicy({ name, namespace: apis.ns, body: { ...body, metadata: { ...found.metadata, ...body.metadata } } }),
  );
}

/** The run's ConfigMap and relay Secret, then its Sandbox (whose pod needs both to start). */
export async function createRun({ core, custom, ns }: KubeApis, objects: KubeRunObjects): Promise<void> {
  const { configMap, secret } = objects;
  if (configMap) await call('a ConfigMap', () => core.createNamespacedConfigMap({ namespace: ns, body: configMap }));
  if (secret) await call("the run's relay Secret", () => core.createNamespacedSecret({ namespace: ns, body: secret }));
  await call('a Sandbox', () =>
    custom.createNamespacedCustomObject({
      group: SANDBOX_API.group,
      version: SANDBOX_API.version,
      namespace: ns,
      plural: SANDBOX_API.plural,
      body: objects.sandbox,
    }),
  );
}

/**
 * Delete a run: its Sandbox with background propagation (the garbage collector then deletes the
 * pod, gracefully: the pod stays in the API until its kubelet has stopped it), its ConfigMap and
 * its relay Secret. Never the pod itself, and never with grace 0: a force delete takes the pod out
 * of the API while its processes may still run.
 */
export async function deleteRun({ core, custom, ns }: KubeApis, name: string): Promise<void> {
  const own = runObjectNames(name);
  await call(`removing ${name}`, () =>
    Promise.all([
      unlessGone(
        custom.deleteNamespacedCustomObject({
          group: SANDBOX_API.group,
          version: SANDBOX_API.version,
          namespace: ns,
          plural: SANDBOX_API.plural,
          name,
          propagationPolicy: 'Background',
        }),
      ),
      unlessGone(core.deleteNamespacedConfigMap({ name: own.configMap, namespace: ns })),
      unlessGone(core.deleteNamespacedSecret({ name: own.secret, namespace: ns })),
    ]),
  );
}
