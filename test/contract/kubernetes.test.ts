import { contractHome } from './contract-plan.js';
import { SHELL_COMMANDS } from './docker-commands.js';
import { describeLauncherContract } from './launcher-contract.js';
import { startKubeRig } from '../helpers/kube-rig.js';

/**
 * The Kubernetes launcher under the same contract: a real kube-apiserver with agent-sandbox's
 * CRDs, the fake agent-sandbox controller and the test kubelet running pods on the local Docker
 * engine (test/helpers/kube-rig.ts). Workspaces are the cluster's volumes, not host directories
 * (hostWorkspaces: false); warm containers and late mounts are Docker's alone for now, and the
 * contract holds the capabilities to say so.
 */
describeLauncherContract(
  'kubernetes',
  async () => {
    const rig = await startKubeRig();
    const home = contractHome({ image: 'berth/shell:latest', runtime: 'runc' });
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
  { runtime: 'runc', warm: false, lateMounts: false, cmd: SHELL_COMMANDS, hostWorkspaces: false },
);
