import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  matrixChannel,
  signalChannel,
  slackChannel,
  telegramChannel,
  webhookChannel,
  type FilesChannel,
  type InFile,
} from '../helpers/chat-files-channels.js';
import { fileLinks, sha, startChatFilesRig, type ChatFilesRig } from '../helpers/chat-files-rig.js';
import { pdfBytes, pngBytes } from '../helpers/sample-files.js';
import { until } from '../helpers/until.js';

/**
 * Files in and out, end to end on every chat channel: a person sends an image and a document the
 * channel's native way (on its fake service), through the real bridge, core and a real container
 * (the shell preset: the message runs as `sh -c`, and reads the words berth put before it). The
 * bytes land in the workspace's inbox/ (hashed on the host); the agent leaves outbox/chart.png and
 * outbox/report.txt, which come back as the channel's native send with the same bytes; a file
 * over the service's limit (or whose send the service refused) comes as a link that opens with
 * no login (its key), bytes compared; a refused file is told in plain words.
 */
const MiB = 1024 * 1024;
const MATRIX_UPLOAD_LIMIT = 256 * 1024;
const HOOK_MAX_FILE_BYTES = 2 * MiB;
/** The Signal bridge's max_file_bytes: below berth's own cap, so a file over it is one the agent can make. */
const SIGNAL_MAX_FILE_BYTES = 64 * 1024;
/** Past Telegram's 50 MB a bot may send (TELEGRAM_FILE_LIMIT_BYTES). */
const TELEGRAM_OVER = 50_000_001;

let rig: ChatFilesRig;
const channel = (name: FilesChannel['name']) => rig.channels.find((c) => c.name === name)!;

beforeAll(async () => {
  const channels = await Promise.all([
    signalChannel(SIGNAL_MAX_FILE_BYTES),
    telegramChannel(),
    slackChannel(),
    matrixChannel(MATRIX_UPLOAD_LIMIT),
    webhookChannel(() => rig.server.url, HOOK_MAX_FILE_BYTES),
  ]);
  rig = await startChatFilesRig(channels, { max_file_mb: 64, max_message_mb: 64, types: ['image/*', 'application/pdf', 'text/*'] });
}, 60_000);
afterAll(() => rig?.close());

/** What each channel's person sends: an image, a document, a type the project does not take, and (where the service declares sizes) one declared too big. */
function filesOf(p: string, declares: boolean): InFile[] {
  return [
    { name: `${p}-screen.png`, mime: 'image/png', data: pngBytes(16, 16) },
    { name: `${p}-notes.pdf`, mime: 'application/pdf', data: pdfBytes() },
    { name: `${p}-tool.zip`, mime: 'application/zip', data: Buffer.from('PK\x03\x04 not really') },
    ...(declares ? [{ name: `${p}-huge.pdf`, mime: 'application/pdf', data: pdfBytes(), declared: 70 * MiB }] : []),
  ];
}

/** The agent says what berth told it of the files: berth's words are comment lines before its script, which /proc shows it. */
const SEEN = "tr '\\0' '\\n' < /proc/$$/cmdline | grep '^# \\[The person sent'";

/** The agent's part: what it was told, inbox/, and files left in outbox/. */
const script = (p: string, image: string, bigBytes?: number) =>
  [
    SEEN,
    'ls inbox',
    'mkdir -p outbox',
    `cp inbox/${image} outbox/chart.png`,
    `printf 'report from ${p}\\n' > outbox/report.txt`,
    ...(bigBytes ? [`head -c ${bigBytes} /dev/urandom > outbox/big-${p}.bin`] : []),
    'echo done-' + p,
  ].join('\n');

async function proveRoundTrip(
  ch: FilesChannel,
  opts: { declares: boolean; oneFilePerMessage?: boolean; bigBytes?: number; failSend?: boolean; native: string[]; prefix?: string },
) {
  const p = opts.prefix ?? ch.name.slice(0, 3);
  const [image, doc, ...refused] = filesOf(p, opts.declares);
  // One file a message: the refused ones first, so the last message (the script) lands one.
  const files = opts.oneFilePerMessage ? [...refused, image!, doc!] : [image!, doc!, ...refused];
  if (opts.failSend) ch.failNextFile!();
  // A Telegram photo is named by its message (photo-<id>.jpg).
  const imageIn = ch.name === 'telegram' ? 'photo-*.jpg' : image!.name;
  const names = await ch.send(script(p, imageIn, opts.bigBytes), files, (f) => `${SEEN}; echo got ${f.name}`);
  await until(() => ch.texts().some((t) => t.includes(`done-${p}`)), `${ch.name}: the agent's answer`, 120_000);

  // In: the image and the document landed in inbox/ with the bytes sent; the agent was told their paths.
  const said = ch.texts().join('\n');
  for (const f of [image!, doc!]) {
    const name = names[files.indexOf(f)]!;
    expect(sha(rig.inboxFile(name) ?? Buffer.alloc(0)), `${name} in inbox/`).toBe(sha(f.data));
    expect(said).toContain(`inbox/${name}`);
  }
  expect(said).toMatch(/# \[The person sent (a file|\d files) with this message, saved in your working directory: inbox\//);
  // Refused: told in plain words, not saved.
  expect(said).toContain(`${p}-tool.zip: this kind of file is not taken here`);
  expect(rig.inboxFile(`${p}-tool.zip`)).toBeUndefined();
  if (opts.declares) {
    expect(said).toMatch(new RegExp(`${p}-huge\\.pdf: too big \\([^)]+\\): files up to 64 MB are taken`));
    expect(rig.inboxFile(`${p}-huge.pdf`)).toBeUndefined();
  }

  // Out: each expected native send has the bytes the agent left; the others came as links that open without a login.
  const want = new Map([
    ['chart.png', pngBytes(16, 16)],
    ['report.txt', Buffer.from(`report from ${p}\n`)],
    ...(opts.bigBytes ? [[`big-${p}.bin`, rig.sentFile(`big-${p}.bin`)!] as const] : []),
  ]);
  const expectedLinks = [...want.keys()].filter((n) => !opts.native.includes(n));
  const links = await until(() => {
    const l = fileLinks(ch.texts());
    return expectedLinks.every((n) => l.has(n)) && ch.sentBack().length >= opts.native.length ? l : undefined;
  }, `${ch.name}: the agent's files`);
  for (const name of opts.native) {
    const sent = ch.sentBack().find((f) => f.name === name || (name === 'chart.png' && f.how === 'sendPhoto'));
    expect(sent, `${name} sent natively`).toBeDefined();
    expect(sha(sent!.data), `${name} as sent by ${sent!.how}`).toBe(sha(want.get(name)!));
  }
  for (const name of expectedLinks) {
    const url = new URL(links.get(name)!, rig.server.url);
    const got = await fetch(url);
    expect(got.status, `${name} by its link`).toBe(200);
    expect(Number(got.headers.get('content-length'))).toBe(want.get(name)!.length);
    expect(sha(Buffer.from(await got.arrayBuffer())), `${name} by its link`).toBe(sha(want.get(name)!));
    // Without the key it asks for a login; with another key it is not there.
    url.searchParams.delete('key');
    expect((await fetch(url)).status).toBe(401);
    url.searchParams.set('key', 'A'.repeat(22));
    expect((await fetch(url)).status).toBe(404);
  }
  return { said };
}

describe('files in and out on every chat channel (fake services, real containers)', { timeout: 240_000 }, () => {
  it("Signal: attachments in (getAttachment), attachments out (data URIs); past the bridge's max_file_bytes a link", async () => {
    await proveRoundTrip(channel('signal'), { declares: true, bigBytes: SIGNAL_MAX_FILE_BYTES + 1, native: ['chart.png', 'report.txt'] });
    // The big file went as a link only: no attachment past the limit reached signal-cli.
    expect(
      channel('signal')
        .sentBack()
        .map((f) => f.name),
    ).toEqual(['chart.png', 'report.txt']);
  });

  it("Telegram: a photo and a document in (getFile); sendPhoto and sendDocument out; past the Bot API's 50 MB a link", async () => {
    await proveRoundTrip(channel('telegram'), {
      declares: true,
      oneFilePerMessage: true,
      bigBytes: TELEGRAM_OVER,
      native: ['chart.png', 'report.txt'],
    });
    const sent = channel('telegram').sentBack();
    expect(sent.find((f) => f.how === 'sendPhoto')).toBeDefined();
    expect(sent.find((f) => f.name === 'report.txt')?.how).toBe('sendDocument');
  });

  it('Slack: file_share in (url_private with the bot token), the external upload flow out; an upload Slack refuses becomes a link', async () => {
    // The first file out (big-sla.bin, sorted first) is refused by Slack: it comes as a link, the others as uploads.
    await proveRoundTrip(channel('slack'), { declares: true, bigBytes: 4096, failSend: true, native: ['chart.png', 'report.txt'] });
  });

  it("Matrix: m.image and m.file in (the media repo), upload + m.image/m.file out; past the homeserver's upload limit a link", async () => {
    await proveRoundTrip(channel('matrix'), {
      declares: true,
      oneFilePerMessage: true,
      bigBytes: MATRIX_UPLOAD_LIMIT + 1,
      native: ['chart.png', 'report.txt'],
    });
    expect(
      channel('matrix')
        .sentBack()
        .map((f) => [f.name, f.how]),
    ).toEqual([
      ['chart.png', 'm.image'],
      ['report.txt', 'm.file'],
    ]);
  });

  it("signed webhooks: base64 parts in; the answer and a notice with the files' links to the callback; over the hook's bound: 413 in words", async () => {
    const hook = channel('webhook');
    await proveRoundTrip(hook, { declares: false, native: [] });
    await hook.send('echo too-much', [{ name: 'big.pdf', mime: 'application/pdf', data: Buffer.alloc(HOOK_MAX_FILE_BYTES + 1) }]);
    expect(hook.lastStatus!()).toMatchObject({ status: 413, body: expect.stringContaining('the file is larger than 2 MiB') });
  });

  it("signed webhooks without a callback_url: the refusal and the files' links come as notices in the sync answer", async () => {
    const hook = channel('webhook') as Awaited<ReturnType<typeof webhookChannel>>;
    const { said } = await proveRoundTrip(hook.sync, { declares: false, native: [], prefix: 'wsy' });
    // The answer was one response: its notices (the refusal before the run, the links after it) with the reply.
    const answer = JSON.parse(hook.lastStatus!()!.body) as { status: string; reply: string; notices: string[] };
    expect(answer.status).toBe('answered');
    expect(answer.reply).toContain('done-wsy');
    expect(answer.notices).toEqual([
      expect.stringContaining('wsy-tool.zip: this kind of file is not taken here'),
      expect.stringMatching(/^berth: the agent sent 2 files/),
    ]);
    expect(said).toContain('chart.png');
  });
});
