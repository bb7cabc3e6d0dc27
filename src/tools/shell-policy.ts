import { posix } from 'node:path';
import type { PermissionLevel } from '../config/session.js';
import { BerthError } from '../errors.js';
import { LEVEL_PROFILES } from '../plan/permissions.js';

/**
 * The shell tool's policy, pure: parse a command without a shell, find which paths it would
 * read and write, and check them against the level's profile. The container is the hard
 * boundary; this is the second layer the permission matrix describes.
 */

export const WORKSPACE_ROOT = '/workspace';

// Anything a shell would interpret: chaining, pipes, redirects, substitution, globbing, expansion.
const OPERATORS = /[;&|<>`$(){}\n\\*?[\]~]/;

export function deny(rule: string, message: string): BerthError {
  return new BerthError('PERMISSION_DENIED', message, { rule });
}

/** Split a command string into argv like a shell would for plain words and quotes, and nothing more. */
export function splitCommand(command: string): string[] {
  const argv: string[] = [];
  let current = '';
  let inWord = false;
  let quote: '"' | "'" | null = null;
  for (const ch of command) {
    if (quote) {
      if (ch === quote) quote = null;
      else if (quote === '"' && OPERATORS.test(ch)) throw deny('shell_operator', `"${ch}" is not allowed: commands run without a shell`);
      else current += ch;
      continue;
    }
    if (ch === '"' || ch === "'") {
      quote = ch;
      inWord = true;
    } else if (ch === ' ' || ch === '\t') {
      if (inWord) argv.push(current);
      current = '';
      inWord = false;
    } else if (OPERATORS.test(ch)) {
      throw deny('shell_operator', `"${ch}" is not allowed: commands run without a shell (no ; | & > < \` $() and friends)`);
    } else {
      current += ch;
      inWord = true;
    }
  }
  if (quote) throw deny('shell_syntax', 'unterminated quote');
  if (inWord) argv.push(current);
  return argv;
}

export interface PathIntent {
  reads: string[];
  writes: string[];
}

const operands = (args: string[]) => args.filter((a) => !a.startsWith('-') || a === '-');

/** Which paths a known command reads and writes; unknown commands: path-like arguments count as reads. */
export function collectPathIntent(argv: string[]): PathIntent {
  const [bin = '', ...args] = argv;
  const ops = operands(args);
  switch (bin) {
    case 'cp':
      return { reads: ops.slice(0, -1), writes: ops.slice(-1) };
    case 'mv':
    case 'rm':
    case 'rmdir':
    case 'mkdir':
    case 'touch':
    case 'tar':
      return { reads: [], writes: ops };
    case 'ln':
      return { reads: ops.slice(0, -1), writes: ops.slice(-1) };
    case 'chmod':
      return { reads: [], writes: ops.slice(1) };
    case 'grep':
      return { reads: ops.slice(1), writes: [] };
    case 'find': {
      const firstExpr = args.findIndex((a) => a.startsWith('-') || a === '!' || a === '(');
      return { reads: firstExpr === -1 ? args : args.slice(0, firstExpr), writes: [] };
    }
    case 'sed':
      return { reads: ops.slice(1), writes: args.some((a) => a.startsWith('-i')) ? ops.slice(1) : [] };
    case 'curl':
    case 'wget': {
      const writes: string[] = [];
      const reads: string[] = [];
      args.forEach((a, i) => {
        const next = args[i + 1];
        if (next === undefined) return;
        if (['-o', '--output', '-O', '--output-document'].includes(a)) writes.push(next);
        if (['-T', '--upload-file', '-K', '--config'].includes(a)) reads.push(next);
      });
      return { reads, writes };
    }
    default:
      return { reads: ops.filter((a) => a.startsWith('/') || a.startsWith('..') || a.includes('/../')), writes: [] };
  }
}

const under = (path: string, root: string) => path === root || path.startsWith(`${root}/`);

/** A granted shared area, as the container sees it (/shared/<name>). */
export interface SharedRoot {
  name: string;
  writable: boolean;
}

/** The shared area a path points into, if any ("/shared/<name>/..."). */
export function sharedAreaOf(path: string, cwd = WORKSPACE_ROOT): string | undefined {
  const m = /^\/shared\/([^/]+)/.exec(posix.resolve(cwd, path));
  return m?.[1];
}

/**
 * Throws PERMISSION_DENIED naming the rule; returns argv when the level allows it. Granted
 * shared areas count as part of the workspace context: readable at every level, writable when
 * the grant is rw. (Paths into ungranted areas are refused before this, by the caller.)
 */
export function checkShellCommand(level: PermissionLevel, argv: string[], cwd = WORKSPACE_ROOT, shared: SharedRoot[] = []): string[] {
  const inside = (path: string, _cwd: string, write = false) => {
    const resolved = posix.resolve(cwd, path);
    if (under(resolved, WORKSPACE_ROOT)) return true;
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
  for (const w of intent.writes) {
    if (!inside(w, cwd, true)) throw deny('write_outside_workspace', `"${bin}" would write "${w}", outside the workspace`);
  }
  if (!profile.readOutside) {
    for (const r of intent.reads) {
      if (!inside(r, cwd)) throw deny('read_outside_workspace', `"${bin}" would read "${r}", outside the workspace (level ${level})`);
    }
  }
  return argv;
}
