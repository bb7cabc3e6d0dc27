import { execFileSync, spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { BerthError } from '../../base/errors.js';
import { closeQuietly, openPlannedSource } from '../../fs/fd-path.js';
import type { BindMount } from '../../plan/run-plan.js';
import type { ProcessHandle } from './proc-handle.js';

/**
 * Mounts attached to a running container (the pre-started pool), through native/berth-mount.c:
 * berth opens each source without following links, checks it is the path the plan named, and
 * hands the helper the descriptors, never a path to resolve again. Host-side and root-only.
 */

const SOURCE = fileURLToPath(new URL('../../../native/berth-mount.c', import.meta.url));
/** A claim attaches a handful of mounts in ~10 ms; one that takes this long is stuck. */
const ATTACH_TIMEOUT_MS = 10_000;
/** berth-mount's exit when the container's process is gone or not the container's (nothing touched). */
const GONE_EXIT = 3;

/**
 * The helper's binary, compiled once per source version into the home's cache (gcc, which setup
 * installs for berth-bridge). Throws LAUNCHER_UNSUPPORTED when it cannot be built.
 */
export function mountHelper(cacheDir: string): string {
  const source = fs.readFileSync(SOURCE);
  const bin = join(cacheDir, `berth-mount-${createHash('sha256').update(source).digest('hex').slice(0, 12)}`);
  if (fs.existsSync(bin)) return bin;
  fs.mkdirSync(cacheDir, { recursive: true, mode: 0o700 });
  const tmp = `${bin}.${randomBytes(4).toString('hex')}.tmp`;
  try {
    execFileSync('gcc', ['-O2', '-s', '-o', tmp, SOURCE], { stdio: ['ignore', 'ignore', 'pipe'] });
    fs.renameSync(tmp, bin);
  } catch (err) {
    fs.rmSync(tmp, { force: true });
    throw new BerthError('LAUNCHER_UNSUPPORTED', `could not build the mount helper: ${(err as Error).message.split('\n')[0]}`, {
      hint: 'install a C compiler (apt-get install -y gcc libc6-dev), or set runs.pool: 0',
    });
  }
  return bin;
}

/**
 * Attach `binds` (in order: a mount before any below it) into the mount namespace of the
 * container whose first process `proc` holds (never a PID looked up again: the helper enters
 * through the held descriptor and checks the process is still the container's). Each source must
 * still be what the plan named (E_SANDBOX_VIOLATION otherwise); a target is resolved inside the
 * container without following any link (the helper fails on one). False: the process is gone or
 * not the container's, and nothing was mounted. On any failure the container must be thrown away.
 */
export async function attachMounts(helper: string, proc: ProcessHandle, containerId: string, binds: Array<BindMount>): Promise<boolean> {
  const fds: number[] = [];
  try {
    for (const m of binds) fds.push(openPlannedSource(m.source));
    // The child's descriptor 3 is the process, 4, 5, ... the sources, in order.
    const specs = binds.map((m, i) => `${4 + i}:${m.readOnly ? 'r' : 'w'}:${m.target}`);
    return await new Promise<boolean>((resolve, reject) => {
      const child = spawn(helper, ['3', containerId, proc.startTime, ...specs], {
        stdio: ['ignore', 'ignore', 'pipe', proc.fd, ...fds],
        timeout: ATTACH_TIMEOUT_MS,
        killSignal: 'SIGKILL',
      });
      let stderr = '';
      child.stderr?.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-2000)));
      child.on('error', reject);
      child.on('close', (code, signal) => {
        if (code === 0 || code === GONE_EXIT) resolve(code === 0);
        else
          reject(
            new BerthError(
              'RUN_FAILED',
              `could not attach the workspace to a pre-started container: ${stderr.trim() || `berth-mount ended with ${signal ?? code}`}`,
            ),
          );
      });
    });
  } finally {
    for (const fd of fds) closeQuietly(fd);
  }
}
