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
import { startFakeMatrix, type FakeMatrix } from '../fakes/matrix.js';
import { matrixChannel } from '../../src/channels/matrix.js';
import { testHome, type TestHome } from '../helpers.js';

/**
 * The Matrix bridge against a fake homeserver written from the client-server spec (and Synapse
 * where the spec is silent): /sync long polls with since tokens, rooms and invites, idempotent
 * sends by transaction id, typing, receipts, M_LIMIT_EXCEEDED with retry_after_ms. Real
 * containers answer: the shell preset runs each message.
 */
let fake: FakeMatrix;
let h: TestHome;
let bridges: RunningBridges;
let alice: string;
let bob: string;
let aliceRoom: string;
let bobRoom: string;

const repliesIn = (room: string) =>
  fake
    .repliesIn(room)
    .map((e) => String((e.content as { body?: unknown }).body ?? ''))
    .filter((t) => !t.startsWith('berth: queued'));
const waitIn = (room: string, count: number) => fake.waitFor(() => repliesIn(room).length >= count && repliesIn(room), 30_000);
/** The bot holds a sync open: its first one (timeout 0, history) is taken, and it listens. */
const listening = () => fake.waitForPoll(10_000);

beforeAll(async () => {
  fake = await startFakeMatrix();
  alice = `@alice:${fake.serverName}`;
  bob = `@bob:${fake.serverName}`;
  aliceRoom = fake.createRoom({ members: [alice], direct: true });
  bobRoom = fake.createRoom({ members: [bob], direct: true });
  fake.sendText(aliceRoom, alice, 'echo history-is-not-answered');
  h = testHome({
    config: [
      'bridges:',
      '  matrix:',
      `    homeserver: ${fake.url}`,
      `    user_id: '${fake.botUserId}'`,
      `    access_token: ${fake.botAccessToken}`,
      '    senders: pairing',
      `    allow: ['${alice}', 'matrix:${bob}', '@mallory:${fake.serverName}', '@carol:${fake.serverName}']`,
      'routes:',
      '  matrix: { project: mx }',
      '',
    ].join('\n'),
  });
  h.create({ name: 'mx', workspace_isolation: true });
  bridges = startTestBridges(h);
  await listening();
});
afterAll(() => stopBridgeRig({ bridges, h, fake }));

describe('Matrix bridge', () => {
  it('a message in a room of two runs as its sender and is answered as a notice; typing and a read receipt; history before berth is not answered', async () => {
    const e = fake.sendText(aliceRoom, alice, 'echo hello from $(whoami)');
    expect(await waitIn(aliceRoom, 1)).toEqual(['hello from agent']);
    expect(fake.repliesIn(aliceRoom)[0]!.content.msgtype).toBe('m.notice');
    expect(fake.typing.some((t) => t.roomId === aliceRoom && t.userId === fake.botUserId && t.typing)).toBe(true);
    expect(fake.receipts.some((r) => r.roomId === aliceRoom && r.eventId === e.event_id)).toBe(true);
    expect(
      bridges
        .channel('matrix')!
        .inbox.all()
        .find((m) => m.id === e.event_id),
    ).toMatchObject({ tenant: `matrix:${alice}`, sender: `matrix:${alice}`, chat: aliceRoom });
    expect(
      bridges
        .channel('matrix')!
        .inbox.all()
        .some((m) => m.text === 'echo history-is-not-answered'),
    ).toBe(false);
  });

  it('a bigger room is one tenant: its members share a workspace; notices (other bots) and the bot itself are not answered', async () => {
    const room = fake.createRoom({ members: [alice, bob], name: 'team' });
    fake.sendText(room, alice, 'echo from-alice > shared.txt; echo ok');
    await waitIn(room, 1);
    fake.sendText(room, bob, 'cat shared.txt');
    expect((await waitIn(room, 2))[1]).toBe('from-alice');
    fake.sendText(room, bob, '/whoami');
    expect((await waitIn(room, 3))[2]).toContain(`You are matrix-room:${room},`);
    const before = bridges.channel('matrix')!.inbox.all().length;
    fake.sendText(room, alice, 'echo a-notice', { msgtype: 'm.notice' });
    fake.sendRaw(room, { type: 'm.room.message', sender: fake.botUserId, content: { msgtype: 'm.text', body: 'echo myself' } });
    fake.sendText(room, alice, 'echo after');
    await fake.waitFor(() => repliesIn(room).includes('after'), 30_000);
    expect(bridges.channel('matrix')!.inbox.all().length).toBe(before + 1);
  });

  it("a room of two is someone's own only while it is that person and the bot: once a third joins, it is a group", async () => {
    const mallory = `@mallory:${fake.serverName}`;
    const carol = `@carol:${fake.serverName}`;
    const room = fake.createRoom({ members: [mallory], direct: true });
    const m1 = fake.sendText(room, mallory, 'echo hi');
    await fake.waitFor(() => repliesIn(room).length > 0, 30_000);
    expect(
      bridges
        .channel('matrix')!
        .inbox.all()
        .find((m) => m.id === m1.event_id)?.tenant,
    ).toBe(`matrix:${mallory}`);
    fake.invite(room, mallory, carol);
    fake.join(room, carol);
    const c1 = fake.sendText(room, carol, 'ls');
    await fake.waitFor(() => repliesIn(room).length > 1, 30_000);
    // Carol's message never runs in her own workspace with its answer in Mallory's room.
    expect(
      bridges
        .channel('matrix')!
        .inbox.all()
        .find((m) => m.id === c1.event_id)?.tenant,
    ).toBe(`matrix-room:${room}`);
  });

  it('an edit is a new message, marked as one', async () => {
    const e = fake.sendText(bobRoom, bob, 'echo first');
    await waitIn(bobRoom, 1);
    fake.edit(bobRoom, bob, e.event_id, 'echo second');
    await waitIn(bobRoom, 2); // the shell preset runs "(edited) echo second" as it is: a syntax error, answered
    expect(
      bridges
        .channel('matrix')!
        .inbox.all()
        .filter((m) => m.chat === bobRoom)
        .map((m) => m.text),
    ).toEqual(['echo first', '(edited) echo second']);
  });

  it('restarted, berth syncs from the token it kept: what came meanwhile is answered once, nothing twice', async () => {
    await bridges.stop();
    fake.sendText(bobRoom, bob, 'echo once >> once.txt; wc -l < once.txt');
    bridges = startTestBridges(h);
    await fake.waitFor(() => repliesIn(bobRoom).includes('1'), 30_000);
    fake.sendText(bobRoom, bob, 'wc -l < once.txt');
    expect((await waitIn(bobRoom, 4)).at(-1)).toBe('1');
    expect(fs.readFileSync(join(homePaths(h.home).stateDir, 'bridges', 'matrix', 'next_batch'), 'utf8').trim()).not.toBe('');
  });

  it('15 messages while berth is stopped (more than a sync timeline holds): each is answered once, in order', async () => {
    const room = fake.createRoom({ members: [alice], direct: true });
    fake.sendText(room, alice, 'echo up');
    await waitIn(room, 1);
    await bridges.stop();
    for (let i = 1; i <= 15; i++) fake.sendText(room, alice, `echo down${i}`);
    bridges = startTestBridges(h);
    const answers = await fake.waitFor(() => repliesIn(room).length >= 16 && repliesIn(room), 60_000);
    expect(answers).toEqual(['up', ...Array.from({ length: 15 }, (_, i) => `down${i + 1}`)]);
  });

  it('a room with history that invites the bot: the history is not run, what comes after is; a thread is answered in its thread', async () => {
    const room = fake.createRoom({ members: [alice, bob], name: 'history', withoutBot: true });
    for (let i = 1; i <= 6; i++) fake.sendText(room, i % 2 ? alice : bob, `echo history-${i}`);
    fake.invite(room, alice);
    await fake.waitFor(() => fake.members(room)[fake.botUserId] === 'join', 10_000);
    const root = fake.sendText(room, alice, 'echo after-the-invite');
    expect(await waitIn(room, 1)).toEqual(['after-the-invite']);
    const inThread = fake.sendText(room, bob, 'echo in-the-thread', { threadRoot: root.event_id });
    await fake.waitFor(() => repliesIn(room).includes('in-the-thread'), 30_000);
    const reply = fake.repliesIn(room).find((e) => e.content.body === 'in-the-thread')!;
    expect(reply.content['m.relates_to']).toEqual({
      rel_type: 'm.thread',
      event_id: root.event_id,
      is_falling_back: true,
      'm.in_reply_to': { event_id: inThread.event_id },
    });
    expect(repliesIn(room).some((t) => t.includes('history-'))).toBe(false);
  });

  it('an invite is accepted; a stranger there is held for pairing, then approved, told and answered', async () => {
    const stranger = `@sam:${fake.serverName}`;
    const room = fake.createRoom({ members: [stranger], invite: true, direct: true });
    await fake.waitFor(() => fake.members(room)[fake.botUserId] === 'join', 10_000);
    fake.sendText(room, stranger, 'echo first-words');
    await fake.waitFor(() => repliesIn(room).length > 0, 30_000);
    expect(repliesIn(room)[0]).toMatch(/does not know you yet/);
    // Approval tells them in the room they wrote in.
    const r = await approveSender(
      { config: h.berth.config, stateDir: homePaths(h.home).stateDir, logger: pino({ level: 'silent' }) },
      `matrix:${stranger}`,
    );
    expect(r).toEqual({ was_pending: true, held: true, told: true });
    expect(repliesIn(room)).toContainEqual(expect.stringMatching(/approved you/));
    await fake.waitFor(() => repliesIn(room).includes('first-words'), 30_000);
  });

  it('a rate limit (M_LIMIT_EXCEEDED, retry_after_ms) is waited out once: the answer arrives, once', async () => {
    fake.rateLimitNext('/send/', 500);
    fake.sendText(aliceRoom, alice, 'echo after-the-limit');
    await fake.waitFor(() => repliesIn(aliceRoom).includes('after-the-limit'), 30_000);
    expect(repliesIn(aliceRoom).filter((r) => r === 'after-the-limit')).toHaveLength(1);
  });

  it('an answer sent again (berth restarted between sending it and noting it sent) is the same event: the homeserver keeps one', async () => {
    const transport = matrixChannel.create({
      config: h.berth.config.bridges.matrix!,
      logger: pino({ level: 'silent' }),
      dir: '/nonexistent',
      take: () => 'duplicate',
      postOut: async () => ({ status: 200 }),
    });
    const before = fake.repliesIn(bobRoom).length;
    await transport.send(bobRoom, 'the answer', { answerTo: '$event-answered-twice' });
    await transport.send(bobRoom, 'the answer', { answerTo: '$event-answered-twice' });
    await transport.send(bobRoom, 'a notice', {});
    await transport.send(bobRoom, 'a notice', {});
    expect(
      fake
        .repliesIn(bobRoom)
        .slice(before)
        .map((e) => e.content.body),
    ).toEqual(['the answer', 'a notice', 'a notice']);
  });

  it('malformed events from the homeserver are passed over; the bridge goes on answering', async () => {
    const before = bridges.channel('matrix')!.inbox.all().length;
    for (const content of [
      null,
      'text',
      42,
      { msgtype: 'm.text' },
      { msgtype: 'm.text', body: 42 },
      { msgtype: 'm.text', body: '   ' },
      { body: 'echo no-msgtype' },
      { msgtype: 'm.text', body: 'x', 'm.relates_to': { rel_type: 'm.replace' } },
    ]) {
      fake.sendRaw(aliceRoom, { type: 'm.room.message', sender: alice, content: content as never });
    }
    fake.sendRaw(aliceRoom, { type: 'm.room.message', sender: 'not-a-user-id', content: { msgtype: 'm.text', body: 'echo odd-sender' } });
    fake.sendText(aliceRoom, alice, 'echo still-here');
    await fake.waitFor(() => repliesIn(aliceRoom).includes('still-here'), 30_000);
    // The edit without new content is read as its own body; nothing else became a message.
    const taken = bridges
      .channel('matrix')!
      .inbox.all()
      .slice(before)
      .map((m) => m.text);
    expect(taken).not.toContain('echo no-msgtype');
    expect(taken).toContain('echo still-here');
    expect(taken.length).toBeLessThanOrEqual(3);
  });

  it("doctor checks the token is the bot's; berth.yaml names a bad user id", async () => {
    expect(await checkBridges(h.berth.config)).toEqual([
      { name: 'bridge matrix', status: 'ok', detail: expect.stringContaining('answers with project "mx"') },
    ]);
    const wrong = BerthConfigSchema.parse({ bridges: { matrix: { homeserver: fake.url, user_id: fake.botUserId, access_token: 'nope' } } });
    expect(await checkBridges(wrong)).toEqual([
      { name: 'bridge matrix', status: 'fail', detail: expect.stringContaining('M_UNKNOWN_TOKEN') },
    ]);
    expect(
      BerthConfigSchema.safeParse({ bridges: { matrix: { homeserver: fake.url, user_id: 'berth', access_token: 'x' } } }).error?.issues.map(
        (i) => i.path.join('.'),
      ),
    ).toEqual(['bridges.matrix.user_id']);
  });
});
