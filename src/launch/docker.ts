import { Writable } from 'node:stream';
import Docker from 'dockerode';
import { BerthError } from '../errors.js';
import type { PlannedMount, RunPlan } from '../plan/run-plan.js';
import { labelFilter, LABELS, type ContainerQuery } from '../plan/labels.js';
import { openIpcReader, uncleanReasonOf, watchKeepAlive, type IpcReader, type KeepAlive } from './docker-exec.js';

/**
 * One of the launch folder's docker files (only they import dockerode). It translates a RunPlan
 * into Engine API options and the engine's failures into berth's error codes; it decides nothing
 * about isolation.
 */

export interface RunResult {
  containerId: string;
  exitCode: number;
  stdout: string;
  stderr: string;
  /** Output went past the plan's cap: the run was stopped and the output cut there. */
  truncated: boolean;
  timedOut: boolean;
  timings: { createMs: number; startMs: number; runMs: number; totalMs: number };
}

/** An exec's result; `clean: false` means the container must not take another message. */
export interface ExecResult extends RunResult {
  clean: boolean;
  /** Why it is not clean (stopped, processes left behind, or no way to tell). */
  uncleanReason?: string;
}

export interface IdleContainer {
  containerId: string;
  timings: { createMs: number; startMs: number };
}

export interface EngineInfo {
  version: string;
  apiVersion: string;
  runcVersion: string;
  securityOptions: string[];
  /** Where the engine keeps images and containers. */
  rootDir: string;
}

export interface BuildOptions {
  context: NodeJS.ReadableStream;
  tag: string;
  buildArgs?: Record<string, string>;
  onProgress?: (line: string) => void;
}

export interface ManagedContainer {
  id: string;
  project: string;
  workspace: string;
  run: string;
  state: string;
  /** What its writable /workspace reaches (plan/labels.ts); missing on containers of an older berth. */
  reach?: string;
  /** The berth process that started it, if labelled. */
  owner?: string;
}

export interface Engine {
  info(): Promise<EngineInfo>;
  imageExists(image: string): Promise<boolean>;
  /** Run a plan to its end; aborting `signal` stops the container (the result then says why). */
  run(plan: RunPlan, opts?: RunOptions): Promise<RunResult>;
  /**
   * Start a warm container: created exactly as `run` would create it, but running `keepAliveArgv`
   * (e.g. `berth-bridge idle`, wrapped in the plan's relays) until it is removed.
   */
  startIdle(plan: RunPlan, keepAliveArgv: string[], opts?: { onCreated?(id: string): void }): Promise<IdleContainer>;
  /**
   * Run `argv` in a warm container with the plan's env, user, cwd and limits (the container's
   * cgroup). A timeout, an output overflow or an abort removes the whole container (Docker cannot
   * kill an exec). Otherwise the container stays, and `clean: false` tells the caller to remove it:
   * something the exec started still runs, or that cannot be known. One exec at a time per
   * container. Throws RUN_FAILED if the container is gone or stopped.
   */
  execIn(containerId: string, plan: RunPlan, argv: string[], opts?: RunOptions): Promise<ExecResult>;
  /** Force-remove the given containers; returns how many. */
  removeContainers(ids: string[]): Promise<number>;
  listManaged(query: ContainerQuery): Promise<ManagedContainer[]>;
  /** Force-remove the labelled containers a query matches; returns how many. */
  removeManaged(query: ContainerQuery): Promise<number>;
  buildImage(options: BuildOptions): Promise<void>;
}

/** Engine API mount (the typings lag the API: tmpfs has no Source, binds have NonRecursive). */
export type EngineMount =
  | { Type: 'tmpfs'; Target: string; ReadOnly: boolean; TmpfsOptions: { SizeBytes: number; Mode: number } }
  | { Type: 'bind'; Source: string; Target: string; ReadOnly: boolean; BindOptions: { NonRecursive: boolean } };

export function toEngineMount(m: PlannedMount): EngineMount {
  if (m.type === 'tmpfs') {
    return { Type: 'tmpfs', Target: m.target, ReadOnly: m.readOnly, TmpfsOptions: { SizeBytes: m.sizeBytes, Mode: m.mode } };
  }
  // Typed binds refuse a missing source instead of creating it as root (Binds strings would).
  // NonRecursive: host submounts under a source are not carried in, so nothing below a
  // read-only bind can be a writable mount (recursive read-only needs API 1.44).
  return { Type: 'bind', Source: m.source, Target: m.target, ReadOnly: m.readOnly, BindOptions: { NonRecursive: true } };
}

function toEnv(plan: RunPlan): string[] {
  return Object.entries(plan.env).map(([k, v]) => `${k}=${v}`);
}

/**
 * Engine API options for a plan; exported so tests can check the translation as data. `cmd`
 * replaces the plan's argv (a warm container's keep-alive), nothing else.
 */
export function toCreateOptions(plan: RunPlan, name?: string, cmd: string[] = plan.argv): Docker.ContainerCreateOptions {
  return {
    name,
    Image: plan.image,
    Cmd: cmd,
    Entrypoint: [],
    WorkingDir: plan.cwd,
    User: plan.user,
    Env: toEnv(plan),
    Labels: plan.labels,
    AttachStdout: true,
    AttachStderr: true,
    AttachStdin: false,
    OpenStdin: false,
    Tty: false,
    StopTimeout: 1,
    HostConfig: {
      Mounts: plan.mounts.map(toEngineMount) as unknown as Docker.MountConfig,
      NetworkMode: plan.network,
      CapDrop: ['ALL'],
      SecurityOpt: ['no-new-privileges'],
      ReadonlyRootfs: plan.readOnlyRootfs,
      Memory: plan.limits.memoryBytes,
      MemorySwap: plan.limits.memoryBytes,
      NanoCpus: plan.limits.nanoCpus,
      PidsLimit: plan.limits.pids,
      IpcMode: 'private',
      // Scoped to that private IPC namespace (run-plan.ts IPC_SYSCTLS).
      Sysctls: { ...plan.sysctls },
      // No single file grows past what the workspace may hold: the kernel refuses the write (EFBIG / SIGXFSZ).
      ...(plan.limits.diskBytes ? { Ulimits: [{ Name: 'fsize', Soft: plan.limits.diskBytes, Hard: plan.limits.diskBytes }] } : {}),
      // The engine keeps no copy of the output: berth reads it once, bounded, from attach.
      LogConfig: { Type: 'none', Config: {} },
    },
  };
}

interface EngineErrorShape {
  statusCode?: number;
  code?: string;
  json?: { message?: string };
  message?: string;
}

export function translateEngineError(err: unknown, context: { image?: string } = {}): BerthError {
  if (err instanceof BerthError) return err;
  const e = (err ?? {}) as EngineErrorShape;
  const text = e.json?.message ?? e.message ?? String(err);
  if (e.code === 'ECONNREFUSED' || e.code === 'ENOENT' || e.code === 'EACCES' || e.code === 'ECONNRESET') {
    return new BerthError('ENGINE_UNAVAILABLE', `no Docker engine answers (${e.code})`, {
      hint: 'start one: "make run" does it on Debian as root, or "sudo dockerd &"; berth honours DOCKER_HOST',
    });
  }
  if (e.statusCode === 404 && context.image && /image/i.test(text)) {
    return new BerthError('IMAGE_MISSING', `image ${context.image} is not on this engine`, {
      hint: 'build it with "berth images build"',
    });
  }
  return new BerthError('RUN_FAILED', `the engine refused: ${text.trim()}`, {}, { cause: err });
}

export interface RunOptions {
  signal?: AbortSignal;
  onCreated?: (containerId: string) => void;
  /** Output as the container prints it (what is kept is bounded the same way: past the cap, nothing more). */
  onOutput?: (stream: 'stdout' | 'stderr', chunk: Buffer) => void;
}

/** Collects output up to a shared cap; past it, calls onOverflow once and drops the rest. */
class BoundedOutput {
  readonly chunks = { stdout: [] as Buffer[], stderr: [] as Buffer[] };
  private total = 0;
  truncated = false;
  constructor(
    private readonly cap: number,
    private readonly onOverflow: () => void,
    private readonly onKept?: RunOptions['onOutput'],
  ) {}

  sink(which: 'stdout' | 'stderr'): Writable {
    return new Writable({
      write: (chunk: Buffer, _enc, done) => {
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
        done();
      },
    });
  }

  text(which: 'stdout' | 'stderr'): string {
    return Buffer.concat(this.chunks[which]).toString('utf8');
  }
}

function notFound(argv: string[], image: string): string {
  return `${argv[0]}: not found in image ${image}\n`;
}

export function createDockerEngine(docker: Docker = new Docker()): Engine {
  const engineCall = async <T>(fn: () => Promise<T>, context: { image?: string } = {}): Promise<T> => {
    try {
      return await fn();
    } catch (err) {
      throw translateEngineError(err, context);
    }
  };

  async function run(plan: RunPlan, opts: RunOptions = {}): Promise<RunResult> {
    const t0 = performance.now();
    const container = await engineCall(() => docker.createContainer(toCreateOptions(plan)), { image: plan.image });
    try {
      opts.onCreated?.(container.id);
    } catch (err) {
      await container.remove({ force: true }).catch(() => undefined);
      throw err;
    }
    const tCreated = performance.now();
    let timedOut = false;
    let timer: NodeJS.Timeout | undefined;
    const kill = () => {
      container.kill({ signal: 'SIGKILL' }).catch(() => undefined);
    };
    try {
      const output = new BoundedOutput(plan.limits.outputBytes, kill, opts.onOutput);
      const stream = await engineCall(() => container.attach({ stream: true, stdout: true, stderr: true }));
      const ended = new Promise<void>((resolve) => {
        stream.on('end', resolve);
        stream.on('close', resolve);
        stream.on('error', () => resolve());
      });
      docker.modem.demuxStream(stream, output.sink('stdout'), output.sink('stderr'));
      try {
        await container.start();
      } catch (err) {
        // The command is not in the image: answer like a shell would (127), not as an engine failure.
        const text = (err as EngineErrorShape).json?.message ?? (err as Error).message ?? '';
        if (!/executable file not found|no such file or directory/i.test(text)) throw translateEngineError(err, { image: plan.image });
        const t = performance.now();
        return {
          containerId: container.id,
          exitCode: 127,
          stdout: '',
          stderr: notFound(plan.argv, plan.image),
          truncated: false,
          timedOut: false,
          timings: { createMs: tCreated - t0, startMs: t - tCreated, runMs: 0, totalMs: t - t0 },
        };
      }
      const tStarted = performance.now();
      timer = setTimeout(() => {
        timedOut = true;
        kill();
      }, plan.limits.timeoutMs);
      if (opts.signal?.aborted) kill();
      opts.signal?.addEventListener('abort', kill, { once: true });
      // After start, "not-running" returns at once if the container already exited. ("next-exit"
      // sent before start races: if the engine registers it after the exit, it waits forever.)
      const { StatusCode } = await engineCall(() => container.wait({ condition: 'not-running' }) as Promise<{ StatusCode: number }>);
      clearTimeout(timer);
      // The attach stream ends right after exit; don't let a stuck stream hold the run.
      let grace: NodeJS.Timeout | undefined;
      await Promise.race([ended, new Promise((r) => (grace = setTimeout(r, 2000)))]);
      clearTimeout(grace);
      const tDone = performance.now();
      return {
        containerId: container.id,
        exitCode: StatusCode,
        stdout: output.text('stdout'),
        stderr: output.text('stderr'),
        truncated: output.truncated,
        timedOut,
        timings: {
          createMs: tCreated - t0,
          startMs: tStarted - tCreated,
          runMs: tDone - tStarted,
          totalMs: tDone - t0,
        },
      };
    } finally {
      clearTimeout(timer);
      await container.remove({ force: true }).catch(() => undefined);
    }
  }

  /** Warm containers this engine started: their keep-alive's processes, for the exec checks. */
  const warm = new Map<string, KeepAlive>();
  /** Their IPC readers, one for each container's life (started with it, ended with it). */
  const ipcReaders = new Map<string, IpcReader>();

  async function remove(id: string): Promise<void> {
    warm.delete(id);
    ipcReaders.get(id)?.close();
    ipcReaders.delete(id);
    await docker.getContainer(id).remove({ force: true }).catch(() => undefined);
  }

  async function startIdle(plan: RunPlan, keepAliveArgv: string[], opts: { onCreated?(id: string): void } = {}): Promise<IdleContainer> {
    const t0 = performance.now();
    const container = await engineCall(() => docker.createContainer(toCreateOptions(plan, undefined, keepAliveArgv)), { image: plan.image });
    const tCreated = performance.now();
    try {
      opts.onCreated?.(container.id);
      await engineCall(() => container.start(), { image: plan.image });
      const { State } = await engineCall(() => container.inspect());
      if (!State.Running) {
        throw new BerthError('RUN_FAILED', `the keep-alive "${keepAliveArgv.join(' ')}" exited at once (status ${State.ExitCode})`);
      }
      const keepAlive = await watchKeepAlive(State.Pid, keepAliveArgv);
      warm.set(container.id, keepAlive);
      ipcReaders.set(container.id, openIpcReader(keepAlive));
    } catch (err) {
      await remove(container.id);
      throw err;
    }
    return { containerId: container.id, timings: { createMs: tCreated - t0, startMs: performance.now() - tCreated } };
  }

  async function execIn(containerId: string, plan: RunPlan, argv: string[], opts: RunOptions = {}): Promise<ExecResult> {
    const t0 = performance.now();
    const container = docker.getContainer(containerId);
    const exec = await engineCall(() =>
      container.exec({ Cmd: argv, Env: toEnv(plan), User: plan.user, WorkingDir: plan.cwd, AttachStdin: false, AttachStdout: true, AttachStderr: true, Tty: false }),
    );
    opts.onCreated?.(containerId);
    const tCreated = performance.now();
    // Docker has no way to stop an exec: stopping it means removing its container.
    let stopped: Promise<void> | undefined;
    let timedOut = false;
    const stop = () => {
      stopped ??= remove(containerId);
    };
    const output = new BoundedOutput(plan.limits.outputBytes, stop, opts.onOutput);
    const stream = await engineCall(() => exec.start({ hijack: true, stdin: false }));
    const tStarted = performance.now();
    const timer = setTimeout(() => {
      timedOut = true;
      stop();
    }, plan.limits.timeoutMs);
    if (opts.signal?.aborted) stop();
    opts.signal?.addEventListener('abort', stop, { once: true });
    try {
      // The stream ends when the exec's output closes: at its exit, or at most ~2 s later when a
      // process it left holds the pipes (the engine's grace).
      const ended = new Promise<void>((resolve) => {
        stream.on('end', resolve);
        stream.on('close', resolve);
        stream.on('error', () => resolve());
      });
      docker.modem.demuxStream(stream, output.sink('stdout'), output.sink('stderr'));
      await ended;
      // Usually exited by now; a command that closed its output may still run (until the timeout).
      let exitCode: number | undefined;
      for (let delay = 10; !stopped; delay = Math.min(delay * 2, 250)) {
        const info = await exec.inspect().catch(() => undefined);
        if (!info) break; // the container went away under the exec
        if (!info.Running) {
          exitCode = info.ExitCode ?? undefined;
          break;
        }
        await new Promise((r) => setTimeout(r, delay));
      }
      clearTimeout(timer);
      opts.signal?.removeEventListener('abort', stop);
      let uncleanReason: string | undefined;
      if (stopped || exitCode === undefined) {
        stop();
        await stopped;
        uncleanReason = timedOut ? 'timed out' : output.truncated ? 'output past the cap' : opts.signal?.aborted ? 'aborted' : 'the container went away';
      } else {
        const keepAlive = warm.get(containerId);
        uncleanReason = keepAlive ? await uncleanReasonOf(keepAlive, ipcReaders.get(containerId)) : 'this engine did not start it, so has no baseline to compare with';
      }
      let stdout = output.text('stdout');
      let stderr = output.text('stderr');
      // The command is not in the image: answer as `run` does (127), not with runc's message.
      if (exitCode === 126 && /^OCI runtime exec failed: .*exec: "[^"]*": (executable file not found|no such file or directory)/.test(stdout)) {
        [exitCode, stdout, stderr] = [127, '', notFound(argv, plan.image)];
      }
      const tDone = performance.now();
      return {
        containerId,
        // A stopped exec died with its container's SIGKILL, as a stopped `run` does.
        exitCode: exitCode ?? 137,
        stdout,
        stderr,
        truncated: output.truncated,
        timedOut,
        clean: !uncleanReason,
        ...(uncleanReason ? { uncleanReason } : {}),
        timings: { createMs: tCreated - t0, startMs: tStarted - tCreated, runMs: tDone - tStarted, totalMs: tDone - t0 },
      };
    } finally {
      clearTimeout(timer);
      opts.signal?.removeEventListener('abort', stop);
      stream.destroy();
    }
  }

  async function listManaged(query: ContainerQuery): Promise<ManagedContainer[]> {
    const list = await engineCall(() => docker.listContainers({ all: true, filters: labelFilter(query) }));
    return list.map((c) => ({
      id: c.Id,
      project: c.Labels[LABELS.project] ?? '',
      workspace: c.Labels[LABELS.workspace] ?? '',
      run: c.Labels[LABELS.run] ?? '',
      state: c.State,
      reach: c.Labels[LABELS.reach],
      owner: c.Labels[LABELS.owner],
    }));
  }

  return {
    async info() {
      const [version, info] = await engineCall(() => Promise.all([docker.version(), docker.info()]));
      return {
        version: version.Version,
        apiVersion: version.ApiVersion,
        runcVersion: (info as { RuncCommit?: { ID?: string } }).RuncCommit?.ID ?? 'unknown',
        securityOptions: (info as { SecurityOptions?: string[] }).SecurityOptions ?? [],
        rootDir: (info as { DockerRootDir?: string }).DockerRootDir ?? '/var/lib/docker',
      };
    },

    async imageExists(image) {
      try {
        await docker.getImage(image).inspect();
        return true;
      } catch (err) {
        if ((err as EngineErrorShape).statusCode === 404) return false;
        throw translateEngineError(err);
      }
    },

    run,
    startIdle,
    execIn,
    listManaged,

    async removeContainers(ids) {
      await Promise.all(ids.map(remove));
      return ids.length;
    },

    async removeManaged(query) {
      const found = await listManaged(query);
      await Promise.all(found.map((c) => remove(c.id)));
      return found.length;
    },


    async buildImage({ context, tag, buildArgs, onProgress }) {
      const stream = await engineCall(() => docker.buildImage(context, { t: tag, buildargs: buildArgs, rm: true, forcerm: true }));
      await new Promise<void>((resolve, reject) => {
        docker.modem.followProgress(
          stream,
          (err: Error | null, events: Array<{ error?: string }>) => {
            const failed = err?.message ?? events.find((e) => e.error)?.error;
            if (failed) reject(new BerthError('RUN_FAILED', `building ${tag} failed: ${failed.trim()}`));
            else resolve();
          },
          (event: { stream?: string; status?: string; error?: string }) => {
            const line = (event.stream ?? event.status ?? event.error ?? '').trimEnd();
            if (line) onProgress?.(line);
          },
        );
      });
    },
  };
}
