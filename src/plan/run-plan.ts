import { posix } from 'node:path';
import { userToolsEnv } from './user-tools.js';
import type { BerthConfig } from '../config/berth-config.js';
import { protectedPathKey, type ProjectMetadata } from '../config/metadata.js';
import type { SharedGrant } from '../config/grants.js';
import { own } from '../base/own.js';
import { BerthError } from '../base/errors.js';
import { WORKSPACE_MOUNT } from './container-paths.js';
import { LABELS } from './labels.js';
import { LEVEL_PROFILES } from './levels.js';
import type { PermissionLevel } from '../config/session.js';
import { DEFAULT_RUNTIME, enginePids, runtimeChoiceIssues, runtimeFor } from '../config/runtimes.js';
import { agentArgv, progressFormatOf, type ProgressFormat } from './agent-command.js';
import { planOutbound, RELAY_BIN, TRUST_MOUNTS, withRelays, type RunSocket } from './outbound.js';

/**
 * The plan is a pure function of (operator config, project, workspace, run options): everything
 * that decides isolation is here, as data, from the workspace it is given (its id, directory and
 * whether it is isolated come with it). Launchers translate it; they decide nothing.
 */

export { WORKSPACE_MOUNT } from './container-paths.js';
export const CONTAINER_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';
export const TMP_BYTES = 64 * 1024 * 1024;

/**
 * The IPC namespace's limits (every container has its own namespace; these sysctls are scoped to
 * it). SysV objects outlive the process that made them, in kernel memory no process owns, so the
 * kernel's counts (32,000 queues, 32,000 semaphore sets, unlimited shared memory) would let one
 * message pin the container's whole memory limit. Sizes of one object stay the kernel's defaults
 * (a queue holds 16 KiB: two messages of msgmax's 8 KiB; a set holds 250 semaphores), so a program
 * that works on a stock Linux works here; what shrinks is how many: 16 of each kind, which covers
 * the programs that still use SysV IPC (PostgreSQL: one segment, a set per 16 connections).
 * Shared memory may hold what /tmp may. At the limits: queues 16 × 16 KiB of text (headers of
 * empty messages: ~18 MiB of kernel memory, measured), semaphores ~256 KiB, shared memory 64 MiB,
 * all charged to the container's memory cgroup; a warm container with any of them left is removed.
 */
export const IPC_SYSCTLS: Readonly<Record<string, string>> = {
  'kernel.msgmni': '16',
  'kernel.msgmnb': '16384',
  'kernel.shmmni': '16',
  'kernel.shmmax': String(TMP_BYTES),
  'kernel.shmall': String(TMP_BYTES / 4096), // in pages of 4 KiB
  /** SEMMSL (per set), SEMMNS (in all), SEMOPM (per semop call), SEMMNI (sets). */
  'kernel.sem': '250 4000 32 16',
};

/** Paths of the project directory that are berth's, not the tenants': read-only or hidden in shared mode. */
export const RESERVED_PROJECT_PATHS = {
  metadata: 'metadata.json',
  sessions: 'sessions',
  memory: 'memory',
  workflows: 'workflows',
} as const;

/** What a new isolated workspace gets from its project (and what a workflow step may only read). */
export const SEED_ENTRIES = ['AGENTS.md', '.factory'] as const;
/** Tenant workspaces inside the project directory. */
export const WORKSPACES_DIR = 'workspaces';

/** Where long-term memory is mounted (read-only) for levels that may read it. */
export const MEMORY_MOUNT = '/memory';
/** The run directory (berth's sockets for this run) inside the container. */
export const RUN_DIR_MOUNT = '/run/berth';
/** The session's persistent agent home, when the run belongs to one. */
export const AGENT_HOME = '/home/agent';
/** Granted shared areas appear at /shared/<name>. */
export const SHARED_MOUNT = '/shared';

export type MountKind = 'file' | 'dir';

export type PlannedMount =
  /** `claim`: where a cluster keeps the same data (a shared area's PVC): what a launcher without host paths mounts instead of `source`. */
  | { type: 'bind'; source: string; target: string; readOnly: boolean; claim?: string }
  | { type: 'tmpfs'; target: string; readOnly: boolean; sizeBytes: number; mode: number };
export type BindMount = Extract<PlannedMount, { type: 'bind' }>;

export interface RunPlan {
  image: string;
  /** The OCI runtime (berth.yaml runtimes; the project's, or its level's). */
  runtime: string;
  /** What a new container runs: the agent's argv, behind berth-bridge's relays when it has sockets. */
  argv: string[];
  /** The agent's argv alone: what a warm container execs for one message (its relays already run). */
  exec: string[];
  /** How the agent's output is read as it works (steps, notes, its answer); absent: plain output. */
  progress?: ProgressFormat;
  /** A warm container's main process: the same relays around `berth-bridge idle`. */
  keepAlive: string[];
  cwd: string;
  user: string;
  mounts: PlannedMount[];
  env: Record<string, string>;
  /** No level has a network: the model and allowed hosts are reached through the run's sockets. */
  network: 'none';
  /** Sockets berth must open in the run directory before the container starts. */
  sockets: RunSocket[];
  readOnlyRootfs: true;
  /** Namespaced kernel settings of the container (IPC_SYSCTLS). */
  sysctls: Record<string, string>;
  limits: {
    memoryBytes: number;
    nanoCpus: number;
    pids: number;
    timeoutMs: number;
    outputBytes: number;
    /** The largest file any process may write (RLIMIT_FSIZE), and what the rw root may hold. */
    diskBytes?: number;
    /** Entries the rw root may hold. */
    files?: number;
  };
  labels: Record<string, string>;
  /** Host-side work before launch, all decided here (prepareMounts only carries it out). */
  prepare: PreparePlan;
  /** Things an operator should know about (e.g. an allowed env name with no value in berth.yaml). */
  warnings: string[];
}

/**
 * What must be true of the host tree when the engine mounts it. The engine follows symlinks in
 * bind sources and runc in mount targets, so each step is a no-follow walk: the rw root is the
 * directory at `rwRootPath` below the project (its real path must be `rwRoot`); `files` must be
 * regular files; `dirs` are made (or a link or file in their way moved aside); `mountpoints` must
 * be real files/directories of their kind.
 */
export interface PreparePlan {
  rwRoot: string;
  rwRootPath: string[];
  files: string[];
  dirs: Array<{ path: string; mode: number; tenantOwned: boolean }>;
  mountpoints: Array<{ path: string; kind: MountKind }>;
}

export interface ProtectedSnapshot {
  /** Berth-owned directory holding a copy of every protected path, at the same relative paths. */
  dir: string;
  entries: Array<{ path: string; kind: MountKind }>;
}

/**
 * Where a run works: the workspace's id, its host directory, and whether a container sees only it
 * (else the whole project). Decided once per run (runs/run-context.ts) and carried: the store
 * makes and bounds the workspace by it, the plan mounts by it.
 */
export interface RunWorkspace {
  id: string;
  dir: string;
  isolated: boolean;
}

export interface PlanInput {
  config: BerthConfig;
  project: { dir: string; metadataFile: string; metadata: ProjectMetadata };
  workspace: RunWorkspace;
  protectedSnapshot: ProtectedSnapshot;
  run: {
    id: string;
    message: string;
    /** The session's permission level: what the container reaches (egress, memory) and its runtime follow from it here. */
    level: PermissionLevel;
    /** Run this argv instead of the agent (the shell tool); the message is then unused. */
    argv?: string[];
    session?: string;
    /** Data for the run, as environment variables (a workflow's input): never pasted into argv text. */
    env?: Record<string, string>;
    /** Someone watches it live (a chat): the shell preset then traces its commands as steps. */
    live?: boolean;
  };
  /** The project's memory directory, mounted read-only when the level may read memory (LEVEL_PROFILES). */
  memory?: { dir: string };
  /** This run's socket directory (berth-owned), mounted read-only at /run/berth. */
  runDir?: string;
  /** The session's agent home (berth-owned, one per session), mounted read-write at HOME. */
  home?: { dir: string };
  /** Shared areas granted to the project in berth.yaml (nothing else is ever mounted). */
  shared?: SharedGrant[];
  /** berth's egress CA files (host paths), given when the project holds secret grants: mounted at TRUST_MOUNTS when the level has egress. */
  egressTrust?: { ca: string; bundle: string };
  /**
   * Run in the project's private workspace instead of a tenant's (workflow steps): the project
   * directory at /workspace, cwd at cwdRel below it — but never the tenants' workspaces (hidden)
   * and never the seed every new tenant gets read-write (mounted read-only from `seeds`, a copy
   * berth took for this run).
   */
  privateWorkspace?: { cwdRel: string; seeds: ProtectedSnapshot; ensureDir?: string[] };
  /** The berth home's installation id, labelled on every container. */
  installation: string;
  /** The berth process running it (its process identity, "<pid>.<start time>.<boot>"), labelled so a restart reaps only the dead's. */
  ownerProcess?: string;
}

export function imageFor(metadata: ProjectMetadata, config: BerthConfig): string {
  if (metadata.image) return metadata.image;
  return metadata.agent === 'shell' || Array.isArray(metadata.agent) ? config.images.shell : config.images.agent;
}

function isReserved(path: string): boolean {
  return Object.values(RESERVED_PROJECT_PATHS).some((r) => path === r || path.startsWith(`${r}/`));
}

export function planRun(input: PlanInput): RunPlan {
  const { config, project, workspace, protectedSnapshot, run } = input;
  const meta = project.metadata;
  const privateRun = input.privateWorkspace;
  // Decided by the run context (a workflow step's private workspace never is: the whole project).
  const { isolated } = workspace;
  const warnings: string[] = [];

  const rwRoot = isolated ? workspace.dir : project.dir;
  const dirs: PreparePlan['dirs'] = [];
  const mounts: PlannedMount[] = [{ type: 'bind', source: rwRoot, target: WORKSPACE_MOUNT, readOnly: false }];

  if (!isolated) {
    dirs.push(
      { path: RESERVED_PROJECT_PATHS.sessions, mode: 0o700, tenantOwned: false },
      { path: RESERVED_PROJECT_PATHS.memory, mode: 0o755, tenantOwned: false },
      { path: RESERVED_PROJECT_PATHS.workflows, mode: 0o755, tenantOwned: false },
      ...(privateRun ? [] : [{ path: posix.join(WORKSPACES_DIR, workspace.id), mode: 0o755, tenantOwned: true }]),
    );
    // Shared mode mounts the whole project: berth's own files stay out of tenants' reach.
    // The admin's files: readable, never writable by a tenant.
    for (const adminPath of [RESERVED_PROJECT_PATHS.metadata, RESERVED_PROJECT_PATHS.workflows]) {
      mounts.push({
        type: 'bind',
        source: posix.join(project.dir, adminPath),
        target: posix.join(WORKSPACE_MOUNT, adminPath),
        readOnly: true,
      });
    }
    const hidden: string[] = [RESERVED_PROJECT_PATHS.sessions, RESERVED_PROJECT_PATHS.memory, ...(privateRun ? [WORKSPACES_DIR] : [])];
    for (const path of hidden) {
      mounts.push({ type: 'tmpfs', target: posix.join(WORKSPACE_MOUNT, path), readOnly: true, sizeBytes: 4096, mode: 0o555 });
    }
  }
  const mountpoints: RunPlan['prepare']['mountpoints'] = [];
  if (privateRun) {
    if (privateRun.ensureDir) dirs.push({ path: privateRun.ensureDir.join('/'), mode: 0o755, tenantOwned: true });
    mountpoints.push({ path: WORKSPACES_DIR, kind: 'dir' });
    for (const seed of privateRun.seeds.entries) {
      mountpoints.push(seed);
      mounts.push({
        type: 'bind',
        source: posix.join(privateRun.seeds.dir, seed.path),
        target: posix.join(WORKSPACE_MOUNT, seed.path),
        readOnly: true,
      });
    }
  }
  const profile = LEVEL_PROFILES[run.level];
  if (input.memory && profile.memoryRead) mounts.push({ type: 'bind', source: input.memory.dir, target: MEMORY_MOUNT, readOnly: true });
  const trust = input.runDir !== undefined && profile.egress && input.egressTrust !== undefined;
  const outbound = input.runDir
    ? planOutbound({ config, metadata: meta, agentRun: !run.argv, egress: profile.egress, trust }, RUN_DIR_MOUNT)
    : { sockets: [], env: {}, warnings: [] };
  warnings.push(...outbound.warnings);
  if (input.runDir) mounts.push({ type: 'bind', source: input.runDir, target: RUN_DIR_MOUNT, readOnly: true });
  if (trust && input.egressTrust) {
    mounts.push({ type: 'bind', source: input.egressTrust.bundle, target: TRUST_MOUNTS.bundle, readOnly: true });
    mounts.push({ type: 'bind', source: input.egressTrust.ca, target: TRUST_MOUNTS.ca, readOnly: true });
  }
  if (input.home) mounts.push({ type: 'bind', source: input.home.dir, target: AGENT_HOME, readOnly: false });
  for (const area of input.shared ?? []) {
    mounts.push({
      type: 'bind',
      source: area.path,
      target: posix.join(SHARED_MOUNT, area.name),
      readOnly: area.mode !== 'rw',
      ...(area.claim ? { claim: area.claim } : {}),
    });
  }

  for (const entry of meta.protected_paths) {
    const path = protectedPathKey(entry);
    if (!isolated && isReserved(path)) {
      warnings.push(`protected path "${entry}" is one of berth's own paths, which are always read-only or hidden`);
      continue;
    }
    const snap = protectedSnapshot.entries.find((e) => e.path === path);
    if (!snap) {
      // Fail closed: without berth's own copy there is nothing safe to mount read-only.
      throw new BerthError('CONFIG_INVALID', `protected path "${entry}" has no snapshot`, {
        hint: `run "berth project update ${meta.name}" to take one`,
      });
    }
    mountpoints.push({ path, kind: snap.kind });
    mounts.push({
      type: 'bind',
      source: posix.join(protectedSnapshot.dir, path),
      target: posix.join(WORKSPACE_MOUNT, path),
      readOnly: true,
    });
  }
  mounts.push({ type: 'tmpfs', target: '/tmp', readOnly: false, sizeBytes: TMP_BYTES, mode: 0o1777 });

  const env: Record<string, string> = {
    PATH: CONTAINER_PATH,
    HOME: input.home ? AGENT_HOME : '/tmp',
    // A session's home persists: what the agent installs with user-level tools goes there.
    ...(input.home ? userToolsEnv(AGENT_HOME, CONTAINER_PATH) : {}),
    BERTH_PROJECT: meta.name,
    BERTH_WORKSPACE: workspace.id,
    BERTH_RUN: run.id,
    ...run.env,
  };
  const modelKeys = new Set(Object.values(config.models).map((m) => m.api_key));
  for (const name of meta.env) {
    const value = own(config.env, name);
    if (value === undefined) warnings.push(`env "${name}" is allowed but berth.yaml gives it no value`);
    // Fail closed even if berth.yaml's own check was bypassed: a model key never enters a container.
    else if ([...modelKeys].some((key) => value.includes(key))) warnings.push(`env "${name}" holds a model API key and is not passed`);
    else env[name] = value;
  }
  Object.assign(env, outbound.env); // berth's own variables win over anything a project lets through

  const progress = run.argv ? undefined : progressFormatOf(meta.agent, run.live === true);
  const exec =
    run.argv ?? agentArgv(meta.agent, run.message, { openaiBaseUrl: outbound.env.OPENAI_BASE_URL, progress, noNetwork: !profile.egress });
  const runtime = planRuntime(meta, config, run.level);
  return {
    image: imageFor(meta, config),
    runtime,
    argv: withRelays(exec, outbound.sockets, RUN_DIR_MOUNT),
    exec,
    ...(progress ? { progress } : {}),
    keepAlive: withRelays([RELAY_BIN, 'idle'], outbound.sockets, RUN_DIR_MOUNT),
    cwd: privateRun
      ? posix.join(WORKSPACE_MOUNT, privateRun.cwdRel)
      : isolated
        ? WORKSPACE_MOUNT
        : posix.join(WORKSPACE_MOUNT, 'workspaces', workspace.id),
    user: `${config.agent_user.uid}:${config.agent_user.gid}`,
    mounts,
    env,
    network: 'none',
    sockets: outbound.sockets,
    readOnlyRootfs: true,
    sysctls: { ...IPC_SYSCTLS },
    limits: {
      memoryBytes: meta.limits.memory_mb * 1024 * 1024,
      nanoCpus: Math.round(meta.limits.cpus * 1e9),
      pids: enginePids(meta.limits.pids, runtime),
      timeoutMs: meta.limits.timeout_seconds * 1000,
      outputBytes: meta.limits.output_bytes,
      diskBytes: meta.limits.disk_mb * 1024 * 1024,
      files: meta.limits.files,
    },
    labels: {
      [LABELS.managed]: 'true',
      [LABELS.installation]: input.installation,
      [LABELS.project]: meta.name,
      [LABELS.workspace]: workspace.id,
      [LABELS.run]: run.id,
      [LABELS.reach]: privateRun ? 'private' : isolated ? 'workspace' : 'project',
      ...(run.session ? { [LABELS.session]: run.session } : {}),
      ...(input.ownerProcess ? { [LABELS.owner]: input.ownerProcess } : {}),
    },
    prepare: {
      rwRoot,
      rwRootPath: isolated ? [WORKSPACES_DIR, workspace.id] : [],
      files: isolated ? [] : [RESERVED_PROJECT_PATHS.metadata],
      dirs,
      mountpoints,
    },
    warnings,
  };
}

/** The run's OCI runtime: one berth.yaml offers (fail closed). */
function planRuntime(meta: ProjectMetadata, config: BerthConfig, level: PermissionLevel): string {
  const runtime = runtimeFor(meta, level);
  const [notOffered] = runtimeChoiceIssues({ runtime }, config.runtimes);
  if (notOffered) {
    throw new BerthError('RUNTIME_MISSING', notOffered.reason, {
      hint: `add it to berth.yaml's runtimes once the engine has it, or "berth project update ${meta.name} --runtime ${DEFAULT_RUNTIME}"`,
    });
  }
  return runtime;
}
