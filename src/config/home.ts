import { join, resolve } from 'node:path';
import type { BerthConfig } from './berth-config.js';
import { own } from '../base/own.js';

/** Where everything of one installation lives. Pure: paths only, nothing touched. */
export interface HomePaths {
  root: string;
  configFile: string;
  /** berth's private state: never mounted into a container, never tenant-writable. */
  stateDir: string;
  secretFile: string;
  adminTokenFile: string;
  tmpDir: string;
  trashDir: string;
  /** Downloads worth keeping between builds (the agent CLIs' npm tarballs). */
  cacheDir: string;
}

/**
 * The home when none is named (--home, $BERTH_HOME): the current directory if it already is a
 * berth home (it has berth.yaml or .berth/: an older berth's default, kept working), else a
 * directory outside any source checkout, $XDG_DATA_HOME/berth or ~/.local/share/berth. Pure.
 */
export function defaultHome(env: NodeJS.ProcessEnv, cwd: string, isHome: (dir: string) => boolean): string {
  if (isHome(cwd)) return cwd;
  const data = env.XDG_DATA_HOME && env.XDG_DATA_HOME.startsWith('/') ? env.XDG_DATA_HOME : join(env.HOME || '/root', '.local', 'share');
  return join(data, 'berth');
}

export function homePaths(root: string): HomePaths {
  const stateDir = join(root, '.berth');
  return {
    root,
    configFile: join(root, 'berth.yaml'),
    stateDir,
    secretFile: join(stateDir, 'secret'),
    adminTokenFile: join(stateDir, 'admin-token'),
    tmpDir: join(stateDir, 'tmp'),
    trashDir: join(stateDir, 'trash'),
    cacheDir: join(stateDir, 'cache'),
  };
}

export interface ProjectPaths {
  name: string;
  dir: string;
  metadataFile: string;
  sessionsDir: string;
  workspacesDir: string;
  memoryDir: string;
  /** Private per-project state: protected-path snapshots, the workspace registry. */
  stateDir: string;
  protectedDir: string;
  workspaceRegistry: string;
}

/** Where private workspaces live by default (workspaces_path, relative to the home). */
export function projectsDirOf(config: BerthConfig, home: HomePaths): string {
  return resolve(home.root, config.workspaces_path);
}

/** A project's private workspace: the operator's override, else <workspaces_path>/<name>. */
export function privateWorkspaceOf(config: BerthConfig, home: HomePaths, name: string): string {
  return own(config.projects, name)?.private_workspace ?? join(projectsDirOf(config, home), name);
}

export function projectPaths(home: HomePaths, name: string, dir: string): ProjectPaths {
  const stateDir = join(home.stateDir, 'projects', name);
  return {
    name,
    dir,
    metadataFile: join(dir, 'metadata.json'),
    sessionsDir: join(dir, 'sessions'),
    workspacesDir: join(dir, 'workspaces'),
    memoryDir: join(dir, 'memory'),
    stateDir,
    protectedDir: join(stateDir, 'protected'),
    workspaceRegistry: join(stateDir, 'workspaces.jsonl'),
  };
}
