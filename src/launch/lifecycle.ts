import { Writable } from 'node:stream';
import { RELAY_BIN } from '../plan/outbound.js';
import type { RunPlan } from '../plan/run-plan.js';
import type { ExecLeftovers, ExecResult, OutputListener, RunOptions } from './launcher.js';

/**
 * The rules of a run's life, written once above every launcher: output is kept up to the plan's
 * cap and the run stopped past it; the plan's timeout stops it; an abort stops it; a command the
 * image lacks answers 127 as a shell would; a stopped run exits 137 (SIGKILL); and a warm
 * container takes another message only when nothing of the last one is left in it. A launcher
 * observes and reports; what follows from it is decided here.
 */

/** A warm container that holds more memory than this beyond its idle self is not kept: idle, it would pin it. */
export const WARM_MEMORY_SLACK = 32 * 2 ** 20;

/**
 * Runtimes whose processes live in a sandbox's own kernel (gVisor's sentry): runsc applies the
 * engine's seccomp profile to a container's first process only, so every exec runs under
 * berth-bridge's filter (`sentryExec`), on any launcher; berth sees their warm containers through
 * the keep-alive's reports.
 */
export const SENTRY_RUNTIMES: ReadonlySet<string> = new Set(['runsc']);

/** The argv an exec runs in a container of this runtime: under berth-bridge's seccomp filter in a sentry. */
export const sentryExec = (runtime: string, argv: string[]): string[] =>
  SENTRY_RUNTIMES.has(runtime) ? [RELAY_BIN, 'seccomp', '--', ...argv] : argv;

/** What berth-bridge's filter wrapper prints when the command is not in the image (berth-bridge.c), exit 127. */
export const notInImage = (argv: string[]) => `${argv[0]}: not found in this image\n`;

/** Why an exec's container was removed when berth did not stop it: it was not there any more. */
export const CONTAINER_LOST = 'the container went away';

/** The exit status of a run stopped by berth (SIGKILL), on every launcher. */
export const STOPPED_EXIT = 137;

/** The exit status and message when the plan's command is not in its image. */
export function commandNotFound(argv: string[], image: string): { exitCode: number; stdout: string; stderr: string } {
  return { exitCode: 127, stdout: '', stderr: `${argv[0]}: not found in image ${image}\n` };
}

/** Collects output up to a shared cap; past it, calls onOverflow once and drops the rest. */
export class BoundedOutput {
  readonly chunks = { stdout: [] as Buffer[], stderr: [] as Buffer[] };
  private total = 0;
  truncated = false;
  constructor(
    private readonly cap: number,
    private readonly onOverflow: () => void,
    private readonly onKept?: OutputListener,
  ) {}

  /** Take a chunk of one stream: kept while there is room, then the overflow fires once. */
  push(which: 'stdout' | 'stderr', chunk: Buffer): void {
    const room = this.cap - this.total;
    if (room > 0) {
      const kept = chunk.length <= room ? chunk : chunk.subarray(0, room);
      this.chunks[which].push(kept);
      this.total += kept.length;
      try {
        this.onKept?.(which, kept);
      } catch {
        // a listener's failure never touches the run
      }
    }
    if (chunk.length > room && !this.truncated) {
      this.truncated = true;
      this.onOverflow();
    }
  }

  sink(which: 'stdout' | 'stderr'): Writable {
    return new Writable({
      write: (chunk: Buffer, _enc, done) => {
        this.push(which, chunk);
        done();
      },
    });
  }

  text(which: 'stdout' | 'stderr'): string {
    return Buffer.concat(this.chunks[which]).toString('utf8');
  }
}

/**
 * A run's bounds: its output (cap), its timeout and the caller's abort, each calling `stop` (at
 * most once). `arm()` once the command runs (the timeout counts from its start); `disarm()` when
 * it ended. `why()` names what stopped it, if anything did.
 */
export interface RunBounds {
  output: BoundedOutput;
  arm(): void;
  disarm(): void;
  readonly timedOut: boolean;
  readonly stopped: boolean;
  why(): string | undefined;
}

export function runBounds(plan: Pick<RunPlan, 'limits'>, opts: RunOptions, stop: () => void): RunBounds {
  let timedOut = false;
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  const stopOnce = () => {
    if (stopped) return;
    stopped = true;
    stop();
  };
  const output = new BoundedOutput(plan.limits.outputBytes, stopOnce, opts.onOutput);
  const onTimeout = () => {
    timedOut = true;
    stopOnce();
  };
  return {
    output,
    arm() {
      timer = setTimeout(onTimeout, plan.limits.timeoutMs);
      if (opts.signal?.aborted) stopOnce();
      opts.signal?.addEventListener('abort', stopOnce, { once: true });
    },
    disarm() {
      clearTimeout(timer);
      opts.signal?.removeEventListener('abort', stopOnce);
    },
    get timedOut() {
      return timedOut;
    },
    get stopped() {
      return stopped;
    },
    why() {
      if (!stopped) return undefined;
      return timedOut ? 'timed out' : output.truncated ? 'output past the cap' : opts.signal?.aborted ? 'aborted' : 'stopped';
    },
  };
}

/**
 * Why a warm container must not take another message after an exec, or undefined when it may:
 * nothing of the exec still runs, the keep-alive is whole and running, no IPC object is left, and
 * it holds no more memory than the slack beyond its idle self. Whatever the launcher could not
 * observe counts against it: "cannot tell" is never clean.
 */
export function warmVerdict(left: ExecLeftovers): string | undefined {
  if (!left.running) return 'its processes cannot be read by this launcher';
  if (left.running.length) return `it left processes running: ${left.running.join(', ')}`;
  if (!left.keepAliveHurt) return 'its keep-alive cannot be checked by this launcher';
  if (left.keepAliveHurt.length) return `the keep-alive is not running: ${left.keepAliveHurt.join(', ')}`;
  if (!left.mountsMissing) return 'its mounts cannot be read by this launcher';
  if (left.mountsMissing.length) return `a protected path was moved from its mount: ${left.mountsMissing.join(', ')}`;
  if (!left.ipc) return 'its IPC namespace cannot be read by this launcher';
  if (left.ipc.length) return `it left IPC objects: ${left.ipc.join(', ')}`;
  if (left.memoryGrowth === undefined) return 'its memory cannot be read by this launcher';
  if (left.memoryGrowth > WARM_MEMORY_SLACK)
    return `it holds ${Math.round(left.memoryGrowth / 2 ** 20)} MiB more than when idle (a tmpfs file, shared memory, kernel memory)`;
  return undefined;
}

/** Why the container of this exec must not take another message (it was stopped, or left something), or undefined. */
export function execVerdict(r: ExecResult): string | undefined {
  return r.stopped ?? warmVerdict(r.leftovers);
}
