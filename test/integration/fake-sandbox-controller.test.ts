import { randomBytes } from 'node:crypto';
import { CoreV1Api, CustomObjectsApi, type V1Pod } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandboxController, type Sandbox, type SandboxController } from '../fakes/agent-sandbox-controller.js';
import { listWatch } from '../fakes/kubelet.js';
import { installAgentSandbox, startKubeCluster, type KubeCluster } from '../helpers/kube-cluster.js';
import { until } from '../helpers/until.js';

/**
 * The fake agent-sandbox controller reads Sandboxes from a cache fed by its watch, as upstream's
 * does (controllers/sandbox_controller.go v0.5.6: Reconcile's r.Get is a cache read). So it shows
 * the race the real controller showed on a real cluster (kubernetes-reality-4, row 3): a pod
 * deleted together with its Sandbox is made again, owned by the Sandbox already gone, until the
 * garbage collector removes it; deleting the Sandbox alone and leaving the pod to the collector
 * makes nothing again. The cache is held back (sandboxCacheLagMs) so the window is wide enough to
 * hit every time. No kubelet runs: the pods stay Pending, which is all the controller looks at.
 */

const GROUP = 'agents.x-k8s.io';
const crd = { group: GROUP, version: 'v1beta1', plural: 'sandboxes' };
let cluster: KubeCluster;
let controller: SandboxController;
let core: CoreV1Api;
let custom: CustomObjectsApi;
const ns = `fsc-${randomBytes(4).toString('hex')}`;
/** Every pod the controller made in the namespace, in order: name and owner uid. */
const created: Array<{ name: string; owner: string }> = [];
let podWatch: { stop(): void };

beforeAll(async () => {
  cluster = await startKubeCluster();
  await installAgentSandbox(cluster.kubeConfig);
  core = cluster.kubeConfig.makeApiClient(CoreV1Api);
  custom = cluster.kubeConfig.makeApiClient(CustomObjectsApi);
  await core.createNamespace({ body: { metadata: { name: ns } } });
  podWatch = listWatch<V1Pod>(cluster.kubeConfig, `/api/v1/namespaces/${ns}/pods`, {}, (type, pod) => {
    if (type === 'ADDED') created.push({ name: pod.metadata!.name!, owner: pod.metadata?.ownerReferences?.[0]?.uid ?? '' });
  });
  controller = await startSandboxController({ kubeConfig: cluster.kubeConfig, namespace: ns, sandboxCacheLagMs: 3000 });
}, 600_000);

afterAll(async () => {
  podWatch?.stop();
  await controller?.stop();
  await cluster?.stop();
});

async function makeSandbox(name: string): Promise<string> {
  const body = {
    apiVersion: `${GROUP}/v1beta1`,
    kind: 'Sandbox',
    metadata: { name, namespace: ns },
    spec: { podTemplate: { spec: { containers: [{ name: 'main', image: 'berth/shell:latest', command: ['sleep', '600'] }] } } },
  };
  const made = (await custom.createNamespacedCustomObject({ ...crd, namespace: ns, body })) as Sandbox;
  await until(() => created.some((p) => p.name === name), `the pod of ${name}`);
  return made.metadata.uid;
}

const readPod = (name: string) => core.readNamespacedPod({ name, namespace: ns }).catch(() => undefined);
const sandboxGone = (name: string) =>
  custom.getNamespacedCustomObject({ ...crd, namespace: ns, name }).then(
    () => false,
    (e: { code?: number }) => e.code === 404,
  );

describe('the fake agent-sandbox controller reads Sandboxes through a cache', () => {
  it('makes a pod again when the pod and its Sandbox are deleted at once: owned by the deleted Sandbox, until the collector removes it', async () => {
    const uid = await makeSandbox('race');
    // As berth's launcher removed a run before issue 44: both deletes at once, grace 0.
    await Promise.all([
      custom.deleteNamespacedCustomObject({ ...crd, namespace: ns, name: 'race', gracePeriodSeconds: 0 }),
      core.deleteNamespacedPod({ name: 'race', namespace: ns, gracePeriodSeconds: 0 }),
    ]);
    await until(() => created.filter((p) => p.name === 'race').length === 2, 'the pod made again');
    expect(created.filter((p) => p.name === 'race')).toEqual([
      { name: 'race', owner: uid },
      { name: 'race', owner: uid },
    ]);
    expect(await sandboxGone('race')).toBe(true);
    // The orphan: a pod of a Sandbox that no longer exists. The collector takes it once it knows.
    await until(async () => (await readPod('race')) === undefined, 'the orphan pod collected');
    await controller.idle();
    expect(await readPod('race')).toBeUndefined();
  });

  it('makes nothing again when the Sandbox alone is deleted and its pod left to the collector', async () => {
    await makeSandbox('calm');
    await custom.deleteNamespacedCustomObject({ ...crd, namespace: ns, name: 'calm', propagationPolicy: 'Background' });
    await until(async () => (await readPod('calm')) === undefined, 'the pod collected');
    await controller.idle();
    expect(created.filter((p) => p.name === 'calm')).toHaveLength(1);
    expect(await readPod('calm')).toBeUndefined();
  });
});
