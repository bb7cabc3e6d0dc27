import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import type { BerthConfig } from '../config/berth-config.js';
import type { Owner } from '../fs/tree.js';
import type { Engine, ManagedContainer, RunResult } from '../launch/docker.js';
import { planRun, type RunPlan } from '../plan/run-plan.js';
import type { ProjectStore } from '../store/projects.js';
import { snapshotForPlan } from '../store/protected-snapshot.js';
import { appendRunRecord } from '../store/run-log.js';
import type { RunRecord } from '../admin/views.js';
import { workspaceIdFor } from '../store/secret.js';
import { ensureWorkspace } from '../store/workspaces.js';
import { createKeyedLock } from './keyed-lock.js';
import { prepareMounts } from './prepare-mounts.js';

export interface RunRequest {
  project: string;
  tenantKey: string;
  message: string;
  network?: RunPlan['network'];
}

export interface RunOutcome extends RunResult {
  runId: string;
  project: string;
  workspaceId: string;
  warnings: string[];
}

export interface Runner {
  run(request: RunRequest): Promise<RunOutcome>;
  /** Remove labelled containers a crashed berth of this home left behind. */
  reapLeftovers(): Promise<number>;
  /** This installation's containers (of one project, or all). */
  listContainers(project?: string): Promise<ManagedContainer[]>;
  /** Stop and remove one project's containers (runs in flight end with exit 137). */
  removeContainers(project: string): Promise<number>;
}

export function newRunId(): string {
  return `r${Date.now().toString(36)}${randomBytes(5).toString('hex')}`;
}

export function createRunner(deps: {
  store: ProjectStore;
  engine: Engine;
  config: BerthConfig;
  secret: Buffer;
  installation: string;
  logger: Logger;
}): Runner {
  const { store, engine, config, secret, installation } = deps;
  const owner: Owner | undefined =
    process.getuid?.() === 0 ? { uid: config.agent_user.uid, gid: config.agent_user.gid } : undefined;
  // One run at a time per workspace: a tenant's messages queue instead of racing each other's mounts.
  const withWorkspaceLock = createKeyedLock();

  async function run(request: RunRequest): Promise<RunOutcome> {
    const project = store.get(request.project);
    const runId = newRunId();
    const log = deps.logger.child({ project: project.metadata.name, run: runId });
    const lockKey = `${project.metadata.name}/${workspaceIdFor(secret, project.metadata.name, request.tenantKey)}`;
    return withWorkspaceLock(lockKey, async () => {
      const workspace = ensureWorkspace({ project, secret, tenantKey: request.tenantKey, owner });
      const wlog = log.child({ workspace: workspace.id });
      if (workspace.created) wlog.info({ skipped: workspace.skipped }, 'workspace created');
      for (const s of workspace.skipped) wlog.warn(s, 'seed entry not copied');
      const plan = planRun({
        config,
        project: { dir: project.paths.dir, metadataFile: project.paths.metadataFile, metadata: project.metadata },
        workspace: { id: workspace.id, dir: workspace.dir },
        protectedSnapshot: snapshotForPlan(project.paths.protectedDir, project.snapshot),
        run: { id: runId, message: request.message, network: request.network },
        installation,
      });
      for (const w of plan.warnings) wlog.warn(w);
      prepareMounts({
        plan,
        projectDir: project.paths.dir,
        isolated: project.metadata.workspace_isolation,
        workspaceId: workspace.id,
        owner,
      });
      const result = await engine.run(plan);
      wlog.info(
        { exitCode: result.exitCode, timedOut: result.timedOut, truncated: result.truncated, ms: Math.round(result.timings.totalMs) },
        'run finished',
      );
      const outcome: RunOutcome = { ...result, runId, project: project.metadata.name, workspaceId: workspace.id, warnings: plan.warnings };
      appendRunRecord(project.paths.sessionsDir, toRunRecord(outcome));
      return outcome;
    });
  }

  return {
    run,
    reapLeftovers: () => engine.removeManaged({ installation }),
    listContainers: (project) => engine.listManaged({ installation, project }),
    removeContainers: (project) => engine.removeManaged({ installation, project }),
  };
}

function roundedTimings(t: RunResult['timings']) {
  const r = (ms: number) => Math.round(ms * 10) / 10;
  return { create: r(t.createMs), start: r(t.startMs), run: r(t.runMs), total: r(t.totalMs) };
}

export function toRunRecord(o: RunOutcome): RunRecord {
  return {
    run: o.runId,
    workspace: o.workspaceId,
    exit_code: o.exitCode,
    timed_out: o.timedOut,
    truncated: o.truncated,
    output_bytes: Buffer.byteLength(o.stdout) + Buffer.byteLength(o.stderr),
    timings_ms: roundedTimings(o.timings),
    finished_at: new Date().toISOString(),
  };
}
