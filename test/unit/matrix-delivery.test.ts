import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import type { ChannelMessage, ChannelTransport } from '../../src/channels/contract.js';
import { createMatrixBridge, MatrixBridgeSchema } from '../../src/channels/matrix.js';
import { startFakeMatrix, type FakeMatrix } from '../fakes/matrix.js';

/**
 * What the Matrix bridge hands the inbox, against the fake homeserver (its /sync `limited`
 * timelines, prev_batch and /messages as the client-server spec has them): messages sent while
 * berth was down are all taken, in order, once; a room's history before the bot was invited is
 * never a message; an encrypted room is told once that berth cannot read it; a thread is answered
 * in the thread.
 */
interface Rig {
  fake: FakeMatrix;
  dir: string;
  taken: ChannelMessage[];
  logs: string[];
  start(): Promise<ChannelTransport>;
}

let cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.reverse()) await c();
  cleanups = [];
});

async function rig(): Promise<Rig> {
  const fake = await startFakeMatrix();
  const dir = fs.mkdtempSync(join(os.tmpdir(), 'berth-mx-'));
  cleanups.push(async () => {
    await fake.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });
  const taken: ChannelMessage[] = [];
  const logs: string[] = [];
  const known = new Set<string>();
  const config = MatrixBridgeSchema.parse({ homeserver: fake.url, user_id: fake.botUserId, access_token: fake.botAccessToken });
  return {
    fake,
    dir,
    taken,
    logs,
    async start() {
      const bridge = createMatrixBridge({
        config,
        dir,
        logger: pino({ level: 'info' }, { write: (line: string) => void logs.push(line) }),
        take: (m) => {
          taken.push(m);
          if (known.has(m.id)) return 'duplicate';
          known.add(m.id);
          return 'accepted';
        },
        postOut: async () => ({ status: 200 }),
        backoffMs: { min: 10, max: 50 },
      });
      bridge.start();
      cleanups.push(() => bridge.stop());
      await fake.waitForPoll();
      return bridge;
    },
  };
}

const texts = (taken: ChannelMessage[]) => taken.map((m) => m.text);

describe('Matrix: nothing sent while berth was down is lost', () => {
  it('15 messages in a room of two while berth is stopped: all 15 are taken after the restart, in order, each once', async () => {
    const r = await rig();
    const alice = `@alice:${r.fake.serverName}`;
    const room = r.fake.createRoom({ members: [alice], direct: true });
    const first = await r.start();
    r.fake.sendText(room, alice, 'echo before');
    await r.fake.waitFor(() => r.taken.length === 1);
    await first.stop();
    for (let i = 1; i <= 15; i++) r.fake.sendText(room, alice, `echo down${i}`);
    await r.start();
    await r.fake.waitFor(() => r.taken.length >= 16);
    await r.fake.waitForPoll();
    expect(texts(r.taken)).toEqual(['echo before', ...Array.from({ length: 15 }, (_, i) => `echo down${i + 1}`)]);
  });

  it('a gap longer than the bounds: the newest 1,000 of it and the timeline are taken in order, older ones named in the log, and the paging stops', async () => {
    const r = await rig();
    const alice = `@alice:${r.fake.serverName}`;
    const room = r.fake.createRoom({ members: [alice], direct: true });
    const first = await r.start();
    await first.stop();
    for (let i = 1; i <= 1200; i++) r.fake.sendText(room, alice, `m${i}`);
    await r.start();
    await r.fake.waitFor(() => r.taken.length >= 1010, 20_000);
    await r.fake.waitForPoll();
    expect(texts(r.taken)).toEqual(Array.from({ length: 1010 }, (_, i) => `m${i + 191}`));
    expect(r.fake.requests.filter((q) => q.path.includes('/messages')).length).toBeLessThanOrEqual(10);
    expect(r.logs.some((l) => l.includes('older messages of this room were not fetched'))).toBe(true);
  });
});

describe('Matrix: history before the bot came is not run', () => {
  it('a room with history that invites the bot: only what was written after the invite is taken', async () => {
    const r = await rig();
    const alice = `@alice:${r.fake.serverName}`;
    const bob = `@bob:${r.fake.serverName}`;
    await r.start();
    const room = r.fake.createRoom({ members: [alice, bob], name: 'old', withoutBot: true });
    for (let i = 1; i <= 6; i++) r.fake.sendText(room, i % 2 ? alice : bob, `echo history-${i}`);
    r.fake.invite(room, alice);
    await r.fake.waitFor(() => r.fake.members(room)[r.fake.botUserId] === 'join');
    r.fake.sendText(room, bob, 'echo after-join');
    await r.fake.waitFor(() => r.taken.length >= 1);
    await r.fake.waitForPoll();
    expect(texts(r.taken)).toEqual(['echo after-join']);
  });

  it('invited while berth was down, with more history and more messages than one timeline holds: exactly the messages after the invite', async () => {
    const r = await rig();
    const alice = `@alice:${r.fake.serverName}`;
    const bob = `@bob:${r.fake.serverName}`;
    const first = await r.start();
    await first.stop();
    const room = r.fake.createRoom({ members: [alice, bob], name: 'busy', withoutBot: true });
    for (let i = 1; i <= 15; i++) r.fake.sendText(room, alice, `echo history-${i}`);
    r.fake.invite(room, alice);
    for (let i = 1; i <= 12; i++) r.fake.sendText(room, bob, `echo while-invited-${i}`);
    await r.start();
    await r.fake.waitFor(() => r.taken.length >= 12);
    await r.fake.waitForPoll();
    expect(texts(r.taken)).toEqual(Array.from({ length: 12 }, (_, i) => `echo while-invited-${i + 1}`));
  });
});

describe('Matrix: encrypted rooms', () => {
  it('an encrypted DM gets one plain notice that berth cannot read it, a log line, and no second notice (after a restart either)', async () => {
    const r = await rig();
    const carol = `@carol:${r.fake.serverName}`;
    const first = await r.start();
    const room = r.fake.createRoom({ members: [carol], direct: true, encrypted: true, invite: true });
    await r.fake.waitFor(() => r.fake.members(room)[r.fake.botUserId] === 'join');
    await r.fake.waitFor(() => r.fake.repliesIn(room).length >= 1); // on joining, before anyone writes
    await r.fake.waitForPoll();
    const encrypted = { algorithm: 'm.megolm.v1.aes-sha2', ciphertext: 'AwgAEn…', sender_key: 'k', session_id: 's', device_id: 'D' };
    r.fake.sendRaw(room, { type: 'm.room.encrypted', sender: carol, content: encrypted });
    r.fake.sendRaw(room, { type: 'm.room.encrypted', sender: carol, content: encrypted });
    await r.fake.waitFor(() => r.logs.filter((l) => l.includes('an encrypted matrix message')).length >= 2);
    await first.stop();
    r.fake.sendRaw(room, { type: 'm.room.encrypted', sender: carol, content: encrypted });
    await r.start();
    await r.fake.waitFor(() => r.logs.filter((l) => l.includes('an encrypted matrix message')).length >= 3);
    const notices = r.fake.repliesIn(room).map((e) => String(e.content.body));
    expect(notices).toHaveLength(1);
    expect(notices[0]).toMatch(/cannot read encrypted messages.*encryption turned off/);
    expect(r.fake.repliesIn(room)[0]!.content.msgtype).toBe('m.notice');
    expect(r.logs.some((l) => l.includes('end-to-end encrypted') && l.includes(room))).toBe(true);
    expect(r.taken).toEqual([]);
  });
});

describe('Matrix: threads', () => {
  it("a message in a thread is taken as the thread's chat and answered in that thread; the room stays the tenant and the profile", async () => {
    const r = await rig();
    const alice = `@alice:${r.fake.serverName}`;
    const bob = `@bob:${r.fake.serverName}`;
    const room = r.fake.createRoom({ members: [alice, bob], name: 'team' });
    const bridge = await r.start();
    const root = r.fake.sendText(room, alice, 'echo root');
    const inThread = r.fake.sendText(room, bob, 'echo in thread', { threadRoot: root.event_id });
    await r.fake.waitFor(() => r.taken.length >= 2);
    const [main, threaded] = r.taken;
    expect(main).toMatchObject({ chat: room, tenant: `matrix-room:${room}` });
    expect(threaded).toMatchObject({ id: inThread.event_id, chat: `${room}/${root.event_id}`, tenant: `matrix-room:${room}` });
    expect(bridge.profileKeys!(threaded!.chat)).toEqual([`matrix:${room}/${root.event_id}`, `matrix:${room}`, 'matrix']);
    await bridge.send(threaded!.chat, 'in thread', { answerTo: threaded!.id });
    await bridge.send(main!.chat, 'root', { answerTo: main!.id });
    const [inThreadReply, mainReply] = r.fake.repliesIn(room);
    expect(inThreadReply!.content['m.relates_to']).toEqual({
      rel_type: 'm.thread',
      event_id: root.event_id,
      is_falling_back: true,
      'm.in_reply_to': { event_id: inThread.event_id },
    });
    expect(mainReply!.content['m.relates_to']).toBeUndefined();
    await bridge.typing(threaded!.chat, true);
    expect(r.fake.typing.at(-1)).toMatchObject({ roomId: room, typing: true });
  });
});
