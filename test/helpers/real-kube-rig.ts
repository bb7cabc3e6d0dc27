import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import https from 'node:https';
import type net from 'node:net';
import { randomBytes } from 'node:crypto';
import { CoreV1Api, KubeConfig, PatchStrategy, setHeaderOptions, type V1PersistentVolume } from '@kubernetes/client-node';
import { KubernetesSchema } from '../../src/config/kubernetes.js';
import { createRelayServer, createRelayTokens } from '../../src/launch/kubernetes/relay.js';
import { createKubernetesLauncher } from '../../src/launch/kubernetes/launcher.js';
import { startSandboxController } from '../fakes/agent-sandbox-controller.js';
import type { KubeCluster } from './kube-cluster.js';
import type { KubeRig } from './kube-rig.js';
import { removePodContainers } from './real-kube-node.js';
import { LOCAL_CLASS, type RealKubeInfo } from './real-kube-cluster.js';
import { waitFor } from './real-kube-proc.js';

/**
 * A test file's part of the real-node cluster (test/real-kube-setup.ts): a namespace of its own,
 * berth's relay on the pods' bridge address, and the launcher as berth.yaml makes it. Same shape
 * as the fake rig, so the suites run unchanged. The agent-sandbox controller is still the fake
 * (one namespace): the real one is not built here yet (issue 44 item 2).
 */

function clusterOf(info: RealKubeInfo, kubeConfig: KubeConfig): KubeCluster {
  const ca = fs.readFileSync(info.ca);
  const get = (path: string) =>
    new Promise<unknown>((resolve, reject) => {
      const req = https.get(`${info.server}${path}`, { ca, headers: { authorization: `Bearer ${info.token}` }, timeout: 15_000 }, (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (body += c));
        res.on('end', () =>
          res.statusCode === 200 ? resolve(JSON.parse(body)) : reject(new Error(`GET ${path}: ${res.statusCode} ${body.slice(0, 300)}`)),
        );
      });
      req.on('error', reject);
    });
  return { server: info.server, token: info.token, kubeConfig, kubeConfigFile: info.kubeConfigFile, get, stop: async () => undefined };
}

/** The host directory of a claim's volume: a pending claim (nothing mounted it yet) is first bound to a free local PV, as an operator pre-binds one. */
async function claimDirOf(core: CoreV1Api, namespace: string, claim: string, node: string): Promise<string> {
  const pvc = await core.readNamespacedPersistentVolumeClaim({ namespace, name: claim });
  if (!pvc.spec?.volumeName) {
    if ((pvc.spec?.storageClassName ?? LOCAL_CLASS) !== LOCAL_CLASS) throw new Error(`claim ${claim} is not bound yet`);
    const free = (await core.listPersistentVolume({ labelSelector: `berth-test/node=${node}` })).items.find(
      (pv) => pv.status?.phase === 'Available' && !pv.spec?.claimRef,
    );
    if (!free) throw new Error(`no free local PV on ${node} for ${claim}`);
    await core.patchPersistentVolume(
      { name: free.metadata!.name!, body: { spec: { claimRef: { namespace, name: claim } } } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
  }
  let pv: V1PersistentVolume | undefined;
  await waitFor(`claim ${claim} bound`, 60_000, async () => {
    const c = await core.readNamespacedPersistentVolumeClaim({ namespace, name: claim });
    if (c.status?.phase !== 'Bound' || !c.spec?.volumeName) return false;
    pv = await core.readPersistentVolume({ name: c.spec.volumeName });
    return true;
  });
  const path = pv?.spec?.local?.path ?? pv?.spec?.hostPath?.path;
  if (!path) throw new Error(`claim ${claim}'s volume has no host path`);
  return path;
}

/** The Docker id of a pod's first app container, by dockershim's labels, on whichever node's engine has it. */
export function podContainer(info: RealKubeInfo, ns: string, pod: string): string | undefined {
  for (const node of info.nodes) {
    const out = execFileSync(
      'docker',
      [
        '-H',
        `unix://${node.dockerSocket}`,
        'ps',
        '--filter',
        'label=io.kubernetes.docker.type=container',
        '--filter',
        `label=io.kubernetes.pod.namespace=${ns}`,
        '--filter',
        `label=io.kubernetes.pod.name=${pod}`,
        '--format',
        '{{.ID}} {{.Label "io.kubernetes.container.name"}}',
      ],
      { encoding: 'utf8' },
    );
    const app = out
      .trim()
      .split('\n')
      .map((l) => l.split(' '))
      .find(([id, name]) => id && name !== 'prepare');
    if (app) return app[0];
  }
  return undefined;
}

export async function startRealKubeRig(info: RealKubeInfo, opts: { storageClass?: string } = {}): Promise<KubeRig> {
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromFile(info.kubeConfigFile);
  const core = kubeConfig.makeApiClient(CoreV1Api);
  const namespace = `${info.nsPrefix}-${randomBytes(3).toString('hex')}`;
  const cleanups: Array<() => Promise<unknown> | void> = [];
  const stop = async () => {
    for (const c of cleanups.reverse()) await Promise.resolve(c()).catch(() => undefined);
  };
  try {
    await core.createNamespace({ body: { metadata: { name: namespace } } });
    // ServiceAccount admission refuses a pod until the controller-manager made the namespace's default account.
    await waitFor(`namespace ${namespace}'s default service account`, 60_000, async () =>
      (await core.listNamespacedServiceAccount({ namespace })).items.some((a) => a.metadata?.name === 'default'),
    );
    cleanups.push(async () => {
      // The namespace controller deletes everything in it; the kubelet stops the pods. What is left
      // after a minute (a pod on a stopped node) is removed from the engine by its labels.
      await core.deleteNamespace({ name: namespace });
      await waitFor(
        `namespace ${namespace} gone`,
        60_000,
        async () => !(await core.listNamespace()).items.some((n) => n.metadata?.name === namespace),
      ).catch(() => undefined);
      for (const node of info.nodes) removePodContainers(node.dockerSocket, (ns) => ns === namespace);
    });
    const tokens = createRelayTokens();
    const relay: net.Server = createRelayServer(tokens);
    await new Promise<void>((r) => relay.listen(0, info.gatewayIp, r));
    cleanups.push(() => void relay.close());
    const address = `${info.gatewayIp}:${(relay.address() as net.AddressInfo).port}`;
    const controller = await startSandboxController({ kubeConfig, namespace });
    cleanups.push(() => controller.stop());
    const launcherWith = (extra: Record<string, unknown>) =>
      createKubernetesLauncher({
        kubeConfig,
        settings: KubernetesSchema.parse({
          namespace,
          gateway: { address },
          start_timeout_seconds: 120,
          ...(opts.storageClass ? { storage_class: opts.storageClass } : {}),
          ...extra,
        }),
        relay: { address, tokens },
      });
    const launcher = launcherWith({});
    return {
      cluster: clusterOf(info, kubeConfig),
      namespace,
      // The admin's: deploy/rbac.yaml's grants are held to the code on the fast tier (kube-rbac.ts).
      berthKubeConfigFile: info.kubeConfigFile,
      launcher,
      launcherWith,
      kubelet: { containerOf: (ns: string, pod: string) => podContainer(info, ns, pod) },
      gatewayIp: info.gatewayIp,
      claimDir: (claim) => claimDirOf(core, namespace, claim, info.nodes[0]!.name),
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}
