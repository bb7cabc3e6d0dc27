import type Docker from 'dockerode';

export const BENCH_IMAGE = 'berth/shell:latest';

/** The baseline: what any Docker client must do for one run, nothing more. */
export async function bareRun(docker: Docker, command: string, network = 'none'): Promise<void> {
  const c = await docker.createContainer({ Image: BENCH_IMAGE, Cmd: ['sh', '-c', command], HostConfig: { NetworkMode: network } });
  const exited = c.wait({ condition: 'next-exit' });
  await c.start();
  await exited;
  await c.remove({ force: true });
}
