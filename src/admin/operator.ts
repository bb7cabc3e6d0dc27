import fs from 'node:fs';
import { dirname } from 'node:path';
import type { Logger } from 'pino';
import { type BerthConfig } from '../config/berth-config.js';
import { homePaths, privateWorkspaceOf } from '../config/home.js';
import { grantEdit, privateWorkspaceEdit, revokeEdit, editBerthYaml, setEdit, unsetEdit } from '../config/operator-edits.js';
import { checkOperatorConfig } from '../config/operator-checks.js';
import { sharedGrantsFor } from '../config/grants.js';
import { BerthError, errnoOf } from '../base/errors.js';
import type { ProjectStore } from '../store/projects.js';
import type { ProjectAccess } from './views.js';
import { own } from '../base/own.js';

function lstatOrUndefined(path: string): fs.Stats | undefined {
  try {
    return fs.lstatSync(path);
  } catch (err) {
    if (errnoOf(err) === 'ENOENT') return undefined;
    throw err;
  }
}

/**
 * The operator's own changes (berth.yaml): grants and private workspaces. Only the operator's
 * token or shell reaches these; nothing a project admin or tenant sends does.
 */
export function createOperatorService(deps: { home: string; store: ProjectStore; config: () => BerthConfig; logger: Logger }) {
  const home = homePaths(deps.home);
  const edit = (fn: Parameters<typeof editBerthYaml>[1]) =>
    editBerthYaml({ file: home.configFile, home: deps.home, lockDir: home.stateDir }, fn);

  function access(project: string, config = deps.config()): ProjectAccess {
    return {
      project,
      private_workspace: privateWorkspaceOf(config, home, project),
      private_workspace_overridden: own(config.projects, project)?.private_workspace !== undefined,
      shared_access: sharedGrantsFor(config, project),
    };
  }

  /** Deny by default: the one check for "may this project use this area?" — refusals are logged. */
  function assertGranted(project: string, area: string, want: 'ro' | 'rw' = 'ro') {
    const grant = access(project).shared_access.find((g) => g.name === area);
    if (!grant || (want === 'rw' && grant.mode !== 'rw')) {
      deps.logger.warn({ project, area, want }, 'shared area refused: not granted');
      throw new BerthError(
        'AREA_NOT_GRANTED',
        `project "${project}" has no ${want === 'rw' ? 'read-write ' : ''}grant for shared area "${area}"`,
        {
          hint: `the operator grants it: berth project grant ${project} ${area}${want === 'rw' ? ' --rw' : ''}`,
        },
      );
    }
    return grant;
  }

  /** Refuse a private-workspace path before anything on disk changes (the same rules as berth.yaml's). */
  function checkPlacement(project: string, to: string): void {
    const config = deps.config();
    const next = {
      ...config,
      projects: { ...config.projects, [project]: { shared_access: [], ...own(config.projects, project), private_workspace: to } },
    };
    const field = `projects.${project}.private_workspace`;
    const issues = checkOperatorConfig(next, deps.home)
      .filter((i) => i.field === field)
      .map((i) => ({ field: 'path', reason: i.reason }));
    if (issues.length) throw new BerthError('CONFIG_INVALID', 'private workspace is invalid', { issues });
  }

  async function move(project: string, to: string | undefined) {
    const from = deps.store.get(project).paths.dir;
    const config = deps.config();
    if (to !== undefined) checkPlacement(project, to);
    const target =
      to ?? privateWorkspaceOf({ ...config, projects: { ...config.projects, [project]: { shared_access: [] } } }, home, project);
    if (target === from) return;
    const existing = lstatOrUndefined(target);
    if (existing) {
      if (!existing.isDirectory() || fs.readdirSync(target).length > 0) {
        throw new BerthError('CONFIG_INVALID', `${target} exists and is not an empty directory`, {
          issues: [{ field: 'path', reason: 'must not exist, or be an empty directory' }],
        });
      }
      fs.rmdirSync(target);
    }
    // Whatever this creates is removed again if the move fails: nothing half-made stays behind.
    const created = fs.mkdirSync(dirname(target), { recursive: true });
    try {
      fs.renameSync(from, target);
    } catch (err) {
      if (created) fs.rmSync(created, { recursive: true, force: true });
      if (existing) fs.mkdirSync(target);
      const code = errnoOf(err);
      if (code === 'EXDEV') {
        throw new BerthError('CONFIG_INVALID', `${target} is on another filesystem than ${from}`, {
          hint: 'move the directory yourself, then set the override',
        });
      }
      if (code === 'EINVAL' || code === 'ENAMETOOLONG' || code === 'ENOTDIR' || code === 'EEXIST' || code === 'ENOTEMPTY') {
        throw new BerthError('CONFIG_INVALID', `cannot move the project to ${target} (${code})`, {
          issues: [{ field: 'path', reason: code === 'EINVAL' ? 'is inside the project itself' : `refused by the filesystem (${code})` }],
        });
      }
      throw err;
    }
    return { from, target };
  }

  return {
    access,
    assertGranted,
    async grant(project: string, area: string, mode: 'ro' | 'rw') {
      deps.store.get(project);
      if (own(deps.config().shared_workspaces, area) === undefined) {
        throw new BerthError('CONFIG_INVALID', `no shared area "${area}" in berth.yaml`, {
          issues: [{ field: 'area', reason: 'names no shared area' }],
        });
      }
      return access(project, await edit(grantEdit(project, area, mode)));
    },
    async revoke(project: string, area: string) {
      deps.store.get(project);
      return access(project, await edit(revokeEdit(project, area)));
    },
    async setPrivateWorkspace(project: string, path: string | undefined) {
      const moved = await move(project, path);
      try {
        return access(project, await edit(privateWorkspaceEdit(project, path)));
      } catch (err) {
        if (moved) fs.renameSync(moved.target, moved.from); // berth.yaml refused it: put the project back
        throw err;
      }
    },
    /** One berth.yaml setting at a path (`berth config set`), checked with the whole file first. */
    setConfig: (path: string[], value: unknown) => edit(setEdit(path, value)),
    /** One berth.yaml setting removed: its default applies again. */
    unsetConfig: (path: string[]) => edit(unsetEdit(path)),
  };
}

export type OperatorService = ReturnType<typeof createOperatorService>;
