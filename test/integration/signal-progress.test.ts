import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningBridges } from '../../src/bridges/start.js';
import { STARTING_WORDS } from '../../src/bridges/progress.js';
import { startFakeSignalCli, type FakeSignalCli } from '../fakes/signal-cli.js';
import { testHome, type TestHome } from '../helpers.js';
import { startSignalBridges, stopBridgeRig } from '../helpers/bridge-rig.js';

/**
 * Signal cannot show the agent at work live: a long run gets one short progress message
 * (bridges.progress_message_after_seconds), through the real wire (the signal-cli fake), built
 * from the demo shell's traced commands — never more than one, then the answer. (A first message
 * whose container takes more than 5 s to start, on a loaded host, is also told "starting your
 * container…": that line is not this file's subject, and is left out below.)
 */
const replies = (fake: FakeSignalCli, to: string) =>
  fake
    .repliesTo(to)
    .map((m) => m.message)
    .filter((m) => m !== STARTING_WORDS);
const ALICE = '66666666-6666-4666-8666-666666666601';
let fake: FakeSignalCli;
let h: TestHome;
let bridges: RunningBridges;

beforeAll(async () => {
  fake = await startFakeSignalCli({ keepaliveMs: 200, receiveMode: 'on-connection' });
  h = testHome({
    config: [
      'bridges:',
      '  progress_message_after_seconds: 1',
      '  signal:',
      `    url: ${fake.url}`,
      `    account: '${fake.account}'`,
      '    senders: open',
      'routes:',
      '  signal: { project: sig }',
      '',
    ].join('\n'),
  });
  h.create({ name: 'sig', workspace_isolation: true });
  bridges = await startSignalBridges(h, fake);
});
afterAll(() => stopBridgeRig({ bridges, h, fake }));

describe('Signal: the agent at work', () => {
  it('a run past the threshold gets one progress message naming what runs now, then the answer', async () => {
    fake.deliverText({ fromUuid: ALICE, fromNumber: null, text: 'echo start; ls / > /dev/null; sleep 3; echo end' });
    await fake.waitFor(() => fake.repliesTo(ALICE).some((m) => m.message === 'start\nend'), 30_000);
    expect(replies(fake, ALICE)).toEqual(['berth: still working (ran 3 commands; now: sleep 3)', 'start\nend']);
  });

  it('a quick run gets the answer alone', async () => {
    const before = replies(fake, ALICE).length;
    fake.deliverText({ fromUuid: ALICE, fromNumber: null, text: 'echo quick' });
    await fake.waitFor(() => fake.repliesTo(ALICE).some((m) => m.message === 'quick'), 30_000);
    expect(replies(fake, ALICE).slice(before)).toEqual(['quick']);
  });
});
