import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { isBerthError } from '../../src/base/errors.js';
import type { ChannelTransport } from '../../src/channels/contract.js';
import { createSlackBridge, SlackBridgeSchema, slackFileOrigins, slackMessage } from '../../src/channels/slack.js';
import { SLACK_FILE_LIMIT_BYTES } from '../../src/channels/slack-files.js';
import { startFakeSlack, type FakeSlack } from '../fakes/slack.js';
import { bytesOf, pdf, pdfBytes, png, pngBytes } from '../helpers/sample-files.js';

/**
 * Files through the Slack module against the fake Slack: shared files become attachments whose
 * bytes come with the bot token from Slack's file host only, bounded; what berth sends is an
 * external upload completed into the channel (and thread).
 */
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const DM = 'D0ALICE01';
const ALICE = 'U0ALICE01';

async function setup(opts: { chunkedFiles?: boolean } = {}): Promise<{ fake: FakeSlack; slack: ChannelTransport; apiUrl: string }> {
  const fake = await startFakeSlack({ whenNoReceiver: 'drop', ...opts });
  cleanups.push(() => fake.close());
  const apiUrl = fake.apiUrl.replace(/\/$/, '');
  const slack = createSlackBridge({
    config: SlackBridgeSchema.parse({ bot_token: fake.botToken, signing_secret: fake.signingSecret, api_url: apiUrl }),
    logger: pino({ level: 'silent' }),
    dir: '/nonexistent',
    take: () => 'accepted',
    postOut: async () => ({ status: 200 }),
  });
  return { fake, slack, apiUrl };
}

const fetchOf = (t: ChannelTransport, ref: string, maxBytes = 1024 * 1024) =>
  t.fetchAttachment!(ref, { maxBytes, signal: AbortSignal.timeout(10_000) });
const codeOf = async (p: Promise<unknown>) =>
  p.then(
    () => 'resolved',
    (err: unknown) => (isBerthError(err) ? err.code : String(err)),
  );

describe('slack: files in', () => {
  it('a direct message sharing a PNG and a PDF, no text: two attachments, each fetched with the bot token', async () => {
    const { fake, slack, apiUrl } = await setup();
    const image = fake.addFile(pngBytes(), { name: 'screenshot.png', mimetype: 'image/png' });
    const report = fake.addFile(pdfBytes(), { name: 'report.pdf', mimetype: 'application/pdf' });
    const delivery = fake.deliverMessage({ channel: DM, channelType: 'im', user: ALICE, text: '', files: [image, report] });
    const message = slackMessage(delivery.body, undefined, slackFileOrigins(apiUrl))!;
    expect(message).toMatchObject({ chat: DM, tenant: `slack:${ALICE}`, text: '' });
    expect(message.attachments).toEqual([
      { ref: `slack:${image.id}:${image.url_private_download}`, name: 'screenshot.png', mime: 'image/png', size: pngBytes().length },
      { ref: `slack:${report.id}:${report.url_private_download}`, name: 'report.pdf', mime: 'application/pdf', size: pdfBytes().length },
    ]);
    expect(Buffer.from(await fetchOf(slack, message.attachments![0]!.ref))).toEqual(pngBytes());
    expect(Buffer.from(await fetchOf(slack, message.attachments![1]!.ref))).toEqual(pdfBytes());
    expect(fake.fileDownloads).toEqual([
      { id: image.id, authorized: true },
      { id: report.id, authorized: true },
    ]);
  });

  it("a clip recorded in Slack is a voice note; a file from a host that is not Slack's is not taken", async () => {
    const { fake, apiUrl } = await setup();
    const clip = { ...fake.addFile(bytesOf(500), { name: 'clip.webm', mimetype: 'audio/webm' }), subtype: 'slack_audio' };
    const elsewhere = {
      ...fake.addFile(bytesOf(10), { name: 'x.bin', mimetype: 'application/octet-stream' }),
      url_private_download: 'https://files.slack.com.evil.example/x.bin',
      url_private: 'https://evil.example/x.bin',
    };
    const delivery = fake.deliverMessage({
      channel: DM,
      channelType: 'im',
      user: ALICE,
      text: 'listen',
      files: [clip, elsewhere] as never,
    });
    expect(slackMessage(delivery.body, undefined, slackFileOrigins(apiUrl))!.attachments).toEqual([
      expect.objectContaining({ name: 'clip.webm', mime: 'audio/webm', voice: true }),
    ]);
  });

  it('over the bound: refused mid-stream (no length declared) and by Content-Length', async () => {
    for (const chunkedFiles of [true, false]) {
      const { fake, slack } = await setup({ chunkedFiles });
      const big = fake.addFile(bytesOf(300_000), { name: 'big.bin', mimetype: 'application/octet-stream', size: 10 });
      expect(await codeOf(fetchOf(slack, `slack:${big.id}:${big.url_private_download}`, 100_000))).toBe('TOO_LARGE');
    }
  });

  it('a ref Slack did not hand out, or a URL on another host, is refused: the token goes nowhere else', async () => {
    const { fake, slack } = await setup();
    const file = fake.addFile(bytesOf(10), { name: 'a.bin', mimetype: 'application/octet-stream' });
    for (const ref of [
      `slack:${file.id}:https://evil.example/files-pri/x`,
      `slack:${file.id}:https://files.slack.com.evil.example/x`,
      'tg:AAAA',
      `mxc://example.org/${file.id}`,
      `slack:nope:${file.url_private_download}`,
    ]) {
      expect(await codeOf(fetchOf(slack, ref))).toBe('NOT_FOUND');
    }
    expect(fake.fileDownloads).toEqual([]);
  });

  it('a token Slack does not let read the file: its redirect to sign in is refused, not followed', async () => {
    const { fake, apiUrl } = await setup();
    const file = fake.addFile(bytesOf(10), { name: 'a.bin', mimetype: 'application/octet-stream' });
    const stranger = createSlackBridge({
      config: SlackBridgeSchema.parse({ bot_token: 'xoxb-not-this-workspace', signing_secret: 's', api_url: apiUrl }),
      logger: pino({ level: 'silent' }),
      dir: '/nonexistent',
      take: () => 'accepted',
      postOut: async () => ({ status: 200 }),
    });
    await expect(fetchOf(stranger, `slack:${file.id}:${file.url_private_download}`)).rejects.toMatchObject({
      status: 403,
      message: expect.stringContaining('files:read'),
    });
    expect(fake.fileDownloads).toEqual([{ id: file.id, authorized: false }]);
  });
});

describe('slack: files out', () => {
  it('a PNG and a PDF: each an external upload, completed into the channel with its caption', async () => {
    const { fake, slack } = await setup();
    expect(slack.fileLimitBytes).toBe(SLACK_FILE_LIMIT_BYTES);
    await slack.sendFile!(DM, png(), 'the chart <b>');
    await slack.sendFile!('C0TEAM001/1700000000.000100', pdf(), 'the report');
    expect(fake.uploads.map((u) => ({ filename: u.filename, length: u.length, bytes: u.bytes, completed: u.completed }))).toEqual([
      {
        filename: 'chart.png',
        length: pngBytes().length,
        bytes: pngBytes(),
        completed: { channel_id: DM, initial_comment: 'the chart &lt;b&gt;', title: 'chart.png' },
      },
      {
        filename: 'report.pdf',
        length: pdfBytes().length,
        bytes: pdfBytes(),
        completed: { channel_id: 'C0TEAM001', thread_ts: '1700000000.000100', initial_comment: 'the report', title: 'report.pdf' },
      },
    ]);
    // The upload URL is the credential: the bot token went to the Web API alone.
    expect(fake.calls.filter((c) => c.method.startsWith('files.')).map((c) => [c.method, c.tokenFrom])).toEqual([
      ['files.getUploadURLExternal', 'header'],
      ['files.completeUploadExternal', 'header'],
      ['files.getUploadURLExternal', 'header'],
      ['files.completeUploadExternal', 'header'],
    ]);
  });

  it("an upload Slack refuses is the send's failure, with Slack's word", async () => {
    const { fake, slack } = await setup();
    fake.failNext('files.getUploadURLExternal', 'file_uploads_disabled');
    await expect(slack.sendFile!(DM, pdf(), 'x')).rejects.toMatchObject({
      message: expect.stringContaining('file_uploads_disabled'),
      status: 400,
    });
  });
});
