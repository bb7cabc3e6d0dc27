import type { PermissionLevel } from '../config/session.js';
import type { ManagedContainer, OutputListener } from '../launch/launcher.js';
import type { IncomingFile } from '../plan/files-in.js';
import type { ApprovalListener } from '../store/approvals.js';
import type { CheckpointThread } from '../store/checkpoint-thread.js';
import type { ProgressListener } from './progress-tap.js';
import type { PrivateTarget } from './run-context.js';
import type { RunOutcome } from './run-record.js';

/** What a runner offers (runner.ts makes one): runs, and the turns and containers around them. */
export interface RunRequest {
  project: string;
  tenantKey: string;
  message: string;
  /** The conversation; default: the tenant's own default session. */
  sessionId?: string;
  /** Set the session's permission level (persisted) before this run. */
  level?: PermissionLevel;
  /** The agent's plain output as it prints it (never an event stream: that is read into onProgress). */
  onOutput?: OutputListener;
  /** The agent's tool calls and words as it works (agents whose output berth reads: plan.progress). */
  onProgress?: ProgressListener;
  /** The chat watching this run, which can ask its person (a host outside the egress allowlist). */
  onApproval?: ApprovalListener;
  /**
   * Awaited once the run is admitted and holds its workspace lock, before anything is prepared:
   * a chat bridge takes its run slot here, so a message waiting for its turn holds none.
   */
  whenReady?: () => Promise<void>;
  /** Files sent with the message: land in the workspace's inbox/ before the run (runs/run-files.ts). */
  files?: IncomingFile[];
  /** The schedule this run is a firing of (runs/scheduler.ts): its record names it. */
  schedule?: string;
}

export interface Runner {
  run(request: RunRequest): Promise<RunOutcome>;
  /** One workflow step for a session, in the project's private workspace. */
  runPrivate(
    project: string,
    sessionId: string,
    tenantKey: string,
    level: PermissionLevel,
    message: string,
    target: PrivateTarget,
  ): Promise<RunOutcome>;
  /** Run argv (the shell tool) in a container shaped exactly like the session's agent runs. */
  exec(ref: { project: string; session: string }, argv: string[]): Promise<RunOutcome>;
  /**
   * Stop: admit nothing more (SHUTTING_DOWN), let runs in flight finish for up to `deadlineMs`,
   * then stop this process's containers; those runs are journaled as interrupted. The warm
   * containers are removed either way.
   */
  drain(deadlineMs: number): Promise<{ interrupted: number }>;
  /**
   * Stop one run of this process before its end (a person's /stop, the operator): its record and
   * its answer say why. False when no run of that id holds its workspace here (it waits, ended, or
   * belongs to another process).
   */
  stop(runId: string, reason: string): boolean;
  /** A deleted session's warm container goes with it (a new session of that id must not inherit it). */
  forgetSession(project: string, session: string): Promise<void>;
  /** Remove the idle warm containers now (berth stops; tests); returns how many. */
  releaseWarm(): Promise<number>;
  /** Remove every labelled container of this home (explicit cleanup). */
  reapLeftovers(): Promise<number>;
  /**
   * At startup: close the runs a dead berth process of this home left open (journaled as
   * interrupted) and remove their containers — never those of a berth process still running.
   */
  recover(): Promise<{ interrupted: string[]; removed: number }>;
  /** This installation's containers (of one project, or all). */
  listContainers(project?: string): Promise<ManagedContainer[]>;
  /** Stop and remove one project's containers (runs in flight end with exit 137). */
  removeContainers(project: string): Promise<number>;
  /**
   * Remove the project's containers that see every workspace (shared mode, or unlabelled) and its
   * warm ones: switching isolation on, no shared view outlives the switch. Returns how many.
   */
  retireSharedContainers(project: string): Promise<number>;
  /**
   * fn in this workspace's turn (what a run holds from its preparation to its end): a restore or a
   * fork of it cannot race a message's run in this process.
   */
  withWorkspace<T>(project: string, workspaceId: string, fn: () => Promise<T>): Promise<T>;
  /** Checkpoint copies, off the event loop (one thread per process). */
  readonly checkpoints: CheckpointThread;
}
