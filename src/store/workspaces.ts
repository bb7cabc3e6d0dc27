import fs from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { BerthError, errnoOf } from '../base/errors.js';
import { at, closeQuietly, openChildDir, openNoFollow, openRootDir, withFd } from '../fs/fd-path.js';
import { readJsonFile } from '../fs/json-file.js';
import { diskUsage } from '../fs/du.js';
import { ensureLoopQuota, quotaUsage, type QuotaEnsured, type QuotaHolds } from '../fs/loop-quota.js';
import { isMounted, mountPoints } from '../fs/mount-table.js';
import { copyEntry, displace, ensureDirPath, kindAt, openDirPath, writeNewFileAt, type Owner, type Skipped } from '../fs/tree.js';
import { SEED_ENTRIES, type ProtectedSnapshot, type RunWorkspace } from '../plan/run-plan.js';
import type { Project } from './projects.js';
import { readdirIfExists } from '../fs/dir.js';

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
  /** It is its own filesystem (disk_quotas: loop), mounted: the kernel bounds its bytes. */
  ownFilesystem: boolean;
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
 * A tenant's (or session's) workspace of the project, by id: the one place its directory is joined
 * and the project's isolation read. A run takes it once (runs/run-context.ts) and carries it;
 * what works without a run (start-up mounts, the admin's usage view, a session's root_dir) calls this too.
 */
export function workspaceOf(project: Project, id: string): RunWorkspace {
  return { id, dir: join(project.paths.workspacesDir, id), isolated: project.metadata.workspace_isolation };
}

/**
 * First contact creates workspaces/<id>/ (seeded from the project when isolated); later calls
 * only verify it. Every step is a no-follow open from the project directory, so a link or file
 * a tenant planted where a directory belongs is moved aside, never followed.
 */
export function ensureWorkspace(opts: {
  project: Project;
  /** Which workspace, where, and whether it is isolated (seeded and bounded only then): as the run decided. */
  workspace: RunWorkspace;
  /** Whose it is (the registry's record); never used as a path. */
  tenantKey: string;
  session?: string;
  owner?: Owner;
  /** berth.yaml disk_quotas and the project's limits: the kernel bound for this workspace. */
  quota?: WorkspaceQuota;
}): Workspace {
  const { project, owner, workspace } = opts;
  const parsed = TenantKeySchema.safeParse(opts.tenantKey);
  if (!parsed.success) {
    throw new BerthError('CONFIG_INVALID', 'tenant key is invalid', {
      issues: [{ field: 'user', reason: parsed.error.issues[0]?.message ?? 'invalid' }],
    });
  }
  const { id } = workspace;
  const shown = `projects/${project.metadata.name}`;
  const skipped: Skipped[] = [];
  let created = false;
  let ownFilesystem = false;

  withFd(openRootDir(project.paths.dir), (projectFd) => {
    const wsRoot = ensureDirPath(projectFd, ['workspaces'], { owner, displace: true, shownRoot: shown });
    try {
      const kind = kindAt(wsRoot, id);
      if (kind === 'dir') {
        ownFilesystem = quotaFor(project, wsRoot, workspace, opts);
        return;
      }
      if (kind !== 'missing') displace(wsRoot, id);
      try {
        fs.mkdirSync(at(wsRoot, id), { mode: 0o755 });
      } catch (err) {
        if (errnoOf(err) === 'EEXIST') return; // a concurrent first contact won
        throw err;
      }
      // The quota is mounted before the seed is copied in, so the seed lands inside it.
      try {
        ownFilesystem = quotaFor(project, wsRoot, workspace, opts);
      } catch (err) {
        try {
          fs.rmdirSync(at(wsRoot, id)); // nothing half-created: the next contact starts over
        } catch {
          // something else is there now (moved in meanwhile): the next contact displaces it
        }
        throw err;
      }
      created = true;
      const wsFd = openChildDir(wsRoot, id, `${shown}/workspaces/${id}`);
      if (wsFd === undefined) throw new BerthError('INTERNAL', `workspace ${id} vanished while being created`);
      withFd(wsFd, (fd) => {
        if (owner) fs.fchownSync(fd, owner.uid, owner.gid);
        if (!workspace.isolated) return;
        try {
          for (const entry of SEED_ENTRIES) copyEntry(projectFd, fd, entry, { shownPath: entry, owner, skipped });
        } catch (err) {
          // The seed never lands on an existing entry (O_EXCL): one there means another directory was moved in.
          if (errnoOf(err) !== 'EEXIST') throw err;
          throw new BerthError(
            'E_SANDBOX_VIOLATION',
            `${shown}/workspaces/${id} changed while it was being created`,
            { path: `${shown}/workspaces/${id}` },
            { cause: err },
          );
        }
      });
    } finally {
      closeQuietly(wsRoot);
    }
  });

  if (created)
    recordWorkspace(project, {
      id,
      tenant_key: opts.tenantKey,
      ...(opts.session ? { session: opts.session } : {}),
      created_at: new Date().toISOString(),
    });
  return { id, dir: workspace.dir, created, skipped, ownFilesystem };
}

export interface WorkspaceQuota {
  mode: 'off' | 'loop';
  sizeBytes: number;
  files: number;
  /** Where a pre-quota workspace is mounted while its content is copied in. */
  scratchDir: string;
  /** What else runs: a container of this workspace, or one that sees every workspace (shared mode). */
  holds?: QuotaHolds;
  onEnsured?: (id: string, ensured: QuotaEnsured) => void;
}

/** A workspace's ext4 image, in berth's private state (never in a container's reach). */
export const quotaImageOf = (project: Project, id: string) => join(project.paths.stateDir, 'quotas', `${id}.ext4`);

/**
 * A workspace that has an image always runs with it mounted, whatever disk_quotas says now: its
 * content lives there, and a bare directory written meanwhile would be shadowed by the next mount.
 * Every step reaches the workspace through wsRoot (workspaces/, opened no-follow), never its path.
 */
function quotaFor(project: Project, wsRoot: number, workspace: RunWorkspace, opts: { quota?: WorkspaceQuota; owner?: Owner }): boolean {
  const { quota } = opts;
  if (!quota || !workspace.isolated) return false;
  const image = quotaImageOf(project, workspace.id);
  if (quota.mode !== 'loop' && !fs.existsSync(image)) return false;
  const spec = {
    image,
    parentFd: wsRoot,
    name: workspace.id,
    mountpoint: workspace.dir,
    sizeBytes: quota.sizeBytes,
    files: quota.files,
    owner: opts.owner,
  };
  const ensured = ensureLoopQuota(spec, quota.scratchDir, quota.holds);
  quota.onEnsured?.(workspace.id, ensured);
  return ensured.mounted;
}

/**
 * At startup: mount every workspace image that is not mounted (after a reboot none are), before
 * anything can write into a bare workspace directory. One that cannot be mounted does not stop
 * the others: it is reported, and its own runs fail until it can.
 */
export function mountQuotaImages(
  project: Project,
  quota: WorkspaceQuota,
  owner?: Owner,
): { looked: number; failed: Array<{ id: string; err: unknown }> } {
  let names: string[];
  try {
    names = fs.readdirSync(join(project.paths.stateDir, 'quotas'));
  } catch {
    return { looked: 0, failed: [] };
  }
  const ids = names.map((n) => /^([0-9a-f]{32})\.ext4$/.exec(n)?.[1]).filter((id): id is string => id !== undefined);
  const wsRoot = withFd(openRootDir(project.paths.dir), (projectFd) =>
    openDirPath(projectFd, ['workspaces'], `projects/${project.metadata.name}`),
  );
  if (wsRoot === undefined) return { looked: 0, failed: [] };
  return withFd(wsRoot, (root) => {
    const present = ids.filter((id) => kindAt(root, id) === 'dir'); // a link where a workspace was is not followed
    const failed: Array<{ id: string; err: unknown }> = [];
    for (const id of present) {
      try {
        quotaFor(project, root, workspaceOf(project, id), { quota, owner });
      } catch (err) {
        failed.push({ id, err });
      }
    }
    return { looked: present.length, failed };
  });
}

/**
 * Will this run change the workspace's filesystem (make its image, mount it, resize it)? Then no
 * container may have the workspace mounted meanwhile: the caller lets its own go first.
 */
export function quotaChangePending(project: Project, workspace: RunWorkspace, quota: WorkspaceQuota): boolean {
  if (!workspace.isolated) return false;
  let size: number | undefined;
  try {
    size = fs.statSync(quotaImageOf(project, workspace.id)).size;
  } catch {
    return quota.mode === 'loop'; // a first image (of a new workspace too: what runs decides whether it is made now)
  }
  return size !== quota.sizeBytes || !isMounted(workspace.dir);
}

/** What a workspace holds: from its filesystem when it has a quota (no walk), else a capped walk. */
export function workspaceUsage(
  project: Project,
  id: string,
  mounted: ReadonlySet<string> = new Set(mountPoints()),
): { size_bytes: number; quota?: { size_bytes: number; files: number; files_max: number } } {
  const { dir } = workspaceOf(project, id);
  if (!mounted.has(dir)) return { size_bytes: diskUsage(dir).bytes };
  // statfs through a no-follow descriptor: a link swapped in would report some other filesystem.
  const u = withFd(openNoFollow(dir).fd, (fd) => quotaUsage(`/proc/self/fd/${fd}`));
  return { size_bytes: u.usedBytes, quota: { size_bytes: u.sizeBytes, files: u.files, files_max: u.filesMax } };
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
  return readdirIfExists(dir)
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
