import type Docker from 'dockerode';

export const BENCH_IMAGE = 'berth/shell:latest';

/** The baseline: what any Docker client must do for one run, nothing more. */
export async function bareRun(docker: Docker, command: string, network = 'none'): Promise<void> {
  const c = await docker.createContainer({ Image: BENCH_IMAGE, Cmd: ['sh', '-c', command], HostConfig: { NetworkMode: network } });
  await c.start();
  await c.wait({ condition: 'not-running' });
  await c.remove({ force: true });
}
