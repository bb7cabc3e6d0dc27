import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createWebFiles } from '../../src/bridges/web-files.js';
import { ProjectMetadataSchema } from '../../src/config/metadata.js';
import { openChatUploads, UPLOAD_BOUNDS, UPLOAD_TTL_MS } from '../../src/store/chat-uploads.js';

let dir: string;
beforeEach(() => {
  dir = fs.mkdtempSync(join(os.tmpdir(), 'berth-uploads-'));
});
afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

const alice = { project: 'p', user: 'alice' };
const bob = { project: 'p', user: 'bob' };

describe('web chat uploads: kept per person until their message takes them', () => {
  it('an upload is named safely, taken once by its ref, and another person cannot name it', () => {
    const files = createWebFiles(openChatUploads(dir), { getProjectMetadata: () => ProjectMetadataSchema.parse({ name: 'p' }) });
    const up = files.upload(alice, '../../chart.png', 'image/png', Buffer.from('PNG'));
    expect(up).toEqual({ id: expect.stringMatching(/^u[0-9a-f]{24}$/), name: 'chart.png', type: 'image/png', size: 3 });
    expect(() => files.attachmentsOf(bob, [up.id])).toThrow(expect.objectContaining({ code: 'CONFIG_INVALID' }));
    const { attachments, shown } = files.attachmentsOf(alice, [up.id]);
    expect(shown).toEqual([{ name: 'chart.png', size: 3, type: 'image/png' }]);
    expect(() => files.fetch(attachments[0]!.ref, 2)).toThrow(expect.objectContaining({ code: 'TOO_LARGE' }));
    expect(Buffer.from(files.fetch(attachments[0]!.ref, 100)).toString()).toBe('PNG');
    expect(() => files.fetch(attachments[0]!.ref, 100)).toThrow(expect.objectContaining({ code: 'NOT_FOUND' }));
    expect(() => files.fetch('../../etc/passwd', 100)).toThrow(expect.objectContaining({ code: 'NOT_FOUND' }));
  });

  it('refuses past the project max_file_mb and past the per-person count; sweeps what waited past a day', () => {
    let now = 1_000_000;
    const uploads = openChatUploads(dir, () => now);
    const files = createWebFiles(uploads, {
      getProjectMetadata: () => ProjectMetadataSchema.parse({ name: 'p', files: { max_file_mb: 1 } }),
    });
    expect(() => files.upload(alice, 'big', undefined, Buffer.alloc(1024 * 1024 + 1))).toThrow(
      expect.objectContaining({ code: 'PAYLOAD_TOO_LARGE' }),
    );
    for (let i = 0; i < UPLOAD_BOUNDS.perPerson; i++) files.upload(alice, `f${i}`, undefined, Buffer.from('x'));
    expect(() => files.upload(alice, 'one more', undefined, Buffer.from('x'))).toThrow(expect.objectContaining({ code: 'LIMIT_REACHED' }));
    expect(files.upload(bob, 'bob may', undefined, Buffer.from('x')).name).toBe('bob may');
    now += UPLOAD_TTL_MS + 1;
    expect(files.upload(alice, 'after a day', undefined, Buffer.from('x')).name).toBe('after a day');
  });
});
