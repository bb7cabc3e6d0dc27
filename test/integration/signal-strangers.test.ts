import fs from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main } from '../../src/cli/berth.js';
import { bridgeDir, type RunningBridges } from '../../src/bridges/start.js';
import { homePaths } from '../../src/config/home.js';
import { openInbox } from '../../src/store/inbox.js';
import { startFakeSignalCli, type FakeSignalCli } from '../fakes/signal-cli.js';
import { testHome, type TestHome } from '../helpers.js';
import { capturingLogger, startSignalBridges, stopBridgeRig } from '../helpers/bridge-rig.js';

/**
 * L1 (outside attack 3): strangers on Signal. A sender nobody approved never runs anything, so
 * what they send is not worth a disk: at most a short start of it is journaled, they get one
 * refusal per hour (not one per message: Signal rate-limits the bot, not them), the operator
 * sees one log line per new sender, and approving someone tells them they can talk now.
 */
const uuid = (n: number) => `44444444-4444-4444-4444-4444444444${String(n).padStart(2, '0')}`;
const FRIEND = uuid(90);
let fake: FakeSignalCli;
let h: TestHome;
let bridges: RunningBridges;
const logLines: Array<{ msg: string; sender?: string }> = [];
let inboxFile: string;

beforeAll(async () => {
  fake = await startFakeSignalCli({ keepaliveMs: 200, receiveMode: 'on-connection' });
  h = testHome({
    config: [
      'bridges:',
      '  signal:',
      `    url: ${fake.url}`,
      `    account: '${fake.account}'`,
      '    senders: pairing',
      `    allow: ['${FRIEND}']`,
      'routes:',
      '  signal: { project: sig }',
      '',
    ].join('\n'),
  });
  h.create({ name: 'sig', workspace_isolation: true });
  const dir = bridgeDir(homePaths(h.home).stateDir);
  inboxFile = join(dir, 'signal.jsonl');
  // A dead berth journaled a stranger's message and died before refusing it: it must never run.
  openInbox(dir, 'signal').receive({
    id: 'left-open',
    chat: uuid(7),
    sender: `signal:${uuid(7)}`,
    tenant: `signal:${uuid(7)}`,
    text: 'echo ran-after-restart',
  });
  bridges = await startSignalBridges(h, fake, capturingLogger(logLines));
});
afterAll(() => stopBridgeRig({ bridges, h, fake }));

describe('Signal strangers (unapproved senders)', () => {
  it("a stranger's message journaled before a restart is refused at recovery, never run", async () => {
    const entry = await fake.waitFor(
      () =>
        bridges
          .channel('signal')!
          .inbox.all()
          .find((e) => e.id === 'left-open' && e.phase === 'failed'),
      10_000,
    );
    expect(entry.reason).toMatch(/not approved/);
    expect(h.berth.admin.listSessions('sig')).toEqual([]);
  });

  it('10 messages of 200 KB from two strangers: 2 refusals, a bounded inbox, one log line per sender', async () => {
    const before = fs.statSync(inboxFile).size;
    const ids = Array.from({ length: 10 }, (_, i) =>
      fake.deliverText({ fromUuid: uuid(i % 2), fromNumber: null, name: `stranger ${i % 2}`, text: `spam ${i} ${'x'.repeat(200_000)}` }),
    );
    const ended = () =>
      ids.every((d) =>
        bridges
          .channel('signal')!
          .inbox.all()
          .some((e) => e.id === `${d.sourceUuid}:${d.timestamp}` && e.phase === 'failed'),
      );
    await fake.waitFor(ended, 20_000);
    await new Promise((r) => setTimeout(r, 300)); // a late second refusal would show by now
    expect([fake.repliesTo(uuid(0)).length, fake.repliesTo(uuid(1)).length]).toEqual([1, 1]);
    expect(fake.repliesTo(uuid(0))[0]!.message).toMatch(/does not know you yet/);
    // Every message is still read-receipted (it is safe with berth), and recorded: text cut short.
    expect(
      fake
        .receipts()
        .filter((r) => [uuid(0), uuid(1)].includes(r.recipient))
        .flatMap((r) => r.targetTimestamps).length,
    ).toBe(10);
    const growth = fs.statSync(inboxFile).size - before;
    console.log(`inbox grew ${growth} bytes for 10 messages of 200 KB`);
    expect(growth).toBeLessThan(10 * 1024); // today: over 2,000,000 bytes
    for (const e of bridges
      .channel('signal')!
      .inbox.all()
      .filter((e) => e.sender === `signal:${uuid(0)}`))
      expect((e.text ?? '').length).toBeLessThanOrEqual(200);
    const strangers = [`signal:${uuid(0)}`, `signal:${uuid(1)}`];
    expect(
      bridges
        .channel('signal')!
        .state.pending()
        .map((p) => p.sender)
        .filter((s) => strangers.includes(s))
        .sort(),
    ).toEqual(strangers.sort());
    // The operator hears once per new sender, not once per message.
    const waits = logLines.filter((l) => /waits for approval/.test(l.msg) && strangers.includes(l.sender ?? ''));
    expect(waits.map((l) => l.sender).sort()).toEqual(strangers.sort());
    expect(h.berth.admin.listSessions('sig')).toEqual([]);
  });

  it('berth bridge approve tells the person they can talk now, and they are answered', async () => {
    const out: string[] = [];
    const io = { out: (s: string) => void out.push(s), err: (s: string) => void out.push(s) };
    expect(await main(['--home', h.home, 'bridge', 'approve', `signal:${uuid(0)}`], {}, io)).toBe(0);
    expect(out.join('')).toMatch(/approved signal:/);
    const hello = await fake.waitFor(() => fake.repliesTo(uuid(0))[1], 10_000);
    expect(hello.message).toMatch(/approved.*talk/i);
    fake.deliverText({ fromUuid: uuid(0), fromNumber: null, text: 'echo hello-now' });
    await fake.waitFor(() => fake.repliesTo(uuid(0)).some((s) => s.message === 'hello-now'), 30_000);
    // The other stranger still waits, and still hears nothing more this hour.
    fake.deliverText({ fromUuid: uuid(1), fromNumber: null, text: 'echo still-me' });
    await new Promise((r) => setTimeout(r, 500));
    expect(fake.repliesTo(uuid(1)).length).toBe(1);
  });

  it("a stranger's first message is kept, not run, and answered once the operator approves them (from the CLI, another process's doing)", async () => {
    const newcomer = uuid(20);
    fake.deliverText({ fromUuid: newcomer, fromNumber: null, name: 'newcomer', text: 'echo first-message-kept' });
    const told = await fake.waitFor(() => fake.repliesTo(newcomer)[0], 10_000);
    expect(told.message).toMatch(/your message is kept and answered as soon as they do/);
    const entry = bridges
      .channel('signal')!
      .inbox.all()
      .find((e) => e.sender === `signal:${newcomer}`);
    expect(entry).toMatchObject({ phase: 'held', text: 'echo first-message-kept' });
    // A second message before approval is not kept: they already heard this hour.
    fake.deliverText({ fromUuid: newcomer, fromNumber: null, text: 'echo second-not-kept' });
    await new Promise((r) => setTimeout(r, 2500)); // past a check for approvals: still nothing runs
    expect(fake.repliesTo(newcomer)).toHaveLength(1);
    expect(h.berth.admin.listSessions('sig').filter((x) => x.tenant_key === `signal:${newcomer}`)).toEqual([]);

    const out: string[] = [];
    const io = { out: (t: string) => void out.push(t), err: (t: string) => void out.push(t) };
    expect(await main(['--home', h.home, 'bridge', 'approve', `signal:${newcomer}`], {}, io)).toBe(0);
    expect(out.join('')).toMatch(/their first message is answered by the running bridge/);
    const answered = await fake.waitFor(() => fake.repliesTo(newcomer).find((m) => m.message === 'first-message-kept'), 15_000);
    expect(answered).toBeDefined();
    expect(fake.repliesTo(newcomer).map((m) => m.message)).toContain(
      'berth: the operator approved you: your first message is being answered (/help lists what this bot understands).',
    );
    expect(fake.repliesTo(newcomer).some((m) => m.message.includes('second-not-kept'))).toBe(false);
    await fake.waitFor(
      () =>
        bridges
          .channel('signal')!
          .inbox.all()
          .find((e) => e.id === entry!.id && e.phase === 'replied'),
      10_000,
    );
  });
});
