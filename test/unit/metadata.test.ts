import { describe, expect, it } from 'vitest';
import { ProjectMetadataSchema, ProjectUpdateSchema, protectedPathProblem } from '../../src/config/metadata.js';
import { parseOrThrow } from '../../src/config/parse.js';
import { BerthError } from '../../src/base/errors.js';

function issuesOf(input: unknown) {
  try {
    parseOrThrow(ProjectMetadataSchema, input, 'metadata.json');
  } catch (err) {
    expect(err).toBeInstanceOf(BerthError);
    expect((err as BerthError).code).toBe('CONFIG_INVALID');
    return (err as BerthError).details.issues;
  }
  throw new Error('expected a refusal');
}

describe('metadata.json schema', () => {
  it('fills the documented defaults', () => {
    expect(ProjectMetadataSchema.parse({ name: 'bot' })).toEqual({
      name: 'bot',
      workspace_isolation: false,
      protected_paths: [],
      agent: 'shell',
      runtime: 'runc',
      level_runtimes: {},
      limits: { memory_mb: 512, cpus: 1, pids: 256, timeout_seconds: 300, output_bytes: 1048576, disk_mb: 1024, files: 100000 },
      env: [],
      models: { upstreams: [], allow: ['*'], budget: { requests_per_hour: 200, tokens_per_hour: 2_000_000 } },
      egress: { allow: [] },
      teams: {},
      chat: { raise_level: 'admins', approvals: 'person', approval_timeout_seconds: 120 },
      files: { max_file_mb: 20, max_message_mb: 50, max_files: 10, types: ['*/*'] },
      admins: [],
    });
  });

  it.each(['', 'Bot', '-bot', 'a/b', '../x', 'a'.repeat(64), 'bot_1', '.hidden'])('refuses the name %j', (name) => {
    expect(issuesOf({ name })).toEqual([{ field: 'name', reason: expect.stringContaining('a-z, 0-9') }]);
  });

  it('refuses unknown fields by name', () => {
    const issues = issuesOf({ name: 'bot', isolation: true, limits: { ram: 1 } });
    expect(issues?.sort((a, b) => a.field.localeCompare(b.field))).toEqual([
      { field: 'isolation', reason: 'unknown field' },
      { field: 'limits.ram', reason: 'unknown field' },
    ]);
  });

  it('refuses a custom argv without the {message} placeholder, accepts one with it', () => {
    expect(issuesOf({ name: 'bot', agent: ['my-agent', '--run'] })?.[0]?.field).toBe('agent');
    expect(ProjectMetadataSchema.parse({ name: 'bot', agent: ['my-agent', '--prompt={message}'] }).agent).toEqual([
      'my-agent',
      '--prompt={message}',
    ]);
  });

  it('refuses env names berth sets and repeated names', () => {
    expect(issuesOf({ name: 'bot', env: ['BERTH_RUN'] })?.[0]?.field).toBe('env.0');
    expect(issuesOf({ name: 'bot', env: ['A', 'A'] })?.[0]?.field).toBe('env');
  });
});

describe('protected_paths', () => {
  it.each([
    ['', 'is empty'],
    ['/etc/passwd', 'not absolute'],
    ['../secret', '".."'],
    ['a/../b', '".."'],
    ['a//b', 'not normalized'],
    ['./a', 'not normalized'],
    ['a/./b', 'not normalized'],
    ['.', '/workspace itself'],
    ['/', 'not absolute'],
    ['bad\nname', 'control character'],
    ['tab\there', 'control character'],
  ])('refuses %j (%s)', (entry, reason) => {
    expect(protectedPathProblem(entry)).toContain(reason);
    const issues = issuesOf({ name: 'bot', protected_paths: ['AGENTS.md', entry] });
    expect(issues).toEqual([{ field: 'protected_paths.1', reason: expect.stringContaining(reason) }]);
  });

  it('accepts files and directories (trailing slash)', () => {
    const ok = ['AGENTS.md', '.factory/', 'docs/guide.md', 'ünïcode/ok'];
    expect(ProjectMetadataSchema.parse({ name: 'bot', protected_paths: ok }).protected_paths).toEqual(ok);
  });

  it('refuses duplicates, with or without the trailing slash', () => {
    expect(issuesOf({ name: 'bot', protected_paths: ['.factory/', '.factory'] })).toEqual([
      { field: 'protected_paths.1', reason: '".factory" duplicates ".factory/"' },
    ]);
  });

  it('refuses a path inside an already protected directory', () => {
    expect(issuesOf({ name: 'bot', protected_paths: ['.factory/mcp.json', '.factory/'] })).toEqual([
      { field: 'protected_paths.0', reason: '".factory/mcp.json" is inside ".factory/", which is already protected' },
    ]);
  });

  it('applies the same rules to updates', () => {
    expect(ProjectUpdateSchema.safeParse({ protected_paths: ['../x'] }).success).toBe(false);
    expect(ProjectUpdateSchema.safeParse({ name: 'other' }).success).toBe(false);
    expect(ProjectUpdateSchema.parse({ limits: { timeout_seconds: 5 } })).toEqual({ limits: { timeout_seconds: 5 } });
  });
});
