import fs from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { unitHome, type TestHome } from '../helpers.js';

/** The runner's files step on the in-memory launcher: the workspace's disk limit bounds what lands. */
let h: TestHome | undefined;
afterEach(async () => {
  await h?.[Symbol.asyncDispose]();
  h = undefined;
});

describe('runner: files against limits.disk_mb', () => {
  it('a tenant over its quota gets its file refused (quota) and its message still runs, told what arrived', async () => {
    h = unitHome();
    h.create({ name: 'q', workspace_isolation: true, limits: { disk_mb: 1 } });
    const first = await h.berth.runner.run({ project: 'q', tenantKey: 'web:full', message: 'hi' });
    fs.writeFileSync(join(first.workspaceRoot, 'filler.bin'), Buffer.alloc(1024 * 1024 - 64 * 1024));
    const files = [
      { name: 'small.txt', data: Buffer.from('fits') },
      { name: 'big.txt', data: Buffer.alloc(128 * 1024) },
    ];
    const run = await h.berth.runner.run({ project: 'q', tenantKey: 'web:full', message: 'look', files });
    expect(run.files?.in).toEqual({
      saved: [{ path: 'inbox/small.txt', kind: 'text', size: 4, voice: false }],
      refused: [{ name: 'big.txt', reason: 'quota', size: 128 * 1024 }],
      notice: expect.stringContaining('your workspace is full'),
    });
    expect(fs.readFileSync(join(first.workspaceRoot, 'inbox/small.txt'), 'utf8')).toBe('fits');
    expect(fs.existsSync(join(first.workspaceRoot, 'inbox/big.txt'))).toBe(false);
  });
});

describe('runner: files need a workspace of the person’s own (review of issue 40, finding 4)', () => {
  it('in a shared workspace, files sent are refused in words and nothing lands; what lies in outbox/ is not sent', async () => {
    h = unitHome();
    h.create({ name: 'shared', workspace_isolation: false });
    const first = await h.berth.runner.run({ project: 'shared', tenantKey: 'web:bob', message: 'hi' });
    // Another tenant of the shared tree leaves a file for Alice's next answer.
    fs.mkdirSync(join(first.workspaceRoot, 'outbox'), { recursive: true });
    fs.writeFileSync(join(first.workspaceRoot, 'outbox', 'invoice.pdf'), '%PDF-1.4 planted');
    const run = await h.berth.runner.run({
      project: 'shared',
      tenantKey: 'web:alice',
      message: 'look',
      files: [{ name: 'private.txt', data: Buffer.from('mine') }],
    });
    expect(run.files?.in).toEqual({
      saved: [],
      refused: [{ name: 'private.txt', reason: 'shared' }],
      notice: expect.stringContaining("this project's workspace is shared with other people"),
    });
    expect(run.files?.out).toEqual({ files: [], left: [] });
    expect(fs.existsSync(join(first.workspaceRoot, 'inbox', 'private.txt'))).toBe(false);
    expect(fs.existsSync(join(first.workspaceRoot, 'outbox', 'invoice.pdf'))).toBe(true);
  });
});
