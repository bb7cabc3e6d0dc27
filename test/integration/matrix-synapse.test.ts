import { createHash } from 'node:crypto';
import fs from 'node:fs';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningBridges } from '../../src/bridges/start.js';
import { approveSender } from '../../src/bridges/senders.js';
import { ENCRYPTED_ROOM_NOTICE } from '../../src/channels/matrix-encrypted.js';
import { checkBridges } from '../../src/cli/doctor-outbound.js';
import { BerthConfigSchema } from '../../src/config/berth-config-schema.js';
import { homePaths } from '../../src/config/home.js';
import { capturingLogger, startTestBridges } from '../helpers/bridge-rig.js';
import { matrixPerson, type MatrixEvent, type MatrixPerson } from '../helpers/matrix-client.js';
import { startSynapse, type Synapse } from '../helpers/synapse.js';
import { until } from '../helpers/until.js';
import { testHome, type TestHome } from '../helpers.js';

/**
 * berth's Matrix bridge and core against a real Synapse (Debian's 1.160, test/helpers/synapse.ts),
 * the people driven by plain client-server API calls. Each case is a finding of
 * /work/shared/channels-real-4.md §1 (M1–M6) or the files of issue 40, as the real server plays
 * it: its `limited` syncs, its first sync of a joined room, its event size limit and its
 * surrogate check, its media repository. Real containers answer: the shell preset runs each
 * message. A missing image fails (test/helpers/synapse.ts says how to build it), never skips.
 */
const RUN_MS = 90_000;
/** A 1×1 PNG. */
const PIXEL_PNG = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==', 'base64');
let synapse: Synapse;
let h: TestHome;
let bridges: RunningBridges;
let alice: MatrixPerson;
let bob: MatrixPerson;
let carol: MatrixPerson;
let bot: string;
const logged: Array<{ msg: string; room?: string }> = [];

const start = () => startTestBridges(h, capturingLogger(logged));
const inbox = () => bridges.channel('matrix')!.inbox.all();

/** The bot's events in a room, oldest first, as `who` reads them ("queued" notices left out). */
async function fromBot(who: MatrixPerson, room: string): Promise<MatrixEvent[]> {
  return (await who.timeline(room)).filter(
    (e) => e.sender === bot && e.type === 'm.room.message' && !String(e.content.body).startsWith('berth: queued'),
  );
}
const notices = async (who: MatrixPerson, room: string) =>
  (await fromBot(who, room)).filter((e) => e.content.msgtype === 'm.notice').map((e) => String(e.content.body));
/** The bot's notices once there are `count`. */
const noticesAtLeast = (who: MatrixPerson, room: string, count: number, ms = RUN_MS) =>
  until(async () => ((await notices(who, room)).length >= count ? notices(who, room) : undefined), `${count} notices in ${room}`, ms);
const botJoined = (who: MatrixPerson, room: string) =>
  until(async () => (await who.joinedMembers(room)).includes(bot), `the bot to join ${room}`, 30_000);

/** A DM with the bot, joined by it (`roomVersion`: Synapse's default otherwise). */
async function dmOf(who: MatrixPerson, roomVersion?: string): Promise<string> {
  const room = await who.createRoom({
    preset: 'trusted_private_chat',
    is_direct: true,
    invite: [bot],
    ...(roomVersion ? { room_version: roomVersion } : {}),
  });
  await botJoined(who, room);
  return room;
}

beforeAll(async () => {
  synapse = await startSynapse();
  bot = synapse.users.berth.userId;
  alice = matrixPerson(synapse.url, synapse.users.alice);
  bob = matrixPerson(synapse.url, synapse.users.bob);
  carol = matrixPerson(synapse.url, synapse.users.carol);
  h = testHome({
    config: [
      'bridges:',
      '  matrix:',
      `    homeserver: ${synapse.url}`,
      `    user_id: '${bot}'`,
      `    access_token: ${synapse.users.berth.token}`,
      '    senders: pairing',
      `    allow: ['${alice.userId}', '${bob.userId}']`,
      'routes:',
      '  matrix: { project: mx }',
      '',
    ].join('\n'),
  });
  h.create({ name: 'mx', workspace_isolation: true });
  bridges = start();
  // The first sync of a new home only takes the token: rooms made after it are new.
  await until(() => fs.existsSync(join(homePaths(h.home).stateDir, 'bridges', 'matrix', 'next_batch')), 'the first sync', 30_000);
}, 180_000);

afterAll(async () => {
  await bridges?.stop();
  await h?.[Symbol.asyncDispose]();
  await synapse?.stop();
});

describe('Matrix bridge against Synapse 1.160', () => {
  it('a DM: the bot joins by itself; a stranger is held for pairing, approved, told and answered', async () => {
    const room = await dmOf(carol);
    const sent = await carol.text(room, 'echo hello from carol');
    expect(await noticesAtLeast(carol, room, 1)).toEqual([expect.stringMatching(/does not know you yet/)]);
    const approved = await approveSender(
      { config: h.berth.config, stateDir: homePaths(h.home).stateDir, logger: pino({ level: 'silent' }) },
      `matrix:${carol.userId}`,
    );
    expect(approved).toEqual({ was_pending: true, held: true, told: true });
    const said = await noticesAtLeast(carol, room, 3);
    expect(said.slice(1)).toEqual([expect.stringMatching(/approved you/), 'hello from carol']);
    expect(inbox().find((m) => m.id === sent)).toMatchObject({ tenant: `matrix:${carol.userId}`, chat: room });
  });

  it(
    'M1: 15 messages sent while berth is stopped (Synapse syncs only the last 10) are each answered once, in order',
    async () => {
      const room = await dmOf(alice);
      await alice.text(room, 'echo up');
      await noticesAtLeast(alice, room, 1);
      await bridges.stop();
      for (let i = 1; i <= 15; i++) await alice.text(room, `echo down${i}`);
      bridges = start();
      await noticesAtLeast(alice, room, 16, 4 * RUN_MS);
      // One more after them: everything before it has been answered (a chat's messages run in order), so the count is final.
      await alice.text(room, 'echo after');
      const said = await until(
        async () => ((await notices(alice, room)).includes('after') ? notices(alice, room) : undefined),
        'after',
        RUN_MS,
      );
      expect(said).toEqual(['up', ...Array.from({ length: 15 }, (_, i) => `down${i + 1}`), 'after']);
      expect(logged.some((l) => l.msg.includes('older messages of this room were not fetched'))).toBe(false);
    },
    8 * RUN_MS,
  );

  it(
    'M1 and M2 at once: a DM made while berth is stopped, 12 messages written before the bot could join, each answered once',
    async () => {
      await bridges.stop();
      const room = await alice.directWith(bot);
      for (let i = 1; i <= 12; i++) await alice.text(room, `echo early${i}`);
      bridges = start();
      await botJoined(alice, room);
      await noticesAtLeast(alice, room, 12, 4 * RUN_MS);
      await alice.text(room, 'echo after');
      const said = await until(
        async () => ((await notices(alice, room)).includes('after') ? notices(alice, room) : undefined),
        'after',
        RUN_MS,
      );
      expect(said).toEqual([...Array.from({ length: 12 }, (_, i) => `early${i + 1}`), 'after']);
    },
    8 * RUN_MS,
  );

  it(
    'M2: invited into a room with 6 old messages, the bot runs none of them and answers one sent after its join',
    async () => {
      const room = await alice.createRoom({ preset: 'private_chat', name: 'history', invite: [bob.userId] });
      await bob.join(room);
      for (let i = 1; i <= 6; i++) await (i % 2 ? alice : bob).text(room, `echo history-${i} said before the bot was invited`);
      await alice.invite(room, bot);
      await botJoined(alice, room);
      const after = await alice.text(room, 'echo after-the-join');
      expect(await noticesAtLeast(alice, room, 1)).toEqual(['after-the-join']);
      expect(inbox().filter((m) => m.chat === room)).toEqual([expect.objectContaining({ id: after, tenant: `matrix-room:${room}` })]);
    },
    2 * RUN_MS,
  );

  it('M3: an encrypted room (as Element makes a DM) gets one plain notice; its encrypted messages are logged', async () => {
    const room = await carol.createRoom({
      preset: 'trusted_private_chat',
      is_direct: true,
      invite: [bot],
      initial_state: [{ type: 'm.room.encryption', state_key: '', content: { algorithm: 'm.megolm.v1.aes-sha2' } }],
    });
    await botJoined(carol, room);
    const encrypted = (n: number) =>
      carol.send(room, 'm.room.encrypted', {
        algorithm: 'm.megolm.v1.aes-sha2',
        ciphertext: `AwgAEnAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA${n}`,
        sender_key: 'Rt7JKqmD7g2v0T3dKJm0m1k3f7UM3ZKrNq6yHWAePQU',
        session_id: 'X3lUlvLELLYxeTx4yOVu6UDpasGEVO0Jbu+QFnm0cKQ',
        device_id: 'CAROLDEVICE',
      });
    const first = await encrypted(1);
    const second = await encrypted(2);
    const seen = (id: string) =>
      logged.some((l) => l.msg === 'an encrypted matrix message: berth cannot read it' && JSON.stringify(l).includes(id));
    await until(() => seen(first) && seen(second), 'both encrypted messages logged', 30_000);
    expect(await noticesAtLeast(carol, room, 1)).toEqual([ENCRYPTED_ROOM_NOTICE]);
    expect(inbox().filter((m) => m.chat === room)).toEqual([]);
    expect(logged.filter((l) => l.msg.startsWith('matrix room is end-to-end encrypted') && l.room === room)).toHaveLength(1);
  });

  it(
    "M4: a DM that grows into a group is answered in a new group conversation, not refused; the DM owner's files stay theirs",
    async () => {
      const room = await dmOf(bob, '12'); // a room id without a server part, as a group tenant's key
      await bob.text(room, 'echo mine > mine.txt; echo solo');
      expect(await noticesAtLeast(bob, room, 1)).toEqual(['solo']);
      await bob.invite(room, carol.userId);
      await carol.join(room);
      const ls = await bob.text(room, 'ls; echo in-the-group');
      const said = await noticesAtLeast(bob, room, 2);
      expect(said[1]).toMatch(/in-the-group$/);
      expect(said[1]).not.toContain('mine.txt');
      expect(inbox().find((m) => m.id === ls)?.tenant).toBe(`matrix-room:${room}`);
    },
    2 * RUN_MS,
  );

  it(
    'M5: a reply with an astral character at the 12,000 cut, and one of 12,000 control characters, both arrive whole',
    async () => {
      const room = await dmOf(alice);
      await alice.text(room, "head -c 11999 /dev/zero | tr '\\0' a; printf '\\360\\237\\230\\200'; head -c 100 /dev/zero | tr '\\0' b");
      const astral = await noticesAtLeast(alice, room, 2);
      expect(astral.join('')).toBe(`${'a'.repeat(11999)}😀${'b'.repeat(100)}`);
      await alice.text(room, "head -c 12000 /dev/zero | tr '\\0' '\\001'; echo; echo control-done");
      const said = await until(
        async () => ((await notices(alice, room)).some((t) => t.endsWith('control-done')) ? notices(alice, room) : undefined),
        'the control characters reply',
        RUN_MS,
      );
      expect(said.slice(astral.length).join('')).toBe(`${'\u0001'.repeat(12000)}\ncontrol-done`);
    },
    3 * RUN_MS,
  );

  it(
    "M6: a message in a thread is answered in that thread (Synapse lists the answer among the thread's events)",
    async () => {
      // Room version 12: its room id has no server part.
      const room = await dmOf(alice, '12');
      expect(room).toMatch(/^![A-Za-z0-9_-]+$/);
      const root = await alice.text(room, 'echo root');
      await noticesAtLeast(alice, room, 1);
      const inThread = await alice.text(room, 'echo in-the-thread', {
        'm.relates_to': { rel_type: 'm.thread', event_id: root, is_falling_back: true, 'm.in_reply_to': { event_id: root } },
      });
      await noticesAtLeast(alice, room, 2);
      const answer = (await fromBot(alice, room)).find((e) => e.content.body === 'in-the-thread')!;
      expect(answer.content['m.relates_to']).toEqual({
        rel_type: 'm.thread',
        event_id: root,
        is_falling_back: true,
        'm.in_reply_to': { event_id: inThread },
      });
      const thread = await alice.relations(room, root, 'm.thread');
      expect(thread.map((e) => e.event_id)).toEqual(expect.arrayContaining([inThread, answer.event_id]));
    },
    2 * RUN_MS,
  );

  it(
    "files in: an image uploaded to Synapse's media repository and sent as m.image lands in inbox/, where the agent reads it",
    async () => {
      const room = await dmOf(bob);
      const png = PIXEL_PNG;
      const url = await bob.upload(png, 'pixel.png', 'image/png');
      const sent = await bob.send(room, 'm.room.message', {
        msgtype: 'm.image',
        body: 'sha256sum /workspace/inbox/pixel.png',
        filename: 'pixel.png',
        url,
        info: { mimetype: 'image/png', size: png.length, w: 1, h: 1 },
      });
      const [said] = await noticesAtLeast(bob, room, 1);
      expect(said).toBe(`${createHash('sha256').update(png).digest('hex')}  /workspace/inbox/pixel.png`);
      expect(inbox().find((m) => m.id === sent)?.attachments).toEqual([
        { ref: url, name: 'pixel.png', mime: 'image/png', size: png.length },
      ]);
    },
    2 * RUN_MS,
  );

  it(
    'files out: what the agent writes to outbox/ comes back as m.image and m.file, downloadable from Synapse as the person',
    async () => {
      const room = await dmOf(bob);
      const csv = 'a,b\n1,2\n';
      await bob.text(
        room,
        `mkdir -p /workspace/outbox && printf '${PIXEL_PNG.toString('base64')}' | base64 -d > /workspace/outbox/chart.png && printf '${csv.replace(/\n/g, '\\n')}' > /workspace/outbox/result.csv && echo made`,
      );
      const files = await until(
        async () => {
          const events = (await fromBot(bob, room)).filter((e) => e.content.msgtype !== 'm.notice');
          return events.length >= 2 ? events : undefined;
        },
        'two files from the bot',
        RUN_MS,
      );
      expect(await notices(bob, room)).toContain('made');
      const byName = new Map(files.map((e) => [String(e.content.filename), e.content]));
      expect(byName.get('chart.png')).toMatchObject({ msgtype: 'm.image', info: { mimetype: 'image/png', size: PIXEL_PNG.length } });
      expect(byName.get('result.csv')).toMatchObject({ msgtype: 'm.file', info: { mimetype: 'text/csv', size: csv.length } });
      const image = await bob.download(String(byName.get('chart.png')!.url));
      expect({ status: image.status, type: image.type, data: image.data.equals(PIXEL_PNG) }).toEqual({
        status: 200,
        type: 'image/png',
        data: true,
      });
      const table = await bob.download(String(byName.get('result.csv')!.url));
      expect({ status: table.status, text: table.data.toString('utf8') }).toEqual({ status: 200, text: csv });
    },
    2 * RUN_MS,
  );

  it(
    "a file over Synapse's upload limit (its media config says 1 MiB) comes as a link after the answer (Synapse had dropped the link's notice: it reused the answer's transaction id)",
    async () => {
      const room = await dmOf(alice);
      await alice.text(room, 'mkdir -p /workspace/outbox && head -c 1572864 /dev/zero > /workspace/outbox/big.bin && echo big');
      const said = await noticesAtLeast(alice, room, 2);
      expect(said[0]).toBe('big');
      expect(said[1]).toMatch(
        /^berth: the agent sent a file to open at its link:\nbig\.bin \(1\.5 MB\): \S*\/chat\/api\/runs\/r\w+\/files\/big\.bin\?\S+$/,
      );
      expect((await fromBot(alice, room)).filter((e) => e.content.msgtype !== 'm.notice')).toEqual([]);
    },
    2 * RUN_MS,
  );

  it("doctor: the bot's token is ok; a logged-out token is M_UNKNOWN_TOKEN; a person's token is named as theirs", async () => {
    const matrix = h.berth.config.bridges.matrix!;
    const as = (token: string) =>
      BerthConfigSchema.parse({ bridges: { matrix: { homeserver: synapse.url, user_id: bot, access_token: token } } });
    expect(await checkBridges(h.berth.config)).toEqual([
      { name: 'bridge matrix', status: 'ok', detail: `${bot} at ${synapse.url} answers with project "mx"; senders: ${matrix.senders}` },
    ]);
    expect(await checkBridges(as('syt_YmVydGg_not_a_token'))).toEqual([
      { name: 'bridge matrix', status: 'fail', detail: expect.stringContaining('refuses the access token (M_UNKNOWN_TOKEN)') },
    ]);
    expect(await checkBridges(as(synapse.users.alice.token))).toEqual([
      { name: 'bridge matrix', status: 'fail', detail: `the access token is ${alice.userId}'s, not ${bot}'s` },
    ]);
  });

  it("every request berth made was answered 2xx in Synapse's access log, but for rate limits (429, waited out) and long polls cut at a stop", async () => {
    const lines = (await synapse.logs()).split('\n').filter((l) => l.includes(`{${bot}} Processed request`));
    expect(lines.length).toBeGreaterThan(10);
    const statusOf = (l: string) => /\s(\d{3})!? "[A-Z]+ (\S+)/.exec(l); // 499!: the client went away
    const wrong = lines.filter((l) => {
      const m = statusOf(l);
      const status = Number(m?.[1]);
      return !(status >= 200 && status < 300) && status !== 429 && !(status === 499 && m?.[2]?.includes('/sync?'));
    });
    expect(wrong).toEqual([]);
  });
});
