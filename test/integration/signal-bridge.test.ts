import fs from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningBridges } from '../../src/bridges/start.js';
import { signalMessages } from '../../src/channels/signal.js';
import { homePaths } from '../../src/config/home.js';
import { startFakeSignalCli, type FakeSignalCli } from '../fakes/signal-cli.js';
import { testHome, type TestHome } from '../helpers.js';
import { startSignalBridges, stopBridgeRig } from '../helpers/bridge-rig.js';
import { until } from '../helpers/until.js';
import { workspaceOf } from '../../src/store/workspaces.js';
import { workspaceIdOf } from '../../src/store/sessions.js';
import { checkBridges } from '../../src/cli/doctor-outbound.js';
import { BerthConfigSchema } from '../../src/config/berth-config-schema.js';

/**
 * The Signal bridge against a protocol-faithful fake of signal-cli's HTTP daemon (SSE without
 * ids and with keepalives, JSON-RPC sends, receipts, typing, error payloads, re-delivery), with
 * real containers answering: the demo-like shell preset runs each message as `sh -c`.
 */
const uuid = (n: number) => `00000000-0000-4000-8000-${String(n).padStart(12, '0')}`;
let fake: FakeSignalCli;
let h: TestHome;
let bridges: RunningBridges;

function config(senders: 'open' | 'pairing', allow: string[] = []) {
  return [
    'bridges:',
    '  max_concurrent_runs: 3',
    '  signal:',
    `    url: ${fake.url}`,
    `    account: '${fake.account}'`,
    `    senders: ${senders}`,
    `    allow: [${allow.map((a) => `'${a}'`).join(', ')}]`,
    'routes:',
    '  signal: { project: sig }',
    '',
  ].join('\n');
}

const say = (n: number, text: string, extra: { groupId?: string; fromNumber?: string | null; timestamp?: number } = {}) =>
  fake.deliverText({
    fromUuid: uuid(n),
    fromNumber: extra.fromNumber === undefined ? `+1555000${String(n).padStart(4, '0')}` : extra.fromNumber,
    name: `user ${n}`,
    text,
    groupId: extra.groupId,
    timestamp: extra.timestamp,
  });
// "queued" notices depend on what else runs at that moment: the answers are what is checked.
const repliesOf = (n: number) =>
  fake
    .repliesTo(uuid(n))
    .map((s) => s.message)
    .filter((m) => !m.startsWith('berth: queued'));
const waitReplies = (n: number, count: number, timeoutMs = 30_000) =>
  fake.waitFor(() => repliesOf(n).length >= count && repliesOf(n), timeoutMs);

beforeAll(async () => {
  fake = await startFakeSignalCli({ keepaliveMs: 200, receiveMode: 'on-connection' });
  h = testHome({ config: config('pairing', [uuid(1), uuid(2), uuid(3), uuid(4), uuid(5), uuid(6), uuid(7)]) });
  h.create({ name: 'sig', workspace_isolation: true, admins: [`signal:${uuid(7)}`] });
  bridges = await startSignalBridges(h, fake);
});
afterAll(() => stopBridgeRig({ bridges, h, fake }));

describe('Signal bridge: a message becomes a run, the answer goes back', () => {
  it('journals, acknowledges (read receipt), shows typing while the agent works, answers the sender', async () => {
    const d = say(1, 'echo hello from $(whoami)');
    expect(await waitReplies(1, 1)).toEqual(['hello from agent']);
    expect(fake.receipts().some((r) => r.recipient === uuid(1) && r.targetTimestamps.includes(d.timestamp))).toBe(true);
    expect(
      fake
        .typing()
        .filter((t) => t.recipients.includes(uuid(1)))
        .map((t) => t.stop),
    ).toEqual(expect.arrayContaining([false, true]));
    // 'replied' is journaled right after the send returns.
    const entry = await fake.waitFor(() =>
      bridges
        .channel('signal')!
        .inbox.all()
        .find((e) => e.id === `${uuid(1)}:${d.timestamp}` && e.phase === 'replied'),
    );
    expect(entry).toMatchObject({ sender: `signal:${uuid(1)}`, tenant: `signal:${uuid(1)}` });
  });

  it('a re-delivered message (same uuid and timestamp) runs once', async () => {
    const ts = Date.now() + 5000;
    say(2, 'echo ran >> count.txt; wc -l < count.txt', { timestamp: ts });
    await waitReplies(2, 1);
    say(2, 'echo ran >> count.txt; wc -l < count.txt', { timestamp: ts });
    say(2, 'cat count.txt | wc -l');
    const replies = await waitReplies(2, 2);
    expect(replies).toEqual(['1', '1']);
  });

  it("one chat's messages run in order; chats run in parallel", async () => {
    for (const [i, s] of [0.6, 0.1, 0.3].entries()) say(3, `sleep ${s}; echo m${i}`);
    // Each of chats 4 and 5 says it is running, then waits for the test's "go": neither can end
    // before both have started, so chats run one after another never get there (no wall clock).
    const gated = (word: string) => `: > here; until [ -e go ]; do sleep 0.05; done; echo ${word}`;
    say(4, gated('four'));
    say(5, gated('five'));
    const workspaces = [4, 5].map(
      (n) => workspaceOf(h.berth.store.get('sig'), workspaceIdOf(h.berth.secret, 'sig', `signal:${uuid(n)}`)).dir,
    );
    await until(() => workspaces.every((dir) => fs.existsSync(join(dir, 'here'))), 'chats 4 and 5 running at once', 30_000);
    for (const dir of workspaces) fs.writeFileSync(join(dir, 'go'), '');
    const answers = () => repliesOf(3);
    await fake.waitFor(() => answers().length >= 3, 30_000);
    expect(answers()).toEqual(['m0', 'm1', 'm2']);
    expect(await waitReplies(4, 1)).toEqual(['four']);
    expect(await waitReplies(5, 1)).toEqual(['five']);
  });

  it('hidden numbers key on the uuid; a group chat is its own tenant and is answered in the group', async () => {
    say(6, 'echo hidden', { fromNumber: null });
    expect(await waitReplies(6, 1), JSON.stringify(fake.sent().slice(-3))).toEqual(['hidden']);
    const groupId = Buffer.from('group-one-id-0123456789abcdef').toString('base64');
    say(6, 'echo "$BERTH_WORKSPACE" > /dev/null; echo in-group', { groupId });
    const g = await fake.waitFor(() => fake.sent().find((s) => s.groupId === groupId && s.ok), 30_000); // a new tenant: its first container
    expect(g.message).toBe('in-group');
    expect(h.berth.admin.listSessions('sig').some((s) => s.tenant_key === `signal-group:${groupId}`)).toBe(true);
    // Who writes in the group is a member of its team (the gateway's team folders follow).
    expect(h.berth.admin.getProject('sig').teams[`signal-group:${groupId}`]).toEqual({ members: [`signal:${uuid(6)}`] });
  });

  it('receipts, typing and sync echoes of the bot are not messages', async () => {
    const before = fake.sent().length;
    fake.deliverReceipt({ fromUuid: uuid(1), fromNumber: null, type: 'read', timestamps: [1] });
    fake.deliverTyping({ fromUuid: uuid(1), fromNumber: null, action: 'STARTED' });
    fake.deliverSyncSent({ destinationUuid: uuid(1), text: 'echo should-not-run' });
    say(1, 'echo after');
    await fake.waitFor(() => repliesOf(1).includes('after'), 30_000);
    expect(
      fake
        .sent()
        .slice(before)
        .filter((s) => s.recipients.includes(uuid(1)))
        .map((s) => s.message),
    ).toEqual(['after']);
  });

  it('a reply over 2000 bytes is sent as its start and the whole as a text attachment', async () => {
    say(1, 'i=0; while [ $i -lt 400 ]; do echo "line $i of a long answer"; i=$((i+1)); done');
    const long = await fake.waitFor(() => fake.repliesTo(uuid(1)).find((s) => s.attachments.length > 0), 30_000);
    expect(Buffer.byteLength(long.message)).toBeLessThanOrEqual(2000);
    expect(long.files[0]?.data?.toString()).toContain('line 399 of a long answer');
    expect(signalMessages('é'.repeat(1500))[0]!.message).not.toContain('\uFFFD');
  });

  it('reconnects when the daemon drops the stream, and answers what arrives next', async () => {
    const connections = fake.connections();
    fake.dropConnections({ abrupt: true });
    await fake.waitFor(() => fake.connections() > connections, 10_000);
    say(1, 'echo reconnected');
    await fake.waitFor(() => repliesOf(1).includes('reconnected'), 30_000);
  });
});

describe('chat commands (berth answers, not the agent)', () => {
  it('/help, /whoami (no host path), /level low takes the network away, raising needs an admin, /new starts a conversation', async () => {
    say(5, '/help');
    await fake.waitFor(() => repliesOf(5).some((m) => m.includes('/level low|medium|high')));
    say(5, '/whoami');
    const who = await fake.waitFor(() => repliesOf(5).find((m) => m.startsWith('You are ')));
    expect(who).toContain(`You are signal:${uuid(5)},`);
    expect(who).toMatch(/level: medium/);
    expect(who).not.toContain(h.home);
    say(5, '/level low');
    await fake.waitFor(() => repliesOf(5).includes('berth: level is now low.'));
    say(5, 'ls /sys/class/net; echo "proxy=${HTTPS_PROXY:-none}"');
    await fake.waitFor(() => repliesOf(5).includes('lo\nproxy=none'), 30_000);
    say(5, '/level high');
    await fake.waitFor(() => repliesOf(5).some((m) => m.includes("only this project's admins may raise the level")));
    say(7, '/level high');
    await fake.waitFor(() => repliesOf(7).includes('berth: level is now high.'));
    say(5, '/level banana');
    await fake.waitFor(() => repliesOf(5).some((m) => m.includes('"banana" is not a level')));
    const sessionBefore = who.match(/conversation: ([^\s;]+)/)?.[1];
    say(5, '/new');
    await fake.waitFor(() => repliesOf(5).some((m) => m.startsWith('berth: new conversation')));
    say(5, '/whoami');
    const after = await fake.waitFor(() => repliesOf(5).filter((m) => m.startsWith('You are '))[1]);
    expect(after.match(/conversation: ([^\s;]+)/)?.[1]).not.toBe(sessionBefore);
    say(5, '/nope');
    await fake.waitFor(() => repliesOf(5).some((m) => m.startsWith('berth: unknown command /nope')));
  });
});

describe('pairing: who may talk at all', () => {
  it('an unknown sender is refused and waits for the operator; approved, it is answered', async () => {
    say(9, 'echo let me in');
    await fake.waitFor(() => repliesOf(9).some((m) => m.includes('does not know you yet')));
    expect(
      bridges
        .channel('signal')!
        .state.pending()
        .map((p) => p.sender),
    ).toContain(`signal:${uuid(9)}`);
    bridges.channel('signal')!.state.approve(`signal:${uuid(9)}`);
    say(9, 'echo in now');
    await fake.waitFor(() => repliesOf(9).includes('in now'));
    expect(fs.existsSync(join(homePaths(h.home).stateDir, 'bridges', 'signal.jsonl'))).toBe(true);
  });

  it('a send the network keeps refusing (untrusted identity) is tried again, then as a file, then ends failed in the inbox, saying each try', async () => {
    fake.failNextSend({ type: 'untrusted' }, { recipient: uuid(4), count: Infinity });
    const d = say(4, 'echo never-delivered');
    const entry = await fake.waitFor(
      () =>
        bridges
          .channel('signal')!
          .inbox.all()
          .find((e) => e.id === `${uuid(4)}:${d.timestamp}` && e.phase === 'failed'),
      30_000,
    );
    fake.clearSendFailures();
    expect(entry.reason).toMatch(/^the reply could not be delivered \(send: .*; send: .*; send: .*; file: .*; notice: .*\)$/);
  });

  it('a send that fails once (a network failure) is tried again: the reply arrives once', async () => {
    fake.failNextSend({ type: 'network' }, { recipient: uuid(4) });
    say(4, 'echo second-try');
    await fake.waitFor(() => repliesOf(4).includes('second-try'), 30_000);
    expect(repliesOf(4).filter((m) => m === 'second-try')).toHaveLength(1);
  });
});

describe('doctor shows the bridge', () => {
  it('signal-cli answering: ok with the account and project; not answering: fail with the command that starts it', async () => {
    expect(await checkBridges(h.berth.config)).toEqual([
      { name: 'bridge signal', status: 'ok', detail: expect.stringContaining(`${fake.account} answers with project "sig"`) },
    ]);
    const down = BerthConfigSchema.parse({ bridges: { signal: { url: 'http://127.0.0.1:9', account: '+15550000000' } } });
    expect(await checkBridges(down)).toEqual([
      { name: 'bridge signal', status: 'fail', detail: expect.stringContaining('signal-cli -a +15550000000 daemon --http=127.0.0.1:9') },
    ]);
  });
});
