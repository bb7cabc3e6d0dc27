import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import Docker from 'dockerode';
import { createDockerLauncher } from '../../src/launch/docker.js';
import { removeContainersOf } from '../helpers.js';
import { contractHome } from './contract-plan.js';
import { SHELL_COMMANDS } from './docker-commands.js';
import { describeLauncherContract } from './launcher-contract.js';

/**
 * The Docker launcher under each runtime berth ships with. gVisor: its processes are not host
 * processes, so the launcher cannot look for what an exec left (capabilities().warm('runsc') is
 * false) and the contract holds it to saying so.
 */
for (const { runtime, warm } of [
  { runtime: 'runc', warm: true },
  { runtime: 'runsc', warm: false },
]) {
  describeLauncherContract(
    'docker',
    async () => {
      const home = contractHome({ image: 'berth/shell:latest', runtime });
      if (warm) {
        home.plan({ argv: ['true'] }); // lays out the project
        // What a tenant could upload and run: it leaves a SysV segment behind.
        execFileSync('gcc', ['-static', '-O2', '-o', join(home.workspaceDir('a'), 'ipc-probe'), join(import.meta.dirname, '..', 'fixtures', 'ipc-probe.c')]);
      }
      return {
        launcher: createDockerLauncher(new Docker()),
        plan: home.plan,
        async cleanup() {
          await removeContainersOf(home.home);
          await home.cleanup();
        },
      };
    },
    { runtime, warm, cmd: SHELL_COMMANDS },
  );
}
