import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { isBerthError } from '../../src/base/errors.js';
import type { ChannelMessage } from '../../src/channels/contract.js';
import { createWebhookBridge, WebhookBridgeSchema } from '../../src/channels/webhook.js';
import { webhookSignature } from '../../src/channels/webhook-signing.js';
import { createFileStage } from '../../src/channels/webhook-files.js';
import { bytesOf, pdfBytes, pngBytes } from '../helpers/sample-files.js';

/**
 * Files a signed webhook carries inline: staged under the channel's own directory with a random
 * ref, read back by fetchAttachment within its bound, dropped when the message is a duplicate,
 * swept after a day; a hook takes files only when its operator set max_file_bytes.
 */
const SECRET = 'webhook-files-secret-0123456789abcdef';
const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});

function setup() {
  const dir = fs.mkdtempSync(join(os.tmpdir(), 'berth-hook-files-'));
  dirs.push(dir);
  const taken: ChannelMessage[] = [];
  const hook = { secret: SECRET, reply: 'callback', callback_url: 'http://127.0.0.1:9/answers' };
  const config = WebhookBridgeSchema.parse({ hooks: { ci: { ...hook, max_file_bytes: 100_000 }, plain: hook } });
  const seen = new Set<string>();
  const bridge = createWebhookBridge({
    config,
    dir,
    logger: pino({ level: 'silent' }),
    take: (m) => {
      taken.push(m);
      if (seen.has(m.id)) return 'duplicate';
      seen.add(m.id);
      return 'accepted';
    },
    postOut: async () => ({ status: 204 }),
  });
  const post = (name: string, body: unknown) => {
    const raw = JSON.stringify(body);
    const ts = String(Math.floor(Date.now() / 1000));
    return bridge.http!(
      new Request(`http://berth/hooks/${name}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-berth-timestamp': ts, 'x-berth-signature': webhookSignature(SECRET, ts, raw) },
        body: raw,
      }),
      name,
    );
  };
  const staged = () => (fs.existsSync(join(dir, 'files')) ? fs.readdirSync(join(dir, 'files')) : []);
  return { bridge, taken, post, staged, dir };
}

const b64 = (b: Buffer) => b.toString('base64');
const codeOf = async (p: Promise<unknown>) =>
  p.then(
    () => 'resolved',
    (err: unknown) => (isBerthError(err) ? err.code : String(err)),
  );

describe('webhook: files in', () => {
  it('files and no text: a message with attachments, staged privately, read back whole', async () => {
    const { bridge, taken, post, staged, dir } = setup();
    const res = await post('ci', {
      id: 'm1',
      user: 'ci-bot',
      files: [
        { name: 'build.png', content_base64: b64(pngBytes()), mime: 'image/png' },
        { name: 'report.pdf', content_base64: b64(pdfBytes()) },
      ],
    });
    expect(res.status).toBe(202);
    expect(taken).toHaveLength(1);
    expect(taken[0]).toMatchObject({
      text: '',
      attachments: [
        { name: 'build.png', mime: 'image/png', size: pngBytes().length },
        { name: 'report.pdf', size: pdfBytes().length },
      ],
    });
    const [png, pdf] = taken[0]!.attachments!;
    expect(png!.ref).toMatch(/^hook-file:[0-9a-f]{32}$/);
    expect(Buffer.from(await bridge.fetchAttachment!(png!.ref, { maxBytes: 100_000, signal: AbortSignal.timeout(1000) }))).toEqual(
      pngBytes(),
    );
    expect(Buffer.from(await bridge.fetchAttachment!(pdf!.ref, { maxBytes: 100_000, signal: AbortSignal.timeout(1000) }))).toEqual(
      pdfBytes(),
    );
    expect(staged()).toHaveLength(2);
    for (const name of staged()) expect(fs.statSync(join(dir, 'files', name)).mode & 0o077).toBe(0);
  });

  it("over the hook's bound together: TOO_LARGE, nothing staged; a fetch under a smaller bound: TOO_LARGE", async () => {
    const { bridge, taken, post, staged } = setup();
    expect(
      await codeOf(
        post('ci', {
          id: 'm1',
          user: 'u',
          text: 'x',
          files: [
            { name: 'a.bin', content_base64: b64(bytesOf(60_000)) },
            { name: 'b.bin', content_base64: b64(bytesOf(60_000)) },
          ],
        }),
      ),
    ).toBe('TOO_LARGE');
    expect(taken).toEqual([]);
    expect(staged()).toEqual([]);
    await post('ci', { id: 'm2', user: 'u', files: [{ name: 'a.bin', content_base64: b64(bytesOf(60_000)) }] });
    expect(
      await codeOf(bridge.fetchAttachment!(taken[0]!.attachments![0]!.ref, { maxBytes: 59_999, signal: AbortSignal.timeout(1000) })),
    ).toBe('TOO_LARGE');
  });

  it('the same message id again: a duplicate, and its files are not kept', async () => {
    const { post, staged } = setup();
    const body = { id: 'm1', user: 'u', files: [{ name: 'a.txt', content_base64: b64(Buffer.from('hello')) }] };
    expect((await post('ci', body)).status).toBe(202);
    expect(await (await post('ci', body)).json()).toEqual({ id: 'm1', status: 'duplicate' });
    expect(staged()).toHaveLength(1);
  });

  it('a hook without max_file_bytes takes no files; a message without text or files is refused; names are checked', async () => {
    const { post } = setup();
    await expect(
      post('plain', { id: 'm1', user: 'u', text: 'x', files: [{ name: 'a.txt', content_base64: 'aGk=' }] }),
    ).rejects.toMatchObject({ code: 'CONFIG_INVALID', details: { issues: [{ field: 'files' }] } });
    await expect(post('ci', { id: 'm2', user: 'u' })).rejects.toMatchObject({
      code: 'CONFIG_INVALID',
      details: { issues: [{ field: 'text' }] },
    });
    await expect(post('ci', { id: 'm3', user: 'u', files: [{ name: '../../etc/passwd', content_base64: 'aGk=' }] })).rejects.toMatchObject({
      code: 'CONFIG_INVALID',
    });
    await expect(post('ci', { id: 'm4', user: 'u', files: [{ name: 'a', content_base64: 'not base64!' }] })).rejects.toMatchObject({
      code: 'CONFIG_INVALID',
    });
  });

  it('a ref the hook did not hand out is refused; one whose file is gone is NOT_FOUND', async () => {
    const { bridge } = setup();
    for (const ref of ['hook-file:../../berth.yaml', 'hook-file:ABC', 'tg:AAAA', `hook-file:${'0'.repeat(32)}`]) {
      expect(await codeOf(bridge.fetchAttachment!(ref, { maxBytes: 1000, signal: AbortSignal.timeout(1000) }))).toBe('NOT_FOUND');
    }
  });
});

describe('webhook: the file stage', () => {
  it('files older than a day are swept when the next ones are staged', () => {
    const dir = fs.mkdtempSync(join(os.tmpdir(), 'berth-stage-'));
    dirs.push(dir);
    const [old] = createFileStage(dir).stage([{ name: 'a', content_base64: 'aGk=' }], 100);
    const later = createFileStage(dir, () => Date.now() + 25 * 3600 * 1000);
    const [fresh] = later.stage([{ name: 'b', content_base64: 'aGk=' }], 100);
    expect(() => later.fetch(old!.ref, { maxBytes: 100 })).toThrow(expect.objectContaining({ code: 'NOT_FOUND' }));
    expect(Buffer.from(later.fetch(fresh!.ref, { maxBytes: 100 })).toString()).toBe('hi');
  });
});
