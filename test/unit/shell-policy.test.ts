import { describe, expect, it } from 'vitest';
import { LOW_BINS, MEDIUM_EXTRA_BINS } from '../../src/plan/levels.js';
import { checkShellCommand, collectPathIntent, SHELL_BINS, splitCommand } from '../../src/plan/shell/index.js';

function rule(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (err) {
    return (err as { details?: { rule?: string } }).details?.rule;
  }
  return undefined;
}

describe('splitCommand', () => {
  it('splits words and quotes without a shell', () => {
    expect(splitCommand(`cp "my file.txt" 'b c' ./`)).toEqual(['cp', 'my file.txt', 'b c', './']);
    expect(splitCommand('  ls   -la  ')).toEqual(['ls', '-la']);
    expect(splitCommand('echo ""')).toEqual(['echo', '']);
  });

  it.each([
    'ls; rm -rf /',
    'cat a | sh',
    'echo x > f',
    'cat < f',
    'echo `id`',
    'echo $(id)',
    'echo $HOME',
    'a && b',
    'sleep 1 &',
    'ls *',
    'echo "$(id)"',
    'ls ~',
    'a\nb',
  ])('refuses %j', (cmd) => {
    expect(rule(() => splitCommand(cmd))).toBe('shell_operator');
  });
});

describe('collectPathIntent', () => {
  const paths = (argv: string[]) => {
    const { reads, writes } = collectPathIntent(argv);
    return { reads, writes };
  };
  it('knows the common commands', () => {
    expect(paths(['cp', '-r', 'a', 'b', 'dest/'])).toEqual({ reads: ['a', 'b'], writes: ['dest/'] });
    expect(paths(['mv', 'a', 'b'])).toEqual({ reads: [], writes: ['a', 'b'] });
    expect(paths(['grep', '-r', 'needle', 'src', '/etc'])).toEqual({ reads: ['src', '/etc'], writes: [] });
    expect(paths(['find', '.', '/etc', '-name', 'x'])).toEqual({ reads: ['.', '/etc'], writes: [] });
    expect(paths(['curl', '-o', '/tmp/x', 'https://example.com'])).toEqual({ reads: [], writes: ['/tmp/x'] });
  });

  it('counts option values as paths, wherever they are attached', () => {
    expect(paths(['grep', '-rf/etc/pats', 'src'])).toEqual({ reads: ['/etc/pats', 'src'], writes: [] });
    expect(paths(['grep', '-e', 'a', '-e', 'b', 'f'])).toEqual({ reads: ['f'], writes: [] });
    expect(paths(['cp', '--target-directory=/tmp', 'a', 'b'])).toEqual({ reads: ['a', 'b'], writes: ['/tmp'] });
    expect(paths(['sort', '-o', 'out', 'in'])).toEqual({ reads: ['in'], writes: ['out'] });
    expect(paths(['uniq', 'in', 'out'])).toEqual({ reads: ['in'], writes: ['out'] });
    expect(paths(['sed', '-i', 's/a/b/', 'f'])).toEqual({ reads: ['f'], writes: ['f'] });
    expect(paths(['ln', '-s', '../a', 'sub/l'])).toEqual({ reads: ['sub/a', 'a'], writes: ['sub/l'] });
  });

  it('resolves tar operands against -C and follows its mode', () => {
    expect(paths(['tar', '-C', 'sub', '-czf', 'out.tgz', 'a', '../../etc'])).toEqual({
      reads: ['sub', 'sub/a', '../etc'],
      writes: ['out.tgz'],
    });
    expect(paths(['tar', '--directory=/etc', '-cf', 'x', 'passwd'])).toEqual({ reads: ['/etc', '/etc/passwd'], writes: ['x'] });
    expect(paths(['tar', 'xzf', 'a.tgz', '-C', 'sub'])).toEqual({ reads: ['a.tgz'], writes: ['sub'] });
    expect(paths(['tar', '-tf', 'a.tar', 'member'])).toEqual({ reads: ['a.tar'], writes: [] });
  });

  it('names the forms that need level high, and the commands run', () => {
    expect(collectPathIntent(['find', '.', '-exec', 'id', ';']).highOnly).toEqual([
      { rule: 'exec_not_allowed', message: expect.stringContaining('find -exec') },
    ]);
    expect(collectPathIntent(['env', 'FOO=1', 'ls', '-la']).runs).toEqual([{ argv: ['ls', '-la'], cwd: undefined }]);
    expect(collectPathIntent(['env', '-0']).highOnly).toEqual([]);
  });
});

/** The matrix of seed 004, as policy (the real-container half lives in test/integration/sessions.test.ts). */
describe('checkShellCommand by level', () => {
  const check = (level: 'low' | 'medium' | 'high', cmd: string) => rule(() => checkShellCommand(level, splitCommand(cmd)));
  it.each([
    ['low', 'curl --version', 'binary_not_allowed'],
    ['low', 'whoami', 'binary_not_allowed'],
    ['low', 'ls -la', undefined],
    ['low', 'mkdir -p notes/a', undefined],
    ['low', 'cat ../other/secret', 'read_outside_workspace'],
    ['medium', 'curl --version', undefined],
    ['medium', 'whoami', undefined],
    ['medium', 'cat /etc/passwd', 'read_outside_workspace'],
    ['medium', 'python3 -c 1', 'binary_not_allowed'],
    ['high', 'whoami', undefined],
    ['high', 'python3 -c 1', undefined],
    ['high', 'cp /etc/hostname ./', undefined],
    ['high', 'cp x /outside/', 'write_outside_workspace'],
    ['high', 'touch /tmp/x', 'write_outside_workspace'],
    ['high', 'rm -rf ../..', 'write_outside_workspace'],
    ['high', 'mv /workspace/a /workspace/b', undefined],
    ['high', '/bin/sh -c id', 'binary_path'],
    ['high', '', 'empty_command'],
  ] as const)('%s: %j → %s', (level, cmd, expected) => {
    expect(check(level, cmd)).toBe(expected);
  });
});

/** Renders argv as a command line for splitCommand (single quotes where a shell would interpret something). */
const toCommand = (argv: string[]) => argv.map((a) => (/^[\w@%+=:,./-]+$/.test(a) ? a : `'${a}'`)).join(' ');

type Level = 'low' | 'medium' | 'high';
const LOW_MEDIUM: Level[] = ['low', 'medium'];

/**
 * Bypass attempts from the outside attack, and their class: options and option values that read,
 * write or run something. Each is checked as argv and as a command string, at each level listed.
 */
const ATTACKS: Array<[argv: string[], rule: string, levels?: Level[]]> = [
  // The report's own examples.
  [['find', '.', '-exec', 'sh', '-c', 'env', ';'], 'exec_not_allowed'],
  [['grep', '-e', 'root', '/etc/passwd'], 'read_outside_workspace'],
  [['grep', '-eroot', '/etc/passwd'], 'read_outside_workspace'],
  [['sed', 'r /etc/passwd', 'notes.txt'], 'sed_script'],
  [['tar', '-C/etc', '-cf', 'x', 'passwd'], 'read_outside_workspace'],
  [['sed', '-n', 'w /tmp/x', 'notes.txt'], 'sed_script'],
  [['cp', '--target-directory=/tmp', 'x'], 'write_outside_workspace'],
  [['env', 'sh', '-c', 'id'], 'exec_not_allowed', ['medium']],
  [['env', 'sh', '-c', 'id'], 'binary_not_allowed', ['low']],
  // find: commands, files written, symlinks followed, paths in its expression.
  [['find', '.', '-execdir', 'sh', '-c', 'id', '{}', '+'], 'exec_not_allowed'],
  [['find', '.', '-ok', 'rm', '{}', ';'], 'exec_not_allowed'],
  [['find', '.', '-okdir', 'rm', '{}', ';'], 'exec_not_allowed'],
  [['find', '.', '-name', 'x', '-fprint', 'out.txt'], 'exec_not_allowed'],
  [['find', '.', '-fprintf', '/tmp/x', '%p'], 'exec_not_allowed'],
  [['find', '.', '-fls', '/tmp/x'], 'exec_not_allowed'],
  [['find', '-L', '.', '-name', 'x'], 'exec_not_allowed'],
  [['find', '.', '-follow'], 'exec_not_allowed'],
  [['find', '.', '-newer', '/etc/passwd'], 'read_outside_workspace'],
  [['find', '/etc', '-name', 'passwd'], 'read_outside_workspace'],
  [['find', '.', '-files0-from', 'list'], 'option_not_allowed'],
  [['find', '.', '-exec', 'id'], 'option_not_allowed'],
  // sed: e r R w W, s///e and s///w, several commands, script files, backups elsewhere.
  [['sed', 's/a/b/e', 'f'], 'sed_script'],
  [['sed', 's/a/b/w /tmp/x', 'f'], 'sed_script'],
  [['sed', '1e id', 'f'], 'sed_script'],
  [['sed', 'e', 'f'], 'sed_script'],
  [['sed', 'R /etc/passwd', 'f'], 'sed_script'],
  [['sed', '$W /tmp/x', 'f'], 'sed_script'],
  [['sed', 's/a/b/;w /tmp/x', 'f'], 'sed_script'],
  [['sed', 'p\nw /tmp/x', 'f'], 'sed_script'],
  [['sed', '1{w /tmp/x', 'f'], 'sed_script'],
  [['sed', '-e', 'p', '-e', 'w /tmp/x', 'f'], 'sed_script'],
  [['sed', '--expression=r /etc/passwd', 'f'], 'sed_script'],
  [['sed', '-n', '/x/ a text', 'f'], 'sed_script'],
  [['sed', 's/[/]/x/w /tmp/x', 'f'], 'sed_script'],
  [['sed', '-f', 'script.sed', 'f'], 'exec_not_allowed'],
  [['sed', '--file=script.sed', 'f'], 'exec_not_allowed'],
  [['sed', '-i/tmp/*', 's/a/b/', 'f'], 'option_not_allowed'],
  [['sed', 's/a/b/', '/etc/passwd'], 'read_outside_workspace'],
  // tar: programs it runs, file lists, remote archives, paths through -C and -f.
  [['tar', '--to-command=sh', '-xf', 'a.tar'], 'exec_not_allowed'],
  [['tar', '-I', 'sh', '-cf', 'x.tar', 'src'], 'exec_not_allowed'],
  [['tar', '--use-compress-program=sh', '-cf', 'x.tar', 'src'], 'exec_not_allowed'],
  [['tar', '--checkpoint-action=exec=id', '-cf', 'x.tar', 'src'], 'exec_not_allowed'],
  [['tar', '-F', 'sh', '-cf', 'x.tar', 'src'], 'exec_not_allowed'],
  [['tar', '--info-script=sh', '-cf', 'x.tar', 'src'], 'exec_not_allowed'],
  [['tar', '--rsh-command=sh', '-cf', 'x.tar', 'src'], 'exec_not_allowed'],
  [['tar', '-T', 'list.txt', '-cf', 'x.tar'], 'exec_not_allowed'],
  [['tar', '--files-from=list.txt', '-cf', 'x.tar'], 'exec_not_allowed'],
  [['tar', '-cf', 'host:x.tar', 'src'], 'exec_not_allowed'],
  [['tar', '--to-com=sh', '-xf', 'a.tar'], 'option_not_allowed'],
  [['tar', '-P', '-cf', 'x.tar', 'src'], 'option_not_allowed'],
  [['tar', '--transform=s/a/b/', '-cf', 'x.tar', 'src'], 'option_not_allowed'],
  [['tar', '--directory=/etc', '-cf', 'x.tar', 'passwd'], 'read_outside_workspace'],
  [['tar', '-C', 'sub', '-cf', 'x.tar', '../../etc/passwd'], 'read_outside_workspace'],
  [['tar', '-xf', 'a.tar', '-C', '/tmp'], 'write_outside_workspace'],
  [['tar', '-xf', '/etc/a.tar'], 'read_outside_workspace'],
  [['tar', 'cf', '/tmp/x.tar', 'src'], 'write_outside_workspace'],
  [['tar', 'cfC', 'x.tar', '/etc', 'passwd'], 'option_not_allowed'],
  // Other options that run, read or write.
  [['sort', '--compress-program=sh', 'f'], 'exec_not_allowed'],
  [['sort', '-o', '/tmp/x', 'f'], 'write_outside_workspace'],
  [['sort', '-T/tmp', 'f'], 'write_outside_workspace'],
  [['sha256sum', '-c', 'sums.txt'], 'exec_not_allowed'],
  [['md5sum', '--check', 'sums.txt'], 'exec_not_allowed'],
  [['tail', '-f', 'log.txt'], 'exec_not_allowed'],
  [['tail', '-n5', '-F', 'log.txt'], 'exec_not_allowed'],
  [['grep', '-f', '/etc/passwd', 'f'], 'read_outside_workspace'],
  [['grep', '--file=/etc/passwd', 'f'], 'read_outside_workspace'],
  [['grep', '-rf/etc/passwd', '.'], 'read_outside_workspace'],
  [['grep', '--exclude-from=/etc/passwd', 'x', 'f'], 'read_outside_workspace'],
  [['head', '-n5', '/etc/passwd'], 'read_outside_workspace'],
  [['head', '-5', '/etc/passwd'], 'read_outside_workspace'],
  [['touch', '-r', '/etc/passwd', 'f'], 'read_outside_workspace'],
  [['touch', '--reference=/etc/passwd', 'f'], 'read_outside_workspace'],
  [['chmod', '--reference=/etc/passwd', 'f'], 'read_outside_workspace'],
  [['ln', '-s', '/etc/passwd', 'pw'], 'read_outside_workspace'],
  [['ln', '-s', '../../etc/passwd', 'sub/pw'], 'read_outside_workspace'],
  [['ln', '-sr', '../secret', 'sub/s'], 'read_outside_workspace'],
  [['uniq', 'in.txt', '/tmp/out'], 'write_outside_workspace'],
  [['mv', 'x', '/tmp/'], 'write_outside_workspace'],
  [['mv', '-t', '/tmp', 'x'], 'write_outside_workspace'],
  [['cp', '-t/tmp', 'x'], 'write_outside_workspace'],
  [['cp', '--parents', '../x', 'd'], 'option_not_allowed'],
  [['mkdir', '--mode=700', '/tmp/x'], 'write_outside_workspace'],
  [['gzip', '-c', '/etc/passwd'], 'read_outside_workspace'],
  [['realpath', '--relative-to=/etc', 'f'], 'read_outside_workspace'],
  [['diff', '-X', '/etc/passwd', 'a', 'b'], 'read_outside_workspace'],
  [['test', '-f', '/etc/shadow'], 'read_outside_workspace'],
  [['rm', '-rf', '--no-preserve-root', 'x'], 'option_not_allowed'],
  [['ls', '--bogus'], 'option_not_allowed'],
  [['cat', '-n', '--show-all', '-Z', 'f'], 'option_not_allowed'],
  [['cat', '--show-al', 'f'], 'option_not_allowed'],
  [['xargs', 'sh', '-c', 'id'], 'binary_not_allowed'],
  // Medium's network and information commands.
  [['env', 'FOO=1', 'ls'], 'exec_not_allowed', ['medium']],
  [['env', '-i', 'sh'], 'exec_not_allowed', ['medium']],
  [['env', '--', 'sh'], 'exec_not_allowed', ['medium']],
  [['env', '-u', 'HOME'], 'exec_not_allowed', ['medium']],
  [['env', '-C', '/tmp'], 'exec_not_allowed', ['medium']],
  [['env', '-S', 'sh -c id'], 'option_not_allowed', ['medium']],
  [['date', '-s', '2020-01-01'], 'exec_not_allowed', ['medium']],
  [['date', '010100002020'], 'exec_not_allowed', ['medium']],
  [['date', '-r', '/etc/passwd'], 'read_outside_workspace', ['medium']],
  [['hostname', 'evil'], 'exec_not_allowed', ['medium']],
  [['hostname', '-F', 'name.txt'], 'option_not_allowed', ['medium']],
  [['whoami', 'x'], 'operand_not_allowed', ['medium']],
  [['wget', '-e', 'robots=off', 'https://example.com'], 'exec_not_allowed', ['medium']],
  [['wget', '--execute=output_document=/tmp/x', 'https://example.com'], 'exec_not_allowed', ['medium']],
  [['wget', '--post-file=notes.txt', 'https://example.com'], 'exec_not_allowed', ['medium']],
  [['wget', '-i', 'urls.txt'], 'exec_not_allowed', ['medium']],
  [['wget', '-O', '/tmp/x', 'https://example.com'], 'write_outside_workspace', ['medium']],
  [['wget', '-P/tmp', 'https://example.com'], 'write_outside_workspace', ['medium']],
  [['wget', '--output-file=/tmp/log', 'https://example.com'], 'write_outside_workspace', ['medium']],
  [['wget', 'file:///etc/passwd'], 'url_not_allowed', ['medium']],
  [['curl', '-K', 'curl.cfg', 'https://example.com'], 'exec_not_allowed', ['medium']],
  [['curl', '--config=curl.cfg'], 'exec_not_allowed', ['medium']],
  [['curl', '-o', '/tmp/x', 'https://example.com'], 'write_outside_workspace', ['medium']],
  [['curl', '--output=/tmp/x', 'https://example.com'], 'write_outside_workspace', ['medium']],
  [['curl', '-D', '/tmp/h', 'https://example.com'], 'write_outside_workspace', ['medium']],
  [['curl', '-c', '/tmp/jar', 'https://example.com'], 'write_outside_workspace', ['medium']],
  [['curl', '--trace', '/tmp/t', 'https://example.com'], 'write_outside_workspace', ['medium']],
  [['curl', '--stderr', '/tmp/e', 'https://example.com'], 'write_outside_workspace', ['medium']],
  [['curl', '-w', '%output{/tmp/x}hi', 'https://example.com'], 'write_outside_workspace', ['medium']],
  [['curl', '-b', '/etc/passwd', 'https://example.com'], 'read_outside_workspace', ['medium']],
  [['curl', '-d', '@/etc/passwd', 'https://example.com'], 'read_outside_workspace', ['medium']],
  [['curl', '--data-binary', '@/etc/passwd', 'https://example.com'], 'read_outside_workspace', ['medium']],
  [['curl', '--data-urlencode', 'a@/etc/passwd', 'https://example.com'], 'read_outside_workspace', ['medium']],
  [['curl', '-T', '/etc/passwd', 'https://example.com'], 'read_outside_workspace', ['medium']],
  [['curl', '-F', 'f=@/etc/passwd', 'https://example.com'], 'read_outside_workspace', ['medium']],
  [['curl', '-F', 'f=x;headers=@/etc/passwd', 'https://example.com'], 'option_not_allowed', ['medium']],
  [['curl', '-w', '@/etc/passwd', 'https://example.com'], 'read_outside_workspace', ['medium']],
  [['curl', '-H', '@/etc/passwd', 'https://example.com'], 'read_outside_workspace', ['medium']],
  [['curl', 'file:///etc/passwd'], 'url_not_allowed', ['medium']],
  [['curl', '--url', 'FILE:/etc/passwd'], 'url_not_allowed', ['medium']],
  [['curl', 'dict://example.com/x'], 'url_not_allowed', ['medium']],
  [['curl', 'example.com'], 'url_not_allowed', ['medium']],
  [['curl', '-o', '#1', 'https://example.com/{../../tmp/x}'], 'option_not_allowed', ['medium']],
  [['curl', '--unix-socket', '/run/x.sock', 'http://localhost/'], 'option_not_allowed', ['medium']],
];

/** What must still work at low and medium (and, where listed, at medium only). */
const LEGITIMATE: Array<[argv: string[], levels?: Level[]]> = [
  [['ls', '-la']],
  [['ls', '--color=never', '-1', 'src']],
  [['grep', '-rn', 'needle', 'src']],
  [['grep', '-e', 'foo', '-e', 'bar', 'file']],
  [['grep', '-E', 'a|b', '--include=*.ts', '-r', '.']],
  [['find', '.', '-name', '*.ts', '-type', 'f']],
  [['find', 'src', '-maxdepth', '2', '(', '-name', 'a', '-o', '-name', 'b', ')', '-print']],
  [['find', '.', '-name', '*.tmp', '-delete']],
  [['sed', '-i', 's/a/b/g', 'notes.txt']],
  [['sed', '-i.bak', '-E', 's/(x)+/y/2', 'notes.txt']],
  [['sed', '-n', '1,5p', 'f']],
  [['sed', '$d', 'f']],
  [['sed', 's|a/b|c|', 'f']],
  [['sed', '/^#/d', 'f']],
  [['sed', 'y/abc/xyz/', 'f']],
  [['sed', '-e', 's/a/b/', '-e', '3q', 'f']],
  [['tar', '-czf', 'out.tgz', 'src']],
  [['tar', '-xzf', 'a.tgz', '-C', 'sub']],
  [['tar', 'xzf', 'a.tgz']],
  [['tar', '-tzvf', 'a.tgz']],
  [['tar', '--exclude=node_modules', '-C', 'src', '-cf', 'src.tar', '.']],
  [['cp', '-r', 'a', 'b/']],
  [['cp', '-t', 'dest', 'a', 'b']],
  [['mv', '-f', 'a', 'b']],
  [['mkdir', '-p', 'a/b']],
  [['head', '-n', '5', 'f']],
  [['head', '-5', 'f']],
  [['tail', '-n', '+2', 'f']],
  [['wc', '-l', 'f']],
  [['sort', '-u', '-k2,2n', '-o', 'sorted.txt', 'f']],
  [['uniq', '-c', 'in.txt', 'out.txt']],
  [['diff', '-u', 'a', 'b']],
  [['cut', '-d,', '-f1', 'f']],
  [['tr', 'a-z', 'A-Z']],
  [['sha256sum', 'f']],
  [['gzip', '-9', 'f']],
  [['gunzip', '-c', 'f.gz']],
  [['ln', '-s', '../a', 'sub/l']],
  [['chmod', '+x', 'run.sh']],
  [['chmod', '-R', '755', 'dir']],
  [['touch', '-d', 'yesterday', 'f']],
  [['test', '-f', 'notes.txt']],
  [['echo', '-n', 'hello', '/etc/passwd']],
  [['basename', 'a/b.txt', '.txt']],
  [['realpath', 'f']],
  [['du', '-sh', '.']],
  [['stat', '-c', '%s', 'f']],
  [['rm', '-rf', 'build']],
  [['pwd']],
  [['true']],
  [['ls', '--version']],
  [['curl', '-sS', '-o', 'page.html', 'https://example.com'], ['medium']],
  [['curl', '-fsSL', '-H', 'Accept: application/json', 'https://example.com/api'], ['medium']],
  [['curl', '-d', 'a=1', '-X', 'POST', 'https://example.com'], ['medium']],
  [['curl', '-F', 'file=@notes.txt', 'https://example.com'], ['medium']],
  [['curl', '--version'], ['medium']],
  [['wget', '-q', '-O', 'page.html', 'https://example.com'], ['medium']],
  [['env'], ['medium']],
  [['env', '-0'], ['medium']],
  [['printenv', 'HOME'], ['medium']],
  [['date', '+%Y-%m-%d'], ['medium']],
  [['date', '-u', '-d', 'yesterday'], ['medium']],
  [['hostname'], ['medium']],
  [['uname', '-a'], ['medium']],
  [['id', '-u'], ['medium']],
  [['ps', 'aux'], ['medium']],
  [['ps', '-ef'], ['medium']],
  [['df', '-h', '.'], ['medium']],
  [['free', '-m'], ['medium']],
  [['nproc'], ['medium']],
  [['which', 'ls'], ['medium']],
];

describe('bypass attempts (argv and command string alike)', () => {
  const both = (level: Level, argv: string[]) => {
    const command = toCommand(argv);
    expect(splitCommand(command)).toEqual(argv);
    const asArgv = rule(() => checkShellCommand(level, argv));
    expect(rule(() => checkShellCommand(level, splitCommand(command)))).toBe(asArgv);
    return asArgv;
  };

  it.each(
    ATTACKS.flatMap(([argv, expected, levels = LOW_MEDIUM]) => levels.map((level) => [level, toCommand(argv), expected, argv] as const)),
  )('%s: %s → %s', (level, _command, expected, argv) => {
    expect(both(level, [...argv])).toBe(expected);
  });

  it.each(LEGITIMATE.flatMap(([argv, levels = LOW_MEDIUM]) => levels.map((level) => [level, toCommand(argv), argv] as const)))(
    '%s: %s is allowed',
    (level, _command, argv) => {
      expect(both(level, [...argv])).toBeUndefined();
    },
  );
});

describe('at high', () => {
  const high = (argv: string[]) => rule(() => checkShellCommand('high', argv));
  it.each([
    [['find', '.', '-exec', 'id', ';'], undefined],
    [['find', '.', '-name', '*.ts', '-exec', 'grep', '-l', 'x', '{}', '+'], undefined],
    [['find', '/tmp', '-exec', 'rm', '{}', '+'], 'write_outside_workspace'],
    [['find', '.', '-exec', 'cp', '{}', '/tmp/', ';'], 'write_outside_workspace'],
    [['find', '/tmp', '-delete'], 'write_outside_workspace'],
    [['find', '.', '-fprint', '/tmp/x'], 'write_outside_workspace'],
    [['find', '.', '-exec', 'echo', '+', '-fprint', '/tmp/x', ';'], 'option_not_allowed'],
    [['cp', '--target-directory=/tmp', 'x'], 'write_outside_workspace'],
    [['sed', '-n', 'w /tmp/x', 'f'], 'write_outside_workspace'],
    [['sed', '-n', 's/a/b/gw /tmp/x', 'f'], 'write_outside_workspace'],
    [['sed', '-n', '/a/{p;w out.txt\n}', 'f'], undefined],
    [['sed', 's/[/]/x/w /tmp/x', 'f'], 'sed_script'],
    [['sed', 'w ok;w /tmp/x', 'f'], 'sed_script'],
    [['sed', '-e', ':a', '-e', 'N', '-e', '$!ba', '-e', 's/\\n/ /g', 'f'], undefined],
    [['sed', '-f', 'script.sed', 'f'], undefined],
    [['tar', '--to-command=sh', '-xf', 'a.tar'], undefined],
    [['tar', '-xf', 'a.tar', '-C', '/tmp'], 'write_outside_workspace'],
    [['env', 'touch', '/tmp/x'], 'write_outside_workspace'],
    [['env', '-C', '/tmp', 'touch', 'x'], 'write_outside_workspace'],
    [['env', 'FOO=1', 'ls', '-la'], undefined],
    [['curl', '-o', '/tmp/x', 'https://example.com'], 'write_outside_workspace'],
    [['ls', '--bogus'], 'option_not_allowed'],
    [['cat', '/etc/passwd'], undefined],
    [['python3', '-c', 'print(1)'], undefined],
  ] as const)('%j → %s', (argv, expected) => {
    expect(high([...argv])).toBe(expected);
  });

  it('checks command strings the same way', () => {
    expect(rule(() => checkShellCommand('high', splitCommand("find . -exec id ';'")))).toBeUndefined();
    expect(rule(() => checkShellCommand('high', splitCommand('cp --target-directory=/tmp x')))).toBe('write_outside_workspace');
    expect(rule(() => checkShellCommand('high', splitCommand("sed -n 'w /tmp/x' f")))).toBe('write_outside_workspace');
  });
});

describe('the option table', () => {
  it('covers every binary of the low and medium lists', () => {
    for (const bin of [...LOW_BINS, ...MEDIUM_EXTRA_BINS]) expect(SHELL_BINS, bin).toHaveProperty([bin]);
  });

  it('names the binary and the option when it refuses', () => {
    expect(() => checkShellCommand('low', ['ls', '--bogus'])).toThrow(/"ls" option "--bogus"/);
    expect(() => checkShellCommand('medium', ['tar', '--to-command=sh', '-xf', 'a.tar'])).toThrow(/"tar --to-command"/);
  });
});
