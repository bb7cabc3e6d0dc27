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
