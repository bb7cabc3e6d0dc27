import { posix } from 'node:path';
import type { PermissionLevel } from '../../config/session.js';
import { WORKSPACE_MOUNT } from '../container-paths.js';
import { LEVEL_PROFILES } from '../levels.js';
import { deny } from './deny.js';
import { collectPathIntent } from './intent.js';

/**
 * The shell tool's policy, pure: parse a command without a shell, find which paths it would
 * read and write, and check them against the level's profile. The container is the hard
 * boundary; this is the second layer the permission matrix describes. Argv and command input
 * meet the same check: a command string is split (splitCommand) and then checked as argv.
 */

const under = (path: string, root: string) => path === root || path.startsWith(`${root}/`);

/** A granted shared area, as the container sees it (/shared/<name>). */
export interface SharedRoot {
  name: string;
  writable: boolean;
}

/** The shared area a path points into, if any ("/shared/<name>/..."). */
export function sharedAreaOf(path: string, cwd = WORKSPACE_MOUNT): string | undefined {
  const m = /^\/shared\/([^/]+)/.exec(posix.resolve(cwd, path));
  return m?.[1];
}

/**
 * Throws PERMISSION_DENIED naming the rule; returns argv when the level allows it. Granted
 * shared areas count as part of the workspace context: readable at every level, writable when
 * the grant is rw. (Paths into ungranted areas are refused before this, by the caller.)
 */
export function checkShellCommand(level: PermissionLevel, argv: string[], cwd = WORKSPACE_MOUNT, shared: SharedRoot[] = []): string[] {
  const inside = (path: string, write = false) => {
    const resolved = posix.resolve(cwd, path);
    if (under(resolved, WORKSPACE_MOUNT)) return true;
    return shared.some((s) => under(resolved, `/shared/${s.name}`) && (!write || s.writable));
  };
  if (argv.length === 0 || argv[0] === '') throw deny('empty_command', 'no command given');
  const bin = argv[0] as string;
  if (bin.includes('/')) throw deny('binary_path', `give the command name ("${posix.basename(bin)}"), not a path`);
  for (const arg of argv) if (arg.includes('\0')) throw deny('shell_syntax', 'NUL in an argument');
  const profile = LEVEL_PROFILES[level].shell;
  if (profile.allowBins && !profile.allowBins.has(bin)) {
    throw deny('binary_not_allowed', `"${bin}" is not allowed at permission level ${level}`);
  }
  const intent = collectPathIntent(argv);
  const needsHigh = intent.highOnly[0];
  if (level !== 'high' && needsHigh) throw deny(needsHigh.rule, `${needsHigh.message} (level ${level})`);
  const shown = (path: string) => (posix.resolve(cwd, path) === path ? `"${path}"` : `"${path}" (${posix.resolve(cwd, path)})`);
  for (const w of intent.writes) {
    if (!inside(w, true)) throw deny('write_outside_workspace', `"${bin}" would write ${shown(w)}, outside the workspace`);
  }
  if (!profile.readOutside) {
    for (const r of intent.reads) {
      if (!inside(r)) throw deny('read_outside_workspace', `"${bin}" would read ${shown(r)}, outside the workspace (level ${level})`);
    }
  }
  // Only high gets here with runs (find -exec, env COMMAND): the command run is held to the same rules.
  for (const run of intent.runs) checkShellCommand(level, run.argv, run.cwd === undefined ? cwd : posix.resolve(cwd, run.cwd), shared);
  return argv;
}
