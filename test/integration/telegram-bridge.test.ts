import fs from 'node:fs';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningBridges } from '../../src/bridges/start.js';
import { startTestBridges, stopBridgeRig } from '../helpers/bridge-rig.js';
import { approveSender, pendingSenders } from '../../src/bridges/senders.js';
import { homePaths } from '../../src/config/home.js';
import { checkBridges } from '../../src/cli/doctor-outbound.js';
import { BerthConfigSchema } from '../../src/config/berth-config-schema.js';
import { listenHttp, type HttpSurface } from '../../src/cli/serve.js';
import { startFakeTelegram, type FakeTelegram } from '../fakes/telegram.js';
import { testConfig, testHome, type TestHome } from '../helpers.js';

/**
 * The Telegram bridge against a fake of the Bot API written from its documentation and its
 * reference server (getUpdates offsets and long polls, setWebhook with the secret token,
 * MarkdownV2 parsing, sendChatAction, sendDocument, error payloads and retry_after), with real
 * containers answering: the shell preset runs each message as `sh -c`.
 */
let fake: FakeTelegram;
let h: TestHome;
let bridges: RunningBridges;
const ALICE = 7_000_101;
const BOB = 7_000_102;
const STRANGER = 7_000_199;
const GROUP = -100_555_001;

const unMarkdownV2 = (t: string) => t.replace(/\\([_*[\]()~`>#+\-=|{}.!\\])/g, '$1');
const person = (id: number) => ({ id, first_name: `P${id}` });
const say = (
  from: number,
  text: string,
  chat: { id: number; type: 'private' | 'group' | 'supergroup'; title?: string } = { id: from, type: 'private' },
) => fake.deliverText({ chat, from: person(from), text });
const repliesOf = (chat: number) =>
  fake
    .repliesTo(chat)
    .map((m) => unMarkdownV2(m.text ?? m.caption ?? ''))
    .filter((m) => !m.startsWith('berth: queued'));
const waitReplies = (chat: number, count: number, ms = 30_000) =>
  fake.waitFor(() => repliesOf(chat).length >= count && repliesOf(chat), ms);

function config(extra: string[] = []) {
  return [
    'bridges:',
    '  telegram:',
    `    token: '${fake.token}'`,
    `    api_url: ${fake.url}`,
    '    senders: pairing',
    `    allow: ['${ALICE}', 'telegram:${BOB}']`,
    ...extra,
    'routes:',
    '  telegram: { project: tg }',
    '',
  ].join('\n');
}

beforeAll(async () => {
  fake = await startFakeTelegram({ longPollCapMs: 500 });
  h = testHome({ config: config() });
  h.create({ name: 'tg', workspace_isolation: true });
  bridges = startTestBridges(h);
  await fake.waitFor(() => fake.longPolling(), 10_000);
});
afterAll(() => stopBridgeRig({ bridges, h, fake }));

describe('Telegram bridge (long polling)', () => {
  it('a private message runs as its sender and is answered in MarkdownV2 Telegram accepts; typing while it works', async () => {
    say(ALICE, 'echo "hello (from) $(whoami)!"');
    expect(await waitReplies(ALICE, 1)).toEqual(['hello (from) agent!']);
    const sent = fake.sent.filter((s) => s.chatId === ALICE);
    expect(sent.every((s) => s.ok && s.parseMode === 'MarkdownV2')).toBe(true);
    expect(fake.actions.some((a) => a.chatId === ALICE && a.action === 'typing')).toBe(true);
    const entry = bridges
      .channel('telegram')!
      .inbox.all()
      .find((e) => e.sender === `telegram:${ALICE}`);
    expect(entry).toMatchObject({ tenant: `telegram:${ALICE}`, chat: String(ALICE) });
  });

  it("the agent's code stays code; what it writes never becomes markup", async () => {
    say(ALICE, "printf '```\\nls *_x_* [a](b)\\n```\\n**not bold** _nor italic_ [link](http://x)\\n'");
    const [, second] = await waitReplies(ALICE, 2);
    expect(second).toContain('**not bold** _nor italic_ [link](http://x)');
    const message = fake.sent.filter((s) => s.chatId === ALICE && s.ok).at(-1)!.message!;
    expect(message.entities?.map((e) => e.type)).toEqual(['pre']); // the block, and nothing else
  });

  it('a message Telegram sends again (a new update of the same message) runs once', async () => {
    const update = say(BOB, 'echo once >> once.txt; wc -l < once.txt');
    expect(await waitReplies(BOB, 1)).toEqual(['1']);
    fake.deliverRaw({ message: update.message });
    say(BOB, 'wc -l < once.txt');
    expect((await waitReplies(BOB, 2)).at(-1)).toBe('1');
  });

  it('a group is one tenant: its members share a workspace; /cmd@bot is the command', async () => {
    const group = { id: GROUP, type: 'supergroup' as const, title: 'team' };
    say(ALICE, 'echo from-alice > shared.txt', group);
    await waitReplies(GROUP, 1);
    say(BOB, 'cat shared.txt', group);
    expect((await waitReplies(GROUP, 2))[1]).toBe('from-alice');
    say(BOB, `/whoami@${fake.bot.username}`, group);
    expect((await waitReplies(GROUP, 3))[2]).toContain(`You are telegram-group:${GROUP},`);
  });

  it('a long reply is split at line breaks; a very long one comes as reply.txt', async () => {
    say(ALICE, 'seq 1 1500');
    const parts = await fake.waitFor(() => fake.repliesTo(ALICE).length >= 4 && fake.repliesTo(ALICE).slice(2));
    expect(parts.map((p) => unMarkdownV2(p.text ?? '')).join('\n')).toBe(Array.from({ length: 1500 }, (_, i) => i + 1).join('\n'));
    expect(parts.every((p) => [...unMarkdownV2(p.text ?? '')].length <= 4096)).toBe(true);
    say(ALICE, 'seq 1 5000');
    const doc = await fake.waitFor(() => fake.sent.find((s) => s.method === 'sendDocument' && s.chatId === ALICE), 30_000);
    expect(doc.document?.bytes?.toString()).toBe(`${Array.from({ length: 5000 }, (_, i) => i + 1).join('\n')}`);
  });

  it('a rate limit (429 retry_after) is waited out once: the answer arrives, once', async () => {
    fake.failNext('sendMessage', { code: 429, description: 'Too Many Requests: retry after 1', retryAfter: 1 });
    say(BOB, 'echo after-the-limit');
    await fake.waitFor(() => repliesOf(BOB).includes('after-the-limit'), 30_000);
    expect(repliesOf(BOB).filter((r) => r === 'after-the-limit')).toHaveLength(1);
  });

  it('a stranger is held for pairing; approved, they are told and their first message is answered', async () => {
    say(STRANGER, 'echo first-words');
    await fake.waitFor(() => repliesOf(STRANGER).length > 0);
    expect(repliesOf(STRANGER)[0]).toMatch(/does not know you yet/);
    const stateDir = homePaths(h.home).stateDir;
    expect(pendingSenders(h.berth.config, stateDir).map((p) => p.sender)).toContain(`telegram:${STRANGER}`);
    const r = await approveSender({ config: h.berth.config, stateDir, logger: pino({ level: 'silent' }) }, `telegram:${STRANGER}`);
    expect(r).toEqual({ was_pending: true, held: true, told: true });
    await fake.waitFor(() => repliesOf(STRANGER).includes('first-words'), 30_000);
  });

  it('what is not a text message to answer is passed over: photos, channel posts, other bots', async () => {
    const before = bridges.channel('telegram')!.inbox.all().length;
    fake.deliverRaw({
      message: { message_id: 99_001, date: 1, chat: { id: ALICE, type: 'private' }, from: person(ALICE), photo: [] } as never,
    });
    fake.deliverRaw({ channel_post: { message_id: 99_002, date: 1, chat: { id: -100_9, type: 'channel' }, text: 'echo nope' } as never });
    fake.deliverRaw({
      message: {
        message_id: 99_003,
        date: 1,
        chat: { id: ALICE, type: 'private' },
        from: { id: 1, first_name: 'b', is_bot: true },
        text: 'echo bot',
      } as never,
    });
    say(ALICE, 'echo after-the-noise');
    await fake.waitFor(() => repliesOf(ALICE).includes('after-the-noise'), 30_000);
    expect(bridges.channel('telegram')!.inbox.all().length).toBe(before + 1);
  });

  it('berth.yaml pointing at a token file that cannot be read: the running bridge goes on; once the file is there, it restarts with it', async () => {
    const file = join(h.home, 'telegram.token');
    const write = (lines: string[]) =>
      fs.writeFileSync(join(h.home, 'berth.yaml'), testConfig(config(lines).replace(`    token: '${fake.token}'\n`, '')) ?? '');
    write([`    token_file: ${file}`]);
    expect(bridges.reconfigure()).toMatch(/^telegram bridge not restarted: token_file .* cannot be read; the running one goes on$/);
    say(ALICE, 'echo still-answering');
    await fake.waitFor(() => repliesOf(ALICE).includes('still-answering'), 30_000);
    fs.writeFileSync(file, `${fake.token}\n`, { mode: 0o600 });
    expect(bridges.reconfigure()).toMatch(/^telegram bridge restarted: poll at .* with token_file .*telegram\.token/);
    expect(bridges.reconfigure()).toBeUndefined();
    // The file's content is part of what the bridge runs with: a rotated token restarts it.
    fs.writeFileSync(file, `${fake.token} \n`, { mode: 0o600 });
    expect(bridges.reconfigure()).toMatch(/^telegram bridge restarted/);
    await fake.waitFor(() => fake.longPolling(), 10_000);
    say(ALICE, 'echo after-the-rotation');
    await fake.waitFor(() => repliesOf(ALICE).includes('after-the-rotation'), 30_000);
  });

  it('doctor names the bot, or says the token is refused', async () => {
    expect(await checkBridges(h.berth.config)).toEqual([
      { name: 'bridge telegram', status: 'ok', detail: expect.stringContaining(`@${fake.bot.username} answers with project "tg"`) },
    ]);
    const wrong = BerthConfigSchema.parse({ bridges: { telegram: { token: '1:wrong', api_url: fake.url } } });
    expect(await checkBridges(wrong)).toEqual([
      { name: 'bridge telegram', status: 'fail', detail: expect.stringContaining('refuses the token') },
    ]);
  });

  it('berth.yaml refuses a webhook mode it cannot serve, and a token given twice, naming the field', () => {
    const issues = (bridges: unknown) => BerthConfigSchema.safeParse({ bridges }).error?.issues.map((i) => i.path.join('.'));
    expect(issues({ telegram: { token: 'x', mode: 'webhook' } })).toEqual([
      'bridges.telegram.public_url',
      'bridges.telegram.webhook_secret',
    ]);
    expect(issues({ telegram: { token: 'x', token_file: '/x' } })).toEqual(['bridges.telegram.token']);
    expect(issues({ telegram: {} })).toEqual(['bridges.telegram.token']);
  });
});

describe('Telegram bridge (webhook mode, through berth serve)', () => {
  const SECRET = 'tg-webhook-secret-0123456789';
  let w: TestHome;
  let server: HttpSurface;
  beforeAll(async () => {
    w = testHome({ config: 'routes:\n  telegram: { project: tgw }\n' });
    w.create({ name: 'tgw', workspace_isolation: true });
    server = await listenHttp(
      w.berth,
      { host: '127.0.0.1', port: 0, token: 'tg-admin-token-0123456789abcdef' },
      { out: () => undefined, err: () => undefined },
    );
    // berth.yaml names the server's own URL: the fake delivers there.
    fs.writeFileSync(
      join(w.home, 'berth.yaml'),
      testConfig(
        config(['    mode: webhook', `    public_url: ${server.url}`, `    webhook_secret: ${SECRET}`]).replace(
          'project: tg }',
          'project: tgw }',
        ),
      ) ?? '',
    );
    expect(server.bridges.reconfigure()).toMatch(/^telegram bridge started: webhook/);
  });
  afterAll(async () => {
    await server?.close();
    await w?.[Symbol.asyncDispose]();
  });

  it('sets its webhook with the secret; updates POSTed to /hooks/telegram are answered', async () => {
    await fake.waitFor(() => fake.webhook()?.url === `${server.url}/hooks/telegram`, 10_000);
    expect(fake.webhook()?.secretToken).toBe(SECRET);
    say(ALICE, 'echo via-webhook');
    await fake.waitFor(() => repliesOf(ALICE).includes('via-webhook'), 30_000);
  });

  it('refuses a request without the secret, too big or not JSON, and journals none', async () => {
    const before = server.bridges.channel('telegram')!.inbox.all().length;
    const post = (body: string, secret?: string) =>
      fetch(`${server.url}/hooks/telegram`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...(secret ? { 'x-telegram-bot-api-secret-token': secret } : {}) },
        body,
      });
    const update = JSON.stringify({
      update_id: 1,
      message: { message_id: 1, date: 1, chat: { id: ALICE, type: 'private' }, from: person(ALICE), text: 'echo forged' },
    });
    expect((await post(update)).status).toBe(401);
    expect((await post(update, 'wrong-secret-0123456789abcd')).status).toBe(401);
    expect((await post('{"update_id":', SECRET)).status).toBe(400);
    expect((await post(JSON.stringify({ update_id: 2, message: { text: 'x'.repeat(2 * 1024 * 1024) } }), SECRET)).status).toBe(413);
    expect(server.bridges.channel('telegram')!.inbox.all().length).toBe(before);
  });
});
