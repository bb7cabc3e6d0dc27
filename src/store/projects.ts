import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import { dirname, join } from 'node:path';
import { agentOwner, type BerthConfig } from '../config/berth-config.js';
import { homePaths, privateWorkspaceOf, projectPaths, projectsDirOf, type HomePaths, type ProjectPaths } from '../config/home.js';
import {
  ProjectMetadataSchema,
  ProjectNameSchema,
  ProjectUpdateSchema,
  type ProjectMetadata,
  type ProjectMetadataInput,
  type ProjectUpdate,
} from '../config/metadata.js';
import { parseOrThrow } from '../config/parse.js';
import { BerthError, errnoOf } from '../base/errors.js';
import { parsesAs } from '../fs/json-file.js';
import { withFileLock } from '../fs/lock.js';
import { releaseMountsUnder } from '../fs/loop-quota.js';
import { atomicWriteFile, type Owner } from '../fs/tree.js';
import { readSnapshotPointer, takeProtectedSnapshot, type SnapshotPointer } from './protected-snapshot.js';
import { claimProjectName } from './name-claim.js';
import { starterFiles } from './starter.js';
import { readdirIfExists } from '../fs/dir.js';

export interface Project {
  paths: ProjectPaths;
  metadata: ProjectMetadata;
  snapshot: SnapshotPointer | undefined;
}

export interface ProjectStore {
  home: HomePaths;
  /** Where projects without an override live (workspaces_path). */
  projectsDir(): string;
  names(): string[];
  create(input: ProjectMetadataInput): Project;
  get(name: string): Project;
  list(): Project[];
  /** A patch, or one made from the settings as they are under the project lock (a read-modify-write that loses no concurrent change). */
  update(name: string, patch: ProjectUpdate | ((current: ProjectMetadata) => ProjectUpdate)): Promise<Project>;
  /** Move the project (and berth's state for it) to the trash; returns where it went. */
  trash(name: string): Promise<string>;
}

/** Where a trashed project's parts are (ProjectStore.trash's target): its directory, and berth's state for it. */
export function trashedProjectPaths(target: string): Pick<ProjectPaths, 'dir' | 'stateDir' | 'workspacesDir'> {
  const dir = join(target, 'project');
  return { dir, stateDir: join(target, 'state'), workspacesDir: join(dir, 'workspaces') };
}

/** The agent user owns what tenants may write; berth's own files stay root's. */
function chownTree(path: string, owner: Owner | undefined): void {
  if (!owner) return;
  fs.lchownSync(path, owner.uid, owner.gid);
  const stat = fs.lstatSync(path);
  if (stat.isDirectory()) for (const child of fs.readdirSync(path)) chownTree(join(path, child), owner);
}

export function readMetadata(paths: ProjectPaths): ProjectMetadata {
  let text: string;
  try {
    text = fs.readFileSync(paths.metadataFile, 'utf8');
  } catch (err) {
    if (errnoOf(err) === 'ENOENT' || errnoOf(err) === 'ENOTDIR') {
      throw new BerthError('PROJECT_NOT_FOUND', `project "${paths.name}" does not exist`, {
        hint: `create it with "berth project create ${paths.name}"`,
      });
    }
    throw err;
  }
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch (err) {
    throw new BerthError('CONFIG_INVALID', `${paths.metadataFile} is not valid JSON: ${(err as Error).message}`);
  }
  const metadata = parseOrThrow(ProjectMetadataSchema, data, paths.metadataFile);
  if (metadata.name !== paths.name) {
    throw new BerthError('CONFIG_INVALID', `${paths.metadataFile} is invalid`, {
      issues: [{ field: 'name', reason: `is "${metadata.name}" but the directory is "${paths.name}"` }],
    });
  }
  return metadata;
}

/** Staging directories a crashed create left behind (never a project: those are renamed out). */
function removeStaleStaging(dir: string, prefix: string): void {
  const cutoff = Date.now() - 3600_000;
  for (const name of fs.readdirSync(dir)) {
    const full = join(dir, name);
    // Another create may move its own staging directory away between the listing and the look.
    const stat = name.startsWith(prefix) ? fs.lstatSync(full, { throwIfNoEntry: false }) : undefined;
    if (stat && stat.mtimeMs < cutoff) fs.rmSync(full, { recursive: true, force: true });
  }
}

function serialize(metadata: ProjectMetadata): string {
  return `${JSON.stringify(metadata, null, 2)}\n`;
}

/** The steps of a create, in order; a crash after any of them must leave a whole project or none. */
export const CREATE_STEPS = ['staged', 'snapshot', 'claimed', 'state-moved', 'project-moved'] as const;
export type CreateStep = (typeof CREATE_STEPS)[number];

export function createProjectStore(opts: {
  root: string;
  config: () => BerthConfig;
  /** Called after each create step; tests use it to crash the process at a precise point. */
  onCreateStep?: (step: CreateStep) => void;
}): ProjectStore {
  const step = opts.onCreateStep ?? (() => undefined);
  const home = homePaths(opts.root);
  const ownerOf = (): Owner | undefined => agentOwner(opts.config());
  const projectsDir = () => projectsDirOf(opts.config(), home);

  function pathsOf(name: string): ProjectPaths {
    parseOrThrow(ProjectNameSchema, name, 'project name');
    return projectPaths(home, name, privateWorkspaceOf(opts.config(), home, name));
  }

  function get(name: string): Project {
    const paths = pathsOf(name);
    const metadata = readMetadata(paths);
    return { paths, metadata, snapshot: readSnapshotPointer(paths.protectedDir) };
  }

  /**
   * All or nothing: the project is built in a staging directory and renamed into place under a
   * claim on its name, so a crash or a refusal leaves no half-made project, and of concurrent
   * creates of one name exactly one wins.
   */
  function create(input: ProjectMetadataInput): Project {
    const metadata = parseOrThrow(ProjectMetadataSchema, input, 'project settings');
    const paths = pathsOf(metadata.name);
    const owner = ownerOf();
    if (fs.existsSync(paths.dir)) {
      throw new BerthError('PROJECT_EXISTS', `project "${metadata.name}" already exists`);
    }
    const parent = dirname(paths.dir);
    fs.mkdirSync(parent, { recursive: true });
    fs.mkdirSync(home.tmpDir, { recursive: true, mode: 0o700 });
    removeStaleStaging(parent, '.berth-create-');
    removeStaleStaging(home.tmpDir, 'create-');
    // Staged next to its final place (one filesystem, so the final rename is atomic); hidden name.
    const tag = `${metadata.name}-${randomBytes(6).toString('hex')}`;
    const staging = join(parent, `.berth-create-${tag}`);
    const stagedState = join(home.tmpDir, `create-${tag}.state`);
    try {
      fs.mkdirSync(staging, { mode: 0o755 });
      for (const [rel, content] of Object.entries(starterFiles(metadata.name))) {
        fs.mkdirSync(join(staging, rel, '..'), { recursive: true });
        fs.writeFileSync(join(staging, rel), content, { mode: 0o644, flag: 'wx' });
      }
      fs.mkdirSync(join(staging, 'workspaces'));
      chownTree(staging, owner);
      fs.mkdirSync(join(staging, 'sessions'), { mode: 0o700 });
      fs.mkdirSync(join(staging, 'memory'), { mode: 0o755 });
      fs.mkdirSync(join(staging, 'workflows'), { mode: 0o755 });
      fs.writeFileSync(join(staging, 'metadata.json'), serialize(metadata), { mode: 0o644, flag: 'wx' });
      // Parsed back before the rename publishes it, like every write of a project or operator file.
      parsesAs(ProjectMetadataSchema)(fs.readFileSync(join(staging, 'metadata.json'), 'utf8'));
      step('staged');
      const snapshot = takeProtectedSnapshot({
        sourceDir: staging,
        protectedDir: join(stagedState, 'protected'),
        entries: metadata.protected_paths,
      });
      step('snapshot');
      const release = claimProjectName(join(home.stateDir, 'locks'), metadata.name);
      try {
        step('claimed');
        if (fs.existsSync(paths.dir)) throw new BerthError('PROJECT_EXISTS', `project "${metadata.name}" already exists`);
        // State first, project last: a project directory is never there without its state.
        // State without a project is what a crash between the two renames leaves: stale, replaced.
        fs.mkdirSync(join(home.stateDir, 'projects'), { recursive: true });
        fs.rmSync(paths.stateDir, { recursive: true, force: true });
        fs.renameSync(stagedState, paths.stateDir);
        step('state-moved');
        fs.renameSync(staging, paths.dir);
        step('project-moved');
      } finally {
        release();
      }
      return { paths, metadata, snapshot };
    } finally {
      fs.rmSync(staging, { recursive: true, force: true });
      fs.rmSync(stagedState, { recursive: true, force: true });
    }
  }

  /** Names of projects under workspaces_path, plus those the operator placed elsewhere. */
  function names(): string[] {
    const all = new Set([...readdirIfExists(projectsDir()), ...Object.keys(opts.config().projects)]);
    return [...all]
      .filter(
        (n) => ProjectNameSchema.safeParse(n).success && fs.existsSync(join(privateWorkspaceOf(opts.config(), home, n), 'metadata.json')),
      )
      .sort();
  }

  const list = () => names().map(get);

  /** One admin change at a time per project, across processes (CLI and server alike). */
  async function withProjectLock<T>(paths: ProjectPaths, fn: () => T): Promise<T> {
    readMetadata(paths); // PROJECT_NOT_FOUND before taking a lock
    return withFileLock(paths.stateDir, 'metadata.lock', fn);
  }

  async function update(name: string, rawPatch: ProjectUpdate | ((current: ProjectMetadata) => ProjectUpdate)): Promise<Project> {
    const parse = (p: ProjectUpdate) => parseOrThrow(ProjectUpdateSchema, p, 'project update');
    // A given patch is checked before the lock is waited for; a made one, from the settings under it.
    const given = typeof rawPatch === 'function' ? undefined : parse(rawPatch);
    const paths = pathsOf(name);
    return withProjectLock(paths, () => {
      const current = readMetadata(paths);
      const patch = given ?? parse((rawPatch as (current: ProjectMetadata) => ProjectUpdate)(current));
      const merged = parseOrThrow(
        ProjectMetadataSchema,
        { ...current, ...patch, limits: { ...current.limits, ...patch.limits } },
        'project settings',
      );
      // Protection is re-taken from the project directory on every admin update.
      const snapshot = takeProtectedSnapshot({ sourceDir: paths.dir, protectedDir: paths.protectedDir, entries: merged.protected_paths });
      atomicWriteFile(paths.metadataFile, serialize(merged), 0o644, parsesAs(ProjectMetadataSchema));
      return { paths, metadata: merged, snapshot };
    });
  }

  async function trash(name: string): Promise<string> {
    const paths = pathsOf(name);
    const target = join(home.trashDir, `${name}-${new Date().toISOString().replace(/[:.]/g, '-')}-${randomBytes(3).toString('hex')}`);
    fs.mkdirSync(target, { recursive: true, mode: 0o700 });
    await withProjectLock(paths, () => {
      // Workspace quotas are mounts: they go first (their images move with the state).
      releaseMountsUnder(paths.workspacesDir);
      // Renaming the project directory is the one step that makes it gone; state follows.
      fs.renameSync(paths.dir, trashedProjectPaths(target).dir);
    });
    fs.renameSync(paths.stateDir, trashedProjectPaths(target).stateDir);
    return target;
  }

  return { home, projectsDir, names, create, get, list, update, trash };
}
