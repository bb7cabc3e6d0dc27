import type { PermissionLevel } from '../config/session.js';

/**
 * What each permission level gets. The first layer is the container (egress, memory mount);
 * the second is the policy for tools berth runs on the agent's behalf. Pure data. No level has
 * a network: every container reaches its model through berth's model gateway, and at medium
 * and high the project's allowed hosts through berth's egress proxy.
 */
export interface LevelProfile {
  /** May reach the project's allowlisted hosts through berth's egress proxy. */
  egress: boolean;
  memoryRead: boolean;
  memoryWrite: boolean;
  memoryBootstrap: boolean;
  shell: ShellProfile;
}

export interface ShellProfile {
  /** Binaries allowed; null: any binary (writes still bounded to the workspace). */
  allowBins: ReadonlySet<string> | null;
  /** May read paths outside the workspace (e.g. cp /outside/file ./). */
  readOutside: boolean;
}

/** Workspace-local file management. */
export const LOW_BINS = [
  'ls',
  'cat',
  'head',
  'tail',
  'wc',
  'grep',
  'find',
  'mkdir',
  'touch',
  'cp',
  'mv',
  'rm',
  'rmdir',
  'echo',
  'pwd',
  'stat',
  'du',
  'sort',
  'uniq',
  'diff',
  'sed',
  'tr',
  'cut',
  'sha256sum',
  'md5sum',
  'tar',
  'gzip',
  'gunzip',
  'true',
  'false',
  'test',
  'basename',
  'dirname',
  'realpath',
  'ln',
  'chmod',
] as const;
/** Non-mutating information commands added at medium. */
export const MEDIUM_EXTRA_BINS = [
  'curl',
  'wget',
  'whoami',
  'id',
  'uname',
  'hostname',
  'date',
  'uptime',
  'env',
  'printenv',
  'df',
  'free',
  'neofetch',
  'which',
  'nproc',
  'ps',
] as const;

const LOW = new Set<string>(LOW_BINS);
const MEDIUM = new Set<string>([...LOW_BINS, ...MEDIUM_EXTRA_BINS]);

export const LEVEL_PROFILES: Record<PermissionLevel, LevelProfile> = {
  low: { egress: false, memoryRead: false, memoryWrite: false, memoryBootstrap: false, shell: { allowBins: LOW, readOutside: false } },
  medium: { egress: true, memoryRead: true, memoryWrite: false, memoryBootstrap: true, shell: { allowBins: MEDIUM, readOutside: false } },
  high: { egress: true, memoryRead: true, memoryWrite: true, memoryBootstrap: true, shell: { allowBins: null, readOutside: true } },
};

/** send_file and `schedule` are at every level: send_file only sends the tenant's own workspace file to its own chat; berth.yaml `schedules.who` says who may schedule (admin/schedules.ts). */
export type SessionTool = 'shell_run' | 'memory_search' | 'memory_write' | 'send_file' | 'schedule';

/** Tool policy (first check, before dispatch). The memory adapter checks again itself. */
export function toolAllowed(level: PermissionLevel, tool: SessionTool): boolean {
  const p = LEVEL_PROFILES[level];
  if (tool === 'memory_search') return p.memoryRead;
  if (tool === 'memory_write') return p.memoryWrite;
  return true;
}
