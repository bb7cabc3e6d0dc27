import Docker from 'dockerode';
import { createDockerLauncher } from '../../src/launch/docker.js';
import { removeContainersOf } from '../helpers.js';
import { contractHome } from './contract-plan.js';
import { SHELL_COMMANDS } from './docker-commands.js';
import { describeLauncherContract } from './launcher-contract.js';

/**
 * gVisor: its processes are not host processes, so the Docker launcher cannot look for what an
 * exec left (capabilities().warm('runsc') is false) and the contract holds it to saying so.
 */
describeLauncherContract(
  'docker',
  async () => {
    const home = contractHome({ image: 'berth/shell:latest', runtime: 'runsc' });
    return {
      launcher: createDockerLauncher(new Docker()),
      plan: home.plan,
      async cleanup() {
        await removeContainersOf(home.home);
        await home.cleanup();
      },
    };
  },
  { runtime: 'runsc', warm: false, cmd: SHELL_COMMANDS },
);
