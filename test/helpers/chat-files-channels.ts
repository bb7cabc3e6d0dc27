import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { webhookSignature } from '../../src/channels/webhook-signing.js';
import { startFakeMatrix } from '../fakes/matrix.js';
import { startFakeSignalCli } from '../fakes/signal-cli.js';
import { startFakeSlack } from '../fakes/slack.js';
import { startFakeTelegram } from '../fakes/telegram.js';

/**
 * Each chat channel as a person uses it to trade files with berth, on its fake service: how a
 * message with files is sent the service's native way, what berth said back, and which files it
 * sent back natively. The shared rig (chat-files-rig.ts) runs them all against one berth.
 */
export interface InFile {
  name: string;
  mime: string;
  data: Buffer;
  /** The size the service declares, when it says otherwise (a file declared too big is refused unfetched). */
  declared?: number;
}

export interface SentBack {
  name: string;
  data: Buffer;
  /** The native send: sendPhoto, m.image, an upload, an attachment. */
  how: string;
}

export interface FilesChannel {
  name: 'signal' | 'telegram' | 'slack' | 'matrix' | 'webhook';
  /** Its lines under `bridges:` in berth.yaml. */
  config: string[];
  /** Private addresses berth must be let reach (a webhook's callback receiver). */
  privateHosts?: string[];
  /** Connected to berth (its poll or socket is open). */
  ready(): Promise<void>;
  /**
   * The person sends the files with these words. A service that carries one file a message
   * (Telegram, Matrix) sends one message per file, the words with the last and `otherWords` (ending
   * in `echo got <name>`, awaited) with the others.
   * Returns the names the files are expected to land as, in order (a Telegram photo has none of its own).
   */
  send(text: string, files: InFile[], otherWords?: (f: InFile) => string): Promise<string[]>;
  /** What berth said to the person (answers and notices, unescaped). */
  texts(): string[];
  /** Files berth sent the person natively. */
  sentBack(): SentBack[];
  /** Arm a failure of the next file send (the service refusing it), where the fake can play one. */
  failNextFile?(): void;
  /** The webhook's own answer to a request (status and body), for a refusal told at once. */
  lastStatus?(): { status: number; body: string } | undefined;
  close(): Promise<void>;
}

const notQueued = (t: string) => !t.startsWith('berth: queued');

/** Signal through the fake signal-cli; `maxFileBytes`: the bridge's max_file_bytes (what the operator's signal-cli takes). */
export async function signalChannel(maxFileBytes?: number): Promise<FilesChannel> {
  const fake = await startFakeSignalCli({ keepaliveMs: 200, receiveMode: 'on-connection' });
  const uuid = '00000000-0000-4000-8000-00000000f11e';
  return {
    name: 'signal',
    config: [
      '  signal:',
      `    url: ${fake.url}`,
      `    account: '${fake.account}'`,
      '    senders: open',
      ...(maxFileBytes !== undefined ? [`    max_file_bytes: ${maxFileBytes}`] : []),
    ],
    ready: () => fake.waitForClients(1, 10_000),
    async send(text, files) {
      const attachments = files.map((f) =>
        fake.addAttachment(f.data, { contentType: f.mime, filename: f.name, ...(f.declared ? { size: f.declared } : {}) }),
      );
      fake.deliverText({ fromUuid: uuid, fromNumber: '+15550001111', text, attachments });
      return files.map((f) => f.name);
    },
    texts: () =>
      fake
        .repliesTo(uuid)
        .map((s) => s.message)
        .filter((m) => m !== '' && notQueued(m)),
    sentBack: () =>
      fake
        .repliesTo(uuid)
        .flatMap((s) => s.files)
        .map((f) => ({ name: f.filename ?? '', data: f.data ?? Buffer.alloc(0), how: `attachment ${f.source}` })),
    close: () => fake.close(),
  };
}

const unMarkdownV2 = (t: string) => t.replace(/\\([_*[\]()~`>#+\-=|{}.!\\])/g, '$1');

export async function telegramChannel(): Promise<FilesChannel> {
  const fake = await startFakeTelegram({ longPollCapMs: 500 });
  const person = { id: 7_100_001, first_name: 'Tess' };
  const chat = { id: person.id, type: 'private' as const, first_name: 'Tess' };
  let messageId = 500;
  const texts = () =>
    fake
      .repliesTo(chat.id)
      .filter((m) => m.method === 'sendMessage')
      .map((m) => (m.parseMode === 'MarkdownV2' ? unMarkdownV2(m.text ?? '') : (m.text ?? '')))
      .filter(notQueued);
  return {
    name: 'telegram',
    config: ['  telegram:', `    token: '${fake.token}'`, `    api_url: ${fake.url}`, '    senders: open'],
    ready: () => fake.waitFor(() => fake.longPolling(), 10_000).then(() => undefined),
    async send(text, files, otherWords) {
      const names: string[] = [];
      for (const [i, f] of files.entries()) {
        const id = ++messageId;
        const file = fake.addFile(f.data, f.declared ? { fileSize: f.declared } : {});
        const caption = i === files.length - 1 ? text : (otherWords?.(f) ?? `echo got ${f.name}`);
        // A photo is Telegram's own (re-encoded, nameless: berth names it photo-<id>.jpg); anything else a document.
        const media = f.mime.startsWith('image/')
          ? { photo: [{ ...file, width: 16, height: 16 }] }
          : { document: { ...file, file_name: f.name, mime_type: f.mime } };
        fake.deliverRaw({ message: { message_id: id, date: Math.floor(Date.now() / 1000), chat, from: person, caption, ...media } });
        names.push(f.mime.startsWith('image/') ? `photo-${id}.jpg` : f.name);
        // One message at a time, as a person sends them: each is answered before the next.
        if (i < files.length - 1) await fake.waitFor(() => texts().some((t) => t.includes(`got ${f.name}`)), 60_000);
      }
      return names;
    },
    texts,
    sentBack: () =>
      fake
        .repliesTo(chat.id)
        .filter((m) => m.method !== 'sendMessage' && m.document?.bytes)
        .map((m) => ({ name: m.document!.fileName ?? '', data: m.document!.bytes!, how: m.method })),
    close: () => fake.close(),
  };
}

const unMrkdwn = (t: string) => t.replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&amp;/g, '&');

export async function slackChannel(): Promise<FilesChannel> {
  const fake = await startFakeSlack({ ackTimeoutMs: 2000, retryDelaysMs: [50, 50, 50] });
  const user = 'U0FILES01';
  const dm = 'D0FILES01';
  return {
    name: 'slack',
    config: [
      '  slack:',
      `    bot_token: ${fake.botToken}`,
      `    api_url: ${fake.url}/api`,
      '    mode: socket',
      `    app_token: ${fake.appToken}`,
      '    senders: open',
    ],
    ready: () => fake.waitForSocketClients(1, 10_000).then(() => undefined),
    async send(text, files) {
      const shared = files.map((f) =>
        fake.addFile(f.data, { name: f.name, mimetype: f.mime, ...(f.declared ? { size: f.declared } : {}) }),
      );
      // Slack sends a message's text with &, < and > as entities.
      const encoded = text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
      fake.deliverMessage({ channel: dm, channelType: 'im', user, text: encoded, files: shared });
      return files.map((f) => f.name);
    },
    texts: () =>
      fake
        .repliesIn(dm)
        .map((p) => unMrkdwn(p.text))
        .filter(notQueued),
    sentBack: () =>
      fake.uploads
        .filter((u) => u.completed?.channel_id === dm && u.bytes)
        .map((u) => ({ name: u.filename, data: u.bytes!, how: 'files.completeUploadExternal' })),
    failNextFile: () => fake.failNext('files.getUploadURLExternal', 'file_uploads_disabled'),
    close: () => fake.close(),
  };
}

/** Matrix on the fake homeserver, whose upload limit (its media config) is `maxUploadBytes`. */
export async function matrixChannel(maxUploadBytes: number): Promise<FilesChannel> {
  const fake = await startFakeMatrix({ maxUploadBytes });
  const person = `@mira:${fake.serverName}`;
  const room = fake.createRoom({ members: [person], direct: true });
  const events = () => fake.repliesIn(room).map((e) => e.content as { msgtype?: string; body?: string; filename?: string; url?: string });
  return {
    name: 'matrix',
    config: [
      '  matrix:',
      `    homeserver: ${fake.url}`,
      `    user_id: '${fake.botUserId}'`,
      `    access_token: ${fake.botAccessToken}`,
      '    senders: open',
    ],
    ready: () => fake.waitForPoll(10_000).then(() => undefined),
    async send(text, files, otherWords) {
      for (const [i, f] of files.entries()) {
        const url = fake.uploadMedia(f.data, { contentType: f.mime, filename: f.name });
        const caption = i === files.length - 1 ? text : (otherWords?.(f) ?? `echo got ${f.name}`);
        fake.sendRaw(room, {
          type: 'm.room.message',
          sender: person,
          content: {
            msgtype: f.mime.startsWith('image/') ? 'm.image' : 'm.file',
            body: caption,
            filename: f.name,
            url,
            info: { mimetype: f.mime, size: f.declared ?? f.data.length },
          },
        });
        if (i < files.length - 1)
          await fake
            .waitFor(() => events().some((e) => e.body?.includes(`got ${f.name}`)), 60_000)
            .catch(() => {
              throw new Error(`no answer to ${f.name}; the room has: ${JSON.stringify(events()).slice(0, 2000)}`);
            });
      }
      return files.map((f) => f.name);
    },
    texts: () =>
      events()
        .filter((e) => e.msgtype === 'm.notice' || e.msgtype === 'm.text')
        .map((e) => e.body ?? '')
        .filter(notQueued),
    sentBack: () =>
      events()
        .filter((e) => e.msgtype === 'm.image' || e.msgtype === 'm.file')
        .map((e) => ({ name: e.filename ?? '', data: fake.media.get(e.url ?? '')?.bytes ?? Buffer.alloc(0), how: e.msgtype! })),
    close: () => fake.close(),
  };
}

/** Signed webhooks: a sender posting files as base64 parts to a hook answered by callback (and its receiver), and (`sync`) to one without a callback_url, answered in the request. */
export async function webhookChannel(url: () => string, maxFileBytes: number): Promise<FilesChannel & { sync: FilesChannel }> {
  const secret = 'files-hook-secret-0123456789abcdef012345';
  const callbacks: Array<Record<string, unknown>> = [];
  const receiver = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      callbacks.push(JSON.parse(Buffer.concat(chunks).toString()) as Record<string, unknown>);
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
  const port = (receiver.address() as AddressInfo).port;
  let last: { status: number; body: string } | undefined;
  /** The sync hook's answers, as the sender got them. */
  const answers: Array<{ reply?: string; notices?: string[] }> = [];
  let n = 0;
  const post = async (hook: string, text: string, files: InFile[]) => {
    const raw = JSON.stringify({
      id: `m${++n}`,
      user: 'ci-bot',
      text,
      files: files.map((f) => ({ name: f.name, mime: f.mime, content_base64: f.data.toString('base64') })),
    });
    const ts = String(Math.floor(Date.now() / 1000));
    const res = await fetch(`${url()}/hooks/${hook}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-berth-timestamp': ts, 'x-berth-signature': webhookSignature(secret, ts, raw) },
      body: raw,
    });
    last = { status: res.status, body: await res.text() };
    return last;
  };
  const sync: FilesChannel = {
    name: 'webhook',
    config: [],
    ready: async () => undefined,
    async send(text, files) {
      const got = await post('files-sync', text, files);
      answers.push(JSON.parse(got.body) as { reply?: string; notices?: string[] });
      return files.map((f) => f.name);
    },
    // The notices come in the answer; a person reads them beside it.
    texts: () => answers.flatMap((a) => [...(a.notices ?? []), ...(a.reply !== undefined ? [a.reply] : [])]),
    sentBack: () => [],
    close: async () => undefined,
  };
  return {
    name: 'webhook',
    config: [
      '  webhook:',
      '    hooks:',
      '      files:',
      `        secret: ${secret}`,
      '        reply: callback',
      `        callback_url: http://127.0.0.1:${port}/answers`,
      `        max_file_bytes: ${maxFileBytes}`,
      '      files-sync:',
      `        secret: ${secret}`,
      `        max_file_bytes: ${maxFileBytes}`,
    ],
    privateHosts: [`127.0.0.1:${port}`],
    ready: async () => undefined,
    async send(text, files) {
      await post('files', text, files);
      return files.map((f) => f.name);
    },
    texts: () => callbacks.map((c) => String(c.reply ?? c.notice ?? '')),
    sentBack: () => [],
    lastStatus: () => last,
    sync,
    close: () => new Promise<void>((r) => receiver.close(() => r())),
  };
}
