import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import Docker from 'dockerode';
import { afterAll, describe, expect, it } from 'vitest';
import { createDockerLauncher } from '../../src/launch/docker/launcher.js';
import { mountHelper } from '../../src/launch/docker/late-mounts.js';
import { isGone } from '../../src/launch/launcher.js';
import { execVerdict } from '../../src/launch/lifecycle.js';
import { removeContainersOf } from '../helpers.js';
import { contractHome } from './contract-plan.js';
import { SHELL_COMMANDS } from './docker-commands.js';
import { describeLauncherContract } from './launcher-contract.js';

/**
 * The Docker launcher under each runtime berth ships with. Under gVisor the host cannot read a
 * container's processes (they live in the sentry): the launcher sees a warm container's through
 * its keep-alive's reports, and the same contract holds it to the same leftovers verdicts.
 */
const RUNTIMES = ['runc', 'runsc'];

function dockerHome(runtime: string) {
  const home = contractHome({ image: 'berth/shell:latest', runtime });
  home.plan({ argv: ['true'] }); // lays out the project
  // What a tenant could upload and run: it leaves a SysV segment behind.
  execFileSync('gcc', [
    '-static',
    '-O2',
    '-o',
    join(home.workspaceDir('a'), 'ipc-probe'),
    join(import.meta.dirname, '..', 'fixtures', 'ipc-probe.c'),
  ]);
  return home;
}

for (const runtime of RUNTIMES) {
  describeLauncherContract(
    'docker',
    async () => {
      const home = dockerHome(runtime);
      return {
        launcher: createDockerLauncher(new Docker(), { mountHelper: () => mountHelper(join(home.home, 'cache')) }),
        plan: home.plan,
        blankDir: home.home,
        async cleanup() {
          await removeContainersOf(home.home);
          await home.cleanup();
        },
      };
    },
    // gVisor's sentry does not see mounts made after its start.
    { runtime, warm: true, lateMounts: runtime !== 'runsc', adopt: runtime === 'runsc', cmd: SHELL_COMMANDS },
  );
}

// Not the contract's (a launcher without seccomp could still keep it): what the engine's
// profile does for a container's first process holds for every exec in a warm one, gVisor
// included (runsc filters the first process only; berth-bridge filters each exec there).
describe.each(RUNTIMES)('docker warm execs under %s', (runtime) => {
  const home = dockerHome(runtime);
  const launcher = createDockerLauncher(new Docker());
  afterAll(async () => {
    await removeContainersOf(home.home);
    await home.cleanup();
  });

  it('run under a seccomp filter that refuses namespaces, mounts and keyrings, and leave the container clean', async () => {
    const p = home.plan({ argv: ['true'] });
    const { containerId } = await launcher.startIdle(p, p.keepAlive);
    const argv = [
      'sh',
      '-c',
      'grep "^Seccomp:" /proc/self/status; unshare -U true && echo unshared; unshare -m true && echo unshared; true',
    ];
    const r = await launcher.execIn(containerId, home.plan({ argv }), argv);
    if (isGone(r)) throw new Error(r.reason);
    expect(r.stdout).toMatch(/^Seccomp:\s+2\n$/);
    expect(r.stderr).toMatch(/unshare.*Operation not permitted/);
    expect(execVerdict(r)).toBeUndefined();
  });
});
