import { createHash } from 'node:crypto';
import fs from 'node:fs';
import { join } from 'node:path';
import {
  APPROVED_HOSTS_MAX,
  DEFAULT_PERMISSION_LEVEL,
  SessionIdSchema,
  SessionRecordSchema,
  SessionTitleUpdateSchema,
  titleFrom,
  type PermissionLevel,
  type SessionRecord,
  type SessionSettingsUpdate,
} from '../config/session.js';
import { parseOrThrow } from '../config/parse.js';
import { BerthError } from '../base/errors.js';
import { parsesAs, readJsonFile } from '../fs/json-file.js';
import { atomicWriteFile, writeFileOnce } from '../fs/tree.js';
import type { Project, ProjectStore } from './projects.js';
import { workspaceIdFor } from './secret.js';
import { removeAgentHome } from './agent-homes.js';
import { removeChatTranscript } from './chat-transcripts.js';
import { workspaceOf } from './workspaces.js';
import { readdirIfExists } from '../fs/dir.js';

/**
 * Sessions: one conversation in a workspace, with its settings, stored as
 * projects/<name>/sessions/<id>.json (berth-owned: hidden from containers). A session id means
 * something only inside its project: nothing resolves an id across projects.
 */
export interface SessionStore {
  /**
   * Load or create the session a run belongs to (a session never changes tenant): the tenant's
   * session `sessionId` (made if new), or its default one. `chosen`: the id came from
   * a caller (the API, a chat): it may name one of the tenant's own sessions, its default among
   * them, or a new one; never an id berth makes for someone else (a squatted default would lock
   * its tenant out), which is refused alike whether that session exists or not.
   */
  open(project: Project, opts: { sessionId?: string; tenantKey: string; chosen?: boolean }): SessionRecord;
  get(project: string, sessionId: string): { project: Project; session: SessionRecord };
  /** Every session of the project, oldest first; with a tenant, that tenant's only (read through its index, not the whole directory). */
  list(project: Project, filter?: { tenantKey?: string }): SessionRecord[];
  update(project: string, sessionId: string, update: SessionSettingsUpdate['settings']): SessionRecord;
  /** The record its caller just read (no read again), with this level. */
  setLevel(project: Project, session: SessionRecord, level: PermissionLevel): SessionRecord;
  /** One more run; the first message of an untitled session names it (config/session.ts titleFrom). */
  countRun(project: Project, sessionId: string, message?: string): SessionRecord;
  /** Its person's name for it. */
  setTitle(project: string, sessionId: string, title: string): SessionRecord;
  /** Its person allowed `target` ("host:port") for this conversation when its agent asked (the oldest goes past APPROVED_HOSTS_MAX). */
  approveHost(project: string, sessionId: string, target: string): SessionRecord;
  /** Forget a session: its record, its agent home (the conversation) and its chat transcript. Its workspace stays. */
  remove(project: string, sessionId: string): void;
}

/**
 * A workspace's id: the HMAC of its key, the tenant's (or team's) own, or, for a session-mode
 * workspace, one per session (tenant keys never hold NUL). The one derivation: a session record
 * keeps the result and a run carries it (runs/run-context.ts); the tool gateway calls this for
 * the folders it names without a run.
 */
export function workspaceIdOf(secret: Buffer, project: string, tenantKey: string, session?: string): string {
  return workspaceIdFor(secret, project, session === undefined ? tenantKey : `${tenantKey}\0session\0${session}`);
}

export function defaultSessionId(secret: Buffer, project: string, tenantKey: string): string {
  return `t-${workspaceIdFor(secret, project, tenantKey)}`;
}

/** Ids berth makes itself (a tenant's default session, a workflow's): never chosen by a caller. */
export const RESERVED_SESSION_PREFIXES = ['t-', 'wf.'] as const;

export function workflowSessionId(workflow: string): string {
  return `wf.${workflow}`;
}

/**
 * The per-tenant index: .berth/projects/<name>/session-index/<digest of the tenant key>/<session id>,
 * empty files, so listing one person's sessions reads theirs and not every session of the
 * project. An entry is written before its session file and removed after it: a crash in between
 * leaves an entry without a session (skipped), never a session its tenant cannot list. A project
 * from before the index gets it built from its session files on first use.
 */
const INDEX_DIR = 'session-index';
const INDEX_BUILT = '.built';
const tenantDirName = (tenantKey: string) => createHash('sha256').update(tenantKey).digest('hex').slice(0, 32);

export function createSessionStore(opts: { projects: ProjectStore; secret: () => Buffer }): SessionStore {
  const file = (project: Project, id: string) => join(project.paths.sessionsDir, `${id}.json`);
  const indexDir = (project: Project) => join(project.paths.stateDir, INDEX_DIR);
  const tenantIndexDir = (project: Project, tenantKey: string) => join(indexDir(project), tenantDirName(tenantKey));

  function indexAdd(project: Project, tenantKey: string, id: string): void {
    const dir = tenantIndexDir(project, tenantKey);
    fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
    fs.writeFileSync(join(dir, id), '', { mode: 0o600 });
  }

  function sessionFileIds(project: Project): string[] {
    return readdirIfExists(project.paths.sessionsDir)
      .filter((n) => n.endsWith('.json'))
      .map((n) => n.slice(0, -'.json'.length));
  }

  /** Once per project (a marker says it is done): an entry for every session file already there. */
  function ensureIndex(project: Project): void {
    const marker = join(indexDir(project), INDEX_BUILT);
    if (fs.existsSync(marker)) return;
    for (const id of sessionFileIds(project)) {
      const record = read(project, id);
      if (record) indexAdd(project, record.tenant_key, id);
    }
    fs.mkdirSync(indexDir(project), { recursive: true, mode: 0o700 });
    fs.writeFileSync(marker, '', { mode: 0o600 });
  }

  function tenantSessionIds(project: Project, tenantKey: string): string[] {
    ensureIndex(project);
    return readdirIfExists(tenantIndexDir(project, tenantKey));
  }

  /** The session's workspace: decided by berth from tenant, session and mode, never taken from input. */
  function sessionWorkspace(project: Project, tenantKey: string, id: string, mode: 'tenant' | 'session') {
    const wsId = workspaceIdOf(opts.secret(), project.metadata.name, tenantKey, mode === 'session' ? id : undefined);
    return { mode, id: wsId, root_dir: workspaceOf(project, wsId).dir };
  }

  /** A session as stored; its root_dir follows the project if the operator moved it. */
  const read = (project: Project, id: string): SessionRecord | undefined => {
    const record = readJsonFile(file(project, id), SessionRecordSchema);
    const ws = record?.settings.workspace;
    if (!record || !ws?.id) return record;
    return { ...record, settings: { ...record.settings, workspace: { ...ws, root_dir: workspaceOf(project, ws.id).dir } } };
  };

  function write(project: Project, record: SessionRecord): SessionRecord {
    atomicWriteFile(file(project, record.id), `${JSON.stringify(record, null, 2)}\n`, 0o600, parsesAs(SessionRecordSchema));
    return record;
  }

  /**
   * A new session's record, written only if no record of that id is there (two first messages
   * at once, of two tenants or one: one record wins, never the last writer): false when one is.
   */
  function writeNew(project: Project, record: SessionRecord): boolean {
    fs.mkdirSync(project.paths.sessionsDir, { recursive: true, mode: 0o700 });
    return writeFileOnce(file(project, record.id), `${JSON.stringify(record, null, 2)}\n`, 0o600, parsesAs(SessionRecordSchema));
  }

  /**
   * What a session of this id left that no record owns any more (a removal cut short, a run that
   * was still going when its session was deleted and made its home again): a new session of the
   * id, whoever's, starts without it, as one made for the first time does.
   */
  function clearLeftovers(project: Project, id: string): void {
    removeAgentHome(project, id);
    removeChatTranscript(project.paths.stateDir, id);
  }

  function get(projectName: string, sessionId: string) {
    const project = opts.projects.get(projectName);
    parseOrThrow(SessionIdSchema, sessionId, 'session id');
    const session = read(project, sessionId);
    if (!session) throw new BerthError('SESSION_NOT_FOUND', `session "${sessionId}" does not exist in project "${projectName}"`);
    return { project, session };
  }

  function modify(
    project: Project,
    record: SessionRecord,
    change: Partial<Pick<SessionRecord, 'runs' | 'title' | 'approved_hosts'>> & { level?: PermissionLevel; mode?: 'tenant' | 'session' },
  ) {
    const mode = change.mode ?? record.settings.workspace.mode;
    const title = change.title ?? record.title;
    return write(project, {
      ...record,
      ...(title === undefined ? {} : { title }),
      ...(change.approved_hosts === undefined ? {} : { approved_hosts: change.approved_hosts }),
      runs: change.runs ?? record.runs,
      updated_at: new Date().toISOString(),
      settings: {
        permission_level: change.level ?? record.settings.permission_level,
        // The id is derived only when the mode changes (or an old record lacks it): kept otherwise.
        workspace:
          mode === record.settings.workspace.mode && record.settings.workspace.id
            ? record.settings.workspace
            : sessionWorkspace(project, record.tenant_key, record.id, mode),
      },
    });
  }

  return {
    open(project, { sessionId, tenantKey, chosen = false }) {
      // The tenant's default id is derived only when it is needed: no id given, or a reserved one chosen.
      const ownDefault = () => defaultSessionId(opts.secret(), project.metadata.name, tenantKey);
      const id = sessionId ?? ownDefault();
      parseOrThrow(SessionIdSchema, id, 'session id');
      const existing = read(project, id);
      const reserved = RESERVED_SESSION_PREFIXES.some((p) => id.startsWith(p));
      if (chosen && sessionId !== undefined && reserved && existing?.tenant_key !== tenantKey && sessionId !== ownDefault()) {
        throw new BerthError('CONFIG_INVALID', `session "${id}" is one berth names itself: pick another name for a new session`, {
          issues: [
            { field: 'session', reason: `new session ids starting with ${RESERVED_SESSION_PREFIXES.join(' or ')} are made by berth` },
          ],
        });
      }
      if (existing) {
        if (existing.tenant_key !== tenantKey) {
          throw new BerthError('PERMISSION_DENIED', `session "${id}" belongs to another tenant`, { rule: 'session_owner' });
        }
        return existing;
      }
      const now = new Date().toISOString();
      const record: SessionRecord = {
        id,
        project: project.metadata.name,
        tenant_key: tenantKey,
        created_at: now,
        updated_at: now,
        runs: 0,
        settings: { permission_level: DEFAULT_PERMISSION_LEVEL, workspace: sessionWorkspace(project, tenantKey, id, 'tenant') },
      };
      indexAdd(project, tenantKey, id);
      // No record of the id: nothing of a former holder's may stay for the new one (on any launcher:
      // a cluster volume is bound to its home directory, launch/kubernetes/volumes.ts).
      clearLeftovers(project, id);
      if (writeNew(project, record)) return record;
      // Another first message of the id won the race: its record is the session.
      const won = read(project, id);
      if (won?.tenant_key !== tenantKey) fs.rmSync(join(tenantIndexDir(project, tenantKey), id), { force: true });
      if (!won) throw new BerthError('INTERNAL', `session "${id}" was made and removed at once`);
      if (won.tenant_key !== tenantKey)
        throw new BerthError('PERMISSION_DENIED', `session "${id}" belongs to another tenant`, { rule: 'session_owner' });
      return won;
    },

    get,

    list(project, filter = {}) {
      const { tenantKey } = filter;
      const ids =
        tenantKey === undefined
          ? sessionFileIds(project)
          : tenantSessionIds(project, tenantKey).filter((id) => SessionIdSchema.safeParse(id).success);
      return (
        ids
          .map((id) => read(project, id))
          // An index entry whose session is gone, or whose id another tenant took since: not theirs.
          .filter((r): r is SessionRecord => r !== undefined && (tenantKey === undefined || r.tenant_key === tenantKey))
          .sort((a, b) => a.created_at.localeCompare(b.created_at) || a.id.localeCompare(b.id))
      );
    },

    update(projectName, sessionId, settings) {
      const { project, session } = get(projectName, sessionId);
      const wanted = settings.workspace?.root_dir;
      const mode = settings.workspace?.mode ?? session.settings.workspace.mode;
      if (wanted !== undefined && wanted !== sessionWorkspace(project, session.tenant_key, session.id, mode).root_dir) {
        throw new BerthError('CONFIG_INVALID', 'settings are invalid', {
          issues: [{ field: 'settings.workspace.root_dir', reason: 'is decided by berth; omit it or send the current value' }],
        });
      }
      return modify(project, session, { level: settings.permission_level, mode });
    },

    setLevel: (project, session, level) => modify(project, session, { level }),

    remove(projectName, sessionId) {
      const { project, session } = get(projectName, sessionId);
      // Its home and transcript first, the record after: a removal cut short leaves a session
      // without its conversation, never a conversation without its session for the id's next holder.
      clearLeftovers(project, sessionId);
      fs.rmSync(file(project, sessionId), { force: true });
      fs.rmSync(join(tenantIndexDir(project, session.tenant_key), sessionId), { force: true });
    },

    countRun(project, sessionId, message) {
      const session = read(project, sessionId);
      if (!session) throw new BerthError('SESSION_NOT_FOUND', `session "${sessionId}" does not exist`);
      const title = session.title === undefined && message !== undefined ? titleFrom(message) : undefined;
      return modify(project, session, { runs: session.runs + 1, title });
    },

    approveHost(projectName, sessionId, target) {
      const { project, session } = get(projectName, sessionId);
      const hosts = (session.approved_hosts ?? []).filter((h) => h !== target);
      return modify(project, session, { approved_hosts: [...hosts, target].slice(-APPROVED_HOSTS_MAX) });
    },

    setTitle(projectName, sessionId, title) {
      const { project, session } = get(projectName, sessionId);
      return modify(project, session, parseOrThrow(SessionTitleUpdateSchema, { title }, 'session name'));
    },
  };
}
