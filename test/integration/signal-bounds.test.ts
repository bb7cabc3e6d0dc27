import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningBridges } from '../../src/bridges/start.js';
import { startFakeSignalCli, type FakeSignalCli } from '../fakes/signal-cli.js';
import { testHome, type TestHome } from '../helpers.js';
import { capturingLogger, startSignalBridges, stopBridgeRig } from '../helpers/bridge-rig.js';

/**
 * The Signal events stream under an oversized event (attack report L2): signal-cli has already
 * taken such an event off Signal's servers, so dropping the connection over it lost every event
 * read with it. The bridge skips the one event (a warning naming its sender, never its text),
 * picks the stream up at the next event boundary, and answers what came behind it.
 */
const SENDER = '00000000-0000-4000-8000-0000000b1b00';
let fake: FakeSignalCli;
let h: TestHome;
let bridges: RunningBridges;
const logs: Array<Record<string, unknown>> = [];

beforeAll(async () => {
  fake = await startFakeSignalCli({ keepaliveMs: 200, receiveMode: 'on-connection' });
  h = testHome({
    config: [
      'bridges:',
      '  signal:',
      `    url: ${fake.url}`,
      `    account: '${fake.account}'`,
      '    senders: open',
      'routes:',
      '  signal: { project: big }',
      '',
    ].join('\n'),
  });
  h.create({ name: 'big', workspace_isolation: true });
  bridges = await startSignalBridges(h, fake, capturingLogger(logs));
});
afterAll(() => stopBridgeRig({ bridges, h, fake }));

describe('Signal: an event over the size bound (L2)', () => {
  it('a 1.1 MB message is skipped and logged by sender; the message 20 ms behind it is answered on the same connection', async () => {
    const connections = fake.connections();
    const secret = 'do-not-log-me';
    fake.deliverText({ fromUuid: SENDER, fromNumber: null, name: 'Big Sender', text: `${secret} ${'x'.repeat(1_100_000)}` });
    await new Promise((r) => setTimeout(r, 20));
    fake.deliverText({ fromUuid: SENDER, fromNumber: null, text: 'echo second-message-after-big' });
    const reply = await fake.waitFor(() => fake.repliesTo(SENDER).find((s) => s.message === 'second-message-after-big'), 30_000);
    expect(reply).toBeDefined();
    expect(fake.connections()).toBe(connections);
    expect(logs.filter((l) => /events stream failed|reconnect/.test(String(l.msg)))).toEqual([]);
    const warning = logs.find((l) => /over the size bound/.test(String(l.msg)));
    expect(warning).toMatchObject({ level: 40, sender: `signal:${SENDER}`, bytes: expect.any(Number) });
    expect(JSON.stringify(logs)).not.toContain(secret);
    // Nothing of it reached the inbox: only the second message.
    expect(
      bridges
        .channel('signal')!
        .inbox.all()
        .map((e) => e.text),
    ).toEqual(['echo second-message-after-big']);
  });

  it('an oversized event whose sender cannot be read is still skipped, and the stream goes on', async () => {
    const connections = fake.connections();
    fake.deliverRaw({
      envelope: {
        padding: 'y'.repeat(1_200_000),
        sourceUuid: SENDER,
        timestamp: Date.now(),
        dataMessage: { timestamp: Date.now(), message: 'never' },
      },
    });
    fake.deliverText({ fromUuid: SENDER, fromNumber: null, text: 'echo after-the-unnamed-one' });
    await fake.waitFor(() => fake.repliesTo(SENDER).find((s) => s.message === 'after-the-unnamed-one'), 30_000);
    expect(fake.connections()).toBe(connections);
    expect(logs.filter((l) => /over the size bound/.test(String(l.msg)))).toHaveLength(2);
  });
});
