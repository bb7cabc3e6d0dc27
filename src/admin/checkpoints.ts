import fs from 'node:fs';
import { agentOwner, type BerthConfig } from '../config/berth-config.js';
import { parseOrThrow } from '../config/parse.js';
import { SessionIdSchema, type SessionRecord } from '../config/session.js';
import { BerthError } from '../base/errors.js';
import { checkpointBounds, CheckpointIdSchema, type CheckpointMeta } from '../plan/checkpoints.js';
import type { Runner } from '../runs/runner.js';
import { ensureAgentHome } from '../store/agent-homes.js';
import { findCheckpoint, listCheckpoints } from '../store/checkpoints.js';
import { openRuns } from '../store/journal.js';
import { processIdentity } from '../fs/process-identity.js';
import type { Project, ProjectStore } from '../store/projects.js';
import type { SessionStore } from '../store/sessions.js';
import { ensureWorkspace, workspaceOf } from '../store/workspaces.js';

/**
 * Checkpoints of a session as the operator (CLI, API) and a chat's person (/undo, /checkpoints,
 * /fork) use them. The copies are berth's (store/checkpoints.ts, on the runner's checkpoint
 * thread); here: who may, and that no container holds the workspace while it is put back (a warm
 * or pooled one is retired, a run going on refuses the restore with BUSY). A restore and a fork
 * hold the workspace's turn, as a run does: a message sent meanwhile waits for them.
 */
export interface CheckpointView {
  id: string;
  session: string;
  created_at: string;
  run?: string;
  message?: string;
  /** Bytes this checkpoint alone holds on disk (what is unchanged since the one before is shared). */
  bytes: number;
  files: number;
}

export interface CheckpointAdmin {
  /** Keep a checkpoint of the session now (as one is kept before each message). */
  snapshotSession(project: string, session: string): Promise<CheckpointView>;
  /** The session's checkpoints, oldest first. */
  sessionCheckpoints(project: string, session: string): CheckpointView[];
  /** Put the session back as a checkpoint (default: the newest) kept it; it and the newer ones are used up. */
  restoreSession(project: string, session: string, checkpoint?: string): Promise<CheckpointView>;
  /**
   * A new session `to` of the same tenant with `from`'s files (in a workspace of its own) and
   * conversation, as they are now. `fresh`: `to` may already exist, unused (a chat's next session).
   */
  forkSession(project: string, from: string, to: string, opts?: { title?: string; fresh?: boolean }): Promise<SessionRecord>;
}

const viewOf = (c: CheckpointMeta): CheckpointView => ({
  id: c.id,
  session: c.session,
  created_at: c.created_at,
  ...(c.run ? { run: c.run } : {}),
  ...(c.message ? { message: c.message } : {}),
  bytes: c.owned_bytes,
  files: c.files,
});

export function checkpointAdmin(deps: {
  store: ProjectStore;
  sessions: SessionStore;
  runner: () => Runner;
  config: () => BerthConfig;
}): CheckpointAdmin {
  const { sessions } = deps;

  /** The session, if checkpoints can be had for it here. */
  function usable(projectName: string, id: string): { project: Project; session: SessionRecord } {
    const found = sessions.get(projectName, id);
    if (!found.project.metadata.workspace_isolation)
      throw new BerthError(
        'CONFIG_INVALID',
        `project "${projectName}" shares one workspace among its tenants: berth keeps no checkpoints of it`,
        {
          issues: [{ field: 'workspace_isolation', reason: 'checkpoints need a workspace of the tenant (or session) alone' }],
        },
      );
    return found;
  }

  const sourceOf = (project: Project, session: SessionRecord) => {
    const workspace = workspaceOf(project, session.settings.workspace.id ?? '');
    if (!session.settings.workspace.id || !fs.existsSync(workspace.dir))
      throw new BerthError('NOT_FOUND', `session "${session.id}" has no files yet: its first message makes them`);
    const home = ensureAgentHome(project, session.id, agentOwner(deps.config()));
    return { project, tenantKey: session.tenant_key, session: session.id, workspace, home };
  };

  /** The tenant's sessions on this workspace (a tenant-mode one is shared by all of them). */
  const sharing = (project: Project, session: SessionRecord) =>
    sessions.list(project, { tenantKey: session.tenant_key }).filter((s) => s.settings.workspace.id === session.settings.workspace.id);

  return {
    async snapshotSession(projectName, id) {
      const { project, session } = usable(projectName, id);
      const cfg = deps.config().checkpoints;
      const bounds = checkpointBounds(cfg, project.metadata.limits.disk_mb);
      return viewOf(await deps.runner().checkpoints.take(sourceOf(project, session), bounds));
    },

    sessionCheckpoints(projectName, id) {
      const { project, session } = usable(projectName, id);
      return listCheckpoints(project, session.tenant_key, session.id).map(viewOf);
    },

    async restoreSession(projectName, id, checkpoint) {
      const { project, session } = usable(projectName, id);
      if (checkpoint !== undefined) parseOrThrow(CheckpointIdSchema, checkpoint, 'checkpoint');
      findCheckpoint(project, session.tenant_key, session.id, checkpoint);
      const wsId = session.settings.workspace.id ?? '';
      // The workspace's turn: a message sent meanwhile runs on the tree put back, never under the copy.
      return deps.runner().withWorkspace(projectName, wsId, async () => {
        await retireHolders(deps.runner(), projectName, sharing(project, session), session.id, wsId, project);
        const at = checkpoint ?? findCheckpoint(project, session.tenant_key, session.id).id;
        return viewOf(await deps.runner().checkpoints.restore(sourceOf(project, session), at));
      });
    },

    async forkSession(projectName, fromId, to, opts = {}) {
      const { project, session: from } = usable(projectName, fromId);
      parseOrThrow(SessionIdSchema, to, 'new session');
      const there = sessions.list(project).find((s) => s.id === to);
      if (there && !(opts.fresh && there.tenant_key === from.tenant_key && there.runs === 0))
        throw new BerthError('CONFIG_INVALID', `session "${to}" already exists`, {
          issues: [{ field: 'new session', reason: 'must name a session that does not exist yet' }],
        });
      const source = sourceOf(project, from);
      sessions.open(project, { sessionId: to, tenantKey: from.tenant_key, chosen: true });
      // A workspace of its own, so the two directions never write into each other's files.
      let fork = sessions.update(projectName, to, { permission_level: from.settings.permission_level, workspace: { mode: 'session' } });
      if (opts.title) fork = sessions.setTitle(projectName, to, opts.title);
      const owner = agentOwner(deps.config());
      const { disk_mb, files } = project.metadata.limits;
      const workspace = workspaceOf(project, fork.settings.workspace.id ?? '');
      ensureWorkspace({
        project,
        workspace,
        tenantKey: from.tenant_key,
        session: to,
        owner,
        // A new workspace: no container holds it yet.
        quota: {
          mode: deps.config().disk_quotas,
          sizeBytes: disk_mb * 1048576,
          files,
          scratchDir: deps.store.home.tmpDir,
          holds: { inUse: false, seesAll: false },
        },
      });
      const home = ensureAgentHome(project, to, owner);
      // The source's turn: its files as they are between two messages, never half-written by a run.
      await deps
        .runner()
        .withWorkspace(projectName, source.workspace.id, () =>
          deps.runner().checkpoints.copyInto(source, { project, tenantKey: from.tenant_key, session: to, workspace, home }),
        );
      return fork;
    },
  };
}

/**
 * No container may hold the workspace while it is put back (the caller holds its turn): a run of
 * another berth process going on refuses the restore (BUSY); the warm containers of the sessions on it go first, so the next message starts
 * one that sees the tree put back.
 */
async function retireHolders(
  runner: Runner,
  projectName: string,
  others: SessionRecord[],
  session: string,
  wsId: string,
  project: Project,
): Promise<void> {
  const ids = new Set(others.map((s) => s.id).concat(session));
  // This process's runs wait for the turn the caller holds (they run on the tree put back); another process's may be under way.
  const self = processIdentity();
  const running = openRuns(project.paths.sessionsDir).filter(
    (r) => r.session !== undefined && ids.has(r.session) && (r.owner === undefined || r.owner !== self),
  );
  if (running.length)
    throw new BerthError('BUSY', `a run of this workspace is going on (${running[0]?.run}): it is put back once that ends`, {
      retry_after: 5,
    });
  for (const s of ids) await runner.forgetSession(projectName, s);
  // One still up is another berth process's (serve's, when this is the CLI): nothing is written under it.
  const up = (await runner.listContainers(projectName)).filter((c) => c.workspace === wsId);
  if (up.length)
    throw new BerthError(
      'BUSY',
      `a container of this workspace is still up (${up[0]?.id.slice(0, 12)}): it is put back once that is gone`,
      {
        hint: 'a warm container of berth serve goes after runs.warm_idle_seconds, or restore through serve (its API or /undo)',
        retry_after: 30,
      },
    );
}

/**
 * A deleted session's warm container and checkpoints go with it (a new session of that id must
 * inherit neither: the checkpoint thread drops them before any later call of its own).
 */
export function sessionGone(runner: Runner, project: Project, tenantKey: string, id: string): void {
  void runner.checkpoints.dropSession(project, tenantKey, id).catch(() => undefined);
  void runner.forgetSession(project.metadata.name, id).catch(() => undefined);
}
