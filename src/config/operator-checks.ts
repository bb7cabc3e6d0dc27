import fs from 'node:fs';
import { isAbsolute, normalize, resolve, sep } from 'node:path';
import type { FieldIssue } from '../base/errors.js';
import { PROJECT_NAME_PATTERN } from './metadata.js';
import type { BerthConfig } from './berth-config-schema.js';
import { grantName } from './grants.js';
import { own } from '../base/own.js';
import { transcriptionIssues } from './transcription.js';

/** Paths no shared area may be, contain, or sit inside: the engine's sockets and state. */
export const ENGINE_PATHS = ['/var/run', '/run', '/var/lib/docker', '/var/lib/containerd', '/etc/docker'];

const within = (child: string, parent: string) => child === parent || child.startsWith(parent.endsWith(sep) ? parent : parent + sep);
const overlaps = (a: string, b: string) => within(a, b) || within(b, a);

/**
 * Rules on berth.yaml beyond its shape: shared areas absolute, canonical, existing directories
 * that overlap neither each other, nor berth's own trees, nor the engine's; grants naming areas
 * that exist; overrides absolute. fs is only read (realpath, stat). Returns every problem.
 */
export function checkOperatorConfig(config: BerthConfig, home: string, agentUid = config.agent_user.uid): FieldIssue[] {
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
      const problem = privateWorkspaceProblem(override, { workspacesPath, berthState, agentUid });
      if (problem) issues.push({ field, reason: problem });
      else
        for (const [area, areaPath] of areas)
          if (overlaps(override, areaPath)) issues.push({ field, reason: `overlaps shared area "${area}"` });
      for (const [other, o] of Object.entries(config.projects)) {
        if (other < project && o.private_workspace !== undefined && overlaps(override, o.private_workspace))
          issues.push({ field, reason: `overlaps the private workspace of project "${other}"` });
      }
    }
    const seen = new Set<string>();
    settings.shared_access.forEach((g, i) => {
      const name = grantName(g);
      if (own(config.shared_workspaces, name) === undefined)
        issues.push({ field: `projects.${project}.shared_access.${i}`, reason: `names no shared area "${name}"` });
      else if (config.launcher === 'kubernetes' && own(config.kubernetes?.shared_claims ?? {}, name) === undefined) {
        issues.push({
          field: `projects.${project}.shared_access.${i}`,
          reason: `grants "${name}", which has no volume on the cluster: name its PersistentVolumeClaim in kubernetes.shared_claims.${name}`,
        });
      }
      if (seen.has(name)) issues.push({ field: `projects.${project}.shared_access.${i}`, reason: `grants "${name}" twice` });
      seen.add(name);
    });
  }

  for (const area of Object.keys(config.kubernetes?.shared_claims ?? {})) {
    if (own(config.shared_workspaces, area) === undefined)
      issues.push({ field: `kubernetes.shared_claims.${area}`, reason: `names no shared area "${area}"` });
  }

  for (const [channel, profile] of Object.entries(config.routes)) {
    if (!PROJECT_NAME_PATTERN.test(profile.project))
      issues.push({ field: `routes.${channel}.project`, reason: 'is not a valid project name' });
    if (profile.workflow !== undefined && !/^[a-z0-9][a-z0-9_-]{0,62}$/.test(profile.workflow))
      issues.push({ field: `routes.${channel}.workflow`, reason: 'is not a valid workflow name' });
  }
  issues.push(...keyLeaks(config), ...transcriptionIssues(config.transcription, config.models));
  return issues;
}

/** Variables agent CLIs read their key from: berth sets them to a placeholder, never to a key. */
export const MODEL_KEY_VARIABLES = ['ANTHROPIC_API_KEY', 'ANTHROPIC_AUTH_TOKEN', 'OPENAI_API_KEY', 'CODEX_API_KEY'];

/** berth.yaml's env reaches containers: a model key there is a key any tenant can print. */
function keyLeaks(config: BerthConfig): FieldIssue[] {
  const keys = new Set(Object.values(config.models).map((m) => m.api_key));
  return Object.entries(config.env).flatMap(([name, value]) =>
    MODEL_KEY_VARIABLES.includes(name) || [...keys].some((key) => value.includes(key))
      ? [
          {
            field: `env.${name}`,
            reason:
              'holds a model API key, which any tenant could read from its environment; put it in models.<name>.api_key (berth adds it outside the container)',
          },
        ]
      : [],
  );
}

function areaProblem(path: string, workspacesPath: string, berthState: string): string | undefined {
  if (!isAbsolute(path)) return 'must be an absolute path';
  if (path === '/' || normalize(path) === '/') return 'must not be /';
  if (ENGINE_PATHS.some((p) => overlaps(path, p)))
    return "must not be, contain or sit inside the engine's directories (/run, /var/run, /var/lib/docker, ...)";
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

/**
 * Why a private workspace (a project directory the operator places) is refused, or undefined:
 * it must be a clean absolute path, outside the engine's and berth's trees, outside
 * workspaces_path (where every other project and its tenants' workspaces live), and below
 * directories no tenant can change: no symbolic link, nothing owned by the agent user, nothing
 * world-writable without the sticky bit. (fs is only read: lstat of the existing ancestors.)
 */
export function privateWorkspaceProblem(
  path: string,
  ctx: { workspacesPath: string; berthState: string; agentUid: number },
): string | undefined {
  if (path.includes('\0')) return 'must not contain NUL';
  if (!isAbsolute(path) || normalize(path) !== path || path.endsWith(sep)) return 'must be an absolute, normalized path';
  if (Buffer.byteLength(path) > 4000) return 'is longer than 4000 bytes';
  if (path.split(sep).some((c) => Buffer.byteLength(c) > 255)) return 'has a component longer than 255 bytes';
  if (path === '/' || ENGINE_PATHS.some((p) => overlaps(path, p))) return "must not be / or one of the engine's directories";
  if (overlaps(path, ctx.berthState)) return "must not overlap berth's state (.berth)";
  if (overlaps(path, ctx.workspacesPath))
    return `must not overlap workspaces_path (${ctx.workspacesPath}), where projects and their tenant workspaces live`;
  const parts = path.split(sep).filter(Boolean);
  for (let i = 0; i < parts.length - 1; i++) {
    const ancestor = `${sep}${parts.slice(0, i + 1).join(sep)}`;
    let st: fs.Stats;
    try {
      st = fs.lstatSync(ancestor);
    } catch {
      break; // berth creates the rest, as root
    }
    if (st.isSymbolicLink()) return `has a symbolic link in it (${ancestor})`;
    if (!st.isDirectory()) return `${ancestor} is not a directory`;
    if (st.uid === ctx.agentUid) return `lies below ${ancestor}, which the agent user owns (tenants could change it)`;
    if (st.mode & 0o002 && !(st.mode & 0o1000)) return `lies below ${ancestor}, which anyone may write`;
  }
  return undefined;
}
