import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { fetchAttachments } from '../../src/bridges/files.js';
import { FilesSettingsSchema } from '../../src/config/metadata.js';
import { sandboxRead } from '../../src/fs/sandbox.js';
import { collectOutbox, queueOutboxFile, readRunFile, runFilesDirOf } from '../../src/store/run-files.js';

/** Findings of the review of issue 40 (files in and out), each failing on the code before its fix. */
let base: string;
let ws: string;
let outside: string;
let state: string;
const settings = FilesSettingsSchema.parse({});

beforeEach(() => {
  base = fs.realpathSync(fs.mkdtempSync(join(os.tmpdir(), 'berth-files-attacks-')));
  ws = join(base, 'ws');
  outside = join(base, 'outside');
  state = join(base, 'state');
  fs.mkdirSync(ws);
  fs.mkdirSync(outside);
  fs.writeFileSync(join(outside, 'secret.txt'), 'host secret');
});
afterEach(() => fs.rmSync(base, { recursive: true, force: true }));

describe('send_file sends only the tenant’s own files', () => {
  it('a second hard link (to a file from elsewhere) is refused, as collectOutbox refuses it, and nothing is sent', () => {
    fs.linkSync(join(outside, 'secret.txt'), join(ws, 'hard.txt'));
    expect(() => queueOutboxFile(ws, (fd, max) => sandboxRead(fd, 'hard.txt', max, { oneLink: true }), 'hard.txt', settings)).toThrow(
      expect.objectContaining({ code: 'E_SANDBOX_VIOLATION', message: expect.stringContaining('another hard link') }),
    );
    const out = collectOutbox({
      workspaceDir: ws,
      filesDir: runFilesDirOf(state, 'rabc0123456789a'),
      settings,
      who: { tenant_key: 'web:a', session: 's' },
    });
    expect(out.files).toEqual([]);
    expect(readRunFile(state, 'rabc0123456789a', 'hard.txt')).toBeUndefined();
  });
});

describe('a message’s attachments are fetched within its total', () => {
  it('never more than max_message_mb is fetched for one message: the rest is refused as the total, unfetched', async () => {
    const s = FilesSettingsSchema.parse({ max_files: 10, max_file_mb: 20, max_message_mb: 30 });
    const asked: number[] = [];
    const transport = {
      fetchAttachment: async (_ref: string, l: { maxBytes: number }) => {
        asked.push(l.maxBytes);
        return new Uint8Array(Math.min(l.maxBytes, 20 * 1024 * 1024));
      },
    };
    const atts = Array.from({ length: 4 }, (_, i) => ({ ref: `x:${i}`, name: `f${i}.bin` }));
    const got = await fetchAttachments(transport, atts, s, pino({ level: 'silent' }));
    expect(asked).toEqual([20 * 1024 * 1024, 10 * 1024 * 1024]);
    expect(asked.reduce((a, b) => a + b, 0)).toBeLessThanOrEqual(s.max_message_mb * 1024 * 1024);
    expect(got.map((f) => f.refused ?? 'fetched')).toEqual(['fetched', 'fetched', 'message_total', 'message_total']);
  });
});

describe('uploads and downloads held at once are bounded per login and in all', () => {
  it('a third request of one login, or a ninth of all, is BUSY until one ends; a refused one runs nothing', async () => {
    const { inFlight } = await import('../../src/api/in-flight.js');
    const gate = inFlight({ perKey: 2, total: 3 }, 'uploads');
    const releases: Array<() => void> = [];
    const held = () => new Promise<void>((r) => releases.push(r));
    let ran = 0;
    const one = (key: string) => gate(key, () => (ran++, held()));
    const a1 = one('alice');
    const a2 = one('alice');
    await expect(one('alice')).rejects.toMatchObject({ code: 'BUSY', details: { retry_after: 1 } });
    const b1 = one('bob');
    await expect(one('carol')).rejects.toMatchObject({ code: 'BUSY' });
    expect(ran).toBe(3);
    releases.shift()!();
    await a1;
    const c1 = one('carol');
    expect(ran).toBe(4);
    for (const r of releases.splice(0)) r();
    await Promise.all([a2, b1, c1]);
    await expect(gate('alice', () => 'again')).resolves.toBe('again');
  });
});
