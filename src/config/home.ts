import { join } from 'node:path';

/** Where everything of one installation lives. Pure: paths only, nothing touched. */
export interface HomePaths {
  root: string;
  configFile: string;
  projectsDir: string;
  /** berth's private state: never mounted into a container, never tenant-writable. */
  stateDir: string;
  secretFile: string;
  adminTokenFile: string;
  tmpDir: string;
  trashDir: string;
}

export function homePaths(root: string): HomePaths {
  const stateDir = join(root, '.berth');
  return {
    root,
    configFile: join(root, 'berth.yaml'),
    projectsDir: join(root, 'projects'),
    stateDir,
    secretFile: join(stateDir, 'secret'),
    adminTokenFile: join(stateDir, 'admin-token'),
    tmpDir: join(stateDir, 'tmp'),
    trashDir: join(stateDir, 'trash'),
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

export function projectPaths(home: HomePaths, name: string): ProjectPaths {
  const dir = join(home.projectsDir, name);
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
