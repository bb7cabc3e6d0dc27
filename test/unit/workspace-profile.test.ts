import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { detectProfile, workspaceProfile } from '../../src/file-tools/workspace-profile.js';

const files = (...f: string[]) => new Set(f);

describe('detectProfile (pure)', () => {
  it.each([
    [
      { files: files('package.json', 'pnpm-lock.yaml'), packageJson: '{"scripts":{"test":"vitest","lint":"eslint ."}}' },
      ['node'],
      'pnpm',
      { test: ['pnpm', 'test'], lint: ['pnpm', 'run', 'lint'] },
    ],
    [
      { files: files('package.json', 'package-lock.json'), packageJson: '{"scripts":{"format":"prettier -w ."}}' },
      ['node'],
      'npm',
      { format: ['npm', 'run', 'format'] },
    ],
    [
      { files: files('pyproject.toml', 'uv.lock'), pyproject: '[tool.ruff]\nline-length = 100' },
      ['python'],
      'uv',
      { test: ['uv', 'run', 'pytest'], lint: ['uv', 'run', 'ruff', 'check', '.'], format: ['uv', 'run', 'ruff', 'format', '.'] },
    ],
    [
      { files: files('go.mod') },
      ['go'],
      'go',
      { test: ['go', 'test', './...'], lint: ['go', 'vet', './...'], format: ['gofmt', '-l', '.'] },
    ],
    [{ files: files('Cargo.toml') }, ['rust'], 'cargo', { test: ['cargo', 'test'], lint: ['cargo', 'clippy'], format: ['cargo', 'fmt'] }],
    [{ files: files('Makefile'), makefile: 'build:\n\tcc x.c\ntest: build\n\t./t\n' }, ['make'], null, { test: ['make', 'test'] }],
    [{ files: files('package.json'), packageJson: '{not json' }, ['node'], 'npm', {}],
    [{ files: files() }, [], null, {}],
  ] as const)('%j', (input, ecosystems, pm, commands) => {
    expect(detectProfile(input)).toMatchObject({ ecosystems, package_manager: pm, commands });
  });
});

describe('workspaceProfile (cached, through the sandbox)', () => {
  it('refreshes when a marker changes and ignores markers that are links', () => {
    const dir = fs.mkdtempSync(join(os.tmpdir(), 'berth-prof-'));
    const fd = fs.openSync(dir, fs.constants.O_RDONLY | fs.constants.O_DIRECTORY);
    try {
      fs.symlinkSync('/etc/hostname', join(dir, 'go.mod'));
      expect(workspaceProfile(fd, dir).ecosystems).toEqual([]);
      fs.writeFileSync(join(dir, 'package.json'), '{"scripts":{"test":"x"}}');
      expect(workspaceProfile(fd, dir)).toMatchObject({ ecosystems: ['node'], commands: { test: ['npm', 'test'] } });
      fs.writeFileSync(join(dir, 'yarn.lock'), '');
      expect(workspaceProfile(fd, dir).commands.test).toEqual(['yarn', 'test']);
    } finally {
      fs.closeSync(fd);
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
