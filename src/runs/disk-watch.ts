import fs from 'node:fs';
import { diskUsage } from '../fs/du.js';

export const DISK_CHECK_MS = 1000;
/** What a run that starts over limits.disk_mb (or past limits.files: its bytes then partly counted) may add before it is stopped. */
export const OVER_LIMIT_SLACK = 256 * 1024;

/**
 * While a run is in flight, its writable root (and agent home) is measured every second (a
 * bounded, no-follow walk) and the run is stopped once it holds more than limits.disk_mb or
 * limits.files — but only if it grew past the limit during this run, so a run that cleans up an
 * over-full workspace is not stopped for what it found. A workspace that is its own filesystem
 * (disk_quotas: loop) has its bytes bounded by the kernel; only its file count is read (statfs).
 */
export function watchDisk(
  dirs: readonly string[],
  limits: { diskBytes?: number; files?: number },
  stop: (reason: string) => void,
  everyMs = DISK_CHECK_MS,
  /** Workspaces that are their own filesystem (disk_quotas: loop): the kernel bounds their bytes; their files are read from statfs (limits.files may have changed since mkfs). */
  filesystems: readonly string[] = [],
) {
  const { diskBytes, files } = limits;
  if (diskBytes === undefined || files === undefined) return { stop: () => undefined, exceeded: () => undefined };
  // The workspace and the agent home count together: a tenant cannot park what the limit refuses in the other.
  const measure = () => {
    const walked = dirs.reduce(
      (sum, dir) => {
        const u = diskUsage(dir, files);
        return { bytes: sum.bytes + u.bytes, complete: sum.complete && u.complete };
      },
      { bytes: 0, complete: true },
    );
    const inodes = filesystems.reduce((sum, dir) => {
      try {
        const st = fs.statfsSync(dir);
        return sum + (st.files - st.ffree);
      } catch {
        return sum; // gone under the run (its project deleted): nothing to count, never a crash
      }
    }, 0);
    return { bytes: walked.bytes, complete: walked.complete && inodes <= files };
  };
  const start = measure();
  // Over the limit already, or not known (a walk cut short counts only part of the bytes): the
  // run is stopped for what it adds, past a slack — not for the few bytes the agent home gains
  // (a conversation's files) while it cleans up.
  const atLimit = start.bytes > diskBytes || !start.complete;
  let exceeded: string | undefined;
  const timer = setInterval(() => {
    const now = measure();
    if (!now.complete && start.complete) exceeded = `the workspace passed limits.files (${files} files and directories)`;
    else if (now.bytes > diskBytes && now.bytes > start.bytes + (atLimit ? OVER_LIMIT_SLACK : 0))
      exceeded = `the workspace passed limits.disk_mb (${Math.round(diskBytes / 1048576)} MiB): it holds ${now.bytes} bytes`;
    if (exceeded) {
      clearInterval(timer);
      stop(exceeded);
    }
  }, everyMs);
  timer.unref();
  return { stop: () => clearInterval(timer), exceeded: () => exceeded };
}
