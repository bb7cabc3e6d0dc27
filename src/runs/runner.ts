import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import type { Logger } from 'pino';
import type { RunRecord } from '../store/run-log.js';
import { agentOwner, type BerthConfig } from '../config/berth-config.js';
import type { PermissionLevel, SessionRecord } from '../config/session.js';
import type { Engine, ManagedContainer, RunResult } from '../launch/docker.js';
import { LABELS } from '../plan/labels.js';
import { LEVEL_PROFILES } from '../plan/levels.js';
import { sharedGrantsFor } from '../config/grants.js';
import { planRun } from '../plan/run-plan.js';
import { memoryBootstrap } from '../store/memory.js';
import type { Project, ProjectStore } from '../store/projects.js';
import { snapshotForPlan } from '../store/protected-snapshot.js';
import { appendRunRecord } from '../store/run-log.js';
import { workspaceIdFor } from '../store/secret.js';
import { assertChosenSessionId, workspaceKeyOf, type SessionStore } from '../store/sessions.js';
import { copySeedsForRun, ensureWorkspace } from '../store/workspaces.js';
import { join } from 'node:path';
import type { Gateway, GatewayCaller } from '../gateway/service.js';
import { createKeyedLock } from './keyed-lock.js';
import { watchDisk } from './disk-watch.js';
import { prepareMounts } from './prepare-mounts.js';

export interface RunRequest {
  project: string;
  tenantKey: string;
  message: string;
  /** The conversation; default: the tenant's own default session. */
  sessionId?: string;
  /** Set the session's permission level (persisted) before this run. */
  level?: PermissionLevel;
}

export interface RunOutcome extends RunResult {
  runId: string;
  project: string;
  workspaceId: string;
  sessionId: string;
  permissionLevel: PermissionLevel;
  workspaceRoot: string;
  warnings: string[];
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
  /** Remove labelled containers a crashed berth of this home left behind. */
  reapLeftovers(): Promise<number>;
  /** This installation's containers (of one project, or all). */
  listContainers(project?: string): Promise<ManagedContainer[]>;
  /** Stop and remove one project's containers (runs in flight end with exit 137). */
  removeContainers(project: string): Promise<number>;
}

/** Opens a run's gateway socket in a berth-owned directory (the MCP face lives above this layer). */
export type GatewaySocketOpener = (opts: { dir: string; caller: GatewayCaller; logger: Logger }) => Promise<{ dir: string; close(): Promise<void> }>;

export function newRunId(): string {
  return `r${Date.now().toString(36)}${randomBytes(5).toString('hex')}`;
}

/**
 * One egress network per engine, shared by every installation: inter-container traffic is off
 * on it, so sharing it connects nobody (and each network would use one of the engine's ~30
 * address pools).
 */
export const EGRESS_NETWORK = 'berth-egress';

export function createRunner(deps: {
  store: ProjectStore;
  sessions: SessionStore;
  engine: Engine;
  config: () => BerthConfig;
  secret: Buffer;
  installation: string;
  logger: Logger;
  /** The agent file-tool gateway; each agent run gets its own socket, opened by the composition root's opener. */
  gateway?: Gateway;
  openSocket?: GatewaySocketOpener;
  socketsDir?: string;
}): Runner {
  const { store, sessions, engine, config, secret, installation } = deps;
  // One run at a time per workspace: a tenant's messages queue instead of racing each other's mounts.
  const withWorkspaceLock = createKeyedLock();
  let egressReady: Promise<void> | undefined;
  const egress = () => {
    egressReady ??= engine.ensureNetwork(EGRESS_NETWORK, { [LABELS.managed]: 'true' }).catch((err) => {
      egressReady = undefined; // try again at the next run
      throw err;
    });
    return egressReady.then(() => EGRESS_NETWORK);
  };

  /** The flow of one message (or one shell-tool command) for a session. */
  async function launch(
    project: Project,
    session: SessionRecord,
    what: { message: string } | { argv: string[] },
    target?: PrivateTarget,
  ): Promise<RunOutcome> {
    const runId = newRunId();
    const level = session.settings.permission_level;
    const profile = LEVEL_PROFILES[level];
    const mode = session.settings.workspace.mode;
    const log = deps.logger.child({ project: project.metadata.name, session: session.id, permission_level: level, run: runId });
    const wsKey = workspaceKeyOf(session, mode);
    const lockKey = `${project.metadata.name}/${target ? 'private' : workspaceIdFor(secret, project.metadata.name, wsKey)}`;
    return withWorkspaceLock(lockKey, async () => {
      const cfg = config();
      const owner = agentOwner(cfg);
      const shared = sharedGrantsFor(cfg, project.metadata.name);
      const workspace = target
        ? { id: 'private', dir: project.paths.dir, created: false, skipped: [] }
        : ensureWorkspace({ project, secret, tenantKey: session.tenant_key, workspaceKey: wsKey, session: mode === 'session' ? session.id : undefined, owner });
      const wlog = log.child({ workspace: workspace.id });
      if (workspace.created) wlog.info({ skipped: workspace.skipped }, 'workspace created');
      for (const s of workspace.skipped) wlog.warn(s, 'seed entry not copied');

      let message = 'message' in what ? what.message : '';
      const bootstrap = 'message' in what && session.runs === 0 && project.metadata.agent !== 'shell'
        ? memoryBootstrap(project.paths.memoryDir, level)
        : undefined;
      if (bootstrap) message = `${bootstrap}\n---\n\n${message}`;
      fs.mkdirSync(project.paths.memoryDir, { recursive: true, mode: 0o755 });

      const seeds = target ? copySeedsForRun(project, join(store.home.tmpDir, `seed-${runId}`)) : undefined;
      // The tenant's gateway: a socket only this run's container sees (not for the shell tool).
      const socket =
        deps.gateway && deps.openSocket && deps.socketsDir && 'message' in what
          ? await deps.openSocket({
              dir: join(deps.socketsDir, runId),
              caller: deps.gateway.forCaller({ project: project.metadata.name, tenantKey: session.tenant_key }),
              logger: wlog,
            })
          : undefined;
      try {
        const plan = planRun({
          config: cfg,
          project: { dir: project.paths.dir, metadataFile: project.paths.metadataFile, metadata: project.metadata },
          workspace: { id: workspace.id, dir: workspace.dir },
          protectedSnapshot: snapshotForPlan(project.paths.protectedDir, project.snapshot),
          run: {
            id: runId,
            message,
            network: profile.network === 'egress' ? await egress() : 'none',
            argv: 'argv' in what ? what.argv : undefined,
            session: session.id,
            env: target?.env,
          },
          memory: profile.memoryRead ? { dir: project.paths.memoryDir } : undefined,
          shared,
          privateWorkspace: target && seeds ? { cwdRel: target.cwdRel, seeds } : undefined,
          gatewayDir: socket?.dir,
          installation,
        });
        for (const w of plan.warnings) wlog.warn(w);
        prepareMounts({
          plan,
          projectDir: project.paths.dir,
          isolated: project.metadata.workspace_isolation && !target,
          workspaceId: target ? undefined : workspace.id,
          owner,
          ensureDir: target?.ensureDir,
        });
        const abort = new AbortController();
        const disk = watchDisk(plan.prepare.rwRoot, plan.limits, (reason) => {
          wlog.warn({ reason }, 'run stopped: disk limit');
          abort.abort();
        });
        const result = await engine.run(plan, { signal: abort.signal }).finally(() => disk.stop());
        const stoppedFor = disk.exceeded();
        wlog.info(
          { exitCode: result.exitCode, timedOut: result.timedOut, truncated: result.truncated, ms: Math.round(result.timings.totalMs), tool: 'argv' in what },
          'argv' in what ? 'shell tool finished' : 'run finished',
        );
        const outcome: RunOutcome = {
          ...result,
          runId,
          project: project.metadata.name,
          workspaceId: workspace.id,
          sessionId: session.id,
          permissionLevel: level,
          workspaceRoot: workspace.dir,
          warnings: stoppedFor ? [...plan.warnings, `stopped: ${stoppedFor}`] : plan.warnings,
        };
        appendRunRecord(project.paths.sessionsDir, toRunRecord(outcome, 'argv' in what ? 'shell_run' : 'message'));
        if ('message' in what) sessions.countRun(project, session.id);
        return outcome;
      } finally {
        await socket?.close();
        if (seeds) fs.rmSync(seeds.dir, { recursive: true, force: true });
      }
    });
  }

  return {
    async run(request) {
      const project = store.get(request.project);
      if (request.sessionId !== undefined) assertChosenSessionId(request.sessionId);
      let session = sessions.open(project, { sessionId: request.sessionId, tenantKey: request.tenantKey });
      if (request.level && request.level !== session.settings.permission_level) session = sessions.setLevel(project, session.id, request.level);
      return launch(project, session, { message: request.message });
    },
    async runPrivate(projectName, sessionId, tenantKey, level, message, target) {
      const project = store.get(projectName);
      let session = sessions.open(project, { sessionId, tenantKey });
      if (level !== session.settings.permission_level) session = sessions.setLevel(project, session.id, level);
      return launch(project, session, { message }, target);
    },
    async exec(ref, argv) {
      const { project, session } = sessions.get(ref.project, ref.session);
      return launch(project, session, { argv });
    },
    async reapLeftovers() {
      const removed = await engine.removeManaged({ installation });
      // Their gateway sockets went with them (a crashed berth never closed them).
      if (deps.socketsDir) fs.rmSync(deps.socketsDir, { recursive: true, force: true });
      return removed;
    },
    listContainers: (project) => engine.listManaged({ installation, project }),
    removeContainers: (project) => engine.removeManaged({ installation, project }),
  };
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
