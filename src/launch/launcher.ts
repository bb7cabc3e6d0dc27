import { LABELS, type ContainerQuery } from '../plan/labels.js';
import type { Boundary, Observed } from '../plan/receipt.js';
import type { RunPlan } from '../plan/run-plan.js';
import type { PlannedBind } from './mount-check.js';
import type { VolumeCheckpoints } from './volume-checkpoints.js';

/**
 * The launcher contract: what berth asks of whatever runs a RunPlan (Docker today; a cluster
 * next). A launcher translates and reports; it decides nothing about isolation or about the run's
 * life: the rules every launcher follows (output bound, timeout, exit mapping, the warm reuse
 * verdict) are written once in lifecycle.ts. Images are another interface (images.ts): a cluster
 * runs images, it does not build them. `test/contract/` checks every launcher berth ships.
 */

export interface RunTimings {
  createMs: number;
  startMs: number;
  runMs: number;
  totalMs: number;
}

export interface RunResult {
  containerId: string;
  exitCode: number;
  stdout: string;
  stderr: string;
  /** Output went past the plan's cap: the run was stopped and the output cut there. */
  truncated: boolean;
  timedOut: boolean;
  /** The container ended under the command, by no doing of berth's: why, in words ("it ran out of memory (limits.memory_mb)", "it was removed"). */
  lost?: string;
  timings: RunTimings;
}

/**
 * What a warm container holds after an exec, as the launcher sees it (lifecycle.ts judges it).
 * A field the launcher cannot observe is undefined: "cannot tell" is never "clean".
 */
export interface ExecLeftovers {
  /** Processes of the exec's still running ("pid comm"), beyond the keep-alive's own. */
  running?: string[];
  /** The keep-alive's processes that are gone, stopped or about to be ("pid comm state"). */
  keepAliveHurt?: string[];
  /** IPC objects left in the container's namespace ("shm 1", "mqueue 2"). */
  ipc?: string[];
  /** Bytes it holds beyond its idle self once what can be reclaimed is (lifecycle.WARM_MEMORY_SLACK). */
  memoryGrowth?: number;
  /** The plan's mounts no longer where it put them, or not its sources (mount-check.ts): a directory holding one was renamed, another's mount is there. */
  mountsMissing?: string[];
}

/** How a launcher watches one warm container: what each exec left (`observe`, given where the plan mounts in the workspace, and, where it can check them, every bind's source), until `close`. */
export interface LeftoverObserver {
  observe(mountTargets: readonly string[], binds?: readonly PlannedBind[]): Promise<ExecLeftovers>;
  close(): void;
}

/** An exec's result. */
export interface ExecResult extends RunResult {
  /** Why its container was removed to stop it (timed out, output past the cap, aborted); absent if it ran its course. */
  stopped?: string;
  /** What it left behind; empty when stopped (the container is gone) or not observable. */
  leftovers: ExecLeftovers;
}

/** The warm container is not there any more (removed with its project, by hand, or it exited). */
export interface ContainerGone {
  gone: true;
  reason: string;
}

export interface IdleContainer {
  containerId: string;
  timings: { createMs: number; startMs: number };
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

/** A container as every launcher lists it: what its labels (plan/labels.ts) say, and its state. */
export function managedContainer(id: string, state: string, labels: Readonly<Record<string, string>>): ManagedContainer {
  return {
    id,
    project: labels[LABELS.project] ?? '',
    workspace: labels[LABELS.workspace] ?? '',
    run: labels[LABELS.run] ?? '',
    state,
    reach: labels[LABELS.reach],
    owner: labels[LABELS.owner],
  };
}

export type OutputListener = (stream: 'stdout' | 'stderr', chunk: Buffer) => void;

export interface RunOptions {
  signal?: AbortSignal;
  onCreated?: (containerId: string) => void;
  /**
   * Its container runs the plan: a new one just started (not awaited: the command already runs),
   * or the warm one an exec is about to enter (awaited first, so what reads it — under gVisor an
   * exec of its own — is done before the tenant's exec and never counted among its leftovers).
   * When its receipt is read (observe).
   */
  onStarted?: (containerId: string) => void | Promise<void>;
  /** Output as the container prints it (what is kept is bounded the same way: past the cap, nothing more). */
  onOutput?: OutputListener;
}

/**
 * What a launcher can do beyond the core (run, list, remove by labels). Each is an assumption the
 * run path would otherwise make silently; a feature that needs one is refused without it
 * (LAUNCHER_UNSUPPORTED), never half-done.
 */
export interface LauncherCapabilities {
  /** OCI runtimes the engine offers (a plan's `runtime` must be one). */
  runtimes: string[];
  /** The default runtime (a plan without one runs under it). */
  defaultRuntime: string;
  /** Containers run on berth's host: bind sources are berth's own paths (workspaces, snapshots, homes). */
  hostPaths: boolean;
  /** Without host paths: workspaces and homes on the cluster's volumes, berth's read-only files carried to the pod (kubernetes/objects.ts). */
  clusterVolumes?: boolean;
  /** Unix sockets in a bind-mounted run directory reach berth (model gateway, egress proxy, file tools). */
  unixSockets: boolean;
  /** A loop-mounted workspace filesystem (disk_quotas: loop) is what the container's /workspace shows. */
  loopQuotas: boolean;
  /** Warm containers (startIdle, execIn) with leftovers observed after each exec, per runtime. */
  warm: (runtime: string) => boolean;
  /**
   * Bind mounts attached to a started container (attachMounts), per runtime: what the pre-started
   * pool needs. A sandbox with its own kernel (gVisor) does not see a mount made after its start
   * over a bind's root (its gofer holds that directory open).
   */
  lateMounts: (runtime: string) => boolean;
  /**
   * A started container of the runtime goes on serving a bind's directory after berth renames it
   * on the host (gVisor's gofer holds it open from the start): what the pool's adopt claim needs
   * (plan/pool.ts), with claimStarted. Absent: never.
   */
  adoptBinds?: (runtime: string) => boolean;
}

export interface EngineInfo {
  /** "Docker 20.10.24" and the like: what answers. */
  name: string;
  version: string;
  apiVersion: string;
  securityOptions: string[];
  /** Where the engine keeps images and containers (on berth's host, when hostPaths). */
  rootDir: string;
  /** Each runtime the engine offers, with its version when it says. */
  runtimes: Array<{ name: string; version?: string; path?: string }>;
  defaultRuntime: string;
}

export interface Launcher {
  info(): Promise<EngineInfo>;
  capabilities(): Promise<LauncherCapabilities>;
  /** Run a plan to its end (lifecycle.ts rules: output bound, timeout, 127, abort = stop). */
  run(plan: RunPlan, opts?: RunOptions): Promise<RunResult>;
  /** Start a warm container: created as `run` would, running `keepAliveArgv` until it is removed. */
  startIdle(plan: RunPlan, keepAliveArgv: string[], opts?: { onCreated?(id: string): void }): Promise<IdleContainer>;
  /**
   * Run `argv` in a warm container with the plan's env, user, cwd and limits. Stopping it (timeout,
   * cap, abort) removes the container. Otherwise it reports what the exec left behind; the caller
   * judges (lifecycle.warmVerdict). One exec at a time per container.
   */
  execIn(containerId: string, plan: RunPlan, argv: string[], opts?: RunOptions): Promise<ExecResult | ContainerGone>;
  /**
   * Attach the plan's bind mounts to a container startIdle made with blank stand-ins at their
   * targets (capability lateMounts; plan/pool.ts). Sources are opened without following links and
   * must be what the plan named. The container is entered as the process startIdle started, never
   * whatever holds its number now: a container that ended (or is no longer that process) is
   * ContainerGone, and nothing is mounted. From then on the container is listed with the plan's
   * workspace and run, by every process that lists it. On failure the caller removes the container.
   */
  attachMounts(containerId: string, plan: RunPlan): Promise<ContainerGone | undefined>;
  /**
   * A container startIdle made is now the plan's, its binds showing the plan's directories (berth
   * renames them into place: capability adoptBinds). From then on it is listed with the plan's
   * workspace and run by every process that lists it; one that ended, or is not the container it
   * was when it started, is ContainerGone. Nothing is mounted, so the pool asks it beside the
   * message's exec (which finds a gone container gone too). Optional, with adoptBinds.
   */
  claimStarted?(containerId: string, plan: RunPlan): Promise<ContainerGone | undefined>;
  /**
   * Be told when containers of berth's end (the engine's die and destroy events): an id, or
   * undefined when the launcher lost sight of the engine (it restarted, the stream broke) and any
   * may have ended meanwhile. Returns the unsubscribe. Optional: a launcher without it tells nothing.
   */
  watchEnded?(listener: (containerId?: string) => void): () => void;
  /**
   * What a running container holds (its receipt's observed side, plan/receipt.ts): each fact
   * read where it is most reliable, and marked so. Optional: a launcher without it observes nothing,
   * and its runs' receipts say so.
   */
  observe?(containerId: string): Promise<Observed>;
  /**
   * What this launcher promises to hold for a plan, where it carries a part of the plan another way
   * than as written (Kubernetes: the run directory is relayed over TCP, never mounted). A receipt
   * compares what it observed with this; without it, plan/receipt.ts plannedBoundary.
   */
  planned?(plan: RunPlan): Boundary;
  /**
   * Memory and CPU of running containers from the engine's cgroup figures (the console's live
   * view). Optional: a launcher without it (kubernetes: no metrics API asked) shows "not available".
   */
  stats?(ids: string[]): Promise<ContainerStats[]>;
  /**
   * Checkpoints of workspaces and homes that are the launcher's volumes, not berth's directories
   * (volume-checkpoints.ts). Optional: without it the checkpoint thread copies berth's directories.
   */
  checkpoints?: VolumeCheckpoints;
  /** Force-remove the given containers; returns how many. */
  removeContainers(ids: string[]): Promise<number>;
  listManaged(query: ContainerQuery): Promise<ManagedContainer[]>;
  /** Force-remove the labelled containers a query matches; returns how many. */
  removeManaged(query: ContainerQuery): Promise<number>;
}

/** One container's cgroup figures at a moment. */
export interface ContainerStats {
  id: string;
  /** In use, without the page cache (as `docker stats` shows it). */
  memory_bytes: number;
  memory_limit_bytes: number | null;
  /** Of one core (200: two cores busy). */
  cpu_percent: number;
  pids: number | null;
}

export const isGone = (r: ExecResult | ContainerGone): r is ContainerGone => 'gone' in r;
