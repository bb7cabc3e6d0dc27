import fs from 'node:fs';
import { isAbsolute, normalize, resolve, sep } from 'node:path';
import type { FieldIssue } from '../errors.js';
import { PROJECT_NAME_PATTERN } from './metadata.js';
import type { BerthConfig, Grant } from './berth-config.js';

/** Paths no shared area may be, contain, or sit inside: the engine's sockets and state. */
export const ENGINE_PATHS = ['/var/run', '/run', '/var/lib/docker', '/var/lib/containerd', '/etc/docker'];

export function grantName(g: Grant): string {
  return typeof g === 'string' ? g : g.name;
}
export function grantMode(g: Grant): 'ro' | 'rw' {
  return typeof g === 'string' ? 'ro' : g.mode;
}

const within = (child: string, parent: string) => child === parent || child.startsWith(parent.endsWith(sep) ? parent : parent + sep);
const overlaps = (a: string, b: string) => within(a, b) || within(b, a);

/**
 * Rules on berth.yaml beyond its shape: shared areas absolute, canonical, existing directories
 * that overlap neither each other, nor berth's own trees, nor the engine's; grants naming areas
 * that exist; overrides absolute. fs is only read (realpath, stat). Returns every problem.
 */
export function checkOperatorConfig(config: BerthConfig, home: string): FieldIssue[] {
  const issues: FieldIssue[] = [];
  const workspacesPath = resolve(home, config.workspaces_path);
  const berthState = resolve(home, '.berth');
  const areas = Object.entries(config.shared_workspaces);

  for (const [name, path] of areas) {
    const field = `shared_workspaces.${name}`;
    const problem = areaProblem(path, workspacesPath, berthState);
    if (problem) {
      issues.push({ field, reason: problem });
      continue;
    }
    for (const [other, otherPath] of areas) {
      if (other < name && overlaps(path, otherPath)) issues.push({ field, reason: `overlaps shared area "${other}" (${otherPath})` });
    }
  }

  for (const [project, settings] of Object.entries(config.projects)) {
    if (!PROJECT_NAME_PATTERN.test(project)) issues.push({ field: `projects.${project}`, reason: 'is not a valid project name' });
    const override = settings.private_workspace;
    if (override !== undefined) {
      const field = `projects.${project}.private_workspace`;
      if (!isAbsolute(override) || normalize(override) !== override || override.endsWith(sep)) issues.push({ field, reason: 'must be an absolute, normalized path' });
      else if (override === '/' || ENGINE_PATHS.some((p) => overlaps(override, p))) issues.push({ field, reason: "must not be / or one of the engine's directories" });
      else if (overlaps(override, berthState)) issues.push({ field, reason: "must not overlap berth's state (.berth)" });
      else for (const [area, areaPath] of areas) if (overlaps(override, areaPath)) issues.push({ field, reason: `overlaps shared area "${area}"` });
    }
    const seen = new Set<string>();
    settings.shared_access.forEach((g, i) => {
      const name = grantName(g);
      if (!(name in config.shared_workspaces)) issues.push({ field: `projects.${project}.shared_access.${i}`, reason: `names no shared area "${name}"` });
      if (seen.has(name)) issues.push({ field: `projects.${project}.shared_access.${i}`, reason: `grants "${name}" twice` });
      seen.add(name);
    });
  }

  for (const [channel, profile] of Object.entries(config.channels)) {
    if (!PROJECT_NAME_PATTERN.test(profile.project)) issues.push({ field: `channels.${channel}.project`, reason: 'is not a valid project name' });
    if (!/^[a-z0-9][a-z0-9_-]{0,62}$/.test(profile.workflow)) issues.push({ field: `channels.${channel}.workflow`, reason: 'is not a valid workflow name' });
  }
  return issues;
}

function areaProblem(path: string, workspacesPath: string, berthState: string): string | undefined {
  if (!isAbsolute(path)) return 'must be an absolute path';
  if (path === '/' || normalize(path) === '/') return 'must not be /';
  if (ENGINE_PATHS.some((p) => overlaps(path, p))) return "must not be, contain or sit inside the engine's directories (/run, /var/run, /var/lib/docker, ...)";
  if (overlaps(path, workspacesPath)) return `must not contain or sit inside workspaces_path (${workspacesPath})`;
  if (overlaps(path, berthState)) return "must not contain or sit inside berth's state (.berth)";
  let real: string;
  try {
    real = fs.realpathSync(path);
  } catch {
    return 'does not exist';
  }
  if (real !== path) return `is not canonical (its real path is ${real})`;
  if (!fs.statSync(real).isDirectory()) return 'is not a directory';
  return undefined;
}
