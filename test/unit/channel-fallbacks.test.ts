import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { textFile } from '../../src/channels/contract.js';
import type { ChatTransport } from '../../src/bridges/chat-transport.js';
import { createBridgeCore } from '../../src/bridges/core.js';
import { createSignalBridge } from '../../src/channels/signal.js';
import { createSlackBridge, SlackBridgeSchema } from '../../src/channels/slack.js';
import { createTelegramBridge, TelegramBridgeSchema } from '../../src/channels/telegram.js';
import { BerthConfigSchema } from '../../src/config/berth-config-schema.js';
import { openBridgeState } from '../../src/store/bridge-state.js';
import { openInbox } from '../../src/store/inbox.js';
import { fakeCoreAdmin, runViewOf } from '../fakes/core-admin.js';
import { startFakeSignalCli } from '../fakes/signal-cli.js';
import { startFakeSlack } from '../fakes/slack.js';
import { startFakeTelegram } from '../fakes/telegram.js';
import { until } from '../helpers/until.js';

/**
 * The ways of sending the core falls back to, as each channel module does them against its fake
 * service: the words without markup, the reply as a file. And the core over a real channel
 * module whose service keeps failing: the person still gets the reply (the backoff's waits are
 * recorded, not slept).
 */
const logger = pino({ level: 'silent' });
const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** The core over `transport`; one message from `chat` answered with `reply`. */
async function answerThrough(transport: ChatTransport, chat: string, reply: string) {
  const dir = fs.mkdtempSync(join(os.tmpdir(), 'berth-fallback-'));
  cleanups.push(() => fs.rmSync(dir, { recursive: true, force: true }));
  const inbox = openInbox(dir, transport.name);
  const waits: number[] = [];
  const core = createBridgeCore({
    transport: { ...transport, typing: async () => undefined, projectOf: () => 'p' },
    inbox,
    state: openBridgeState(dir, transport.name),
    admin: fakeCoreAdmin({ runMessage: async (_p, r) => (await r.whenReady?.(), runViewOf({ stdout: reply })) }),
    config: () => BerthConfigSchema.parse({}),
    logger,
    senderAllowed: () => true,
    delivery: { sleep: async (ms) => void waits.push(ms) },
  });
  core.receive({ id: 'm1', chat, tenant: 't:a', sender: 't:a', text: 'q' });
  await until(() => inbox.open().length === 0, 'the message to end');
  await core.idle();
  return { waits, entry: inbox.all().find((e) => e.id === 'm1')! };
}

describe('Telegram: plain and file', () => {
  async function telegram() {
    const fake = await startFakeTelegram();
    cleanups.push(() => fake.close());
    const dir = fs.mkdtempSync(join(os.tmpdir(), 'berth-tg-'));
    cleanups.push(() => fs.rmSync(dir, { recursive: true, force: true }));
    const transport = createTelegramBridge({
      config: TelegramBridgeSchema.parse({ token: fake.token, api_url: fake.url }),
      logger,
      dir,
      take: () => 'accepted',
      postOut: async () => ({ status: 200 }),
    });
    fake.deliverText({ chat: { id: 42, type: 'private', first_name: 'A' }, from: { id: 42, first_name: 'A' }, text: 'hi' });
    return { fake, transport };
  }

  it('sendPlain: the words as they are, no parse_mode; sendFile: a document with its name and caption', async () => {
    const { fake, transport } = await telegram();
    await transport.sendPlain!('42', 'a *b* c_d (e)');
    await transport.sendFile!('42', textFile('reply.txt', 'the whole answer'), 'the answer, as a file');
    const [plain, file] = fake.repliesTo(42);
    expect(plain).toMatchObject({ method: 'sendMessage', text: 'a *b* c_d (e)' });
    expect(plain!.parseMode).toBeUndefined();
    expect(file).toMatchObject({ method: 'sendDocument', caption: 'the answer, as a file', document: { fileName: 'reply.txt' } });
    expect(file!.document!.bytes!.toString()).toBe('the whole answer');
  });

  it('sendMessage failing with 500 always: the person gets the reply as reply.txt', async () => {
    const { fake, transport } = await telegram();
    fake.failNext('sendMessage', { code: 500, count: Infinity });
    const { waits, entry } = await answerThrough(transport, '42', 'the answer');
    expect(waits).toEqual([2000, 4000]);
    expect(fake.repliesTo(42).map((m) => [m.method, m.document?.bytes?.toString()])).toEqual([['sendDocument', 'the answer']]);
    expect(entry.phase).toBe('replied');
  });
});

describe('Signal: file', () => {
  async function signal() {
    const fake = await startFakeSignalCli();
    cleanups.push(() => fake.close());
    const transport = createSignalBridge({ url: fake.url, account: fake.account, logger, onMessage: () => undefined });
    return { fake, transport };
  }
  const uuid = '0b0b0b0b-0000-4000-8000-00000000000a';

  it('sendFile: an attachment with its name, under the caption', async () => {
    const { fake, transport } = await signal();
    await transport.sendFile!(uuid, textFile('reply.txt', 'the whole answer'), 'the answer, as a file');
    const [sent] = fake.sent();
    expect(sent).toMatchObject({ ok: true, message: 'the answer, as a file', files: [{ filename: 'reply.txt' }] });
    expect(sent!.files[0]!.data!.toString()).toBe('the whole answer');
  });

  it('a network failure twice: tried again with backoff, the reply arrives once', async () => {
    const { fake, transport } = await signal();
    fake.failNextSend({ type: 'network' }, { count: 2 });
    const { waits, entry } = await answerThrough(transport, uuid, 'the answer');
    expect(waits).toEqual([2000, 4000]);
    expect(
      fake
        .sent()
        .filter((s) => s.ok)
        .map((s) => s.message),
    ).toEqual(['the answer']);
    expect(entry.phase).toBe('replied');
  });
});

describe('Slack: plain', () => {
  it('sendPlain: no mrkdwn formatting, & < > still escaped as Slack asks of every text; a send refused (invalid_blocks) goes plain', async () => {
    const fake = await startFakeSlack({ channels: { D1: 'im' } });
    cleanups.push(() => fake.close());
    const transport = createSlackBridge({
      config: SlackBridgeSchema.parse({ bot_token: fake.botToken, signing_secret: fake.signingSecret, api_url: `${fake.url}/api` }),
      logger,
      dir: os.tmpdir(),
      take: () => 'accepted',
      postOut: async () => ({ status: 200 }),
    });
    fake.failNext('chat.postMessage', 'invalid_blocks');
    const { entry } = await answerThrough(transport, 'D1', 'a *b* <c>');
    expect(fake.posted.map((p) => [p.ok, p.text, (p.params as { mrkdwn?: boolean }).mrkdwn])).toEqual([
      [false, 'a *b* &lt;c&gt;', true],
      [true, 'a *b* &lt;c&gt;', false],
    ]);
    expect(entry.phase).toBe('replied');
  });
});
