/**
 * The shell policy's table, as data. Every binary of the low and medium lists has an entry: the
 * options it may be given, what their values are, and what its operands are. Anything the table
 * does not know is refused (an unknown option could read, write or run anything), and forms that
 * run programs or reach beyond the paths the policy can see are marked high-only.
 */

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
export type ValueKind =
  | 'text'
  | 'read'
  | 'write'
  | 'target'
  | 'chdir'
  | 'archive'
  | 'pattern'
  | 'pattern-file'
  | 'script'
  | 'script-file'
  | 'in-place'
  | 'reference'
  | 'at-file'
  | 'cookie'
  | 'form'
  | 'urlencode'
  | 'write-out'
  | 'output'
  | 'url';

/** A trailing "?": the value is optional and only ever attached (-i.bak, --color=auto). */
type ValueSpec = ValueKind | `${ValueKind}?`;

/** Flags that change what the operands are. */
export type Mode = 'stdout' | 'create' | 'extract' | 'list' | 'symbolic' | 'relative';

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
  | 'read'
  | 'write'
  | 'read-write'
  | 'text'
  | 'none'
  | 'last-write'
  | 'link'
  | 'pattern-then-read'
  | 'script-then-read'
  | 'mode-then-write'
  | 'in-out'
  | 'url'
  | 'tar'
  | 'command'
  | 'date'
  | 'hostname';

/** A getopt-style binary. Option names are space-separated lists ("-n --lines"). */
export interface OptionTable {
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
export interface GrammarSpec {
  grammar: 'find' | 'test' | 'words';
}

type BinSpec = OptionTable | GrammarSpec;

/** The names in a space-separated list ("-n --lines"). */
export const names = (list: string) => list.split(' ').filter(Boolean);

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
    values: {
      '-w --width --sort --time --time-style --format --indicator-style --quoting-style --block-size -I --ignore --hide': 'text',
      '--color --colour': 'text?',
    },
  },
  cat: {
    operands: 'read',
    flags: '-n -b -s -E -T -A -v -e -t -u --number --number-nonblank --squeeze-blank --show-all --show-ends --show-tabs --show-nonprinting',
  },
  head: {
    operands: 'read',
    numeric: true,
    flags: '-q -v -z --quiet --silent --verbose --zero-terminated',
    values: { '-n --lines -c --bytes': 'text' },
  },
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
  touch: {
    operands: 'write',
    flags: '-a -m -c -h --no-create --no-dereference',
    values: { '-d --date -t --time': 'text', '-r --reference': 'read' },
  },
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
    flags:
      '-s -h -a -c -k -m -b -x -L -H -l -S --summarize --human-readable --all --total --apparent-size --bytes --one-file-system --dereference --count-links --separate-dirs --si',
    values: { '-d --max-depth -B --block-size --exclude': 'text' },
  },
  sort: {
    operands: 'read',
    flags:
      '-n -r -u -f -b -d -g -h -i -M -V -R -s -z -c -C -m --numeric-sort --reverse --unique --ignore-case --ignore-leading-blanks --dictionary-order --general-numeric-sort --human-numeric-sort --ignore-nonprinting --month-sort --version-sort --random-sort --stable --zero-terminated --check --merge',
    values: {
      '-k --key -t --field-separator -S --buffer-size --parallel --compress-program': 'text',
      '-o --output -T --temporary-directory': 'write',
    },
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
    values: {
      '-U -C -x --exclude -L --label -I --ignore-matching-lines -W --width': 'text',
      '-X --exclude-from': 'read',
      '--unified --context --color': 'text?',
    },
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
    highOnly:
      '-I --use-compress-program --to-command --checkpoint-action --info-script --new-volume-script -F --rsh-command -T --files-from',
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
  chmod: {
    operands: 'mode-then-write',
    flags: '-R -v -c -f --recursive --verbose --changes --silent --quiet --preserve-root',
    values: { '--reference': 'reference' },
  },

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
    flags:
      '-q -c -S -N -4 -6 --quiet --continue --server-response --timestamping --spider --no-check-certificate --https-only --no-cache --inet4-only --inet6-only --show-progress --retry-connrefused',
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
  uname: {
    operands: 'none',
    flags:
      '-a -s -n -r -v -m -p -i -o --all --kernel-name --nodename --kernel-release --kernel-version --machine --processor --hardware-platform --operating-system',
  },
  hostname: {
    operands: 'hostname',
    flags: '-s -f -d -i -I -A -a --short --fqdn --long --domain --ip-address --all-ip-addresses --all-fqdns --alias',
  },
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
  free: {
    operands: 'none',
    flags: '-b -k -m -g -h -t -w -l -v --bytes --kibi --mebi --gibi --kilo --mega --giga --human --total --wide --si --lohi',
  },
  neofetch: { operands: 'none', flags: '--stdout --off' },
  which: { operands: 'text', flags: '-a' },
  nproc: { operands: 'none', flags: '--all', values: { '--ignore': 'text' } },
  ps: {
    operands: 'text',
    flags: '-e -f -A -a -x -l -w -H -j -F -T -L --forest --no-headers --headers',
    values: { '-o --format -p --pid --ppid -u --user -U -g -G -C --sort': 'text' },
  },
};
