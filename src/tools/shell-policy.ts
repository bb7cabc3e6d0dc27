import { posix } from 'node:path';
import type { PermissionLevel } from '../config/session.js';
import { BerthError } from '../errors.js';
import { LEVEL_PROFILES } from '../plan/permissions.js';

/**
 * The shell tool's policy, pure: parse a command without a shell, find which paths it would
 * read and write, and check them against the level's profile. The container is the hard
 * boundary; this is the second layer the permission matrix describes.
 *
 * Every binary of the low and medium lists has an entry in SHELL_BINS: the options it may be
 * given, what their values are, and what its operands are. Anything the table does not know is
 * refused (an unknown option could read, write or run anything), and forms that run programs
 * or reach beyond the paths the policy can see are refused below level high. Argv and command
 * input meet the same check: a command string is split (splitCommand) and then checked as argv.
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

// ---------------------------------------------------------------------------------------------
// The table

/**
 * What an option's value is to the path checks:
 * - text: a pattern, number, format or name; read/write: a path read/written
 * - target: cp/mv/ln -t DIR, written into (the operands are then all sources)
 * - chdir: tar -C DIR (the operands are relative to it); archive: tar -f FILE (read or written by the mode)
 * - pattern/pattern-file: grep -e/-f (the operands are then all files)
 * - script/script-file: sed -e/-f (ditto; a script is checked, a script file cannot be)
 * - in-place: sed -i[SUFFIX]: the files are rewritten; the suffix names a backup, so no "/"
 * - reference: chmod --reference FILE (read; the first operand is then a file, not a mode)
 * - at-file, cookie, form, urlencode, write-out, output, url: how curl and wget name files and URLs
 */
type ValueKind =
  | 'text' | 'read' | 'write' | 'target' | 'chdir' | 'archive'
  | 'pattern' | 'pattern-file' | 'script' | 'script-file' | 'in-place' | 'reference'
  | 'at-file' | 'cookie' | 'form' | 'urlencode' | 'write-out' | 'output' | 'url';

/** A trailing "?": the value is optional and only ever attached (-i.bak, --color=auto). */
type ValueSpec = ValueKind | `${ValueKind}?`;

/** Flags that change what the operands are. */
type Mode = 'stdout' | 'create' | 'extract' | 'list' | 'symbolic' | 'relative';

/**
 * What the operands (non-option arguments) are:
 * - read, write, text; none: no operand at all; read-write: rewritten in place (gzip), read only with a stdout mode
 * - last-write: sources then the destination (cp); link: the same, plus where a symlink points (ln)
 * - pattern-then-read: grep, unless -e/-f gave the pattern; script-then-read: sed, unless -e/-f gave the script
 * - mode-then-write: chmod, unless --reference; in-out: uniq INPUT [OUTPUT]
 * - url: http(s) and ftp(s) URLs only; tar: by its mode; command: env [NAME=VALUE]... [COMMAND...]
 * - date: +FORMAT, anything else sets the clock; hostname: a name sets it
 */
type Operands =
  | 'read' | 'write' | 'read-write' | 'text' | 'none' | 'last-write' | 'link'
  | 'pattern-then-read' | 'script-then-read' | 'mode-then-write' | 'in-out'
  | 'url' | 'tar' | 'command' | 'date' | 'hostname';

/** A getopt-style binary. Option names are space-separated lists ("-n --lines"). */
interface OptionTable {
  operands: Operands;
  /** Options without a value. */
  flags?: string;
  /** Options with a value, and what the value is. */
  values?: Record<string, ValueSpec>;
  /** Flags that change what the operands are (gzip -c, tar -c/-x/-t, ln -s). */
  modes?: Record<string, Mode>;
  /** Of the options above, those allowed at level high only: they run programs, or reach paths this policy cannot see. */
  highOnly?: string;
  /** "-5", "-20": a count (head, tail) or a level (gzip). */
  numeric?: true;
  /** Options end at the first operand (env: the rest is the command). Otherwise, as GNU getopt, options may follow operands. */
  stopAtOperand?: true;
  /** "tar czf out.tgz src": a first argument without "-" is a cluster of short options. */
  oldStyle?: true;
}

/** Binaries with a grammar of their own: find's expression, test's expression, echo/true/false (plain words). */
type BinSpec = OptionTable | { grammar: 'find' | 'test' | 'words' };

const GUNZIP: OptionTable = {
  operands: 'read-write',
  flags: '-d -f -k -n -N -q -r -v --decompress --uncompress --force --keep --no-name --name --quiet --recursive --verbose --best --fast',
  modes: { '-c --stdout --to-stdout -t --test -l --list': 'stdout' },
};
const CHECKSUM: OptionTable = {
  operands: 'read',
  // -c reads the files a checksum list names: paths this policy cannot see.
  flags: '-b -t -z -c -s -w --binary --text --tag --zero --check --status --warn --quiet --strict --ignore-missing',
  highOnly: '-c --check',
};

/** Every binary of LOW_BINS and MEDIUM_EXTRA_BINS (see src/plan/permissions.ts). */
export const SHELL_BINS: Readonly<Record<string, BinSpec>> = {
  // --- low
  ls: {
    operands: 'read',
    flags:
      '-a -A -l -h -d -F -p -r -t -S -R -1 -i -s -n -c -u -C -x -m -g -o -G -X -v -U -f -k -L -H -Q -N -b -q --all --almost-all --human-readable --si --directory --classify --reverse --recursive --inode --size --numeric-uid-gid --full-time --group-directories-first --dereference --no-group',
    values: { '-w --width --sort --time --time-style --format --indicator-style --quoting-style --block-size -I --ignore --hide': 'text', '--color --colour': 'text?' },
  },
  cat: { operands: 'read', flags: '-n -b -s -E -T -A -v -e -t -u --number --number-nonblank --squeeze-blank --show-all --show-ends --show-tabs --show-nonprinting' },
  head: { operands: 'read', numeric: true, flags: '-q -v -z --quiet --silent --verbose --zero-terminated', values: { '-n --lines -c --bytes': 'text' } },
  tail: {
    operands: 'read',
    numeric: true,
    // -f never ends: it holds the run until its timeout.
    flags: '-q -v -z -f -F --quiet --silent --verbose --zero-terminated',
    values: { '-n --lines -c --bytes': 'text', '--follow': 'text?' },
    highOnly: '-f -F --follow',
  },
  wc: { operands: 'read', flags: '-l -w -c -m -L --lines --words --bytes --chars --max-line-length' },
  grep: {
    operands: 'pattern-then-read',
    flags:
      '-r -R -n -i -v -l -L -c -w -x -E -F -G -P -H -h -o -q -s -a -I -z -Z -b -T --recursive --dereference-recursive --line-number --ignore-case --no-ignore-case --invert-match --files-with-matches --files-without-match --count --word-regexp --line-regexp --extended-regexp --fixed-strings --basic-regexp --perl-regexp --with-filename --no-filename --only-matching --quiet --silent --no-messages --text --null --null-data --byte-offset --initial-tab --line-buffered',
    values: {
      '-e --regexp': 'pattern',
      '-f --file': 'pattern-file',
      '-m --max-count -A --after-context -B --before-context -C --context --include --exclude --exclude-dir --label --binary-files': 'text',
      '--exclude-from': 'read',
      '--color --colour': 'text?',
    },
  },
  find: { grammar: 'find' },
  mkdir: { operands: 'write', flags: '-p -v --parents --verbose', values: { '-m --mode': 'text' } },
  touch: { operands: 'write', flags: '-a -m -c -h --no-create --no-dereference', values: { '-d --date -t --time': 'text', '-r --reference': 'read' } },
  cp: {
    operands: 'last-write',
    // Not --parents: it appends the source path, "..", to the destination.
    flags:
      '-r -R -a -f -i -n -p -v -u -L -P -d -H -l -s -x -T --recursive --archive --force --interactive --no-clobber --verbose --update --dereference --no-dereference --link --symbolic-link --one-file-system --no-target-directory --remove-destination --strip-trailing-slashes --attributes-only',
    values: { '-t --target-directory': 'target', '--preserve --reflink': 'text?', '--no-preserve --sparse': 'text' },
  },
  mv: {
    operands: 'write',
    flags: '-f -i -n -v -u -T --force --interactive --no-clobber --verbose --update --no-target-directory --strip-trailing-slashes',
    values: { '-t --target-directory': 'target' },
  },
  rm: { operands: 'write', flags: '-r -R -f -i -I -v -d --recursive --force --verbose --dir --one-file-system --preserve-root' },
  rmdir: { operands: 'write', flags: '-p -v --parents --verbose --ignore-fail-on-non-empty' },
  echo: { grammar: 'words' },
  pwd: { operands: 'none', flags: '-L -P --logical --physical' },
  stat: { operands: 'read', flags: '-L -f -t --dereference --file-system --terse', values: { '-c --format --printf': 'text' } },
  du: {
    operands: 'read',
    flags: '-s -h -a -c -k -m -b -x -L -H -l -S --summarize --human-readable --all --total --apparent-size --bytes --one-file-system --dereference --count-links --separate-dirs --si',
    values: { '-d --max-depth -B --block-size --exclude': 'text' },
  },
  sort: {
    operands: 'read',
    flags:
      '-n -r -u -f -b -d -g -h -i -M -V -R -s -z -c -C -m --numeric-sort --reverse --unique --ignore-case --ignore-leading-blanks --dictionary-order --general-numeric-sort --human-numeric-sort --ignore-nonprinting --month-sort --version-sort --random-sort --stable --zero-terminated --check --merge',
    values: { '-k --key -t --field-separator -S --buffer-size --parallel --compress-program': 'text', '-o --output -T --temporary-directory': 'write' },
    highOnly: '--compress-program',
  },
  uniq: {
    operands: 'in-out',
    flags: '-c -d -D -u -i -z --count --repeated --unique --ignore-case --zero-terminated',
    values: { '-f --skip-fields -s --skip-chars -w --check-chars': 'text', '--all-repeated --group': 'text?' },
  },
  diff: {
    operands: 'read',
    flags:
      '-u -c -r -N -q -s -i -w -b -B -a -t -T -p -d -y --recursive --new-file --brief --report-identical-files --ignore-case --ignore-all-space --ignore-space-change --ignore-blank-lines --ignore-trailing-space --text --expand-tabs --initial-tab --show-c-function --minimal --strip-trailing-cr --side-by-side --suppress-common-lines',
    values: { '-U -C -x --exclude -L --label -I --ignore-matching-lines -W --width': 'text', '-X --exclude-from': 'read', '--unified --context --color': 'text?' },
  },
  sed: {
    operands: 'script-then-read',
    flags: '-n -E -r -s -z -u --quiet --silent --regexp-extended --separate --null-data --unbuffered --posix --sandbox --debug',
    values: { '-e --expression': 'script', '-f --file': 'script-file', '-i --in-place': 'in-place?', '-l --line-length': 'text' },
    highOnly: '-f --file',
  },
  tr: { operands: 'text', flags: '-c -C -d -s -t --complement --delete --squeeze-repeats --truncate-set1' },
  cut: {
    operands: 'read',
    flags: '-s -n -z --only-delimited --complement --zero-terminated',
    values: { '-b --bytes -c --characters -f --fields -d --delimiter --output-delimiter': 'text' },
  },
  sha256sum: CHECKSUM,
  md5sum: CHECKSUM,
  tar: {
    operands: 'tar',
    oldStyle: true,
    flags:
      '-v -z -j -J -a -k -m -p -o -h --verbose --gzip --gunzip --ungzip --bzip2 --xz --zstd --auto-compress --keep-old-files --touch --preserve-permissions --no-same-owner --no-same-permissions --numeric-owner --dereference --overwrite --no-recursion --exclude-vcs --force-local',
    modes: { '-c --create': 'create', '-x --extract --get': 'extract', '-t --list': 'list', '-O --to-stdout': 'stdout' },
    values: {
      '-f --file': 'archive',
      '-C --directory': 'chdir',
      '--exclude --strip-components --owner --group --mode --sort': 'text',
      '-X --exclude-from --mtime': 'read',
      // Programs tar runs, and a list of further paths.
      '-I --use-compress-program --to-command --checkpoint-action --info-script --new-volume-script -F --rsh-command': 'text',
      '-T --files-from': 'read',
    },
    highOnly: '-I --use-compress-program --to-command --checkpoint-action --info-script --new-volume-script -F --rsh-command -T --files-from',
  },
  gzip: { ...GUNZIP, numeric: true },
  gunzip: GUNZIP,
  true: { grammar: 'words' },
  false: { grammar: 'words' },
  test: { grammar: 'test' },
  basename: { operands: 'text', flags: '-a -z --multiple --zero', values: { '-s --suffix': 'text' } },
  dirname: { operands: 'text', flags: '-z --zero' },
  realpath: {
    operands: 'read',
    flags: '-e -m -s -q -L -P -z --canonicalize-existing --canonicalize-missing --no-symlinks --strip --quiet --logical --physical --zero',
    values: { '--relative-to --relative-base': 'read' },
  },
  ln: {
    operands: 'link',
    flags: '-f -n -v -T -L -P -i --force --no-dereference --verbose --no-target-directory --logical --physical --interactive',
    modes: { '-s --symbolic': 'symbolic', '-r --relative': 'relative' },
    values: { '-t --target-directory': 'target' },
  },
  chmod: { operands: 'mode-then-write', flags: '-R -v -c -f --recursive --verbose --changes --silent --quiet --preserve-root', values: { '--reference': 'reference' } },

  // --- medium
  curl: {
    operands: 'url',
    flags:
      '-s -S -f -L -I -i -v -k -O -G -N -q -4 -6 -# -g --silent --show-error --fail --fail-with-body --location --head --include --verbose --insecure --remote-name --remote-name-all --get --no-buffer --compressed --http1.0 --http1.1 --http2 --progress-bar --no-progress-meter --create-dirs --globoff --ipv4 --ipv6 --raw',
    values: {
      '-o --output --output-dir': 'output',
      '-D --dump-header -c --cookie-jar --trace --trace-ascii --stderr': 'write',
      '-T --upload-file -z --time-cond --cacert --capath': 'read',
      '-K --config': 'read',
      '-d --data --data-ascii --data-binary --json -H --header': 'at-file',
      '--data-urlencode': 'urlencode',
      '-F --form': 'form',
      '-b --cookie': 'cookie',
      '-w --write-out': 'write-out',
      '--url': 'url',
      '--data-raw --form-string -u --user -A --user-agent -e --referer -X --request -m --max-time --connect-timeout --retry --retry-delay --retry-max-time -r --range -C --continue-at --limit-rate --max-filesize --max-redirs --resolve':
        'text',
    },
    // A config file is a list of further options, none of them checked.
    highOnly: '-K --config',
  },
  wget: {
    operands: 'url',
    flags: '-q -c -S -N -4 -6 --quiet --continue --server-response --timestamping --spider --no-check-certificate --https-only --no-cache --inet4-only --inet6-only --show-progress --retry-connrefused',
    values: {
      '-O --output-document -o --output-file -a --append-output -P --directory-prefix': 'write',
      '-i --input-file --post-file': 'read',
      '-e --execute': 'text',
      '-n -U --user-agent --header --post-data -T --timeout -t --tries -Y --max-redirect --user --password --method --body-data --limit-rate --progress -w --wait --waitretry --dns-timeout --connect-timeout --read-timeout':
        'text',
    },
    // -e runs .wgetrc commands (any setting, output files included); -i and --post-file read lists and bodies.
    highOnly: '-e --execute -i --input-file --post-file',
  },
  whoami: { operands: 'none' },
  id: { operands: 'text', flags: '-u -g -G -n -r -z --user --group --groups --name --real --zero' },
  uname: { operands: 'none', flags: '-a -s -n -r -v -m -p -i -o --all --kernel-name --nodename --kernel-release --kernel-version --machine --processor --hardware-platform --operating-system' },
  hostname: { operands: 'hostname', flags: '-s -f -d -i -I -A -a --short --fqdn --long --domain --ip-address --all-ip-addresses --all-fqdns --alias' },
  date: {
    operands: 'date',
    flags: '-u -R --utc --universal --rfc-email',
    values: { '-d --date -D --rfc-3339 -s --set': 'text', '-r --reference -f --file': 'read', '-I --iso-8601': 'text?' },
    highOnly: '-s --set',
  },
  uptime: { operands: 'none', flags: '-p -s --pretty --since' },
  env: {
    operands: 'command',
    stopAtOperand: true,
    // Bare env (and env -0) prints the environment; anything else changes it for a command.
    flags: '-0 -i -v --null --ignore-environment --debug',
    values: { '-u --unset': 'text', '-C --chdir': 'chdir' },
    highOnly: '-i -v --ignore-environment --debug -u --unset -C --chdir',
  },
  printenv: { operands: 'text', flags: '-0 --null' },
  df: {
    operands: 'read',
    flags: '-h -H -k -m -T -a -i -P -l --human-readable --si --print-type --all --inodes --portability --local --total',
    values: { '-t --type -x --exclude-type -B --block-size': 'text', '--output': 'text?' },
  },
  free: { operands: 'none', flags: '-b -k -m -g -h -t -w -l -v --bytes --kibi --mebi --gibi --kilo --mega --giga --human --total --wide --si --lohi' },
  neofetch: { operands: 'none', flags: '--stdout --off' },
  which: { operands: 'text', flags: '-a' },
  nproc: { operands: 'none', flags: '--all', values: { '--ignore': 'text' } },
  ps: {
    operands: 'text',
    flags: '-e -f -A -a -x -l -w -H -j -F -T -L --forest --no-headers --headers',
    values: { '-o --format -p --pid --ppid -u --user -U -g -G -C --sort': 'text' },
  },
};

/** Accepted by every getopt-style binary. */
const COMMON_FLAGS = '--help --version';

interface OptionDef {
  /** Absent for a flag. */
  value?: ValueKind;
  optional?: boolean;
  mode?: Mode;
  highOnly?: boolean;
}

interface CompiledTable extends OptionTable {
  options: Map<string, OptionDef>;
}

const names = (list: string) => list.split(' ').filter(Boolean);

/** The table as lookups; an inconsistent entry (a name twice, a high-only name not listed) fails at load. */
function compile(bin: string, t: OptionTable): CompiledTable {
  const options = new Map<string, OptionDef>();
  const add = (name: string, def: OptionDef) => {
    if (!/^-(-[a-z0-9][a-z0-9.-]*|[^-])$/.test(name) || options.has(name)) throw new Error(`shell-policy table: ${bin} ${name}`);
    options.set(name, def);
  };
  for (const n of names(`${t.flags ?? ''} ${COMMON_FLAGS}`)) add(n, {});
  for (const [list, mode] of Object.entries(t.modes ?? {})) for (const n of names(list)) add(n, { mode });
  for (const [list, spec] of Object.entries(t.values ?? {})) {
    const optional = spec.endsWith('?');
    for (const n of names(list)) add(n, { value: spec.replace('?', '') as ValueKind, optional });
  }
  for (const n of names(t.highOnly ?? '')) {
    const def = options.get(n);
    if (!def) throw new Error(`shell-policy table: ${bin} ${n} is high-only but not listed`);
    def.highOnly = true;
  }
  return { ...t, options };
}

const TABLE = new Map<string, CompiledTable | { grammar: 'find' | 'test' | 'words' }>(
  Object.entries(SHELL_BINS).map(([bin, spec]) => [bin, 'grammar' in spec ? spec : compile(bin, spec)]),
);

// ---------------------------------------------------------------------------------------------
// Parsing argv with the table

interface ParsedOption {
  name: string;
  def: OptionDef;
  value?: string;
}

interface Parsed {
  options: ParsedOption[];
  operands: string[];
}

const notAllowed = (bin: string, what: string) => deny('option_not_allowed', `"${bin}" ${what} is not allowed`);

/** GNU getopt, restricted to the table: clusters (-la), attached values (-C/etc, -n5, --directory=/etc), "--", "-" as stdin. */
function parseOptions(bin: string, t: CompiledTable, args: string[]): Parsed {
  const options: ParsedOption[] = [];
  const operands: string[] = [];
  const lookup = (name: string) => {
    const def = t.options.get(name);
    if (!def) throw notAllowed(bin, `option "${name}"`);
    return def;
  };
  if (t.oldStyle) args = oldStyleArgs(bin, t, args);
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] as string;
    const takeNext = (name: string) => {
      if (i + 1 >= args.length) throw notAllowed(bin, `option "${name}" without its value`);
      return args[++i] as string;
    };
    if (arg === '--') {
      operands.push(...args.slice(i + 1));
      break;
    }
    if (arg === '-' || !arg.startsWith('-')) {
      if (t.stopAtOperand) {
        operands.push(...args.slice(i));
        break;
      }
      operands.push(arg);
      continue;
    }
    if (arg.startsWith('--')) {
      // Exact names only: GNU's abbreviations (--to-com) would let a prefix of an allowed name reach another option.
      const eq = arg.indexOf('=');
      const name = eq === -1 ? arg : arg.slice(0, eq);
      const def = lookup(name);
      if (!def.value) {
        if (eq !== -1) throw notAllowed(bin, `option "${name}" with a value`);
        options.push({ name, def });
      } else if (eq !== -1) options.push({ name, def, value: arg.slice(eq + 1) });
      else options.push(def.optional ? { name, def } : { name, def, value: takeNext(name) });
      continue;
    }
    if (t.numeric && /^-\d+$/.test(arg)) {
      options.push({ name: arg, def: {} });
      continue;
    }
    for (let j = 1; j < arg.length; j++) {
      const name = `-${arg[j]}`;
      const def = lookup(name);
      if (!def.value) {
        options.push({ name, def });
        continue;
      }
      const rest = arg.slice(j + 1);
      if (rest) options.push({ name, def, value: rest });
      else options.push(def.optional ? { name, def } : { name, def, value: takeNext(name) });
      break;
    }
  }
  return { options, operands };
}

/**
 * "tar czf out.tgz src" → "tar -czf out.tgz src". GNU gives each value-taking letter the next
 * word in turn, busybox hands the rest of the cluster to the first one; they agree only when
 * one letter takes a value and it comes last, so anything else is refused.
 */
function oldStyleArgs(bin: string, t: CompiledTable, args: string[]): string[] {
  const [first, ...rest] = args;
  if (first === undefined || first.startsWith('-')) return args;
  const letters = [...first];
  const valued = letters.filter((l) => t.options.get(`-${l}`)?.value);
  if (valued.length > 1 || (valued.length === 1 && letters.at(-1) !== valued[0])) {
    throw notAllowed(bin, `option cluster "${first}" (write it as "-${letters.join(' -')}" with each value after its option)`);
  }
  return [`-${first}`, ...rest];
}

// ---------------------------------------------------------------------------------------------
// What a command reads, writes and runs

/** A form allowed at level high only, and the rule that refuses it below. */
interface HighOnly {
  rule: string;
  message: string;
}

export interface PathIntent {
  reads: string[];
  writes: string[];
  /** Forms allowed at level high only (they run programs, or reach paths the policy cannot see). */
  highOnly: HighOnly[];
  /** Commands this one runs (find -exec, env COMMAND), checked as commands of their own at high; cwd relative to the caller's. */
  runs: Array<{ argv: string[]; cwd?: string }>;
}

const execOnly = (what: string): HighOnly => ({ rule: 'exec_not_allowed', message: `${what} is allowed at permission level high only` });
const relativeTo = (dir: string, path: string) => (path.startsWith('/') ? path : posix.join(dir, path));

/** Which paths a command reads and writes, what it runs, and which of its forms need level high. Throws on what the table refuses. */
export function collectPathIntent(argv: string[]): PathIntent {
  const [bin = '', ...args] = argv;
  const intent: PathIntent = { reads: [], writes: [], highOnly: [], runs: [] };
  const spec = TABLE.get(bin);
  if (!spec) {
    // Outside the table (level high only): path-like arguments count as reads; writes are the container's to bound.
    intent.reads = args.filter((a) => !a.startsWith('-') && (a.startsWith('/') || a.startsWith('..') || a.includes('/../')));
    return intent;
  }
  if ('grammar' in spec) {
    if (spec.grammar === 'find') findIntent(args, intent);
    if (spec.grammar === 'test') testIntent(args, intent);
    return intent; // words: echo, true, false print or ignore them
  }
  const parsed = parseOptions(bin, spec, args);
  for (const o of parsed.options) {
    if (o.def.highOnly) intent.highOnly.push(execOnly(`"${bin} ${o.name}"`));
    if (o.value !== undefined && o.def.value) valuePaths(bin, o.def.value, o.value, intent);
  }
  operandPaths(bin, spec, parsed, intent);
  return intent;
}

const URL_SCHEMES = /^(https?|ftps?):\/\//i;

function checkUrl(bin: string, url: string) {
  // file:, scp:, dict:, smb: and friends read, write or reach beyond the web; a scheme-less word would be guessed at.
  if (!URL_SCHEMES.test(url)) throw deny('url_not_allowed', `"${bin}" fetches http(s):// and ftp(s):// URLs only, not "${url}"`);
}

/** The paths in one option value. Kinds that depend on the whole command (chdir, archive, scripts) are read by operandPaths. */
function valuePaths(bin: string, kind: ValueKind, v: string, intent: PathIntent) {
  const { reads, writes } = intent;
  switch (kind) {
    case 'read':
    case 'pattern-file':
    case 'script-file':
    case 'reference':
      reads.push(v);
      return;
    case 'write':
    case 'target':
      writes.push(v);
      return;
    case 'output':
      // curl -o "#1" names the file after a part of a globbed URL: "{../../tmp/x}".
      if (/#\d/.test(v)) throw notAllowed(bin, `output name "${v}" (#N takes text from the URL)`);
      writes.push(v);
      return;
    case 'in-place':
      // A suffix with "/" puts the backup in another directory.
      if (v.includes('/')) throw notAllowed(bin, `backup suffix "${v}"`);
      return;
    case 'at-file':
      if (v.startsWith('@')) reads.push(v.slice(1));
      return;
    case 'cookie':
      if (!v.includes('=')) reads.push(v); // no "=": a cookie file
      return;
    case 'urlencode': {
      // "name=content" is text; "@file" and "name@file" read the file.
      const at = v.indexOf('@');
      const eq = v.indexOf('=');
      if (at !== -1 && (eq === -1 || at < eq)) reads.push(v.slice(at + 1));
      return;
    }
    case 'form': {
      // name=@file or name=<file reads it; ";type=", ";headers=@file" and quoting are refused rather than followed.
      const content = v.slice(v.indexOf('=') + 1);
      if (/^[@<]/.test(content)) {
        if (/[;,"]/.test(content)) throw notAllowed(bin, `form field "${v}"`);
        reads.push(content.slice(1));
      } else if (content.includes(';')) throw notAllowed(bin, `form field "${v}"`);
      return;
    }
    case 'write-out':
      if (v.startsWith('@')) reads.push(v.slice(1));
      // %output{file} and %output{>>file} (curl 8.3) write to a file.
      for (const m of v.matchAll(/%output\{(?:>>)?([^}]*)\}/g)) writes.push(m[1] as string);
      return;
    case 'url':
      checkUrl(bin, v);
      return;
    default:
      return; // text, pattern, script, chdir, archive
  }
}

/** Whether an option of this kind or mode was given. */
const has = (parsed: Parsed, k: ValueKind | Mode) => parsed.options.some((o) => o.def.value === k || o.def.mode === k);
const valuesOf = (parsed: Parsed, k: ValueKind) => parsed.options.flatMap((o) => (o.def.value === k && o.value !== undefined ? [o.value] : []));

function operandPaths(bin: string, t: CompiledTable, parsed: Parsed, intent: PathIntent) {
  const { reads, writes } = intent;
  const ops = parsed.operands;
  const extraOperand = (op: string) => deny('operand_not_allowed', `"${bin}" takes no operand "${op}" here`);
  switch (t.operands) {
    case 'read':
      reads.push(...ops);
      return;
    case 'write':
      writes.push(...ops);
      return;
    case 'read-write':
      reads.push(...ops);
      if (!has(parsed, 'stdout')) writes.push(...ops);
      return;
    case 'text':
      return;
    case 'none':
      if (ops[0] !== undefined) throw extraOperand(ops[0]);
      return;
    case 'last-write':
    case 'link': {
      const targets = valuesOf(parsed, 'target');
      const sources = targets.length || ops.length < 2 ? ops : ops.slice(0, -1);
      const dest = targets.length ? targets : ops.length < 2 ? ['.'] : ops.slice(-1);
      if (!targets.length) writes.push(...dest); // -t DIR: written already, as an option value
      // A symlink's target is relative to where the link is (DEST, or the directory DEST is in), unless ln -r.
      const fromLink = t.operands === 'link' && has(parsed, 'symbolic') && !has(parsed, 'relative');
      const bases = fromLink ? dest.flatMap((d) => [d, posix.dirname(d)]) : ['.'];
      reads.push(...bases.flatMap((base) => sources.map((src) => relativeTo(base, src))));
      return;
    }
    case 'pattern-then-read':
      reads.push(...(has(parsed, 'pattern') || has(parsed, 'pattern-file') ? ops : ops.slice(1)));
      return;
    case 'mode-then-write':
      writes.push(...(has(parsed, 'reference') ? ops : ops.slice(1)));
      return;
    case 'in-out':
      if (ops[2] !== undefined) throw extraOperand(ops[2]);
      reads.push(...ops.slice(0, 1));
      writes.push(...ops.slice(1));
      return;
    case 'url':
      for (const u of ops) checkUrl(bin, u);
      return;
    case 'script-then-read': {
      const scripts = valuesOf(parsed, 'script');
      const files = scripts.length || has(parsed, 'script-file') ? ops : ops.slice(1);
      if (!scripts.length && !has(parsed, 'script-file')) {
        if (ops[0] === undefined) throw notAllowed(bin, 'without a script');
        scripts.push(ops[0]);
      }
      sedScriptIntent(scripts, intent);
      reads.push(...files);
      if (has(parsed, 'in-place')) writes.push(...files);
      return;
    }
    case 'tar':
      tarIntent(bin, parsed, intent);
      return;
    case 'command': {
      // env [NAME=VALUE]... [COMMAND [ARG]...]: a command, or a changed environment, needs high.
      const firstCommand = ops.findIndex((o) => !o.includes('=') && o !== '-');
      if (ops.length) intent.highOnly.push(execOnly(`"env ${ops.join(' ')}"`));
      if (firstCommand !== -1) intent.runs.push({ argv: ops.slice(firstCommand), cwd: valuesOf(parsed, 'chdir').at(-1) });
      return;
    }
    case 'date':
      for (const op of ops) if (!op.startsWith('+')) intent.highOnly.push(execOnly(`"date ${op}" (it sets the clock)`));
      return;
    case 'hostname':
      for (const op of ops) intent.highOnly.push(execOnly(`"hostname ${op}" (it sets the hostname)`));
      return;
  }
}

/**
 * tar by its mode: -c reads the operands (relative to -C) and writes the archive; -x reads the
 * archive and writes into -C (the operands are member names); -t reads the archive.
 */
function tarIntent(bin: string, parsed: Parsed, intent: PathIntent) {
  const modes = (['create', 'extract', 'list'] as const).filter((m) => has(parsed, m));
  if (modes.length !== 1) throw notAllowed(bin, 'without exactly one of -c, -x, -t');
  const mode = modes[0];
  // GNU tar applies -C to the operands after it, each relative to the one before: one -C keeps that knowable.
  const dirs = valuesOf(parsed, 'chdir');
  if (dirs.length > 1) throw notAllowed(bin, 'option "-C" more than once');
  const dir = dirs[0] ?? '.';
  for (const archive of valuesOf(parsed, 'archive')) {
    // GNU tar takes HOST:FILE for a remote archive and runs rsh to reach it.
    if (archive.includes(':') && !parsed.options.some((o) => o.name === '--force-local')) {
      intent.highOnly.push(execOnly(`"tar -f ${archive}" (HOST:FILE runs a remote shell)`));
    }
    (mode === 'create' ? intent.writes : intent.reads).push(archive);
  }
  if (mode === 'create') {
    if (dirs.length) intent.reads.push(dir);
    // "@other.tar" appends another archive's members.
    intent.reads.push(...parsed.operands.map((op) => relativeTo(dir, op.startsWith('@') ? op.slice(1) : op)));
  } else if (mode === 'extract' && !has(parsed, 'stdout')) intent.writes.push(dir);
}

// ---------------------------------------------------------------------------------------------
// find

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

function findIntent(args: string[], intent: PathIntent) {
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
    const kind = FIND_PRIMARIES.get(primary) ?? (/^-newer[amcB][amcBt]$/.test(primary) ? (primary.endsWith('t') ? 'text' : 'read') : undefined);
    switch (kind) {
      case undefined:
        throw bad(`primary "${primary}"`);
      case 'none':
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
        intent.highOnly.push(execOnly(`"find ${primary}"`));
        intent.writes.push(arg());
        if (kind === 'write+text') arg();
        break;
      case 'follow':
        intent.highOnly.push(execOnly(`"find ${primary}"`));
        break;
      case 'exec': {
        intent.highOnly.push(execOnly(`"find ${primary}"`));
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

// ---------------------------------------------------------------------------------------------
// test

const TEST_FILE_UNARY = new Set(names('-e -f -d -r -w -x -s -L -h -b -c -p -S -u -g -k -O -G -N'));
const TEST_FILE_BINARY = new Set(names('-nt -ot -ef'));

/** test's expression: the operands of file tests are reads (their existence is information); the rest is text. */
function testIntent(args: string[], intent: PathIntent) {
  args.forEach((a, i) => {
    const next = args[i + 1];
    const prev = args[i - 1];
    if (TEST_FILE_UNARY.has(a) && next !== undefined) intent.reads.push(next);
    if (TEST_FILE_BINARY.has(a)) intent.reads.push(...[prev, next].filter((x): x is string => x !== undefined));
  });
}

// ---------------------------------------------------------------------------------------------
// sed scripts

interface SedCommand {
  cmd: string;
  /** s flags. */
  flags?: string;
  /** r R w W, and s///w: the file. */
  file?: string;
}

/** Below high: these commands, one per script, and s flags from g p i I and digits. */
const SAFE_SED_COMMANDS = new Set(['s', 'y', 'p', 'd', '=', 'q']);
const SAFE_S_FLAGS = /^[gpiI0-9]*$/;

/**
 * sed scripts: at high, the whole script (GNU joins -e parts with newlines) is read for the files
 * it names; below high, each part must be one command from SAFE_SED_COMMANDS (no e, r, R, w, W).
 */
function sedScriptIntent(scripts: string[], intent: PathIntent) {
  for (const c of parseSedScript(scripts.join('\n'))) {
    if (c.file === undefined) continue;
    (c.cmd === 'r' || c.cmd === 'R' ? intent.reads : intent.writes).push(c.file);
  }
  for (const script of scripts) {
    const why = lowSedProblem(script);
    if (why) intent.highOnly.push({ rule: 'sed_script', message: `sed script ${JSON.stringify(script)}: ${why}; more is allowed at permission level high only` });
  }
}

function lowSedProblem(script: string): string | undefined {
  if (/[;\n{}]/.test(script)) return 'one command only (";", newlines, "{" and "}" are not allowed)';
  let cmds: SedCommand[];
  try {
    cmds = parseSedScript(script);
  } catch {
    return 'it does not parse on its own';
  }
  if (cmds.length > 1) return 'one command only';
  const c = cmds[0];
  if (!c) return undefined;
  if (!SAFE_SED_COMMANDS.has(c.cmd)) return `command "${c.cmd}" is not allowed (only ${[...SAFE_SED_COMMANDS].join(' ')})`;
  if (c.file !== undefined || !SAFE_S_FLAGS.test(c.flags ?? '')) return `s flags "${c.flags ?? ''}${c.file !== undefined ? `w ${c.file}` : ''}" are not allowed (only g p i I and a number)`;
  return undefined;
}

// sed commands by what follows them: nothing; an optional number; a label (or version) up to
// ";" or the line's end; text, a file name, or a shell command up to the line's end.
const SED_BARE = '}=dDgGhHnNpPxzF';
const SED_NUMBER = 'lLqQ';
const SED_LABEL = ':btTv';
const SED_TEXT = 'aic';
const SED_FILE = 'rRwW';

/**
 * A sed script's commands, by the grammar GNU sed and busybox share. Throws sed_script where it
 * cannot be read with certainty: where the two could disagree on where a command ends (a
 * delimiter inside [...], ";" or "}" in a file name or text), the script is refused.
 */
function parseSedScript(script: string): SedCommand[] {
  const cmds: SedCommand[] = [];
  let i = 0;
  const fail = (why: string) => deny('sed_script', `sed script ${JSON.stringify(script)}: ${why}`);
  const at = () => script[i];
  const skip = (chars: string) => {
    while (i < script.length && chars.includes(script[i] as string)) i++;
  };
  const digits = () => {
    const start = i;
    while (/\d/.test(at() ?? '')) i++;
    return i > start;
  };
  /** A regex up to its unescaped delimiter (the delimiter is consumed). */
  const delimited = (delim: string, regex: boolean) => {
    for (; i < script.length; i++) {
      const c = script[i] as string;
      if (c === '\\') i++;
      else if (c === '\n') break;
      else if (c === delim) {
        i++;
        return;
      }
      else if (regex && c === '[') {
        const end = bracketEnd(script, i);
        if (end !== -1 && script.slice(i, end).includes(delim)) throw fail(`"${delim}" inside [...] (use another delimiter, as s|a/b|c|)`);
      }
    }
    throw fail('unterminated command');
  };
  const delimiter = () => {
    const d = script[i++];
    if (d === undefined || d === '\n' || d === '\\') throw fail('bad delimiter');
    return d;
  };
  const address = () => {
    const c = at();
    if (c === undefined) return false;
    if (/\d/.test(c)) {
      digits();
      if (at() === '~') {
        i++;
        digits();
      }
    } else if (c === '$') i++;
    else if (c === '/' || c === '\\') {
      i++;
      delimited(c === '/' ? '/' : delimiter(), true);
      skip('IM');
    } else return false;
    return true;
  };
  /** To the end of the line: a file name, a label, text. */
  const rest = (what: string, terminators = '\n') => {
    skip(' \t');
    const start = i;
    while (i < script.length && !terminators.includes(script[i] as string)) i++;
    const value = script.slice(start, i);
    if (/[;}]/.test(value)) throw fail(`";" or "}" in the ${what} "${value}" (sed implementations differ on where it ends)`);
    return value;
  };
  /** After a command: blanks, then the end, a newline, ";", "}" or a comment. */
  const end = () => {
    skip(' \t');
    const c = at();
    if (c === undefined || c === '}' || c === '#') return;
    if (c !== '\n' && c !== ';') throw fail(`unexpected "${c}" after a command`);
    i++;
  };
  for (;;) {
    skip(' \t\n;');
    if (i >= script.length) return cmds;
    if (at() === '#') {
      cmds.push({ cmd: '#' });
      rest('comment');
      continue;
    }
    if (address()) {
      skip(' \t');
      if (at() === ',') {
        i++;
        skip(' \t');
        if (at() === '+' || at() === '~') {
          i++;
          digits();
        } else if (!address()) throw fail('a second address is missing');
      }
    }
    skip(' \t');
    while (at() === '!') {
      i++;
      skip(' \t');
    }
    const cmd = script[i++];
    if (cmd === undefined) throw fail('a command is missing');
    if (cmd === '{') cmds.push({ cmd });
    else if (SED_BARE.includes(cmd) || SED_NUMBER.includes(cmd)) {
      if (SED_NUMBER.includes(cmd)) {
        skip(' \t');
        digits();
      }
      cmds.push({ cmd });
      end();
    } else if (SED_LABEL.includes(cmd)) {
      const label = rest('label', '\n;');
      if (/\s/.test(label) || (cmd === ':' && !label)) throw fail(`label "${label}"`);
      cmds.push({ cmd });
    } else if (SED_TEXT.includes(cmd)) {
      // "a text", or "a\" then the text on the next line; a trailing backslash continues it.
      skip(' \t');
      if (at() === '\\') {
        i++;
        skip(' \t');
        if (at() === '\n') i++;
      }
      const start = i;
      while (i < script.length && script[i] !== '\n') i += script[i] === '\\' ? 2 : 1;
      if (/[;}]/.test(script.slice(start, i))) throw fail(`";" or "}" in the text of "${cmd}"`);
      cmds.push({ cmd });
    } else if (SED_FILE.includes(cmd)) {
      const file = rest('file name');
      if (!file) throw fail(`"${cmd}" without a file`);
      cmds.push({ cmd, file });
    } else if (cmd === 'e') {
      rest('command');
      cmds.push({ cmd });
    } else if (cmd === 's' || cmd === 'y') {
      const d = delimiter();
      delimited(d, cmd === 's');
      delimited(d, false);
      let flags = '';
      while (cmd === 's' && /[gpiImMe0-9]/.test(at() ?? '')) flags += script[i++];
      if (cmd === 's' && at() === 'w') {
        i++;
        const file = rest('file name');
        if (!file) throw fail('"s///w" without a file');
        cmds.push({ cmd, flags, file });
      } else {
        cmds.push({ cmd, flags });
        end();
      }
    } else throw fail(`unknown command "${cmd}"`);
  }
}

/** The index after a bracket expression opening at i ("[]a]", "[^]a]", "[[:alpha:]]"), or -1 when it does not close. */
function bracketEnd(s: string, i: number): number {
  let j = i + 1;
  if (s[j] === '^') j++;
  if (s[j] === ']') j++;
  while (j < s.length) {
    const c = s[j] as string;
    if (c === '[' && ':.='.includes(s[j + 1] ?? ' ')) {
      const close = s.indexOf(`${s[j + 1]}]`, j + 2);
      if (close === -1) return -1;
      j = close + 2;
    } else if (c === ']') return j + 1;
    else j++;
  }
  return -1;
}

// ---------------------------------------------------------------------------------------------
// The check

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
  const inside = (path: string, write = false) => {
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
