import fs from 'node:fs';
import { join } from 'node:path';
import { closeQuietly, fdRealPath, openRootDir, withFd } from '../fs/fd-path.js';
import { errnoOf } from '../base/errors.js';
import { ensureDirPath, writeNewFileAt, type Owner } from '../fs/tree.js';
import type { Project } from './projects.js';

/**
 * Each session's agent home: where an agent CLI keeps its conversation between two messages.
 * It lives in berth's private state (never in the project directory, so no other tenant's
 * container can mount it), one per session, and goes when the session goes. Its contents are
 * the tenant's: berth only creates, mounts and removes it, never reads inside.
 */
const HOMES = 'homes';

export function agentHomeDir(project: Project, sessionId: string): string {
  return join(agentHomesDir(project.paths.stateDir), sessionId);
}

/** Where a project's session homes are, given its state directory (a trashed project's too). */
export const agentHomesDir = (stateDir: string) => join(stateDir, HOMES);

/** Make the session's home (no-follow, owned by the agent user) and return its path. */
export function ensureAgentHome(project: Project, sessionId: string, owner: Owner | undefined): string {
  const dir = agentHomeDir(project, sessionId);
  fs.mkdirSync(project.paths.stateDir, { recursive: true, mode: 0o700 });
  const rootFd = openRootDir(project.paths.stateDir);
  try {
    closeQuietly(ensureDirPath(rootFd, [HOMES], { shownRoot: 'homes', mode: 0o711 }));
    const fd = ensureDirPath(rootFd, [HOMES, sessionId], { shownRoot: 'homes', mode: 0o700, owner });
    try {
      if (fdRealPath(fd) !== dir) throw new Error(`agent home ${dir} is not where berth made it`);
    } finally {
      closeQuietly(fd);
    }
  } finally {
    closeQuietly(rootFd);
  }
  return dir;
}

/** Remove a session's home (rm does not follow the links a tenant left inside). */
export function removeAgentHome(project: Project, sessionId: string): void {
  fs.rmSync(agentHomeDir(project, sessionId), { recursive: true, force: true });
}

/**
 * Put decoy files in a home (plan/honeytokens.ts) where none is: every step no-follow from the
 * home's descriptor (a link the tenant left where a directory goes is moved aside), and a file
 * already there is left as it is, whatever the tenant made of it.
 */
export function plantInHome(home: string, files: ReadonlyArray<{ path: string[]; content: string; mode: number }>, owner?: Owner): void {
  withFd(openRootDir(home), (homeFd) => {
    for (const file of files) {
      const name = file.path.at(-1) as string;
      withFd(ensureDirPath(homeFd, file.path.slice(0, -1), { shownRoot: 'home', displace: true, mode: 0o700, owner }), (dirFd) => {
        try {
          writeNewFileAt(dirFd, name, file.content, file.mode, owner);
        } catch (err) {
          if (errnoOf(err) !== 'EEXIST') throw err;
        }
      });
    }
  });
}
