import fs from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { BerthError, errnoOf } from '../errors.js';
import { at, closeQuietly, openChildDir, openRootDir, withFd } from '../fs/fd-path.js';
import { readJsonFile } from '../fs/json-file.js';
import { copyEntry, displace, ensureDirPath, kindAt, writeNewFileAt, type Owner, type Skipped } from '../fs/tree.js';
import { SEED_ENTRIES, type ProtectedSnapshot } from '../plan/run-plan.js';
import type { Project } from './projects.js';
import { workspaceIdFor } from './secret.js';

export const TenantKeySchema = z
  .string()
  .min(1, 'must not be empty')
  .max(1024, 'must be at most 1024 characters')
  .refine((key) => !key.includes('\0'), 'must not contain NUL')
  .describe('Who is talking: "signal:+49…", "web:alice", any string. Never used as a path.');

export interface Workspace {
  id: string;
  /** Host path of the workspace directory. */
  dir: string;
  created: boolean;
  /** Seed entries that were not copied (links, special files, over-size files). */
  skipped: Skipped[];
}

/** The registry's record of a workspace (berth's state, never in a container). */
export const WorkspaceRecordSchema = z.object({
  id: z.string(),
  tenant_key: z.string(),
  session: z.string().optional().describe('Set for a session-mode workspace: the one session it belongs to.'),
  created_at: z.string(),
});
export type WorkspaceRecord = z.infer<typeof WorkspaceRecordSchema>;


/**
 * First contact creates workspaces/<id>/ (seeded from the project when isolated); later calls
 * only verify it. Every step is a no-follow open from the project directory, so a link or file
 * a tenant planted where a directory belongs is moved aside, never followed.
 */
export function ensureWorkspace(opts: {
  project: Project;
  secret: Buffer;
  tenantKey: string;
  /** What the id is derived from: the tenant key, or a per-session key (session workspace mode). */
  workspaceKey?: string;
  /** The id, when the caller has it already (a session keeps its workspace's id). */
  id?: string;
  session?: string;
  owner?: Owner;
}): Workspace {
  const { project, owner } = opts;
  const parsed = TenantKeySchema.safeParse(opts.tenantKey);
  if (!parsed.success) {
    throw new BerthError('CONFIG_INVALID', 'tenant key is invalid', {
      issues: [{ field: 'user', reason: parsed.error.issues[0]?.message ?? 'invalid' }],
    });
  }
  const id = opts.id ?? workspaceIdFor(opts.secret, project.metadata.name, opts.workspaceKey ?? opts.tenantKey);
  const shown = `projects/${project.metadata.name}`;
  const skipped: Skipped[] = [];
  let created = false;

  withFd(openRootDir(project.paths.dir), (projectFd) => {
    const wsRoot = ensureDirPath(projectFd, ['workspaces'], { owner, displace: true, shownRoot: shown });
    try {
      const kind = kindAt(wsRoot, id);
      if (kind === 'dir') return;
      if (kind !== 'missing') displace(wsRoot, id);
      try {
        fs.mkdirSync(at(wsRoot, id), { mode: 0o755 });
      } catch (err) {
        if (errnoOf(err) === 'EEXIST') return; // a concurrent first contact won
        throw err;
      }
      created = true;
      const wsFd = openChildDir(wsRoot, id, `${shown}/workspaces/${id}`);
      if (wsFd === undefined) throw new BerthError('INTERNAL', `workspace ${id} vanished while being created`);
      withFd(wsFd, (fd) => {
        if (owner) fs.fchownSync(fd, owner.uid, owner.gid);
        if (!project.metadata.workspace_isolation) return;
        for (const entry of SEED_ENTRIES) copyEntry(projectFd, fd, entry, { shownPath: entry, owner, skipped });
      });
    } finally {
      closeQuietly(wsRoot);
    }
  });

  if (created) recordWorkspace(project, { id, tenant_key: opts.tenantKey, ...(opts.session ? { session: opts.session } : {}), created_at: new Date().toISOString() });
  return { id, dir: join(project.paths.workspacesDir, id), created, skipped };
}


/** The id → tenant key registry lives in berth's private state, out of every container's reach. */
export function recordWorkspace(project: Project, record: WorkspaceRecord): void {
  const dir = join(project.paths.stateDir, 'workspaces');
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  try {
    fs.writeFileSync(join(dir, `${record.id}.json`), `${JSON.stringify(record)}\n`, { flag: 'wx', mode: 0o600 });
  } catch (err) {
    if (errnoOf(err) !== 'EEXIST') throw err;
  }
}

/** One registry record, by id (a direct lookup: no scan). */
export function readWorkspaceRecord(project: Project, id: string): WorkspaceRecord | undefined {
  if (!/^[0-9a-f]{32}$/.test(id)) return undefined;
  return readJsonFile(join(project.paths.stateDir, 'workspaces', `${id}.json`), WorkspaceRecordSchema);
}

export function listWorkspaces(project: Project): WorkspaceRecord[] {
  const dir = join(project.paths.stateDir, 'workspaces');
  let names: string[];
  try {
    names = fs.readdirSync(dir);
  } catch (err) {
    if (errnoOf(err) === 'ENOENT') return [];
    throw err;
  }
  return names
    .filter((n) => n.endsWith('.json'))
    .map((n) => WorkspaceRecordSchema.parse(JSON.parse(fs.readFileSync(join(dir, n), 'utf8'))))
    .sort((a, b) => a.created_at.localeCompare(b.created_at));
}

/**
 * A read-only copy of the project's seed (what every new tenant gets) for one workflow step, in
 * a berth-owned directory: links and special files are not copied (no-follow), and a missing
 * entry becomes an empty one, so the step can neither change the seed nor plant a new one.
 */
export function copySeedsForRun(project: Project, dst: string): ProtectedSnapshot {
  fs.mkdirSync(dst, { recursive: true, mode: 0o755 });
  const entries = withFd(openRootDir(project.paths.dir), (src) =>
    withFd(openRootDir(dst), (out) =>
      SEED_ENTRIES.map((path) => {
        copyEntry(src, out, path, { shownPath: path });
        if (kindAt(out, path) === 'missing') {
          if (path === 'AGENTS.md') writeNewFileAt(out, path, '');
          else fs.mkdirSync(at(out, path), { mode: 0o755 });
        }
        return { path, kind: kindAt(out, path) === 'dir' ? ('dir' as const) : ('file' as const) };
      }),
    ),
  );
  return { dir: dst, entries };
}
