import { assertNotPaused } from '../store/project-pause.js';
import type { Logger } from 'pino';
import { agentOwner, type BerthConfig } from '../config/berth-config.js';
import { sharedGrantsFor, type SharedGrant } from '../config/grants.js';
import type { PermissionLevel, SessionRecord } from '../config/session.js';
import type { Owner } from '../fs/tree.js';
import type { OutputListener } from '../launch/launcher.js';
import type { RunWorkspace } from '../plan/run-plan.js';
import { memoryBootstrap } from '../store/memory.js';
import type { Project } from '../store/projects.js';
import { workspaceIdOf } from '../store/sessions.js';
import { workspaceOf, type WorkspaceQuota } from '../store/workspaces.js';
import { newRunId } from './run-record.js';
import type { ProgressListener } from './progress-tap.js';
import type { ApprovalListener } from '../store/approvals.js';
import type { IncomingFile } from '../plan/files-in.js';

/** A workflow step: runs in the project's private workspace, cwd below its root. */
export interface PrivateTarget {
  cwdRel: string;
  /** Created (no-follow) before the step, e.g. ['work', 'runs', '<run_id>']. */
  ensureDir?: string[];
  /** Data for the step (the workflow input), as environment variables. */
  env?: Record<string, string>;
}

/** The three kinds of run: a message to the agent, a workflow step, a shell-tool command. */
export type LaunchSpec =
  | {
      kind: 'message';
      message: string;
      onOutput?: OutputListener;
      onProgress?: ProgressListener;
      onApproval?: ApprovalListener;
      whenReady?: () => Promise<void>;
      schedule?: string;
      files?: IncomingFile[];
    }
  | { kind: 'workflow_step'; message: string; target: PrivateTarget }
  | { kind: 'shell_tool'; argv: string[] };

/** What a run is, known the moment it is accepted: every step below reads it, none derives it again. */
export interface RunIdentityContext {
  runId: string;
  project: Project;
  session: SessionRecord;
  level: PermissionLevel;
  /** The tenant's (or session's) workspace id; for a workflow step, the private workspace. */
  workspaceId: string;
  log: Logger;
}

/** ... and what it works with, read once it holds its workspace lock (the operator's settings as they are then). */
export interface RunContext extends RunIdentityContext {
  config: BerthConfig;
  owner: Owner | undefined;
  grants: SharedGrant[];
  /** Decided here once (id, directory, isolated); the store makes it and the plan mounts it as given. */
  workspace: RunWorkspace & { ownFilesystem?: boolean };
}

/** The run's identity, derived once: its id, level, and the workspace id (the HMAC of the tenant key, or the one the session stores). */
export function identityOf(project: Project, session: SessionRecord, spec: LaunchSpec, secret: Buffer, logger: Logger): RunIdentityContext {
  // Every run starts here, whoever asked (chat, API, CLI, schedule, shell tool): a paused project starts none.
  assertNotPaused(project.metadata.name, project.paths.stateDir);
  const runId = newRunId();
  const level = session.settings.permission_level;
  const ws = session.settings.workspace;
  // A session keeps its workspace's id; one from before ids were kept gets it derived (the one derivation).
  const workspaceId =
    spec.kind === 'workflow_step'
      ? 'private'
      : (ws.id ?? workspaceIdOf(secret, project.metadata.name, session.tenant_key, ws.mode === 'session' ? session.id : undefined));
  return {
    runId,
    project,
    session,
    level,
    workspaceId,
    log: logger.child({ project: project.metadata.name, session: session.id, permission_level: level, run: runId, workspace: workspaceId }),
  };
}

/**
 * The full context, from the project as it is now (it may have moved, or had isolation switched
 * on) and the config read now. The workspace is decided here, once: a workflow step's is the
 * project's private one (the whole project, never isolated); any other run's is its tenant's (or
 * session's), isolated as the project says.
 */
export function contextOf(base: RunIdentityContext, project: Project, config: BerthConfig, spec: LaunchSpec): RunContext {
  const workspace =
    spec.kind === 'workflow_step'
      ? { id: base.workspaceId, dir: project.paths.dir, isolated: false }
      : workspaceOf(project, base.workspaceId);
  return { ...base, project, config, owner: agentOwner(config), grants: sharedGrantsFor(config, project.metadata.name), workspace };
}

/** The kernel bound for a workspace (berth.yaml disk_quotas, the project's limits). */
export function quotaOf(project: Project, cfg: BerthConfig, scratchDir: string, log: Logger): WorkspaceQuota {
  const { disk_mb, files } = project.metadata.limits;
  return {
    mode: cfg.disk_quotas,
    sizeBytes: disk_mb * 1024 * 1024,
    files,
    scratchDir,
    onEnsured: (id, e) => {
      if (e.created) log.info({ workspace: id, migrated: e.migrated }, 'workspace quota created');
      if (e.resized) log.info({ workspace: id, ...e.resized }, 'workspace quota resized');
      if (e.warning) log.warn({ workspace: id }, e.warning);
    },
  };
}

/** A session's first message to an agent that takes a prompt starts with the memory SOP (medium and high). */
export function withBootstrap(ctx: RunContext, message: string): string {
  const bootstrap =
    ctx.session.runs === 0 && ctx.project.metadata.agent !== 'shell' ? memoryBootstrap(ctx.project.paths.memoryDir, ctx.level) : undefined;
  return bootstrap ? `${bootstrap}\n---\n\n${message}` : message;
}
