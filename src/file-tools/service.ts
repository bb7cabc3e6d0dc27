import fs from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { z } from 'zod';
import { BerthError, errnoOf } from '../base/errors.js';
import { closeQuietly } from '../fs/fd-path.js';
import { fileStamp } from '../fs/json-file.js';
import { openScopeRoot, sandboxDelete, sandboxInfo, sandboxReadText, sandboxWrite, type FileInfo } from '../fs/sandbox.js';
import type { Project, ProjectStore } from '../store/projects.js';
import { listWorkspaces, readWorkspaceRecord, recordWorkspace, workspaceOf } from '../store/workspaces.js';
import { workspaceIdOf } from '../store/sessions.js';
import { decide, type Caller, type Folder, type Operation, type Scope } from './folder-access.js';
import { detectProfile, workspaceProfile, type WorkspaceProfile } from './workspace-profile.js';
import { own } from '../base/own.js';
import { noMetrics, type Metrics } from '../base/metrics.js';

export const FolderIdSchema = z
  .string()
  .regex(/^[0-9a-f]{32}$/, 'is not a folder id')
  .describe('A folder (workspace) id: the uuid list_folders gives.');
export const ScopeSchema = z.enum(['private', 'shared']).describe('"private": the whole folder; "shared": its shared/ subfolder.');
export const ListScopeSchema = z
  .enum(['my_private', 'my_shared', 'team_private', 'team_shared', 'org_shared'])
  .describe('Which folders to list.');
export const FolderRefSchema = z
  .object({
    folderId: FolderIdSchema,
    scope: ScopeSchema,
    path: z.string().max(4096).default('').describe('A path relative to the scope ("" is its root); no "..", no links.'),
  })
  .strict();

export interface Identity {
  project: string;
  tenantKey: string;
  /** The caller's workspace when a run knows it (a session-mode workspace is not the tenant key's). */
  workspaceId?: string;
  /**
   * Set when the caller's workspace is its session's own (workspace mode "session"): that session's
   * id. Its own folder is then that workspace, and the tenant's default one (its other sessions')
   * is out of its reach, as it is out of that session's container.
   */
  session?: string;
}

export const FolderEntrySchema = z.object({ name: z.string(), uuid: z.string(), scope: ScopeSchema, path: z.string() });
export type FolderEntry = z.infer<typeof FolderEntrySchema>;

const MAX_FOLDERS = 200;
/** Folders and open scope roots one caller keeps (past it they are dropped and looked up again). */
const MAX_KEPT = 16;

function lstatQuietly(path: string): fs.Stats | undefined {
  try {
    return fs.lstatSync(path);
  } catch {
    return undefined;
  }
}

/**
 * Agent file tools, for one caller whose identity came from its connection. Resolve the folder,
 * ask the permission service, then hand the permitted target to an executor (the sandbox
 * functions), which does I/O and nothing else. Violations are logged and counted.
 */
export function createFileTools(deps: {
  store: ProjectStore;
  secret: () => Buffer;
  owner: () => { uid: number; gid: number } | undefined;
  logger: Logger;
  /** A tenant's tree tried to lead berth outside it (for the audit log). */
  onViolation?: (v: { project: string; tenantKey: string; tool: string }) => void;
  metrics?: Metrics;
}) {
  const metrics = deps.metrics ?? noMetrics();
  const violations = new Map<string, number>();

  function callerOf(project: Project, tenantKey: string): Caller {
    const teams = Object.entries(project.metadata.teams)
      .filter(([, t]) => t.members.includes(tenantKey))
      .map(([key]) => key);
    return { tenantKey, teams, leader: project.metadata.admins.includes(tenantKey) };
  }

  function folderOf(project: Project, caller: Caller, folderId: string): Folder & { id: string } {
    const found = readWorkspaceRecord(project, folderId);
    const record = found && !found.session ? found : undefined;
    const idOf = (key: string) => workspaceIdOf(deps.secret(), project.metadata.name, key);
    const owner = record?.tenant_key ?? [caller.tenantKey, ...caller.teams].find((k) => idOf(k) === folderId);
    const kind = owner !== undefined && own(project.metadata.teams, owner) !== undefined ? 'team' : 'user';
    const ownerTeams =
      owner === undefined
        ? []
        : Object.entries(project.metadata.teams)
            .filter(([, t]) => t.members.includes(owner))
            .map(([k]) => k);
    return { id: folderId, owner: owner ?? '', kind, exists: record !== undefined, ownerTeams };
  }

  /** A session-mode caller's own folder: its session's workspace, recorded (by a run or a tool) or not yet. */
  function sessionFolderOf(project: Project, caller: Caller, folderId: string): Folder & { id: string } {
    return {
      id: folderId,
      owner: caller.tenantKey,
      kind: 'user',
      exists: readWorkspaceRecord(project, folderId) !== undefined,
      ownerTeams: caller.teams,
    };
  }

  /**
   * One caller's tools. The project and the caller's teams are resolved once and re-read only
   * when metadata.json changes (an admin edited teams or leadership); the caller's own folder id
   * is computed once; a folder found to exist keeps its owner and kind until then too (a
   * workspace's owner never changes). With `keepOpen` (a run's gateway socket, which calls
   * close()), each scope's root directory stays open between calls, used again only while its
   * path still leads to that same directory (one lstat; a moved or remounted workspace is opened
   * afresh, without following links, as every call did before).
   */
  function forCaller(identity: Identity, opts: { keepOpen?: boolean } = {}) {
    const log = deps.logger.child({ project: identity.project, tenant: identity.tenantKey });
    const { session } = identity;
    // A run's socket and /mcp/session are given the id their run or session carries; a caller without one derives it (the one derivation).
    const ownId = identity.workspaceId ?? workspaceIdOf(deps.secret(), identity.project, identity.tenantKey, session);
    /** The tenant's default workspace, which a session-mode caller does not own. */
    const tenantId = session === undefined ? undefined : workspaceIdOf(deps.secret(), identity.project, identity.tenantKey);
    let resolved: { stamp: string; project: Project; caller: Caller } | undefined;
    const stampOf = (file: string) => fileStamp(file) ?? 'gone';
    const current = () => {
      // Stamp before reading: a change that lands while we read makes the next call read again.
      const file = resolved?.project.paths.metadataFile;
      const before = file === undefined ? undefined : stampOf(file);
      if (resolved && before === resolved.stamp && before !== 'gone') return resolved;
      const p = deps.store.get(identity.project);
      const stamp = p.paths.metadataFile === file && before !== undefined ? before : stampOf(p.paths.metadataFile);
      resolved = { stamp, project: p, caller: callerOf(p, identity.tenantKey) };
      folders.clear();
      return resolved;
    };
    /** Folders known to exist, by id, for the metadata `resolved` was read from. */
    const folders = new Map<string, Folder & { id: string }>();
    const folderFor = (p: Project, caller: Caller, folderId: string) => {
      const known = folders.get(folderId);
      if (known) return known;
      const folder = session !== undefined && folderId === ownId ? sessionFolderOf(p, caller, folderId) : folderOf(p, caller, folderId);
      if (folder.exists) {
        if (folders.size >= MAX_KEPT) folders.clear();
        folders.set(folderId, folder);
      }
      return folder;
    };
    /** Open scope roots (keepOpen), by folder and scope, with the directory each was. */
    const roots = new Map<string, { fd: number; path: string; dev: number; ino: number }>();
    const closeRoots = () => {
      for (const r of roots.values()) closeQuietly(r.fd);
      roots.clear();
    };
    /** The scope's root directory, and whether the caller must close it (not when it is kept). */
    function rootOf(p: Project, ref: { folderId: string; scope: Scope }, create: boolean): { fd: number | undefined; kept: boolean } {
      const key = `${ref.folderId}/${ref.scope}`;
      const path = join(workspaceOf(p, ref.folderId).dir, ...(ref.scope === 'shared' ? ['shared'] : []));
      const kept = roots.get(key);
      if (kept) {
        const st = lstatQuietly(path);
        if (st && st.isDirectory() && st.dev === kept.dev && st.ino === kept.ino && kept.path === path) return { fd: kept.fd, kept: true };
        closeQuietly(kept.fd);
        roots.delete(key);
      }
      const fd = openScopeRoot(p.paths.dir, ref.folderId, ref.scope, create, deps.owner());
      if (fd === undefined || !opts.keepOpen) return { fd, kept: false };
      if (roots.size >= MAX_KEPT) closeRoots();
      const st = fs.fstatSync(fd);
      roots.set(key, { fd, path, dev: st.dev, ino: st.ino });
      return { fd, kept: true };
    }
    const project = () => current().project;

    function guarded<T>(
      what: string,
      ref: { folderId: string; scope: Scope; path: string },
      op: Operation,
      act: (rootFd: number) => T,
      create = false,
    ): T {
      const { project: p, caller } = current();
      const folder = folderFor(p, caller, ref.folderId);
      const d: ReturnType<typeof decide> =
        ref.folderId === tenantId && tenantId !== ownId
          ? {
              allow: false,
              reason: 'this session has a workspace of its own (workspace mode "session"): the tenant’s default workspace is not its',
            }
          : decide(caller, folder, ref.scope, op);
      if (!d.allow) {
        log.warn({ tool: what, folder: ref.folderId, scope: ref.scope, op, reason: d.reason }, 'gateway refused');
        metrics.gatewayCall({ kind: 'tools', outcome: 'refused' });
        throw new BerthError('PERMISSION_DENIED', d.reason, { rule: 'folder_permission' });
      }
      let rootFd: number | undefined;
      let kept = false;
      try {
        ({ fd: rootFd, kept } = rootOf(p, ref, create));
        if (create && !folder.exists && rootFd !== undefined) {
          // A session's own workspace made here is recorded as that session's, as a run would record it.
          recordWorkspace(p, {
            id: ref.folderId,
            tenant_key: folder.owner,
            ...(session !== undefined && ref.folderId === ownId ? { session } : {}),
            created_at: new Date().toISOString(),
          });
        }
        if (rootFd === undefined)
          throw new BerthError('CONFIG_INVALID', `folder ${ref.folderId} has no ${ref.scope} scope yet`, {
            issues: [{ field: 'scope', reason: 'is empty' }],
          });
        const done = act(rootFd);
        metrics.gatewayCall({ kind: 'tools', outcome: 'allowed' });
        return done;
      } catch (err) {
        metrics.gatewayCall({ kind: 'tools', outcome: 'error' });
        if (err instanceof BerthError && err.code === 'E_SANDBOX_VIOLATION') {
          metrics.sandboxViolation(identity.project);
          violations.set(identity.project, (violations.get(identity.project) ?? 0) + 1);
          deps.onViolation?.({ project: identity.project, tenantKey: identity.tenantKey, tool: what });
          log.warn({ tool: what, folder: ref.folderId, scope: ref.scope, path: err.details.path, kind: 'sandbox_violation' }, err.message);
        }
        // The tenant owns the tree and may change it under us: that fails closed, with a clear code.
        const code = errnoOf(err);
        if (code && ['ENOENT', 'ENOTDIR', 'EEXIST', 'EISDIR', 'ENOTEMPTY', 'ELOOP'].includes(code)) {
          throw new BerthError('FILE_CHANGED', `"${ref.path}" changed while berth worked on it (${code}); try again`, { path: ref.path });
        }
        throw err;
      } finally {
        if (!kept) closeQuietly(rootFd);
      }
    }

    return {
      /** Close the scope roots kept open (keepOpen); the tools still work, opening them per call. */
      close: closeRoots,
      listFolders(scope: z.infer<typeof ListScopeSchema>): FolderEntry[] {
        const { project: p, caller } = current();
        const idOf = (key: string) => workspaceIdOf(deps.secret(), p.metadata.name, key);
        const entry = (name: string, s: Scope): FolderEntry => ({ name, uuid: idOf(name), scope: s, path: '/' });
        // A session-mode caller's own folder is its session's workspace (ownId); otherwise the tenant's.
        const mine = (s: Scope): FolderEntry => ({
          name: caller.tenantKey,
          uuid: session === undefined ? idOf(caller.tenantKey) : ownId,
          scope: s,
          path: '/',
        });
        switch (scope) {
          case 'my_private':
            return [mine('private')];
          case 'my_shared':
            return [mine('shared')];
          case 'team_private':
            return caller.teams.map((t) => entry(t, 'private'));
          case 'team_shared':
            return caller.teams.map((t) => entry(t, 'shared'));
          case 'org_shared':
            return listWorkspaces(p)
              .filter((w) => !w.session && w.tenant_key !== caller.tenantKey)
              .filter((w) => decide(caller, folderOf(p, caller, w.id), 'shared', 'read').allow)
              .slice(0, MAX_FOLDERS)
              .map((w) => ({ name: w.tenant_key, uuid: w.id, scope: 'shared' as const, path: '/' }));
        }
      },
      /** The caller's own workspace profile (ecosystem, package manager, format/lint/test commands). */
      profile(): WorkspaceProfile {
        return profileOf(project(), ownId);
      },
      read: (ref: z.infer<typeof FolderRefSchema>): { path: string; content: string } => {
        const content = guarded('read_file_by_id', ref, 'read', (fd) => sandboxReadText(fd, ref.path));
        if (content === undefined)
          throw new BerthError('CONFIG_INVALID', `no file "${ref.path}"`, { issues: [{ field: 'path', reason: 'does not exist' }] });
        return { path: ref.path, content };
      },
      write: (ref: z.infer<typeof FolderRefSchema>, content: string): FileInfo =>
        guarded('write_file_by_id', ref, 'write', (fd) => sandboxWrite(fd, ref.path, Buffer.from(content, 'utf8'), deps.owner()), true),
      remove: (ref: z.infer<typeof FolderRefSchema>): { path: string; deleted: boolean } => ({
        path: ref.path,
        deleted: guarded('delete_file_by_id', ref, 'delete', (fd) => sandboxDelete(fd, ref.path)),
      }),
      info: (ref: z.infer<typeof FolderRefSchema>): FileInfo | { path: string; exists: false } =>
        guarded('get_file_info_by_id', ref, 'read', (fd) => sandboxInfo(fd, ref.path)) ?? { path: ref.path, exists: false },
    };
  }

  /** Profile of one workspace of a project (empty when the workspace does not exist yet). */
  function profileOf(project: Project, folderId: string): WorkspaceProfile {
    const fd = openScopeRoot(project.paths.dir, folderId, 'private', false);
    if (fd === undefined) return detectProfile({ files: new Set() });
    try {
      return workspaceProfile(fd, `${project.paths.dir}/${folderId}`);
    } finally {
      closeQuietly(fd);
    }
  }

  return { forCaller, profileOf, violations: (project: string) => violations.get(project) ?? 0 };
}

export type FileTools = ReturnType<typeof createFileTools>;
export type FileToolsCaller = ReturnType<FileTools['forCaller']>;
