import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { isBerthError } from '../../src/base/errors.js';
import type { ChannelMessage, ChannelTransport } from '../../src/channels/contract.js';
import { createMatrixBridge, MatrixBridgeSchema } from '../../src/channels/matrix.js';
import { matrixMessage } from '../../src/channels/matrix-timeline.js';
import { startFakeMatrix, type FakeMatrix, type FakeMatrixOptions } from '../fakes/matrix.js';
import { bytesOf, pdf, pdfBytes, png, pngBytes } from '../helpers/sample-files.js';

/**
 * Files through the Matrix module against the fake homeserver's content repository: file
 * messages become attachments fetched by the authenticated media API (the legacy one on an older
 * server), bounded; an encrypted file is told in the room; what berth sends is uploaded, then an
 * m.image or m.file event with its info, in the thread when the chat is one.
 */
const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function setup(
  opts: FakeMatrixOptions = {},
  take: (m: ChannelMessage) => void = () => undefined,
): Promise<{ fake: FakeMatrix; mx: ChannelTransport; room: string; alice: string }> {
  const fake = await startFakeMatrix(opts);
  const dir = fs.mkdtempSync(join(os.tmpdir(), 'berth-mx-files-'));
  cleanups.push(async () => {
    await fake.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });
  const alice = `@alice:${fake.serverName}`;
  const room = fake.createRoom({ members: [alice], direct: true });
  const config = MatrixBridgeSchema.parse({ homeserver: fake.url, user_id: fake.botUserId, access_token: fake.botAccessToken });
  const mx = createMatrixBridge({
    config,
    dir,
    logger: pino({ level: 'silent' }),
    take: (m) => (take(m), 'accepted'),
    postOut: async () => ({ status: 200 }),
    backoffMs: { min: 10, max: 50 },
  });
  return { fake, mx, room, alice };
}

const textFileOf = (name: string, text: string) => ({ name, mime: 'text/plain', data: new Uint8Array(Buffer.from(text)) });
const fetchOf = (t: ChannelTransport, ref: string, maxBytes = 1024 * 1024) =>
  t.fetchAttachment!(ref, { maxBytes, signal: AbortSignal.timeout(10_000) });
const codeOf = async (p: Promise<unknown>) =>
  p.then(
    () => 'resolved',
    (err: unknown) => (isBerthError(err) ? err.code : String(err)),
  );

describe('matrix: files in', () => {
  it('an m.image with a caption and an m.file without one: attachments with name, type and size; the bytes by the authenticated media API', async () => {
    const { fake, mx, room, alice } = await setup();
    const image = fake.uploadMedia(pngBytes(), { contentType: 'image/png', filename: 'screen.png' });
    const report = fake.uploadMedia(pdfBytes(), { contentType: 'application/pdf', filename: 'report.pdf' });
    const withCaption = fake.sendRaw(room, {
      type: 'm.room.message',
      sender: alice,
      content: {
        msgtype: 'm.image',
        body: 'what is wrong here?',
        filename: 'screen.png',
        url: image,
        info: { mimetype: 'image/png', size: pngBytes().length, w: 2, h: 1 },
      },
    });
    const bare = fake.sendRaw(room, {
      type: 'm.room.message',
      sender: alice,
      content: { msgtype: 'm.file', body: 'report.pdf', url: report, info: { mimetype: 'application/pdf', size: pdfBytes().length } },
    });
    const first = matrixMessage(room, withCaption, fake.botUserId, true)!;
    const second = matrixMessage(room, bare, fake.botUserId, true)!;
    expect(first).toMatchObject({
      text: 'what is wrong here?',
      attachments: [{ ref: image, name: 'screen.png', mime: 'image/png', size: pngBytes().length }],
    });
    expect(second).toMatchObject({
      text: '',
      attachments: [{ ref: report, name: 'report.pdf', mime: 'application/pdf', size: pdfBytes().length }],
    });
    expect(Buffer.from(await fetchOf(mx, image))).toEqual(pngBytes());
    expect(Buffer.from(await fetchOf(mx, report))).toEqual(pdfBytes());
    expect(fake.mediaDownloads).toEqual([
      { mxc: image, endpoint: 'v1', userId: fake.botUserId },
      { mxc: report, endpoint: 'v1', userId: fake.botUserId },
    ]);
  });

  it('a voice message (m.audio, MSC3245) is a voice attachment', async () => {
    const { fake, room, alice } = await setup();
    const clip = fake.uploadMedia(bytesOf(900), { contentType: 'audio/ogg' });
    const event = fake.sendRaw(room, {
      type: 'm.room.message',
      sender: alice,
      content: {
        msgtype: 'm.audio',
        body: 'Voice message',
        url: clip,
        info: { mimetype: 'audio/ogg', size: 900 },
        'org.matrix.msc3245.voice': {},
      },
    });
    expect(matrixMessage(room, event, fake.botUserId, true)!.attachments).toEqual([
      { ref: clip, name: 'Voice message', mime: 'audio/ogg', size: 900, voice: true },
    ]);
  });

  it('a homeserver before authenticated media (404 M_UNRECOGNIZED): the legacy download', async () => {
    const { fake, mx } = await setup({ authenticatedMedia: false });
    const file = fake.uploadMedia(pdfBytes(), { contentType: 'application/pdf' });
    expect(Buffer.from(await fetchOf(mx, file))).toEqual(pdfBytes());
    expect(fake.mediaDownloads.map((d) => d.endpoint)).toEqual(['v3']);
  });

  it('media the homeserver does not have (404 M_NOT_FOUND) is not asked for again elsewhere', async () => {
    const { fake, mx } = await setup();
    await expect(fetchOf(mx, `mxc://${fake.serverName}/nothere`)).rejects.toMatchObject({
      status: 404,
      message: expect.stringContaining('M_NOT_FOUND'),
    });
    expect(fake.requests.filter((q) => q.path.includes('/media/')).map((q) => q.path)).toEqual([
      `/_matrix/client/v1/media/download/${fake.serverName}/nothere`,
    ]);
  });

  it('over the bound: refused mid-stream (no length declared) and by Content-Length', async () => {
    for (const chunkedMedia of [true, false]) {
      const { fake, mx } = await setup({ chunkedMedia });
      const big = fake.uploadMedia(bytesOf(300_000));
      expect(await codeOf(fetchOf(mx, big, 100_000))).toBe('TOO_LARGE');
    }
  });

  it('a ref that is no mxc:// URI is refused without a request', async () => {
    const { fake, mx } = await setup();
    for (const ref of ['tg:AAAA', 'https://evil.example/_matrix/media/x', 'mxc://server/../../x', 'mxc://a b/c', 'hook:0123'])
      expect(await codeOf(fetchOf(mx, ref))).toBe('NOT_FOUND');
    expect(fake.requests.filter((q) => q.path.includes('/media/'))).toEqual([]);
  });

  it('an encrypted file is told in the room, once, and nothing is taken', async () => {
    const taken: ChannelMessage[] = [];
    const { fake, mx, room, alice } = await setup({}, (m) => taken.push(m));
    mx.start();
    cleanups.push(() => mx.stop());
    await fake.waitForPoll();
    fake.sendRaw(room, {
      type: 'm.room.message',
      sender: alice,
      content: {
        msgtype: 'm.file',
        body: 'secret.pdf',
        file: { url: `mxc://${fake.serverName}/enc`, key: {}, iv: 'x', hashes: {}, v: 'v2' },
      },
    });
    fake.sendText(room, alice, 'and a text');
    await fake.waitFor(() => taken.length === 1 && fake.repliesIn(room).length === 1);
    expect(taken.map((m) => m.text)).toEqual(['and a text']);
    expect(fake.repliesIn(room)[0]!.content).toMatchObject({
      msgtype: 'm.notice',
      body: expect.stringContaining('"secret.pdf" came encrypted'),
    });
  });
});

describe('matrix: files out', () => {
  it('a PNG is uploaded and sent as m.image, a PDF as m.file, each with info.mimetype and info.size', async () => {
    const { fake, mx, room } = await setup();
    await mx.sendFile!(room, png(), 'the chart', { answerTo: '$q1' });
    await mx.sendFile!(room, pdf(), '');
    const [image, file] = fake.repliesIn(room);
    expect(image!.content).toEqual({
      msgtype: 'm.image',
      body: 'the chart',
      filename: 'chart.png',
      url: expect.stringMatching(/^mxc:\/\//),
      info: { mimetype: 'image/png', size: pngBytes().length },
    });
    expect(file!.content).toEqual({
      msgtype: 'm.file',
      body: 'report.pdf',
      filename: 'report.pdf',
      url: expect.stringMatching(/^mxc:\/\//),
      info: { mimetype: 'application/pdf', size: pdfBytes().length },
    });
    expect(fake.media.get(String(image!.content.url))).toMatchObject({
      bytes: pngBytes(),
      contentType: 'image/png',
      filename: 'chart.png',
      by: fake.botUserId,
    });
    expect(fake.media.get(String(file!.content.url))!.bytes).toEqual(pdfBytes());
  });

  it("in a thread: the file event is the thread's; the same answer sent again is the same event", async () => {
    const { fake, mx, room, alice } = await setup();
    const root = fake.sendText(room, alice, 'start a thread');
    const chat = `${room}/${root.event_id}`;
    await mx.sendFile!(chat, pdf(), 'here', { answerTo: '$answered' });
    await mx.sendFile!(chat, pdf(), 'here', { answerTo: '$answered' });
    const sent = fake.repliesIn(room);
    expect(sent).toHaveLength(1);
    expect(sent[0]!.content['m.relates_to']).toMatchObject({ rel_type: 'm.thread', event_id: root.event_id });
  });

  it('texts and files answering one message are each their own event (a homeserver keeps one per transaction id); each sent again is not', async () => {
    const { fake, mx, room } = await setup();
    const about = { answerTo: '$answered-with-files' };
    for (let i = 0; i < 2; i++) {
      await mx.send(room, 'the answer', about);
      await mx.send(room, 'berth: the agent sent a file to open with your web chat login: …', about);
      await mx.sendFile!(room, textFileOf('reply.txt', 'the whole answer'), 'the answer, as a file', about);
      await mx.sendFile!(room, textFileOf('reply.txt', 'a file the agent wrote'), '', about);
    }
    expect(fake.repliesIn(room).map((e) => [e.content.msgtype, e.content.body])).toEqual([
      ['m.notice', 'the answer'],
      ['m.notice', 'berth: the agent sent a file to open with your web chat login: …'],
      ['m.file', 'the answer, as a file'],
      ['m.file', 'reply.txt'],
    ]);
  });

  it("the homeserver's upload limit is learnt from its media config; a bigger file is refused before the upload", async () => {
    const { fake, mx } = await setup({ maxUploadBytes: 1000 });
    expect(mx.fileLimitBytes).toBe(50 * 1024 * 1024);
    mx.start();
    cleanups.push(() => mx.stop());
    await fake.waitFor(() => mx.fileLimitBytes === 1000);
    await expect(
      mx.sendFile!('!x:berth.test', { name: 'big.bin', mime: 'application/octet-stream', data: new Uint8Array(bytesOf(1001)) }, ''),
    ).rejects.toMatchObject({ code: 'TOO_LARGE' });
    expect(fake.media.size).toBe(0);
  });
});
