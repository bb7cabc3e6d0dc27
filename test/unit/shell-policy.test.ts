import { describe, expect, it } from 'vitest';
import { checkShellCommand, collectPathIntent, splitCommand } from '../../src/tools/shell-policy.js';

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

  it.each(['ls; rm -rf /', 'cat a | sh', 'echo x > f', 'cat < f', 'echo `id`', 'echo $(id)', 'echo $HOME', 'a && b', 'sleep 1 &', 'ls *', 'echo "$(id)"', 'ls ~', 'a\nb'])('refuses %j', (cmd) => {
    expect(rule(() => splitCommand(cmd))).toBe('shell_operator');
  });
});

describe('collectPathIntent', () => {
  it('knows the common commands', () => {
    expect(collectPathIntent(['cp', '-r', 'a', 'b', 'dest/'])).toEqual({ reads: ['a', 'b'], writes: ['dest/'] });
    expect(collectPathIntent(['mv', 'a', 'b'])).toEqual({ reads: [], writes: ['a', 'b'] });
    expect(collectPathIntent(['grep', '-r', 'needle', 'src', '/etc'])).toEqual({ reads: ['src', '/etc'], writes: [] });
    expect(collectPathIntent(['find', '.', '/etc', '-name', 'x'])).toEqual({ reads: ['.', '/etc'], writes: [] });
    expect(collectPathIntent(['curl', '-o', '/tmp/x', 'https://example.com'])).toEqual({ reads: [], writes: ['/tmp/x'] });
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
