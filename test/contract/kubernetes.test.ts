import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { CoreV1Api } from '@kubernetes/client-node';
import { LABELS } from '../../src/plan/labels.js';
import { contractHome } from './contract-plan.js';
import { SHELL_COMMANDS } from './docker-commands.js';
import { describeLauncherContract } from './launcher-contract.js';
import { startKubeRig } from '../helpers/kube-rig.js';

/**
 * The Kubernetes launcher under the same contract: a real kube-apiserver with agent-sandbox's
 * CRDs, the fake agent-sandbox controller and the test kubelet running pods on the local Docker
 * engine (test/helpers/kube-rig.ts). Workspaces are the cluster's volumes, not host directories
 * (hostWorkspaces: false). Warm pods are judged by their keep-alive's reports through
 * pods/attach; late mounts are Docker's alone, and the contract holds the capabilities to say so.
 */
describeLauncherContract(
  'kubernetes',
  async () => {
    const rig = await startKubeRig();
    const home = contractHome({ image: 'berth/shell:latest', runtime: 'runc' });
    // What a tenant could upload and run (it leaves a SysV segment behind), put in tenant a's
    // volume on the node's disk, as an upload of the tenant's would be.
    const first = await rig.launcher.run(home.plan({ tenant: 'a', argv: ['true'] }));
    if (first.exitCode !== 0) throw new Error(`tenant a's first run failed: ${first.stderr}`);
    const claims = await rig.cluster.kubeConfig
      .makeApiClient(CoreV1Api)
      .listNamespacedPersistentVolumeClaim({ namespace: rig.namespace, labelSelector: `${LABELS.workspace}=a` });
    const probe = join(await rig.claimDir(claims.items[0]!.metadata!.name!), 'ipc-probe');
    execFileSync('gcc', ['-static', '-O2', '-o', probe, join(import.meta.dirname, '..', 'fixtures', 'ipc-probe.c')]);
    return {
      launcher: rig.launcher,
      plan: home.plan,
      blankDir: home.home,
      async cleanup() {
        await rig.stop();
        await home.cleanup();
      },
    };
  },
  { runtime: 'runc', warm: true, lateMounts: false, cmd: SHELL_COMMANDS, hostWorkspaces: false },
);
