import Docker from 'dockerode';
import { BerthError } from '../../base/errors.js';
import type { RunPlan } from '../../plan/run-plan.js';
import { toCreateOptions, toEnv } from './create.js';
import { labelFilter, type ContainerQuery } from '../../plan/labels.js';
import { engineMessage, translateEngineError } from './errors.js';
import { hostObserver, mountsNotPlanned } from './leftovers.js';
import { reportObserver } from './reports.js';
import {
  managedContainer,
  type ContainerGone,
  type EngineInfo,
  type ExecResult,
  type IdleContainer,
  type Launcher,
  type LauncherCapabilities,
  type LeftoverObserver,
  type ManagedContainer,
  type RunOptions,
  type RunResult,
} from '../launcher.js';
import { plannedBinds, workspaceMountTargets } from '../mount-check.js';
import { commandNotFound, CONTAINER_LOST, notInImage, runBounds, SENTRY_RUNTIMES, sentryExec, STOPPED_EXIT } from '../lifecycle.js';
import { attachMounts } from './late-mounts.js';
import { dockerObserver } from './observe.js';
import { bindsInOrder, claimOfName } from '../../plan/pool.js';
import { claimContainer } from './claim.js';
import { engineEnds } from './events.js';
import { holdProcess, releaseProcess, type ProcessHandle } from './proc-handle.js';
import { endOf, runtimeVersion, streamEnd } from './ends.js';
import { dockerStats } from './stats.js';

/**
 * The Docker launcher (launcher.ts): it translates a RunPlan into Engine API options (docker/create.ts) and the
 * engine's answers into the contract's results; the run's rules come from lifecycle.ts, and it
 * decides nothing about isolation. Only the docker files import dockerode.
 */

/** A warm container's command is not in the image: runc says so in the exec's output (exit 126). */
const EXEC_NOT_FOUND = /^OCI runtime exec failed: .*exec: "[^"]*": (executable file not found|no such file or directory)/;
const START_NOT_FOUND = /executable file not found|no such file or directory/i;

/** Runtimes whose containers' processes are host processes: the leftover check reads them from /proc. */
const HOST_PROCESS_RUNTIMES = new Set(['runc', 'crun']);
/** Containers the engine removes at once for this launcher (the rest wait their turn). */
export const REMOVE_CONCURRENCY = 8;

/** Why a container ended under its command when the engine says the memory limit ended it. */
const OUT_OF_MEMORY = 'it ran out of memory (limits.memory_mb)';

/**
 * `mountHelper` builds (once) and names the late-mount helper (late-mounts.ts), for the
 * pre-started pool; without it the launcher has no late mounts.
 */
export function createDockerLauncher(docker: Docker = new Docker(), opts: { mountHelper?: () => string } = {}): Launcher {
  const engineCall = async <T>(fn: () => Promise<T>, context: { image?: string } = {}): Promise<T> => {
    try {
      return await fn();
    } catch (err) {
      throw translateEngineError(err, context);
    }
  };

  /** The late-mount helper's path; undefined when it cannot be built or berth is not root (capabilities then say no late mounts, and the pool keeps nothing). */
  let helperPath: string | null | undefined;
  const helper = (): string | undefined => {
    if (helperPath === undefined) {
      try {
        helperPath = opts.mountHelper && process.getuid?.() === 0 ? opts.mountHelper() : null;
      } catch {
        helperPath = null;
      }
    }
    return helperPath ?? undefined;
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
    const bounds = runBounds(plan, opts, () => void container.kill({ signal: 'SIGKILL' }).catch(() => undefined));
    try {
      const stream = await engineCall(() => container.attach({ stream: true, stdout: true, stderr: true }));
      const ended = streamEnd(stream);
      docker.modem.demuxStream(stream, bounds.output.sink('stdout'), bounds.output.sink('stderr'));
      try {
        await container.start();
      } catch (err) {
        // The command is not in the image: answer like a shell would (127), not as an engine failure.
        if (!START_NOT_FOUND.test(engineMessage(err))) throw translateEngineError(err, { image: plan.image });
        const t = performance.now();
        const timings = { createMs: tCreated - t0, startMs: t - tCreated, runMs: 0, totalMs: t - t0 };
        return { containerId: container.id, ...commandNotFound(plan.argv, plan.image), truncated: false, timedOut: false, timings };
      }
      const tStarted = performance.now();
      void opts.onStarted?.(container.id);
      bounds.arm();
      // After start, "not-running" returns at once if the container already exited. ("next-exit"
      // sent before start races: if the engine registers it after the exit, it waits forever.)
      const { StatusCode } = await engineCall(() => container.wait({ condition: 'not-running' }) as Promise<{ StatusCode: number }>);
      bounds.disarm();
      // The attach stream ends right after exit; don't let a stuck stream hold the run.
      let grace: NodeJS.Timeout | undefined;
      await Promise.race([ended, new Promise((r) => (grace = setTimeout(r, 2000)))]);
      clearTimeout(grace);
      // Killed by a signal: the memory limit's doing, if the engine says so.
      const lost = !bounds.stopped && StatusCode > 128 && (await endOf(container))?.outOfMemory ? OUT_OF_MEMORY : undefined;
      const tDone = performance.now();
      return {
        containerId: container.id,
        exitCode: StatusCode,
        ...(lost ? { lost } : {}),
        stdout: bounds.output.text('stdout'),
        stderr: bounds.output.text('stderr'),
        truncated: bounds.output.truncated,
        timedOut: bounds.timedOut,
        timings: { createMs: tCreated - t0, startMs: tStarted - tCreated, runMs: tDone - tStarted, totalMs: tDone - t0 },
      };
    } finally {
      bounds.disarm();
      await container.remove({ force: true }).catch(() => undefined);
    }
  }

  /** Warm containers this launcher started, each with what looks into it after an exec (one for its life). */
  const warm = new Map<string, LeftoverObserver>();
  /** Their first process (runc, crun), held, and when the engine says it started: where attachMounts enters. */
  const procs = new Map<string, { proc: ProcessHandle; startedAt: string }>();
  /** Every container startIdle started: its first host process and when the engine says it started (what claimStarted checks). */
  const starts = new Map<string, { pid: number; startedAt: string }>();
  const watchEnded = engineEnds(docker);

  // Removals the engine is asked for at once. A drain with 1,000 warm containers asked for all
  // of them at once, and Docker 20.10 wedged: containerd killed their shims on a deadline, the
  // containers stayed "Up", and every later remove hung until dockerd was restarted (measured).
  let removing = 0;
  const removeQueue: Array<() => void> = [];
  const removeSlot = () =>
    removing < REMOVE_CONCURRENCY ? (removing++, Promise.resolve()) : new Promise<void>((r) => removeQueue.push(r));
  const freeRemoveSlot = () => {
    const next = removeQueue.shift();
    if (next)
      next(); // the slot passes on
    else removing--;
  };

  const observer = dockerObserver(docker, engineCall);

  async function remove(id: string): Promise<void> {
    observer.forget(id);
    warm.get(id)?.close();
    warm.delete(id);
    releaseProcess(procs.get(id)?.proc);
    procs.delete(id);
    starts.delete(id);
    await removeSlot();
    try {
      await docker
        .getContainer(id)
        .remove({ force: true })
        .catch(() => undefined);
    } finally {
      freeRemoveSlot();
    }
  }

  async function startIdle(plan: RunPlan, keepAliveArgv: string[], opts: { onCreated?(id: string): void } = {}): Promise<IdleContainer> {
    const t0 = performance.now();
    const sandboxed = SENTRY_RUNTIMES.has(plan.runtime);
    const container = await engineCall(() => docker.createContainer(toCreateOptions(plan, undefined, keepAliveArgv, sandboxed)), {
      image: plan.image,
    });
    const tCreated = performance.now();
    try {
      opts.onCreated?.(container.id);
      await engineCall(() => container.start(), { image: plan.image });
      const { State } = await engineCall(() => container.inspect());
      if (!State.Running) {
        throw new BerthError('RUN_FAILED', `the keep-alive "${keepAliveArgv.join(' ')}" exited at once (status ${State.ExitCode})`);
      }
      if (HOST_PROCESS_RUNTIMES.has(plan.runtime)) {
        warm.set(container.id, await hostObserver(State.Pid, keepAliveArgv));
        const proc = holdProcess(State.Pid, container.id);
        if (proc) procs.set(container.id, { proc, startedAt: State.StartedAt });
      } else if (sandboxed) warm.set(container.id, await reportObserver(docker, container, State.Pid));
      // A sandbox's receipt reading (an exec inside) taken now, not in front of its first message: its boundary is fixed at its start.
      if (sandboxed) await observer.observe(container.id).catch(() => undefined);
      starts.set(container.id, { pid: State.Pid, startedAt: State.StartedAt });
    } catch (err) {
      await remove(container.id);
      throw err;
    }
    return { containerId: container.id, timings: { createMs: tCreated - t0, startMs: performance.now() - tCreated } };
  }

  async function execIn(containerId: string, plan: RunPlan, argv: string[], opts: RunOptions = {}): Promise<ExecResult | ContainerGone> {
    const t0 = performance.now();
    // Before anything runs in it: a container whose mounts are not this plan's (another tenant's
    // workspace was put there behind berth's back) is as good as gone; so is one whose process ended.
    const held = procs.get(containerId);
    const wrong = held && mountsNotPlanned(held.proc.dir, plannedBinds(plan));
    if (held && !wrong) return { gone: true, reason: 'its first process is gone' };
    if (wrong?.length) return { gone: true, reason: `what is mounted at ${wrong.join(', ')} is not what the plan mounts there` };
    const container = docker.getContainer(containerId);
    const sandboxed = SENTRY_RUNTIMES.has(plan.runtime);
    await opts.onStarted?.(containerId);
    let exec: Docker.Exec;
    try {
      exec = await container.exec({
        Cmd: sentryExec(plan.runtime, argv),
        Env: toEnv(plan),
        User: plan.user,
        WorkingDir: plan.cwd,
        AttachStdin: false,
        AttachStdout: true,
        AttachStderr: true,
        Tty: false,
      });
    } catch (err) {
      // Gone or stopped (removed with its project, or by hand): the caller starts a new one.
      const status = (err as { statusCode?: number }).statusCode;
      if (status === 404 || status === 409) return { gone: true, reason: engineMessage(err).trim() };
      throw translateEngineError(err);
    }
    opts.onCreated?.(containerId);
    const tCreated = performance.now();
    // Docker has no way to stop an exec: stopping it means removing its container.
    let removed: Promise<void> | undefined;
    // The stream of an exec whose sandbox died can stay open for many minutes after its container
    // is removed (seen under gVisor): once stopped, it gets the engine's grace and no more.
    let startGrace: (() => void) | undefined;
    const stoppedAndGrace = new Promise<void>(
      (resolve) => (startGrace = () => void removed?.then(() => setTimeout(resolve, 2000).unref())),
    );
    const bounds = runBounds(plan, opts, () => {
      removed ??= remove(containerId);
      startGrace?.();
    });
    const stream = await engineCall(() => exec.start({ hijack: true, stdin: false }));
    const tStarted = performance.now();
    bounds.arm();
    // The container ending under the exec (removed by hand, its sandbox died) ends the exec too: an
    // exec's own status then reads 137 (runc) or its stream stays open until the timeout (gVisor).
    const watch = new AbortController();
    let lost: string | undefined;
    const containerEnded = container
      .wait({ condition: 'not-running', abortSignal: watch.signal })
      .then(
        () =>
          endOf(container).then((end) =>
            !end ? 'it was removed' : end.outOfMemory ? OUT_OF_MEMORY : `it stopped (status ${end.exitCode})`,
          ),
        (err: unknown) => (watch.signal.aborted ? undefined : engineMessage(err).trim()),
      )
      .catch(() => 'it was removed')
      .then((why) => void (lost = why));
    const lostAndGrace = containerEnded.then(() => (lost ? new Promise((r) => setTimeout(r, 2000).unref()) : new Promise(() => undefined)));
    try {
      // The stream ends when the exec's output closes: at its exit, or at most ~2 s later when a
      // process it left holds the pipes (the engine's grace).
      const ended = streamEnd(stream);
      docker.modem.demuxStream(stream, bounds.output.sink('stdout'), bounds.output.sink('stderr'));
      await Promise.race([ended, stoppedAndGrace, lostAndGrace]);
      // Usually exited by now; a command that closed its output may still run (until the timeout).
      let exitCode: number | undefined;
      for (let delay = 10; !bounds.stopped && !lost; delay = Math.min(delay * 2, 250)) {
        const asked = await exec.inspect().then(
          (info) => ({ info }),
          (err: unknown) => ({ err }),
        );
        if ('err' in asked) {
          // Not found: the container went away under the exec. Any other engine error (a busy
          // daemon) is asked again, until the run's timeout.
          if ((asked.err as { statusCode?: number }).statusCode !== 404) {
            await new Promise((r) => setTimeout(r, delay));
            continue;
          }
          lost = 'it was removed';
          break;
        }
        const { info } = asked;
        if (!info.Running) {
          exitCode = info.ExitCode ?? undefined;
          break;
        }
        await new Promise((r) => setTimeout(r, delay));
      }
      bounds.disarm();
      // Killed by a signal: by its own doing, or by its container's end, which the engine reports
      // a moment after the exec's (runc: the exec dies with the container's init). 128 too: an
      // exec whose gVisor sandbox died under it can read 128, not 137 (seen in a fresh clone).
      if (!bounds.stopped && !lost && exitCode !== undefined && exitCode >= 128) {
        let settle: NodeJS.Timeout | undefined;
        await Promise.race([containerEnded, new Promise((r) => (settle = setTimeout(r, 500)))]);
        clearTimeout(settle);
      }
      let stopped: string | undefined;
      if (bounds.stopped || lost || exitCode === undefined) {
        stopped = bounds.why() ?? CONTAINER_LOST;
        lost ??= 'the engine gave the exec no exit status';
        await (removed ??= remove(containerId));
      }
      let stdout = bounds.output.text('stdout');
      let stderr = bounds.output.text('stderr');
      // The command is not in the image: answer as `run` does (127), not with runc's or the filter's message.
      const notFound = sandboxed
        ? exitCode === 127 && stdout === '' && stderr === notInImage(argv)
        : exitCode === 126 && EXEC_NOT_FOUND.test(stdout);
      if (notFound) ({ exitCode, stdout, stderr } = commandNotFound(argv, plan.image));
      const observer = warm.get(containerId);
      const leftovers = stopped || !observer ? {} : await observer.observe(workspaceMountTargets(plan), plannedBinds(plan));
      const tDone = performance.now();
      return {
        containerId,
        // A stopped exec died with its container's SIGKILL, as a stopped `run` does; so did one
        // whose container ended under it, whatever status the engine read for the exec.
        exitCode: stopped === CONTAINER_LOST ? STOPPED_EXIT : (exitCode ?? STOPPED_EXIT),
        stdout,
        stderr,
        truncated: bounds.output.truncated,
        timedOut: bounds.timedOut,
        ...(stopped ? { stopped } : {}),
        ...(stopped === CONTAINER_LOST ? { lost } : {}),
        leftovers,
        timings: { createMs: tCreated - t0, startMs: tStarted - tCreated, runMs: tDone - tStarted, totalMs: tDone - t0 },
      };
    } finally {
      bounds.disarm();
      watch.abort();
      stream.destroy();
    }
  }

  async function listManaged(query: ContainerQuery): Promise<ManagedContainer[]> {
    const list = await engineCall(() => docker.listContainers({ all: true, filters: labelFilter(query) }));
    // A claimed pool container's labels still say "pool" (fixed at creation); its name says whose it is now.
    return list.map((c) => managedContainer(c.Id, c.State, { ...c.Labels, ...claimOfName(c.Names?.[0]) }));
  }

  async function info(): Promise<EngineInfo> {
    const [version, raw] = await engineCall(() => Promise.all([docker.version(), docker.info()]));
    const facts = raw as {
      RuncCommit?: { ID?: string };
      SecurityOptions?: string[];
      DockerRootDir?: string;
      Runtimes?: Record<string, { path?: string }>;
      DefaultRuntime?: string;
    };
    const runtimes = await Promise.all(
      Object.entries(facts.Runtimes ?? { runc: {} }).map(async ([name, r]) => ({
        name,
        path: r.path,
        version: name === 'runc' && facts.RuncCommit?.ID ? facts.RuncCommit.ID : await runtimeVersion(r.path ?? name),
      })),
    );
    return {
      name: `Docker ${version.Version}`,
      version: version.Version,
      apiVersion: version.ApiVersion,
      securityOptions: facts.SecurityOptions ?? [],
      rootDir: facts.DockerRootDir ?? '/var/lib/docker',
      runtimes,
      defaultRuntime: facts.DefaultRuntime ?? 'runc',
    };
  }

  return {
    info,
    async capabilities(): Promise<LauncherCapabilities> {
      const raw = (await engineCall(() => docker.info())) as { Runtimes?: Record<string, unknown>; DefaultRuntime?: string };
      // An engine reached through a Unix socket runs on berth's host; one over TCP may not.
      const onThisHost = Boolean((docker.modem as { socketPath?: string }).socketPath);
      return {
        runtimes: Object.keys(raw.Runtimes ?? { runc: {} }),
        defaultRuntime: raw.DefaultRuntime ?? 'runc',
        hostPaths: onThisHost,
        unixSockets: onThisHost,
        loopQuotas: onThisHost,
        warm: (runtime) => onThisHost && (HOST_PROCESS_RUNTIMES.has(runtime) || SENTRY_RUNTIMES.has(runtime)),
        lateMounts: (runtime) => onThisHost && HOST_PROCESS_RUNTIMES.has(runtime) && helper() !== undefined,
        adoptBinds: (runtime) => onThisHost && SENTRY_RUNTIMES.has(runtime),
      };
    },
    run,
    startIdle,
    execIn,
    async attachMounts(containerId, plan) {
      const held = procs.get(containerId);
      const bin = helper();
      if (held === undefined || !bin)
        throw new BerthError('LAUNCHER_UNSUPPORTED', 'late mounts need a runc or crun container this berth started, and the helper built');
      const gone = await claimContainer(docker, containerId, plan, { pid: held.proc.pid, startedAt: held.startedAt });
      if (gone) return gone;
      const attached = await attachMounts(bin, held.proc, containerId, bindsInOrder(plan));
      return attached ? undefined : { gone: true, reason: 'its first process is gone' };
    },
    async claimStarted(containerId, plan) {
      const started = starts.get(containerId);
      if (!started) throw new BerthError('LAUNCHER_UNSUPPORTED', 'only a container this berth started can be claimed');
      return claimContainer(docker, containerId, plan, started);
    },
    watchEnded,
    listManaged,
    observe: observer.observe,
    removeContainers: (ids) => Promise.all(ids.map(remove)).then(() => ids.length),
    stats: (ids) => dockerStats(docker, ids),
    async removeManaged(query) {
      const found = await listManaged(query);
      await Promise.all(found.map((c) => remove(c.id)));
      return found.length;
    },
  };
}
