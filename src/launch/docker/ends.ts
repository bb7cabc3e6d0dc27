import { execFile } from 'node:child_process';
import Docker from 'dockerode';
import { STOPPED_EXIT } from '../lifecycle.js';

// What the engine and a runtime say of a container's end, a stream's end and a runtime's version.

/**
 * How the engine says an ended container ended: the memory limit, or its exit status; undefined
 * when it is gone. Its OOM event can come a moment after the exit (seen under gVisor: a SIGKILL'd
 * sandbox read OOMKilled false, then true): a SIGKILL is asked again for up to 1.5 s. Under
 * gVisor the engine hears of the OOM from runsc's shim, and not always (measured: about one run
 * in ten reads OOMKilled false however long it is asked); such a run ends as a bare 137.
 */
export async function endOf(container: Docker.Container): Promise<{ outOfMemory: boolean; exitCode: number } | undefined> {
  for (let attempt = 0; ; attempt++) {
    const state = await container.inspect().then(
      ({ State }) => State,
      () => undefined,
    );
    if (!state) return undefined;
    if (state.OOMKilled || state.ExitCode !== STOPPED_EXIT || attempt === 15)
      return { outOfMemory: state.OOMKilled, exitCode: state.ExitCode };
    await new Promise((r) => setTimeout(r, 100));
  }
}

export function streamEnd(stream: NodeJS.ReadableStream): Promise<void> {
  return new Promise<void>((resolve) => {
    stream.on('end', resolve);
    stream.on('close', resolve);
    stream.on('error', () => resolve());
  });
}

/** A runtime binary's own first line of `--version` (runsc, crun, kata); undefined if it says nothing in time. */
export function runtimeVersion(path: string): Promise<string | undefined> {
  return new Promise((resolve) => {
    execFile(path, ['--version'], { timeout: 2000, maxBuffer: 64 * 1024 }, (err, stdout) =>
      resolve(err ? undefined : stdout.split('\n')[0]?.trim() || undefined),
    );
  });
}
