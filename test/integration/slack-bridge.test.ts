import fs from 'node:fs';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningBridges } from '../../src/bridges/start.js';
import { startTestBridges, stopBridgeRig } from '../helpers/bridge-rig.js';
import { approveSender } from '../../src/bridges/senders.js';
import { homePaths } from '../../src/config/home.js';
import { checkBridges } from '../../src/cli/doctor-outbound.js';
import { BerthConfigSchema } from '../../src/config/berth-config-schema.js';
import { listenHttp, type HttpSurface } from '../../src/cli/serve.js';
import { startFakeSlack, type FakeSlack } from '../fakes/slack.js';
import { testConfig, testHome, type TestHome } from '../helpers.js';

/**
 * The Slack bridge against a fake of Slack written from its documentation: Socket Mode
 * (hello, envelopes, acks, redelivery, disconnect), the Events API over signed HTTP (the
 * signature and its 5-minute window, url_verification, retries), chat.postMessage with its
 * errors and 429 Retry-After. Real containers answer: the shell preset runs each message.
 */
let fake: FakeSlack;
let h: TestHome;
let bridges: RunningBridges;
const ALICE = 'U0ALICE01';
const BOB = 'U0BOB0002';
const STRANGER = 'U0STRANGE9';
const dm = (user: string) => `D${user.slice(1)}`;
const CHANNEL = 'C0TEAM001';

const unMrkdwn = (t: string) => t.replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&amp;/g, '&');
const repliesIn = (channel: string, thread?: string) =>
  fake
    .repliesIn(channel, thread)
    .map((p) => unMrkdwn(p.text))
    .filter((t) => !t.startsWith('berth: queued'));
const waitIn = (channel: string, count: number, thread?: string) =>
  fake.waitFor(() => repliesIn(channel, thread).length >= count && repliesIn(channel, thread), 30_000);
const direct = (user: string, text: string) => fake.deliverMessage({ channel: dm(user), channelType: 'im', user, text });

const config = (extra: string[]) =>
  [
    'bridges:',
    '  slack:',
    `    bot_token: ${fake.botToken}`,
    `    api_url: ${fake.url}/api`,
    '    senders: pairing',
    `    allow: [${ALICE}, 'slack:${BOB}']`,
    ...extra,
    'routes:',
    '  slack: { project: sl }',
    '',
  ].join('\n');

beforeAll(async () => {
  fake = await startFakeSlack({ ackTimeoutMs: 2000, retryDelaysMs: [50, 50, 50] });
  h = testHome({ config: config(['    mode: socket', `    app_token: ${fake.appToken}`]) });
  h.create({ name: 'sl', workspace_isolation: true });
  bridges = startTestBridges(h);
  await fake.waitForSocketClients(1, 10_000);
});
afterAll(() => stopBridgeRig({ bridges, h, fake }));

describe('Slack bridge (Socket Mode)', () => {
  it('a direct message runs as its sender, is acknowledged once journaled, and answered in the DM', async () => {
    const d = direct(ALICE, 'echo hello from $(whoami)');
    expect(await waitIn(dm(ALICE), 1)).toEqual(['hello from agent']);
    expect((await d.done).delivered).toBe(true);
    expect(fake.acks.length).toBeGreaterThan(0);
    expect(
      bridges
        .channel('slack')!
        .inbox.all()
        .find((e) => e.sender === `slack:${ALICE}`),
    ).toMatchObject({ tenant: `slack:${ALICE}`, chat: dm(ALICE) });
  });

  it("the agent's text never becomes a mention or a link: <, > and & are escaped", async () => {
    // What a person types arrives with Slack's own escapes (&lt; for <): the shell gets the characters.
    direct(ALICE, "printf '&lt;!channel&gt; &lt;@U0BOB0002&gt; &amp; &lt;http://x|y&gt;\\n'");
    const posted = await fake.waitFor(() => fake.repliesIn(dm(ALICE)).length >= 2 && fake.repliesIn(dm(ALICE))[1]);
    expect(posted.text).toBe('&lt;!channel&gt; &lt;@U0BOB0002&gt; &amp; &lt;http://x|y&gt;');
  });

  it('a mention in a channel is answered in its thread; the thread is one conversation, the channel one tenant', async () => {
    const first = fake.deliverMention({ channel: CHANNEL, user: ALICE, text: 'echo team > team.txt; echo started' });
    const thread = first.ts!;
    expect(await waitIn(CHANNEL, 1, thread)).toEqual(['started']);
    fake.deliverMention({ channel: CHANNEL, user: BOB, text: '/whoami', threadTs: thread });
    const whoami = (await waitIn(CHANNEL, 2, thread))[1]!;
    expect(whoami).toContain(`You are slack-channel:${CHANNEL},`);
    // Another thread of the same channel: the same workspace, another session.
    const other = fake.deliverMention({ channel: CHANNEL, user: BOB, text: '/whoami' });
    const otherWho = (await waitIn(CHANNEL, 1, other.ts))[0]!;
    expect(/conversation: ([^\s;]+)/.exec(otherWho)?.[1]).not.toBe(/conversation: ([^\s;]+)/.exec(whoami)?.[1]);
    fake.deliverMention({ channel: CHANNEL, user: BOB, text: 'cat team.txt', threadTs: other.ts });
    expect((await waitIn(CHANNEL, 2, other.ts))[1]).toBe('team');
    // A channel message that does not mention the bot is not for it.
    const before = bridges.channel('slack')!.inbox.all().length;
    await fake.deliverMessage({ channel: CHANNEL, channelType: 'channel', user: ALICE, text: 'echo not-for-berth' }).done;
    await fake.deliverBotMessage({ channel: dm(ALICE), text: 'echo from-a-bot' }).done;
    expect(bridges.channel('slack')!.inbox.all().length).toBe(before);
  });

  it('an envelope Slack sends again runs once; after a dropped socket berth reconnects', async () => {
    fake.dropSockets();
    await fake.waitForSocketClients(1, 10_000);
    const d = direct(BOB, 'echo once >> once.txt; wc -l < once.txt');
    expect(await waitIn(dm(BOB), 1)).toEqual(['1']);
    fake.deliverEvent(d.event); // the same message in a new envelope
    direct(BOB, 'wc -l < once.txt');
    expect((await waitIn(dm(BOB), 2)).at(-1)).toBe('1');
  });

  it('a 429 with Retry-After is waited out once: the answer arrives, once', async () => {
    fake.rateLimitNext('chat.postMessage', 1);
    direct(BOB, 'echo after-the-limit');
    await fake.waitFor(() => repliesIn(dm(BOB)).includes('after-the-limit'), 30_000);
    expect(repliesIn(dm(BOB)).filter((r) => r === 'after-the-limit')).toHaveLength(1);
  });

  it('a stranger is held for pairing; approved, they are told in a DM and answered', async () => {
    direct(STRANGER, 'echo first-words');
    await fake.waitFor(() => repliesIn(dm(STRANGER)).length > 0);
    expect(repliesIn(dm(STRANGER))[0]).toMatch(/does not know you yet/);
    const r = await approveSender(
      { config: h.berth.config, stateDir: homePaths(h.home).stateDir, logger: pino({ level: 'silent' }) },
      `slack:${STRANGER}`,
    );
    expect(r).toEqual({ was_pending: true, held: true, told: true });
    await fake.waitFor(() => repliesIn(dm(STRANGER)).includes('first-words'), 30_000);
  });

  it('doctor names the bot, or says the token is refused; berth.yaml names what each mode needs', async () => {
    expect(await checkBridges(h.berth.config)).toEqual([
      { name: 'bridge slack', status: 'ok', detail: expect.stringContaining('answers with project "sl"') },
    ]);
    const wrong = BerthConfigSchema.parse({
      bridges: { slack: { bot_token: 'xoxb-wrong', mode: 'socket', app_token: 'xapp-x', api_url: `${fake.url}/api` } },
    });
    expect(await checkBridges(wrong)).toEqual([{ name: 'bridge slack', status: 'fail', detail: expect.stringContaining('invalid_auth') }]);
    const issues = (slack: unknown) => BerthConfigSchema.safeParse({ bridges: { slack } }).error?.issues.map((i) => i.path.join('.'));
    expect(issues({ bot_token: 'x' })).toEqual(['bridges.slack.signing_secret']);
    expect(issues({ bot_token: 'x', mode: 'socket' })).toEqual(['bridges.slack.app_token']);
  });
});

describe('Slack bridge (Events API, through berth serve)', () => {
  let w: TestHome;
  let server: HttpSurface;
  beforeAll(async () => {
    w = testHome({ config: 'routes:\n  slack: { project: slw }\n' });
    w.create({ name: 'slw', workspace_isolation: true });
    server = await listenHttp(
      w.berth,
      { host: '127.0.0.1', port: 0, token: 'slack-admin-token-0123456789abcdef' },
      { out: () => undefined, err: () => undefined },
    );
    fs.writeFileSync(
      join(w.home, 'berth.yaml'),
      testConfig(config([`    signing_secret: ${fake.signingSecret}`]).replace('project: sl }', 'project: slw }')) ?? '',
    );
    expect(server.bridges.reconfigure()).toMatch(/^slack bridge started: events/);
    fake.setRequestUrl(`${server.url}/hooks/slack`);
  });
  afterAll(async () => {
    fake.setRequestUrl(undefined);
    await server?.close();
    await w?.[Symbol.asyncDispose]();
  });

  it('answers the url_verification challenge; a signed event is run and answered', async () => {
    expect(await fake.verifyUrl()).toBe(true);
    const d = fake.deliverMessage({ channel: dm(ALICE), channelType: 'im', user: ALICE, text: 'echo via-events', mode: 'http' });
    expect(await d.done).toMatchObject({ delivered: true, attempts: 1 });
    await fake.waitFor(() => repliesIn(dm(ALICE)).includes('via-events'), 30_000);
  });

  it('refuses a bad signature and a stale timestamp (a replay), and journals neither', async () => {
    const before = server.bridges.channel('slack')!.inbox.all().length;
    const event = {
      type: 'event_callback',
      event_id: 'Ev0FORGED',
      event: { type: 'message', channel_type: 'im', channel: dm(ALICE), user: ALICE, text: 'echo forged', ts: '1700000000.000001' },
    };
    expect((await fake.postRaw(event, { 'X-Slack-Signature': 'v0=00' })).status).toBe(401);
    const old = Math.floor(Date.now() / 1000) - 600;
    expect((await fake.postRaw(event, { 'X-Slack-Request-Timestamp': String(old) })).status).toBe(401);
    expect((await fake.postRaw(event, { 'X-Slack-Signature': null })).status).toBe(401);
    expect(server.bridges.channel('slack')!.inbox.all().length).toBe(before);
  });

  it('signed but malformed: not JSON is a 400; an event missing its fields, or with ids that are not Slack ids, runs nothing', async () => {
    const before = server.bridges.channel('slack')!.inbox.all().length;
    expect((await fake.postRaw('{"type": "event_callback", ')).status).toBe(400);
    for (const event of [
      {},
      { type: 'message', channel_type: 'im' },
      { type: 'message', channel_type: 'im', channel: 'D0X', user: 'U0X/../x', text: 'echo bad-user', ts: '1.2' },
      { type: 'message', channel_type: 'im', channel: 'D0X/1', user: ALICE, text: 'echo bad-channel', ts: '1.2' },
      { type: 'message', channel_type: 'im', channel: dm(ALICE), user: ALICE, text: 42, ts: '1.2' },
    ]) {
      expect((await fake.postRaw({ type: 'event_callback', event_id: 'Ev0BAD', event })).status).toBe(200);
    }
    expect(server.bridges.channel('slack')!.inbox.all().length).toBe(before);
  });
});
