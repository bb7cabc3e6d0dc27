import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { isBerthError } from '../../src/base/errors.js';
import type { ChannelMessage, ChannelTransport } from '../../src/channels/contract.js';
import { createTelegramBridge, telegramMessage, TelegramBridgeSchema } from '../../src/channels/telegram.js';
import { TELEGRAM_FILE_LIMIT_BYTES } from '../../src/channels/telegram-files.js';
import { startFakeTelegram, type FakeTelegram } from '../fakes/telegram.js';
import { bytesOf, pdf, pdfBytes, png, pngBytes } from '../helpers/sample-files.js';

/**
 * Files through the Telegram module against the fake Bot API: what a person sends (photo,
 * document, voice) becomes attachments fetched by getFile and the file URL, bounded; what berth
 * sends goes as a photo or a document.
 */
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const ALICE = { id: 42, first_name: 'Alice' };
const CHAT = { id: 42, type: 'private' as const, first_name: 'Alice' };

async function setup(opts: { chunkedFiles?: boolean } = {}): Promise<{ fake: FakeTelegram; tg: ChannelTransport }> {
  const fake = await startFakeTelegram(opts);
  cleanups.push(() => fake.close());
  fake.addChat(CHAT);
  const tg = createTelegramBridge({
    config: TelegramBridgeSchema.parse({ token: fake.token, api_url: fake.url }),
    logger: pino({ level: 'silent' }),
    dir: '/nonexistent',
    take: () => 'accepted',
    postOut: async () => ({ status: 200 }),
  });
  return { fake, tg };
}

const fetchOf = (tg: ChannelTransport, ref: string, maxBytes = 1024 * 1024) =>
  tg.fetchAttachment!(ref, { maxBytes, signal: AbortSignal.timeout(10_000) });
const codeOf = async (p: Promise<unknown>) =>
  p.then(
    () => 'resolved',
    (err: unknown) => (isBerthError(err) ? err.code : String(err)),
  );

describe('telegram: files in', () => {
  it('a photo: the largest size a bot may fetch, as image/jpeg, and its bytes', async () => {
    const { fake, tg } = await setup();
    const small = fake.addFile(bytesOf(100));
    const medium = fake.addFile(pngBytes(4, 4));
    const huge = fake.addFile(bytesOf(10), { fileSize: 25 * 1024 * 1024 }); // declared past the 20 MiB a bot may fetch
    const update = fake.deliverRaw({
      message: {
        message_id: 7,
        date: 1,
        chat: CHAT,
        from: ALICE,
        photo: [
          { ...small, width: 90, height: 90 },
          { ...medium, width: 800, height: 800 },
          { ...huge, width: 5000, height: 5000 },
        ],
      },
    });
    const message = telegramMessage(update)!;
    expect(message).toMatchObject({
      id: '42:7',
      text: '',
      attachments: [{ ref: `tg:${medium.file_id}`, name: 'photo-7.jpg', mime: 'image/jpeg', size: medium.file_size }],
    });
    expect(Buffer.from(await fetchOf(tg, message.attachments![0]!.ref))).toEqual(pngBytes(4, 4));
    expect(fake.downloads).toHaveLength(1);
  });

  it('a document with a caption: the caption is the text, the file keeps its name and type', async () => {
    const { fake, tg } = await setup();
    const file = fake.addFile(pdfBytes());
    const update = fake.deliverRaw({
      message: {
        message_id: 8,
        date: 1,
        chat: CHAT,
        from: ALICE,
        caption: 'summarise this',
        document: { ...file, file_name: 'q3 report.pdf', mime_type: 'application/pdf' },
      },
    });
    const message = telegramMessage(update)!;
    expect(message.text).toBe('summarise this');
    expect(message.attachments).toEqual([
      { ref: `tg:${file.file_id}`, name: 'q3 report.pdf', mime: 'application/pdf', size: pdfBytes().length },
    ]);
    expect(Buffer.from(await fetchOf(tg, message.attachments![0]!.ref))).toEqual(pdfBytes());
  });

  it('a voice note is a voice attachment (audio/ogg)', async () => {
    const { fake, tg } = await setup();
    const file = fake.addFile(bytesOf(3000));
    const update = fake.deliverRaw({
      message: { message_id: 9, date: 1, chat: CHAT, from: ALICE, voice: { ...file, duration: 3, mime_type: 'audio/ogg' } },
    });
    expect(telegramMessage(update)!.attachments).toEqual([
      { ref: `tg:${file.file_id}`, name: 'voice-9.ogg', mime: 'audio/ogg', size: 3000, voice: true },
    ]);
    expect(Buffer.from(await fetchOf(tg, `tg:${file.file_id}`))).toEqual(bytesOf(3000));
  });

  it('over the bound: refused by the declared size before a download, and mid-stream when the size is not declared', async () => {
    const { fake, tg } = await setup({ chunkedFiles: true });
    const declared = fake.addFile(bytesOf(300_000));
    expect(await codeOf(fetchOf(tg, `tg:${declared.file_id}`, 100_000))).toBe('TOO_LARGE');
    expect(fake.downloads).toEqual([]);
    const undeclared = fake.addFile(bytesOf(300_000), { fileSize: null });
    expect(await codeOf(fetchOf(tg, `tg:${undeclared.file_id}`, 100_000))).toBe('TOO_LARGE');
    expect(fake.downloads).toHaveLength(1);
    const lying = fake.addFile(bytesOf(300_000), { fileSize: 10 });
    expect(await codeOf(fetchOf(tg, `tg:${lying.file_id}`, 100_000))).toBe('TOO_LARGE');
  });

  it("a file past the Bot API's 20 MB: TOO_LARGE, whatever the caller's bound", async () => {
    const { fake, tg } = await setup();
    const big = fake.addFile(Buffer.alloc(20 * 1024 * 1024 + 1));
    await expect(fetchOf(tg, `tg:${big.file_id}`, 100 * 1024 * 1024)).rejects.toMatchObject({
      code: 'TOO_LARGE',
      message: expect.stringContaining('Telegram'),
    });
  });

  it('through the poll loop: a document with no caption is taken as a message of its file alone', async () => {
    const fake = await startFakeTelegram({ longPollCapMs: 200 });
    cleanups.push(() => fake.close());
    const taken: ChannelMessage[] = [];
    const tg = createTelegramBridge({
      config: TelegramBridgeSchema.parse({ token: fake.token, api_url: fake.url }),
      logger: pino({ level: 'silent' }),
      dir: '/nonexistent',
      take: (m) => (taken.push(m), 'accepted'),
      postOut: async () => ({ status: 200 }),
      backoffMs: { min: 10, max: 50 },
    });
    tg.start();
    cleanups.push(() => tg.stop());
    const file = fake.addFile(pdfBytes());
    fake.deliverRaw({
      message: {
        message_id: 11,
        date: 1,
        chat: CHAT,
        from: ALICE,
        document: { ...file, file_name: 'a.pdf', mime_type: 'application/pdf' },
      },
    });
    await fake.waitFor(() => taken.length === 1);
    expect(taken[0]).toMatchObject({ id: '42:11', text: '', attachments: [{ name: 'a.pdf', mime: 'application/pdf' }] });
  });

  it('a ref Telegram did not hand out is refused without a call', async () => {
    const { fake, tg } = await setup();
    for (const ref of ['mxc://example.org/abc', 'tg:../../etc/passwd', 'tg:', 'slack:F1:https://files.slack.com/x'])
      expect(await codeOf(fetchOf(tg, ref))).toBe('NOT_FOUND');
    expect(fake.calls.filter((c) => c.method === 'getfile')).toEqual([]);
  });
});

describe('telegram: files out', () => {
  it('a PNG goes as a photo, a PDF as a document, each with its caption', async () => {
    const { fake, tg } = await setup();
    expect(tg.fileLimitBytes).toBe(TELEGRAM_FILE_LIMIT_BYTES);
    await tg.sendFile!('42', png(), 'the chart');
    await tg.sendFile!('42', pdf(), 'the report');
    const [photo, document] = fake.repliesTo(42);
    expect(photo).toMatchObject({ method: 'sendPhoto', caption: 'the chart' });
    expect(photo!.message!.photo).toEqual([expect.objectContaining({ width: 2, height: 1, file_size: pngBytes().length })]);
    expect(photo!.document!.bytes).toEqual(pngBytes());
    expect(document).toMatchObject({
      method: 'sendDocument',
      caption: 'the report',
      document: { fileName: 'report.pdf', mimeType: 'application/pdf' },
    });
    expect(document!.document!.bytes).toEqual(pdfBytes());
  });

  it('an image Telegram cannot read as a photo goes as a document', async () => {
    const { fake, tg } = await setup();
    await tg.sendFile!('42', { name: 'not-really.png', mime: 'image/png', data: new Uint8Array(bytesOf(64)) }, 'a picture');
    expect(fake.sent.map((s) => [s.method, s.ok])).toEqual([
      ['sendPhoto', false],
      ['sendDocument', true],
    ]);
  });

  it('a forum topic: the file goes to its thread', async () => {
    const { fake, tg } = await setup();
    fake.addChat({ id: -100_5, type: 'supergroup', title: 'g', is_forum: true });
    await tg.sendFile!('-1005/77', pdf(), 'here');
    expect(fake.repliesTo(-100_5)[0]).toMatchObject({ method: 'sendDocument', messageThreadId: 77 });
  });
});
