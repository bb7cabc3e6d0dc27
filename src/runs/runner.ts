import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import type { Logger } from 'pino';
import type { RunRecord } from '../store/run-log.js';
import { agentOwner, type BerthConfig } from '../config/berth-config.js';
import type { PermissionLevel, SessionRecord } from '../config/session.js';
import type { Engine, ExecResult, ManagedContainer, RunOptions, RunResult } from '../launch/docker.js';
import { LEVEL_PROFILES, type LevelProfile } from '../plan/levels.js';
import { sharedGrantsFor, type SharedGrant } from '../config/grants.js';
import { planRun, type RunPlan } from '../plan/run-plan.js';
import type { Owner } from '../fs/tree.js';
import { memoryBootstrap } from '../store/memory.js';
import type { Project, ProjectStore } from '../store/projects.js';
import { snapshotForPlan } from '../store/protected-snapshot.js';
import { appendRunRecord } from '../store/run-log.js';
import { workspaceIdFor } from '../store/secret.js';
import { assertChosenSessionId, workspaceKeyOf, type SessionStore } from '../store/sessions.js';
import { copySeedsForRun, ensureWorkspace, mountQuotaImages, quotaChangePending, type WorkspaceQuota } from '../store/workspaces.js';
import { join } from 'node:path';
import type { RunSocket } from '../plan/outbound.js';
import { SOCKET_NAMES } from '../plan/outbound.js';
import type { RunIdentity, RunSocketOpener } from '../outbound/run-identity.js';
import { ensureAgentHome } from '../store/agent-homes.js';
import { createKeyedLock } from './keyed-lock.js';
import { watchDisk } from './disk-watch.js';
import { prepareMounts } from './prepare-mounts.js';
import { ownerAlive } from './process-owner.js';
import { appendJournal, openRuns, type JournalEntry } from '../store/journal.js';
import { BerthError, isBerthError } from '../errors.js';
import { noMetrics, type Metrics } from '../metrics.js';
import type { Admission, Ticket } from './admission.js';
import type { WarmContainer, WarmPool } from './warm-pool.js';
import { warmIdentity } from '../plan/warm.js';

export interface RunRequest {
  project: string;
  tenantKey: string;
  message: string;
  /** The conversation; default: the tenant's own default session. */
  sessionId?: string;
  /** Set the session's permission level (persisted) before this run. */
  level?: PermissionLevel;
  /** The agent's output as it prints it (the run's record is kept as ever). */
  onOutput?: (stream: 'stdout' | 'stderr', chunk: Buffer) => void;
  /**
   * Awaited once the run is admitted and holds its workspace lock, before anything is prepared:
   * a chat bridge takes its run slot here, so a message waiting for its turn holds none.
   */
  whenReady?: () => Promise<void>;
}

export interface RunOutcome extends RunResult {
  runId: string;
  project: string;
  workspaceId: string;
  sessionId: string;
  permissionLevel: PermissionLevel;
  workspaceRoot: string;
  warnings: string[];
  /** It ran in the session's warm container (an exec), not a new one. */
  warm: boolean;
}

/** A workflow step: runs in the project's private workspace, cwd below its root. */
export interface PrivateTarget {
  cwdRel: string;
  /** Created (no-follow) before the step, e.g. ['work', 'runs', '<run_id>']. */
  ensureDir?: string[];
  /** Data for the step (the workflow input), as environment variables. */
  env?: Record<string, string>;
}

export interface Runner {
  run(request: RunRequest): Promise<RunOutcome>;
  /** One workflow step for a session, in the project's private workspace. */
  runPrivate(project: string, sessionId: string, tenantKey: string, level: PermissionLevel, message: string, target: PrivateTarget): Promise<RunOutcome>;
  /** Run argv (the shell tool) in a container shaped exactly like the session's agent runs. */
  exec(ref: { project: string; session: string }, argv: string[]): Promise<RunOutcome>;
  /**
   * Stop: admit nothing more (SHUTTING_DOWN), let runs in flight finish for up to `deadlineMs`,
   * then stop this process's containers; those runs are journaled as interrupted. The warm
   * containers are removed either way.
   */
  drain(deadlineMs: number): Promise<{ interrupted: number }>;
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
}

/** Does this container's writable view hold every workspace of its project? (unlabelled: assume so) */
const seesAllWorkspaces = (c: ManagedContainer) => c.reach !== 'workspace' && c.reach !== 'private';

export function newRunId(): string {
  return `r${Date.now().toString(36)}${randomBytes(5).toString('hex')}`;
}

export function createRunner(deps: {
  store: ProjectStore;
  sessions: SessionStore;
  engine: Engine;
  config: () => BerthConfig;
  secret: Buffer;
  installation: string;
  logger: Logger;
  /**
   * Each run's sockets (file tools, model gateway, egress proxy) in its own directory below
   * `dir`, opened by the composition root's openers.
   */
  sockets?: { dir: string; open: Partial<Record<RunSocket, RunSocketOpener>> };
  /** This process (its process identity, "<pid>.<start time>.<boot>"), recorded on every run it owns. */
  ownerProcess?: string;
  /** Admission control (one per process); without it every run starts at once. */
  admission?: Admission;
  /** Warm session containers (berth serve, berth bridge); without it each message gets a new container. */
  warm?: WarmPool;
  metrics?: Metrics;
}): Runner {
  const { store, sessions, engine, config, secret, installation } = deps;
  const metrics = deps.metrics ?? noMetrics();
  /** Runs of this process past admission: a drain that runs out of time interrupts them. */
  const inFlight = new Set<Flight>();
  // One run at a time per workspace: a tenant's messages queue instead of racing each other's mounts.
  const withWorkspaceLock = createKeyedLock();

  /** What one run works with, resolved once: every step below reads it, none derives it again. */
  interface RunContext {
    runId: string;
    project: Project;
    session: SessionRecord;
    level: PermissionLevel;
    profile: LevelProfile;
    config: BerthConfig;
    owner: Owner | undefined;
    grants: SharedGrant[];
    /** The tenant's (or session's) workspace; for a workflow step, the private workspace. */
    workspace: { id: string; dir: string; ownFilesystem?: boolean };
    log: Logger;
  }

  /** The three kinds of run: a message to the agent, a workflow step, a shell-tool command. */
  type LaunchSpec =
    | { kind: 'message'; message: string; onOutput?: RunRequest['onOutput']; whenReady?: RunRequest['whenReady'] }
    | { kind: 'workflow_step'; message: string; target: PrivateTarget }
    | { kind: 'shell_tool'; argv: string[] };

  /** The run's identity and workspace (known at once) — and the operator's settings, read when it may start. */
  function contextOf(project: Project, session: SessionRecord, spec: LaunchSpec): Omit<RunContext, 'config' | 'owner' | 'grants'> {
    const runId = newRunId();
    const level = session.settings.permission_level;
    const ws = session.settings.workspace;
    const workspace =
      spec.kind === 'workflow_step'
        ? { id: 'private', dir: project.paths.dir }
        : (() => {
            const id = ws.id ?? workspaceIdFor(secret, project.metadata.name, workspaceKeyOf(session, ws.mode));
            return { id, dir: join(project.paths.workspacesDir, id) }; // where the project is now (it may have moved)
          })();
    return {
      runId,
      project,
      session,
      level,
      profile: LEVEL_PROFILES[level],
      workspace,
      log: deps.logger.child({ project: project.metadata.name, session: session.id, permission_level: level, run: runId, workspace: workspace.id }),
    };
  }

  /**
   * The flow of one run: admission → journal → (its turn) → workspace → plan → prepare → launch →
   * record. One run at a time per workspace.
   */
  async function launch(project: Project, session: SessionRecord, spec: LaunchSpec): Promise<RunOutcome> {
    const ctx = contextOf(project, session, spec);
    const labels = { project: project.metadata.name, level: ctx.level, kind: spec.kind };
    let ticket: Ticket | undefined;
    try {
      ticket = deps.admission?.enter({ project: project.metadata.name, tenant: session.tenant_key });
    } catch (err) {
      metrics.runFinished({ ...labels, outcome: isBerthError(err, 'BUSY') ? 'busy' : 'failed', warm: false });
      throw err; // BUSY or SHUTTING_DOWN: never accepted, so never journaled
    }
    const journal = (entry: Omit<JournalEntry, 'at' | 'run'>) => appendJournal(project.paths.sessionsDir, { run: ctx.runId, ...entry });
    const flight: Flight = { interrupted: false, abort: new AbortController() };
    try {
      journal({ phase: 'accepted', owner: deps.ownerProcess, kind: spec.kind, session: session.id });
      if (ticket) {
        await ticket.ready;
        metrics.observeQueueWait(ticket.waitedMs() / 1000);
      }
      inFlight.add(flight);
      const outcome = await locked(ctx, spec, (containerId) => journal({ phase: 'started', container: containerId }), flight.abort.signal);
      if (flight.interrupted) journal({ phase: 'interrupted', reason: DRAIN_REASON });
      else journal({ phase: 'finished', exit_code: outcome.exitCode });
      const t = outcome.timings;
      metrics.observeContainerStart((t.createMs + t.startMs) / 1000, outcome.warm);
      metrics.observeRun(t.runMs / 1000);
      metrics.runFinished({ ...labels, outcome: flight.interrupted ? 'interrupted' : outcome.timedOut ? 'timeout' : outcome.exitCode === 0 ? 'ok' : 'error', warm: outcome.warm });
      return outcome;
    } catch (err) {
      if (flight.interrupted) journal({ phase: 'interrupted', reason: DRAIN_REASON });
      else journal({ phase: 'failed', reason: err instanceof BerthError ? err.code : 'INTERNAL' });
      metrics.runFinished({ ...labels, outcome: flight.interrupted ? 'interrupted' : 'failed', warm: false });
      if (isBerthError(err, 'E_SANDBOX_VIOLATION')) metrics.sandboxViolation(project.metadata.name);
      throw err;
    } finally {
      inFlight.delete(flight);
      ticket?.release();
    }
  }

  async function locked(base: ReturnType<typeof contextOf>, spec: LaunchSpec, onCreated: (containerId: string) => void, stop: AbortSignal): Promise<RunOutcome> {
    const { session } = base;
    const name = base.project.metadata.name;
    return withWorkspaceLock(`${name}/${base.workspace.id}`, async () => {
      if (spec.kind === 'message') await spec.whenReady?.();
      // Read now, not when the run was accepted: a grant revoked while it waited is not mounted, and
      // isolation switched on meanwhile holds for it (no whole-project container after the switch).
      const cfg = config();
      const project = store.get(name);
      const workspace = { ...base.workspace, dir: spec.kind === 'workflow_step' ? project.paths.dir : join(project.paths.workspacesDir, base.workspace.id) };
      const ctx: RunContext = { ...base, project, workspace, config: cfg, owner: agentOwner(cfg), grants: sharedGrantsFor(cfg, name) };
      if (spec.kind !== 'workflow_step') {
        const ws = session.settings.workspace;
        // A workspace filesystem about to be made, mounted or resized: no container may hold the
        // workspace meanwhile. Our warm ones let go; another berth's running one defers the change.
        const quota = quotaOf(project, cfg, ctx.log);
        if (quotaChangePending(project, ctx.workspace.id, quota)) {
          const workspace = warmWorkspaceOf(project.metadata.name, ctx.workspace.id);
          await deps.warm?.discardWhere((_, w) => w?.workspace === workspace);
          const alive = await engine.listManaged({ installation, project: project.metadata.name });
          // One that sees every workspace could move this one under berth: no image is made or resized meanwhile.
          quota.holds = { inUse: alive.some((c) => c.workspace === ctx.workspace.id), seesAll: alive.some(seesAllWorkspaces) };
        }
        const made = ensureWorkspace({ project, secret, tenantKey: session.tenant_key, id: ctx.workspace.id, session: ws.mode === 'session' ? session.id : undefined, owner: ctx.owner, quota });
        ctx.workspace = { ...ctx.workspace, ownFilesystem: made.ownFilesystem };
        if (made.created) ctx.log.info({ skipped: made.skipped }, 'workspace created');
        for (const skipped of made.skipped) ctx.log.warn(skipped, 'seed entry not copied');
      }
      fs.mkdirSync(project.paths.memoryDir, { recursive: true, mode: 0o755 });
      const seeds = spec.kind === 'workflow_step' ? copySeedsForRun(project, join(store.home.tmpDir, `seed-${ctx.runId}`)) : undefined;
      // The session's agent home: the conversation an agent continues at the next message.
      const home = ensureAgentHome(project, session.id, ctx.owner);
      // A message may go to the session's warm container: taken from the pool for this run alone.
      const warmKey = spec.kind === 'message' && deps.warm ? warmKeyOf(project.metadata.name, session.id) : undefined;
      let warm = warmKey ? deps.warm?.take(warmKey) : undefined;
      // Set once runWarm has the container: from then on it settles it (put back or removed).
      const hand = { off: false };
      let runDir: string | undefined;
      let sockets: { close(): Promise<void> } | undefined;
      try {
        const planFor = (dir: string | undefined) =>
          planRun({
            config: ctx.config,
            project: { dir: project.paths.dir, metadataFile: project.paths.metadataFile, metadata: project.metadata },
            workspace: ctx.workspace,
            protectedSnapshot: snapshotForPlan(project.paths.protectedDir, project.snapshot),
            run: {
              id: ctx.runId,
              message: spec.kind === 'shell_tool' ? '' : withBootstrap(ctx, spec.message),
              egress: ctx.profile.egress,
              argv: spec.kind === 'shell_tool' ? spec.argv : undefined,
              session: session.id,
              env: spec.kind === 'workflow_step' ? spec.target.env : undefined,
            },
            memory: ctx.profile.memoryRead ? { dir: project.paths.memoryDir } : undefined,
            shared: ctx.grants,
            privateWorkspace: spec.kind === 'workflow_step' && seeds ? { cwdRel: spec.target.cwdRel, seeds, ensureDir: spec.target.ensureDir } : undefined,
            runDir: dir,
            home: { dir: home },
            installation,
            ownerProcess: deps.ownerProcess,
          });
        // This run's sockets: a directory only its container sees (a warm container's, if it has one).
        const freshDir = deps.sockets ? join(deps.sockets.dir, ctx.runId) : undefined;
        let plan = planFor(warm?.runDir ?? freshDir);
        if (warm && warm.identity !== warmIdentity(plan)) {
          // Anything in the plan changed (level, grants, protection, limits, image, env): a new container.
          ctx.log.info({ container: warm.containerId.slice(0, 12) }, 'warm container recycled: the plan changed');
          const old = warm;
          warm = undefined;
          await deps.warm?.discard(old); // the session stays this message's: it gets a new container
          plan = planFor(freshDir);
        }
        runDir = warm?.runDir ?? freshDir;
        for (const w of plan.warnings) ctx.log.warn(w);
        // A container that outlives the run keeps its run directory: only the sockets go.
        if (runDir) sockets = await openSockets(ctx, runDir, plan.sockets, { keepDir: warmKey !== undefined });
        prepareMounts(plan, project.paths.dir, ctx.owner);
        // A drain that ran out of time while this run waited or prepared: no container for it.
        if (stop.aborted) throw new BerthError('SHUTTING_DOWN', 'berth stopped before this run could start');
        return await execute(ctx, spec, plan, home, onCreated, stop, warmKey === undefined ? undefined : { key: warmKey, reuse: warm, runDir, hand });
      } catch (err) {
        // The session's container was never used (a plan or mount check failed, berth is stopping): not kept.
        if (warmKey && !hand.off) {
          await deps.warm?.drop(warmKey, warm);
          if (!warm && runDir) fs.rmSync(runDir, { recursive: true, force: true }); // a new directory no container shows
        }
        throw err;
      } finally {
        await sockets?.close();
        if (seeds) fs.rmSync(seeds.dir, { recursive: true, force: true });
      }
    });
  }

  /** The kernel bound for a workspace (berth.yaml disk_quotas, the project's limits). */
  function quotaOf(project: Project, cfg: BerthConfig, log: Logger): WorkspaceQuota {
    const { disk_mb, files } = project.metadata.limits;
    return {
      mode: cfg.disk_quotas,
      sizeBytes: disk_mb * 1024 * 1024,
      files,
      scratchDir: store.home.tmpDir,
      onEnsured: (id, e) => {
        if (e.created) log.info({ workspace: id, migrated: e.migrated }, 'workspace quota created');
        if (e.resized) log.info({ workspace: id, ...e.resized }, 'workspace quota resized');
        if (e.warning) log.warn({ workspace: id }, e.warning);
      },
    };
  }

  /**
   * Open what the plan says this run reaches berth through; close() ends them and removes the
   * directory (or, for a warm container's directory, only the sockets: between messages it
   * reaches nothing).
   */
  async function openSockets(ctx: RunContext, dir: string, wanted: readonly RunSocket[], opts: { keepDir: boolean }): Promise<{ close(): Promise<void> }> {
    fs.mkdirSync(dir, { recursive: true, mode: 0o755 });
    const run: RunIdentity = { runId: ctx.runId, project: ctx.project.metadata.name, metadata: ctx.project.metadata, tenantKey: ctx.session.tenant_key, session: ctx.session.id, sessionsDir: ctx.project.paths.sessionsDir };
    const open: Array<{ close(): Promise<void> }> = [];
    const close = async () => {
      await Promise.all(open.map((s) => s.close()));
      if (!opts.keepDir) fs.rmSync(dir, { recursive: true, force: true });
      else for (const kind of wanted) fs.rmSync(join(dir, SOCKET_NAMES[kind]), { force: true });
    };
    try {
      for (const kind of wanted) {
        const opener = deps.sockets?.open[kind];
        if (opener) open.push(await opener({ path: join(dir, SOCKET_NAMES[kind]), run, logger: ctx.log }));
        else ctx.log.warn({ socket: kind }, 'this berth serves no such socket; the run cannot reach it');
      }
    } catch (err) {
      await close();
      throw err;
    }
    return { close };
  }

  /** A session's first message to an agent that takes a prompt starts with the memory SOP (medium and high). */
  function withBootstrap(ctx: RunContext, message: string): string {
    const bootstrap = ctx.session.runs === 0 && ctx.project.metadata.agent !== 'shell' ? memoryBootstrap(ctx.project.paths.memoryDir, ctx.level) : undefined;
    return bootstrap ? `${bootstrap}\n---\n\n${message}` : message;
  }

  /**
   * A message in the session's warm container: an exec into the one it has, or into a new one
   * that stays. A container that is not clean afterwards (stopped, or something the message
   * started still runs) is removed; a clean one goes back to the pool.
   */
  async function runWarm(ctx: RunContext, plan: RunPlan, spec: WarmSpec, opts: RunOptions): Promise<RunResult & { warm: boolean }> {
    const pool = deps.warm as WarmPool;
    spec.hand.off = true;
    let warm = spec.reuse;
    if (warm) {
      try {
        const result = await engine.execIn(warm.containerId, plan, plan.exec, opts);
        settle(pool, spec.key, warm, result.clean, ctx.log, result.uncleanReason);
        return { ...result, warm: true };
      } catch (err) {
        if (!isBerthError(err, 'RUN_FAILED')) {
          await pool.drop(spec.key, warm);
          throw err;
        }
        // Gone (removed with its project, or by hand): the message gets a new one, on the same run
        // directory (this run's sockets are open there), so only the container goes.
        await engine.removeContainers([warm.containerId]);
        ctx.log.info({ container: warm.containerId.slice(0, 12), err: err.message }, 'warm container unusable; starting a new one');
      }
    }
    // A drain past its deadline (or a disk stop) while the old container was given up: no new one.
    const start = opts.signal?.aborted ? Promise.reject(new BerthError('SHUTTING_DOWN', 'berth stopped before this run could start')) : engine.startIdle(plan, plan.keepAlive);
    const started = await start.catch(async (err: unknown) => {
      await pool.drop(spec.key);
      if (spec.runDir) fs.rmSync(spec.runDir, { recursive: true, force: true }); // no container will show it
      throw err;
    });
    warm = { containerId: started.containerId, identity: warmIdentity(plan), workspace: warmWorkspaceOf(ctx.project.metadata.name, ctx.workspace.id), runDir: spec.runDir, since: Date.now() };
    let result: ExecResult;
    try {
      result = await engine.execIn(warm.containerId, plan, plan.exec, opts);
    } catch (err) {
      await pool.drop(spec.key, warm);
      throw err;
    }
    settle(pool, spec.key, warm, result.clean, ctx.log, result.uncleanReason);
    const t = result.timings;
    return { ...result, warm: false, timings: { ...t, createMs: started.timings.createMs + t.createMs, startMs: started.timings.startMs + t.startMs, totalMs: started.timings.createMs + started.timings.startMs + t.totalMs } };
  }

  /** Run the plan (bounded by its limits and the disk watch), then record it. */
  async function execute(
    ctx: RunContext,
    spec: LaunchSpec,
    plan: RunPlan,
    home: string,
    onCreated: (containerId: string) => void,
    stop: AbortSignal,
    warmSpec?: WarmSpec,
  ): Promise<RunOutcome> {
    const abort = new AbortController();
    const stopNow = () => abort.abort();
    stop.addEventListener('abort', stopNow, { once: true });
    // A workspace with its own filesystem is bounded by the kernel; the check keeps the rest.
    const own = ctx.workspace.ownFilesystem === true;
    const disk = watchDisk(
      own ? [home] : [plan.prepare.rwRoot, home],
      plan.limits,
      (reason) => {
        ctx.log.warn({ reason }, 'run stopped: disk limit');
        abort.abort();
      },
      undefined,
      own ? [plan.prepare.rwRoot] : [],
    );
    const opts: RunOptions = { signal: abort.signal, onCreated, onOutput: spec.kind === 'message' ? spec.onOutput : undefined };
    const result = await (warmSpec ? runWarm(ctx, plan, warmSpec, opts) : engine.run(plan, opts).then((r) => ({ ...r, warm: false }))).finally(() => {
      disk.stop();
      stop.removeEventListener('abort', stopNow);
    });
    const stoppedFor = disk.exceeded();
    const tool = spec.kind === 'shell_tool';
    ctx.log.info({ exitCode: result.exitCode, timedOut: result.timedOut, truncated: result.truncated, ms: Math.round(result.timings.totalMs), tool }, tool ? 'shell tool finished' : 'run finished');
    const outcome: RunOutcome = {
      ...result,
      runId: ctx.runId,
      project: ctx.project.metadata.name,
      workspaceId: ctx.workspace.id,
      sessionId: ctx.session.id,
      permissionLevel: ctx.level,
      workspaceRoot: ctx.workspace.dir,
      warnings: stoppedFor ? [...plan.warnings, `stopped: ${stoppedFor}`] : plan.warnings,
    };
    appendRunRecord(ctx.project.paths.sessionsDir, toRunRecord(outcome, tool ? 'shell_run' : 'message'));
    if (!tool) sessions.countRun(ctx.project, ctx.session.id);
    return outcome;
  }

  return {
    async run(request) {
      const project = store.get(request.project);
      if (request.sessionId !== undefined) assertChosenSessionId(request.sessionId);
      let session = sessions.open(project, { sessionId: request.sessionId, tenantKey: request.tenantKey });
      if (request.level && request.level !== session.settings.permission_level) session = sessions.setLevel(project, session.id, request.level);
      return launch(project, session, { kind: 'message', message: request.message, onOutput: request.onOutput, whenReady: request.whenReady });
    },
    async runPrivate(projectName, sessionId, tenantKey, level, message, target) {
      const project = store.get(projectName);
      let session = sessions.open(project, { sessionId, tenantKey });
      if (level !== session.settings.permission_level) session = sessions.setLevel(project, session.id, level);
      return launch(project, session, { kind: 'workflow_step', message, target });
    },
    async exec(ref, argv) {
      const { project, session } = sessions.get(ref.project, ref.session);
      return launch(project, session, { kind: 'shell_tool', argv });
    },
    async drain(deadlineMs) {
      deps.admission?.drain();
      let timer: NodeJS.Timeout | undefined;
      const idle = deps.admission ? deps.admission.idle() : Promise.resolve();
      const finished = await Promise.race([idle.then(() => true), new Promise<boolean>((r) => (timer = setTimeout(() => r(false), deadlineMs)))]);
      clearTimeout(timer);
      if (finished) {
        await deps.warm?.close(); // the warm containers go with berth
        return { interrupted: 0 };
      }
      const interrupted = inFlight.size;
      for (const flight of inFlight) {
        flight.interrupted = true;
        flight.abort.abort(); // stops its container, or keeps one from being made
      }
      const mine = (await engine.listManaged({ installation })).filter((c) => c.owner === deps.ownerProcess);
      await engine.removeContainers(mine.map((c) => c.id));
      await idle;
      await deps.warm?.close();
      return { interrupted };
    },
    releaseWarm: async () => (deps.warm ? deps.warm.close() : 0),
    forgetSession: async (project, session) => deps.warm?.forget(warmKeyOf(project, session)),
    async reapLeftovers() {
      const removed = await engine.removeManaged({ installation });
      // Their sockets went with them (a crashed berth never closed them).
      if (deps.sockets) fs.rmSync(deps.sockets.dir, { recursive: true, force: true });
      return removed;
    },
    async recover() {
      // Socket directories as they are before anything is looked at: one a live run makes later is not judged.
      const socketDirs = deps.sockets ? safeReaddir(deps.sockets.dir) : [];
      const liveRuns = new Set<string>();
      // A dead berth's containers go first: nothing may hold a workspace whose filesystem is mounted (or resized) below.
      const containers = await engine.listManaged({ installation });
      const removed = await engine.removeContainers(containers.filter((c) => !ownerAlive(c.owner)).map((c) => c.id));
      const live = containers.filter((c) => ownerAlive(c.owner));
      const interrupted: string[] = [];
      const cfg = config();
      for (const name of store.names()) {
        let project: Project;
        try {
          project = store.get(name);
        } catch {
          continue; // an invalid project is doctor's business, not a reason not to start
        }
        const { sessionsDir } = project.paths;
        try {
          // After a reboot no quota is mounted: mount them before anything writes a bare workspace
          // (but resize none while a live berth's container sees every workspace of the project).
          const quota = quotaOf(project, cfg, deps.logger.child({ project: name }));
          quota.holds = { seesAll: live.some((c) => c.project === name && seesAllWorkspaces(c)) };
          for (const { id, err } of mountQuotaImages(project, quota, agentOwner(cfg)).failed) {
            deps.logger.error({ project: name, workspace: id, err: String(err) }, 'could not mount a workspace quota');
          }
        } catch (err) {
          deps.logger.error({ project: name, err: String(err) }, 'could not mount the workspace quotas');
        }
        for (const open of openRuns(sessionsDir)) {
          if (ownerAlive(open.owner)) {
            liveRuns.add(open.run); // its sockets may exist before its container does
            continue;
          }
          appendJournal(sessionsDir, { run: open.run, phase: 'interrupted', reason: `the berth process that ran it (${open.owner ?? 'unknown'}) is gone` });
          interrupted.push(open.run);
        }
      }
      // Sockets of dead runs: each run's directory is named by its run id.
      if (deps.sockets) {
        for (const c of live) liveRuns.add(c.run);
        const socketsDir = deps.sockets.dir;
        for (const dir of socketDirs) if (!liveRuns.has(dir)) fs.rmSync(join(socketsDir, dir), { recursive: true, force: true });
      }
      return { interrupted, removed };
    },
    listContainers: (project) => engine.listManaged({ installation, project }),
    async removeContainers(project) {
      await deps.warm?.discardWhere((key) => key.startsWith(`${project}\0`));
      return engine.removeManaged({ installation, project });
    },
    async retireSharedContainers(project) {
      await deps.warm?.discardWhere((key) => key.startsWith(`${project}\0`));
      const shared = (await engine.listManaged({ installation, project })).filter(seesAllWorkspaces);
      return engine.removeContainers(shared.map((c) => c.id));
    },
  };
}

/** A message's warm container (or the lack of one), as runWarm takes it over. */
interface WarmSpec {
  key: string;
  reuse?: WarmContainer;
  runDir?: string;
  /** Set by runWarm: from then on it settles the container. */
  hand: { off: boolean };
}

/** A run past admission; a drain that runs out of time interrupts it. */
interface Flight {
  interrupted: boolean;
  abort: AbortController;
}

const DRAIN_REASON = 'berth stopped: the drain deadline passed';

/** One warm container per session of a project (a project name has no NUL). */
const warmKeyOf = (project: string, session: string) => `${project}\0${session}`;
const warmWorkspaceOf = (project: string, workspace: string) => `${project}\0${workspace}`;

/** After a warm message: a clean container waits for the next one; any other is removed. */
function settle(pool: WarmPool, key: string, warm: WarmContainer, clean: boolean, log: Logger, why?: string): void {
  if (clean) return pool.put(key, warm);
  log.info({ container: warm.containerId.slice(0, 12), why }, 'warm container removed after the message');
  void pool.drop(key, warm).catch(() => undefined);
}

function roundedTimings(t: RunResult['timings']) {
  const r = (ms: number) => Math.round(ms * 10) / 10;
  return { create: r(t.createMs), start: r(t.startMs), run: r(t.runMs), total: r(t.totalMs) };
}

export function toRunRecord(o: RunOutcome, kind: 'message' | 'shell_run' = 'message'): RunRecord {
  return {
    run: o.runId,
    kind,
    session: o.sessionId,
    workspace: o.workspaceId,
    permission_level: o.permissionLevel,
    workspace_root: o.workspaceRoot,
    exit_code: o.exitCode,
    timed_out: o.timedOut,
    truncated: o.truncated,
    output_bytes: Buffer.byteLength(o.stdout) + Buffer.byteLength(o.stderr),
    timings_ms: roundedTimings(o.timings),
    finished_at: new Date().toISOString(),
  };
}

function safeReaddir(dir: string): string[] {
  try {
    return fs.readdirSync(dir);
  } catch {
    return [];
  }
}
