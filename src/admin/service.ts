import type { ProjectMetadata, ProjectMetadataInput, ProjectUpdate } from '../config/metadata.js';
import type { PermissionLevel, SessionRecord, SessionSettingsUpdate } from '../config/session.js';
import type { SessionTokens } from '../store/session-tokens.js';
import type { FileTools } from '../file-tools/service.js';
import type { WorkspaceProfile } from '../file-tools/workspace-profile.js';
import type { SessionStore } from '../store/sessions.js';
import { checkpointAdmin, sessionGone, type CheckpointAdmin } from './checkpoints.js';
import { BerthError } from '../base/errors.js';
import type { RunRequest, Runner } from '../runs/runner.js';
import type { Project, ProjectStore } from '../store/projects.js';
import { readRunRecords, type RunRecord } from '../store/run-log.js';
import { interruptedRuns, openRuns } from '../store/journal.js';
import { readOutbound, type ModelCall, type OutboundRecord } from '../store/outbound-log.js';
import { daysOf } from '../outbound/cost.js';
import { modelUseOf, type ModelUse } from './model-use.js';
import { listWorkspaces, workspaceUsage } from '../store/workspaces.js';
import { openRunFile, type OpenedRunFile } from '../store/run-files.js';
import { mountPoints } from '../fs/mount-table.js';
import type { InterruptedRun, ProjectView, RunView, WorkspaceView } from './views.js';
import type { BerthConfig } from '../config/berth-config.js';
import { resolveRoute } from '../workflows/routes.js';
import { listWorkflows, runWorkflow, type StepEvent } from '../workflows/run.js';
import type { WorkflowRunRecord } from '../workflows/schema.js';
import {
  checkChatUser,
  createChatLinks,
  tenantOfChatUser,
  type ChatAccessEntry,
  type ChatLinks,
  type ChatLogin,
} from '../store/chat-links.js';
import { agentHomeDir } from '../store/agent-homes.js';
import { editBerthYaml, projectGrantsEdit } from '../config/operator-edits.js';
import { projectGrantsOf } from '../config/grants.js';
import { readVolumeId } from '../launch/kubernetes/volumes.js';
import { createVolumeRetirement, trashedVolumeIds } from './volume-retirement.js';
import { fileStopRequest } from './stop-requests.js';
import { runDetail, sessionDetail, tenantDetail, type RunDetail } from './drill-down.js';
import { openScheduleStore } from '../store/schedules.js';
import { pauseProject, resumeProject, type PauseView } from './project-pause.js';
import { assertOperatorChoices, runView, viewOf } from './service-views.js';

/**
 * What an admin can do, once, for every surface: the HTTP API, the MCP tools and the CLI call
 * these and only translate inputs and errors.
 */
export interface AdminService extends CheckpointAdmin {
  createProject(input: ProjectMetadataInput): ProjectView;
  getProject(name: string): ProjectView;
  /** A project's own settings alone, for what each chat message reads (getProject's view also counts every workspace record). */
  getProjectMetadata(name: string): ProjectMetadata;
  listProjects(): ProjectView[];
  /** A patch, or a function making one from the settings as they are under the project lock. */
  updateProject(name: string, patch: ProjectUpdate | ((current: ProjectMetadata) => ProjectUpdate)): Promise<ProjectView>;
  /**
   * Stop its containers, take its grants out of berth.yaml (secrets' and shared areas': a project
   * made again under the name inherits none), move it to the trash, end its tokens and logins,
   * and retire its cluster volumes (retireVolumes).
   */
  deleteProject(name: string, confirm: string | undefined): Promise<{ name: string; trashed_to: string; containers_removed: number }>;
  listWorkspaces(name: string): WorkspaceView[];
  runMessage(
    name: string,
    request: {
      user: string;
      message: string;
      session?: string;
      level?: PermissionLevel;
      onOutput?: RunRequest['onOutput'];
      onProgress?: RunRequest['onProgress'];
      onApproval?: RunRequest['onApproval'];
      whenReady?: RunRequest['whenReady'];
      schedule?: string;
      files?: RunRequest['files'];
    },
  ): Promise<RunView>;
  /**
   * Stop a run before its end (run-halt.ts: its record and answer say why): at once when this
   * process runs it, else asked of the process of this home that does (stop-requests.ts; `here`
   * false). NOT_FOUND when no run of that id is going on.
   */
  stopRun(name: string, run: string, reason: string): { run: string; stopped: true; here: boolean };
  /** Refuse every new run of the project (PROJECT_PAUSED, in words in the chats) until resumeProject; runs going on finish. */
  pauseProject(name: string, reason?: string, by?: string): PauseView;
  resumeProject(name: string): PauseView & { was_paused: boolean };
  /** One run, one session, one tenant, as the operator opens them (drill-down.ts); NOT_FOUND / SESSION_NOT_FOUND when unknown. */
  runDetail(name: string, run: string): RunDetail;
  sessionDetail(name: string, id: string): ReturnType<typeof sessionDetail>;
  tenantDetail(name: string, tenant: string): ReturnType<typeof tenantDetail>;
  /** End a session, keeping it: its runs going on stopped, its warm container let go, its tokens revoked (its history stays). */
  endSession(project: string, id: string): Promise<{ session: string; runs_stopped: number; revoked: number }>;
  listRuns(
    name: string,
    filter: { user?: string; limit?: number },
  ): { runs: RunRecord[]; corrupt_lines: number; interrupted: InterruptedRun[] };
  /** A file a run left in outbox/ (store/run-files.ts), held open (the caller closes or streams it), and whose run it was; NOT_FOUND when there is none. */
  runFile(name: string, run: string, file: string): OpenedRunFile;
  /** Runs accepted or started and not ended (in flight now, or left open by a berth that died and not yet recovered). */
  openRuns(name: string): Array<{ run: string; session: string | null; kind: string | null; phase: string; since: string }>;
  /** A project's model calls since a time (a tenant's, or a run's), newest first and bounded: what the chat's cost words count. */
  modelCalls(name: string, filter: { since: string; tenant?: string; run?: string }): ModelCall[];
  modelUse(name: string): ModelUse; // each tenant's model calls in the last hour against the project's budget (the console's view)
  /** A project's sessions; with a tenant key, that tenant's only (read through its index). */
  listSessions(name: string, tenantKey?: string): SessionRecord[];
  workspaceProfile(name: string, workspaceId: string): WorkspaceProfile;
  getSession(project: string, id: string): SessionRecord;
  /** The session of a tenant, made (at the default level) if it does not exist yet. */
  openSession(project: string, id: string, tenantKey: string): SessionRecord;
  updateSession(project: string, id: string, settings: SessionSettingsUpdate['settings']): SessionRecord;
  renameSession(project: string, id: string, title: string): SessionRecord;
  mintSessionToken(project: string, id: string, ttlSeconds?: number): { session: string; token: string; expires_at: string };
  revokeSessionTokens(project: string, id: string): { session: string; revoked: number };
  /** Forget a session: record, agent home (its conversation, on the cluster too: retireVolumes) and tokens; the next message starts afresh. */
  deleteSession(project: string, id: string): { session: string; deleted: true; revoked: number };
  /**
   * Delete the cluster volumes (launcher: kubernetes) of deleted sessions and projects: each was
   * retired when its session or project went (never mounted again from then on), and waits in
   * berth's state until the cluster has taken it. Session and project delete start a pass; this
   * waits for it, or runs one (the CLI before it exits, tests). One pass at a time.
   */
  retireVolumes(): Promise<{ deleted: number; waiting: number }>;
  listWorkflows(project: string): string[];
  /** Run a workflow (its steps in order, each recorded; the first failure stops it). */
  runWorkflow(project: string, workflow: string, input?: string, onStep?: StepListener): Promise<WorkflowRunRecord>;
  /** Run a route's default workflow, with exactly its project's grants. */
  runChannel(
    channel: string,
    input?: string,
    onStep?: StepListener,
  ): Promise<{ project: string; workflow: string; run: WorkflowRunRecord }>;
  /** A web chat link for one person of a project (tenant "web:<user>"): its path carries the token, shown once. */
  mintChatLink(project: string, user: string, ttlSeconds?: number): ChatLinkView;
  /** Whom a chat link would log in, without using it up. */
  peekChatLink(token: string): ChatLogin;
  /** Opening a chat link (it works once): a login credential for the browser's cookie. */
  openChatLink(token: string): ChatLogin & { credential: string };
  /** A login for someone the sign-in provider vouched for (api/oidc): as a link minted and opened at once. */
  openChatLogin(project: string, user: string, ttlSeconds: number): ChatLogin & { credential: string };
  /** A project's unused chat links and active chat logins (of one user, or everyone's). */
  listChatAccess(project: string, user?: string): { project: string; links: ChatAccessEntry[]; logins: ChatAccessEntry[] };
  /** Revoke a person's unused chat links and log them out everywhere. */
  revokeChatUser(
    project: string,
    user: string,
  ): { project: string; user: string; tenant: string; links_revoked: number; logins_revoked: number };
  /** Whom a chat login credential stands for; UNAUTHORIZED when unknown, expired, or its project is gone. */
  chatLoginOf(credential: string): ChatLogin;
  /** Be told when chat logins end in this process: a person's (revoke), or a whole project's (delete; no user). */
  onChatLogout(listener: (project: string, user?: string) => void): () => void;
}

export interface ChatLinkView {
  project: string;
  user: string;
  tenant: string;
  /** "/chat/login?token=…": the caller puts its own base URL in front. */
  path: string;
  /** The link works once, until then. */
  expires_at: string;
  /** The login it opens ends then. */
  login_expires_at: string;
}

export type StepListener = (event: StepEvent) => void;

/** Model calls one cost question reads at most (a week of a busy tenant's calls). */
const MODEL_CALLS_READ = 100_000;

function modelCallsOf(sessionsDir: string, f: { since: string; tenant?: string; run?: string }): ModelCall[] {
  const keep = (r: OutboundRecord) =>
    r.kind === 'model' && (f.tenant === undefined || r.tenant === f.tenant) && (f.run === undefined || r.run === f.run);
  return readOutbound(sessionsDir, { since: f.since, limit: MODEL_CALLS_READ, keep }) as ModelCall[];
}
export function createAdminService(deps: {
  store: ProjectStore;
  sessions: SessionStore;
  tokens: SessionTokens;
  runner: () => Runner;
  fileTools: FileTools;
  /** The operator's refusal of an ungranted shared area (logged). */
  assertGranted: (project: string, area: string) => unknown;
  config: () => BerthConfig;
  /** Web chat links and logins (default: in berth's state directory). */
  chatLinks?: ChatLinks;
}): AdminService {
  const workflow = (project: string, name: string, input?: string, onStep?: StepListener) =>
    runWorkflow({ store, runner: deps.runner(), assertGranted: deps.assertGranted }, { project, workflow: name, input, onStep });
  const { store, sessions } = deps;
  const projectView = (p: Project) => viewOf(p, deps.fileTools.violations(p.metadata.name));
  const chatLinks = deps.chatLinks ?? createChatLinks(store.home.stateDir);
  const logoutListeners = new Set<(project: string, user?: string) => void>();
  const loggedOut = (project: string, user?: string) => {
    for (const listener of logoutListeners) listener(project, user);
  };
  /** A login whose project was deleted (and maybe made again) logs nobody in. */
  const stillThere = (login: ChatLogin): ChatLogin => {
    if (!store.names().includes(login.project)) throw new BerthError('UNAUTHORIZED', 'the project of this chat login no longer exists');
    return login;
  };

  const { retire, retireVolumes } = createVolumeRetirement(store.home.stateDir, deps.config);

  /** Take a project's grants out of berth.yaml (its secrets' grants, its shared areas'): nothing of them for a project made again under its name. */
  async function removeProjectGrants(name: string): Promise<void> {
    if (!projectGrantsOf(deps.config(), name).length) return;
    await editBerthYaml({ file: store.home.configFile, home: store.home.root, lockDir: store.home.stateDir }, projectGrantsEdit(name));
  }
  return {
    createProject(input) {
      assertOperatorChoices(input, deps.config());
      return projectView(store.create(input));
    },
    getProject: (name) => projectView(store.get(name)),
    getProjectMetadata: (name) => store.get(name).metadata,
    listProjects: () => store.list().map(projectView),
    async updateProject(name, patch) {
      const wasIsolated = store.get(name).metadata.workspace_isolation;
      const config = deps.config();
      const updated = await store.update(name, (current) => {
        const change = typeof patch === 'function' ? patch(current) : patch;
        assertOperatorChoices(change, config);
        return change;
      });
      // Isolation on: a shared run's view of every workspace does not outlive the switch (and would hold off quotas).
      if (!wasIsolated && updated.metadata.workspace_isolation) await deps.runner().retireSharedContainers(name);
      return projectView(updated);
    },

    async deleteProject(name, confirm) {
      store.get(name);
      if (confirm !== name) {
        throw new BerthError('CONFIG_INVALID', `deleting needs confirm=${name}`, {
          issues: [{ field: 'confirm', reason: `must equal the project name "${name}"` }],
        });
      }
      // Stop its containers first, so nothing writes into the tree while it moves.
      const removed = await deps.runner().removeContainers(name);
      // Its grants before the project: a failed edit (berth.yaml invalid meanwhile) deletes nothing.
      await removeProjectGrants(name);
      const trashedTo = await store.trash(name);
      deps.tokens.revokeProject(name); // a project made again under this name inherits no token
      chatLinks.revokeProject(name);
      loggedOut(name);
      // Its cluster volumes: every directory they were bound to is in the trash now.
      retire(trashedVolumeIds(trashedTo));
      return { name, trashed_to: trashedTo, containers_removed: removed };
    },

    listWorkspaces(name) {
      const p = store.get(name);
      const mounted = new Set(mountPoints()); // read once, not once per workspace
      return listWorkspaces(p).map((w) => ({ ...w, ...workspaceUsage(p, w.id, mounted) }));
    },

    async runMessage(name, request) {
      return runView(
        await deps.runner().run({
          project: name,
          tenantKey: request.user,
          message: request.message,
          sessionId: request.session,
          level: request.level,
          onOutput: request.onOutput,
          onProgress: request.onProgress,
          onApproval: request.onApproval,
          whenReady: request.whenReady,
          schedule: request.schedule,
          files: request.files,
        }),
      );
    },

    stopRun(name, run, reason) {
      const open = openRuns(store.get(name).paths.sessionsDir).some((r) => r.run === run);
      if (!open)
        throw new BerthError('NOT_FOUND', `no run ${run.slice(0, 40)} is going on in ${name}`, {
          issues: [{ field: 'run', reason: 'not going on (ended, or never was)' }],
        });
      if (deps.runner().stop(run, reason)) return { run, stopped: true, here: true };
      fileStopRequest(store.home.stateDir, name, run, reason); // another process of this home runs it (or it waits for its turn)
      return { run, stopped: true, here: false };
    },
    pauseProject: (name, reason, by = 'operator') => pauseProject(store.get(name), by, reason),
    resumeProject: (name) => resumeProject(store.get(name)),
    runDetail: (name, run) => runDetail(store.get(name), sessions, run),
    sessionDetail: (name, id) => sessionDetail(store.get(name), sessions, id),
    tenantDetail: (name, tenant) =>
      tenantDetail(store.get(name), sessions, tenant, openScheduleStore(store.home.stateDir).list({ project: name, tenant })),
    async endSession(project, id) {
      sessions.get(project, id);
      const going = openRuns(store.get(project).paths.sessionsDir).filter((r) => r.session === id);
      for (const r of going)
        if (!deps.runner().stop(r.run, 'the operator ended its session'))
          fileStopRequest(store.home.stateDir, project, r.run, 'the operator ended its session');
      await deps.runner().forgetSession(project, id);
      return { session: id, runs_stopped: going.length, revoked: deps.tokens.revokeSession(project, id) };
    },

    runFile: (name, run, file) => openRunFile(store.get(name).paths.stateDir, run, file),
    listRuns(name, filter) {
      const p = store.get(name);
      const limit = filter.limit ?? 50;
      const mine = filter.user === undefined ? undefined : new Set(sessions.list(p, { tenantKey: filter.user }).map((s) => s.id));
      const { records, corrupt } = readRunRecords(p.paths.sessionsDir, { keep: mine && ((r) => mine.has(r.session)), limit });
      const interrupted = interruptedRuns(p.paths.sessionsDir, limit)
        .filter((r) => !mine || (r.session !== undefined && mine.has(r.session)))
        .map((r) => ({
          run: r.run,
          session: r.session ?? null,
          kind: r.kind ?? null,
          interrupted_at: r.at,
          reason: r.reason ?? 'its berth process died',
        }));
      return { runs: records, corrupt_lines: corrupt, interrupted };
    },

    openRuns(name) {
      return openRuns(store.get(name).paths.sessionsDir).map((r) => ({
        run: r.run,
        session: r.session ?? null,
        kind: r.kind ?? null,
        phase: r.phase,
        since: r.at,
      }));
    },

    modelCalls: (name, f) => modelCallsOf(store.get(name).paths.sessionsDir, f),

    modelUse(name) {
      const p = store.get(name);
      const now = Date.now();
      const since = new Date(Math.min(now - 3600_000, Date.parse(daysOf(now).today))).toISOString();
      return modelUseOf(modelCallsOf(p.paths.sessionsDir, { since }), p.metadata.models.budget, deps.config().models, now);
    },

    listSessions: (name, tenantKey) => sessions.list(store.get(name), { tenantKey }),
    workspaceProfile: (name, id) => deps.fileTools.profileOf(store.get(name), id),
    getSession: (project, id) => sessions.get(project, id).session,
    openSession: (project, id, tenantKey) => sessions.open(store.get(project), { sessionId: id, tenantKey, chosen: true }),
    updateSession: (project, id, settings) => sessions.update(project, id, settings),
    renameSession: (project, id, title) => sessions.setTitle(project, id, title),
    mintSessionToken(project, id, ttlSeconds) {
      const { session } = sessions.get(project, id);
      const binding = { project, session: id, tenant_key: session.tenant_key, session_created_at: session.created_at };
      return { session: id, ...deps.tokens.mint(binding, ttlSeconds) };
    },
    deleteSession(project, id) {
      // Its home's cluster volume, read before the home goes; retired once it has.
      const found = sessions.get(project, id);
      const volume = readVolumeId(agentHomeDir(found.project, id));
      sessions.remove(project, id);
      sessionGone(deps.runner(), found.project, found.session.tenant_key, id); // its warm container and checkpoints
      const revoked = deps.tokens.revokeSession(project, id);
      if (volume) retire([volume]);
      return { session: id, deleted: true, revoked };
    },
    retireVolumes,
    revokeSessionTokens(project, id) {
      sessions.get(project, id);
      return { session: id, revoked: deps.tokens.revokeSession(project, id) };
    },
    listWorkflows: (project) => listWorkflows(store.get(project)),
    runWorkflow: workflow,
    async runChannel(channel, input, onStep) {
      const profile = resolveRoute(deps.config(), channel);
      return { ...profile, run: await workflow(profile.project, profile.workflow, input, onStep) };
    },
    mintChatLink(project, user, ttlSeconds) {
      store.get(project);
      const { token, expires_at, login_expires_at } = chatLinks.mintLink(project, user, ttlSeconds);
      return { project, user, tenant: tenantOfChatUser(user), path: `/chat/login?token=${token}`, expires_at, login_expires_at };
    },
    peekChatLink: (token) => stillThere(chatLinks.peekLink(token)),
    openChatLink: (token) => chatLinks.login(token, stillThere),
    openChatLogin(project, user, ttlSeconds) {
      store.get(project);
      return chatLinks.login(chatLinks.mintLink(project, user, ttlSeconds).token, stillThere);
    },
    listChatAccess(project, user) {
      store.get(project);
      if (user !== undefined) checkChatUser(user);
      return { project, ...chatLinks.listActive(project, user) };
    },
    revokeChatUser(project, user) {
      store.get(project);
      checkChatUser(user);
      const revoked = chatLinks.revokeUser(project, user);
      loggedOut(project, user);
      return { project, user, tenant: tenantOfChatUser(user), links_revoked: revoked.links, logins_revoked: revoked.logins };
    },
    chatLoginOf: (credential) => stillThere(chatLinks.verifyLogin(credential)),
    ...checkpointAdmin({ store, sessions, runner: deps.runner, config: deps.config }),
    onChatLogout(listener) {
      logoutListeners.add(listener);
      return () => void logoutListeners.delete(listener);
    },
  };
}
