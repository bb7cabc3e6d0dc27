import type Docker from 'dockerode';

export const BENCH_IMAGE = 'berth/shell:latest';

/** The baseline: what any Docker client must do for one run, nothing more. */
export async function bareRun(docker: Docker, command: string, network = 'none', runtime?: string): Promise<void> {
  const c = await docker.createContainer({
    Image: BENCH_IMAGE,
    Cmd: ['sh', '-c', command],
    HostConfig: { NetworkMode: network, ...(runtime ? { Runtime: runtime } : {}) },
  });
  await c.start();
  await c.wait({ condition: 'not-running' });
  await c.remove({ force: true });
}

/** The baseline of a warm message: one exec of `true` into a running container, to its exit code. */
export async function bareExec(container: Docker.Container): Promise<void> {
  const exec = await container.exec({ Cmd: ['sh', '-c', 'true'], AttachStdout: true, AttachStderr: true });
  const stream = await exec.start({ hijack: true, stdin: false });
  await new Promise<void>((r) => {
    stream.on('end', r);
    stream.on('close', r);
    stream.resume();
  });
  await exec.inspect();
}
