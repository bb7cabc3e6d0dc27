import fs from 'node:fs';
import type net from 'node:net';
import os from 'node:os';
import { join } from 'node:path';
import { CoreV1Api } from '@kubernetes/client-node';
import Docker from 'dockerode';
import { inject } from 'vitest';
import { KubernetesSchema } from '../../src/config/kubernetes.js';
import { createRelayServer, createRelayTokens } from '../../src/launch/kubernetes/relay.js';
import { createKubernetesLauncher } from '../../src/launch/kubernetes/launcher.js';
import type { Launcher } from '../../src/launch/launcher.js';
import { startSandboxController } from '../fakes/agent-sandbox-controller.js';
import { startTestKubelet, type TestKubelet } from '../fakes/kubelet.js';
import { installAgentSandbox, startKubeCluster, type KubeCluster } from './kube-cluster.js';
import { bindDeployRbac } from './kube-rbac.js';
import { startRealKubeRig } from './real-kube-rig.js';

/**
 * A cluster for berth's Kubernetes launcher: the real API server with agent-sandbox's CRDs, the
 * fake agent-sandbox controller, the test kubelet running pods on the local Docker engine on an
 * internal network (no route out), berth's relay listener on that network's host side, and the
 * launcher itself, as berth.yaml `launcher: kubernetes` makes it, with deploy/rbac.yaml's grants and
 * nothing more (its token is berth's ServiceAccount's, bound by that Role).
 *
 * In the vitest project kube-real (make test's real tier, BERTH_TEST_KUBE=real) the same suites
 * get the real-node cluster instead: real kubelet, scheduler and controller-manager
 * (test/helpers/real-kube-rig.ts). `isRealKube()` tells a test which it has, for the few cases
 * where the two differ by design, each saying why.
 */
export interface KubeRig {
  cluster: KubeCluster;
  namespace: string;
  /** A kubeconfig with berth's ServiceAccount token (deploy/rbac.yaml's grants), for a berth.yaml. */
  berthKubeConfigFile: string;
  launcher: Launcher;
  /** The engine's id of a pod's first app container (the test kubelet's, or dockershim's by its labels). */
  kubelet: Pick<TestKubelet, 'containerOf'>;
  /** The host side of the pods' network: where a relay listener of berth's must listen. */
  gatewayIp: string;
  /** Where a PVC's files are on the node's disk (not berth's): the test kubelet's directory, or the bound PV's path. */
  claimDir(claim: string): Promise<string>;
  /** Another launcher on this cluster and relay, with these berth.yaml `kubernetes` settings over the rig's. */
  launcherWith(settings: Record<string, unknown>): Launcher;
  stop(): Promise<void>;
}

/** Whether this file runs on the real-node cluster (project kube-real). */
export function isRealKube(): boolean {
  return inject('realKube') !== undefined;
}

export async function startKubeRig(namespace = 'berth'): Promise<KubeRig> {
  const real = inject('realKube');
  if (real) return startRealKubeRig(real);
  const docker = new Docker();
  const dataDir = fs.mkdtempSync(join(os.tmpdir(), 'berth-kubelet-'));
  const cleanups: Array<() => Promise<unknown> | void> = [() => fs.rmSync(dataDir, { recursive: true, force: true })];
  const stop = async () => {
    for (const c of cleanups.reverse()) await Promise.resolve(c()).catch(() => undefined);
  };
  try {
    const cluster = await startKubeCluster();
    cleanups.push(() => cluster.stop());
    await installAgentSandbox(cluster.kubeConfig);
    await cluster.kubeConfig.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: namespace } } });
    const network = await docker.createNetwork({
      Name: `berth-test-kube-${process.pid}-${Date.now().toString(36)}`,
      Internal: true,
      CheckDuplicate: true,
    });
    cleanups.push(() => network.remove());
    const gatewayIp = ((await network.inspect()) as { IPAM: { Config: Array<{ Gateway: string }> } }).IPAM.Config[0]!.Gateway;
    const tokens = createRelayTokens();
    const relay: net.Server = createRelayServer(tokens);
    await new Promise<void>((r) => relay.listen(0, gatewayIp, r));
    cleanups.push(() => void relay.close());
    const address = `${gatewayIp}:${(relay.address() as net.AddressInfo).port}`;
    // As a node must be for berth (docs/kubernetes.md): its IPC sysctls are namespaced but "unsafe" to Kubernetes.
    const kubelet = await startTestKubelet({
      kubeConfig: cluster.kubeConfig,
      dataDir,
      network: network.id,
      allowedUnsafeSysctls: ['kernel.shm*', 'kernel.msg*', 'kernel.sem'],
    });
    cleanups.push(() => kubelet.stop());
    const controller = await startSandboxController({ kubeConfig: cluster.kubeConfig, namespace });
    cleanups.push(() => controller.stop());
    const berth = await bindDeployRbac(cluster, namespace, dataDir);
    const launcherWith = (extra: Record<string, unknown>) =>
      createKubernetesLauncher({
        kubeConfig: berth.kubeConfig,
        settings: KubernetesSchema.parse({ namespace, gateway: { address }, start_timeout_seconds: 60, ...extra }),
        relay: { address, tokens },
      });
    const launcher = launcherWith({});
    return {
      cluster,
      namespace,
      berthKubeConfigFile: berth.kubeConfigFile,
      launcher,
      launcherWith,
      kubelet,
      gatewayIp,
      claimDir: async (claim) => join(dataDir, 'pvc', namespace, claim),
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}
