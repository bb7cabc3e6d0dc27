import fs from 'node:fs';
import { BerthError } from '../../base/errors.js';
import { closeQuietly } from '../../fs/fd-path.js';
import { procStat } from '../../fs/process-identity.js';

/**
 * A container's first process held by a descriptor on its /proc directory, not by its number: a
 * PID is handed out again once its process is gone (in minutes on a busy host), but an open
 * /proc/<pid> keeps naming the process it was opened on; every open through it fails once that
 * process has ended. The pre-started pool's mount helper enters a container through it alone.
 */
export interface ProcessHandle {
  fd: number;
  pid: number;
  /** Clock ticks after boot (stat field 22), as the kernel wrote it. */
  startTime: string;
  /** `/proc/self/fd/<fd>`: reads below it are the held process's own. */
  dir: string;
}

/**
 * The process now at `pid`, held; it must be in the container's cgroup (named by its engine id).
 * Undefined when berth cannot see it at all (berth in a container of its own: the engine's PIDs
 * are another namespace's); then nothing is entered or judged through it.
 */
export function holdProcess(pid: number, containerId: string): ProcessHandle | undefined {
  let fd: number;
  try {
    fd = fs.openSync(`/proc/${pid}`, fs.constants.O_RDONLY | fs.constants.O_DIRECTORY);
  } catch {
    return undefined;
  }
  const handle = { fd, pid, startTime: '', dir: `/proc/self/fd/${fd}` };
  const startTime = procStat(handle.dir)?.start;
  if (!startTime || !belongsTo(handle, containerId)) {
    closeQuietly(fd);
    throw new BerthError(
      'RUN_FAILED',
      `process ${pid} is not the first process of container ${containerId.slice(0, 12)} (it ended at once)`,
    );
  }
  return { ...handle, startTime };
}

/** Whether the held process still runs in the container's cgroup (false once it has ended). */
export function belongsTo(handle: ProcessHandle, containerId: string): boolean {
  try {
    return fs.readFileSync(`${handle.dir}/cgroup`, 'utf8').includes(containerId);
  } catch {
    return false;
  }
}

export const releaseProcess = (handle: ProcessHandle | undefined) => closeQuietly(handle?.fd);
