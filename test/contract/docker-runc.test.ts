import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import Docker from 'dockerode';
import { createDockerLauncher } from '../../src/launch/docker.js';
import { removeContainersOf } from '../helpers.js';
import { contractHome } from './contract-plan.js';
import { SHELL_COMMANDS } from './docker-commands.js';
import { describeLauncherContract } from './launcher-contract.js';

describeLauncherContract(
  'docker',
  async () => {
    const home = contractHome({ image: 'berth/shell:latest', runtime: 'runc' });
    home.plan({ argv: ['true'] }); // lays out the project
    // What a tenant could upload and run: it leaves a SysV segment behind.
    execFileSync('gcc', ['-static', '-O2', '-o', join(home.workspaceDir('a'), 'ipc-probe'), join(import.meta.dirname, '..', 'fixtures', 'ipc-probe.c')]);
    return {
      launcher: createDockerLauncher(new Docker()),
      plan: home.plan,
      async cleanup() {
        await removeContainersOf(home.home);
        await home.cleanup();
      },
    };
  },
  { runtime: 'runc', warm: true, cmd: SHELL_COMMANDS },
);
