import { posix } from 'node:path';
import { names } from './bins.js';
import { notAllowed } from './deny.js';
import { execOnly, type PathIntent } from './path-intent.js';

/**
 * find's expression, as data: what each primary takes.
 * - none/text/read: no argument, a text argument, a path read (-newer FILE)
 * - delete: the search roots are written; write: -fprint FILE and friends (high only)
 * - exec: a command up to ";" (or "{} +"), high only; follow: follows symlinks out of the roots (high only)
 */
type FindArg = 'none' | 'text' | 'read' | 'delete' | 'write' | 'write+text' | 'exec' | 'follow';

const FIND_PRIMARIES: ReadonlyMap<string, FindArg> = new Map<string, FindArg>([
  ...names(
    '! ( ) , -not -a -and -o -or -print -print0 -prune -empty -depth -xdev -mount -noleaf -ls -quit -true -false -readable -writable -executable -nouser -nogroup -daystart -ignore_readdir_race -noignore_readdir_race',
  ).map((n) => [n, 'none'] as const),
  ...names(
    '-name -iname -path -ipath -wholename -iwholename -regex -iregex -regextype -lname -ilname -type -xtype -size -mtime -mmin -atime -amin -ctime -cmin -used -perm -user -group -uid -gid -links -inum -maxdepth -mindepth -printf',
  ).map((n) => [n, 'text'] as const),
  ...names('-newer -anewer -cnewer -samefile').map((n) => [n, 'read'] as const),
  ['-delete', 'delete'],
  ...names('-fprint -fprint0 -fls').map((n) => [n, 'write'] as const),
  ['-fprintf', 'write+text'],
  ...names('-exec -execdir -ok -okdir').map((n) => [n, 'exec'] as const),
  ['-follow', 'follow'],
]);

const HIGH_ONLY: ReadonlySet<FindArg> = new Set<FindArg>(['write', 'write+text', 'exec', 'follow']);

/** find [-H|-L|-P] [ROOT]... [EXPRESSION]: the roots are read; the primaries add reads, writes, high-only forms and commands. */
export function findIntent(args: string[], intent: PathIntent) {
  const bad = (what: string) => notAllowed('find', what);
  let i = 0;
  // Leading options: -H and -P are the default's neighbours; -L follows every symlink, out of the workspace too.
  for (; i < args.length && /^-[HLP]$/.test(args[i] as string); i++) {
    if (args[i] === '-L') intent.highOnly.push(execOnly('"find -L"'));
  }
  const roots: string[] = [];
  for (; i < args.length && !/^[-(!]/.test(args[i] as string); i++) roots.push(args[i] as string);
  if (!roots.length) roots.push('.');
  intent.reads.push(...roots);
  const execs: Array<{ primary: string; argv: string[] }> = [];
  while (i < args.length) {
    const primary = args[i++] as string;
    const arg = () => {
      if (i >= args.length) throw bad(`"${primary}" without its argument`);
      return args[i++] as string;
    };
    // -newerXY: X, Y from a m c B, or t (Y only) for a date instead of a file.
    const kind =
      FIND_PRIMARIES.get(primary) ?? (/^-newer[amcB][amcBt]$/.test(primary) ? (primary.endsWith('t') ? 'text' : 'read') : undefined);
    if (kind !== undefined && HIGH_ONLY.has(kind)) intent.highOnly.push(execOnly(`"find ${primary}"`));
    switch (kind) {
      case undefined:
        throw bad(`primary "${primary}"`);
      case 'none':
      case 'follow':
        break;
      case 'text':
        arg();
        break;
      case 'read':
        intent.reads.push(arg());
        break;
      case 'delete':
        intent.writes.push(...roots);
        break;
      case 'write':
      case 'write+text':
        intent.writes.push(arg());
        if (kind === 'write+text') arg();
        break;
      case 'exec': {
        const start = i;
        // Ends at ";", or at "+" right after "{}"; another "+" is where implementations differ.
        while (i < args.length && args[i] !== ';' && !(args[i] === '+' && args[i - 1] === '{}')) {
          if (args[i] === '+') throw bad(`"+" inside "${primary}" other than after "{}"`);
          i++;
        }
        if (i >= args.length || i === start) throw bad(`"${primary}" without a command and its ";" or "{} +"`);
        execs.push({ primary, argv: args.slice(start, i++) });
        break;
      }
    }
  }
  // At high the commands are checked too, "{}" standing for a root or a path under it; -execdir runs
  // them in the directory of each match: the root's parent for the root itself (except ".").
  for (const { primary, argv } of execs) {
    for (const root of roots) {
      const cwds = primary.endsWith('dir') && root !== '.' ? [root, posix.dirname(root)] : primary.endsWith('dir') ? [root] : [undefined];
      for (const stand of [root, `${root}/_`]) {
        for (const cwd of cwds) intent.runs.push({ argv: argv.map((a) => a.replaceAll('{}', stand)), cwd });
      }
    }
  }
}
