import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { createSignalBridge, SignalBridgeSchema, signalChannel } from '../../src/channels/signal.js';
import { startFakeSignalCli, type FakeSignalCli } from '../fakes/signal-cli.js';

/**
 * berth's account against signal-cli as it is started: `daemon -a +N` (one account; `account` is
 * ignored) or `daemon` alone (multi-account: every call must name the account, and the daemon may
 * not hold it). berth names its account in every call, and doctor says when the daemon lacks it.
 */
const BOT = '+4915550000';
const ALICE = '7ccae375-cd51-4c82-8b1e-7be3280aa485';
let fakes: FakeSignalCli[] = [];
afterEach(async () => {
  await Promise.all(fakes.map((f) => f.close()));
  fakes = [];
});
async function daemon(multiAccount?: string[]): Promise<FakeSignalCli> {
  const f = await startFakeSignalCli({ account: BOT, ...(multiAccount ? { multiAccount } : {}) });
  fakes.push(f);
  return f;
}
const bridge = (f: FakeSignalCli) =>
  createSignalBridge({ url: f.url, account: BOT, logger: pino({ level: 'silent' }), onMessage: () => undefined });
const config = (f: FakeSignalCli) => SignalBridgeSchema.parse({ url: f.url, account: BOT });

describe('Signal: the account in every call', () => {
  it("a multi-account daemon holding the account takes berth's replies, typing and receipts", async () => {
    const f = await daemon([BOT, '+4915550001']);
    const b = bridge(f);
    await b.send(ALICE, 'hello');
    await b.typing(ALICE, true);
    await b.acknowledge({
      id: `${ALICE}:1`,
      chat: ALICE,
      tenant: `signal:${ALICE}`,
      sender: `signal:${ALICE}`,
      text: 'x',
      receipt: { recipient: ALICE, timestamp: 1 },
    });
    expect(f.repliesTo(ALICE).map((m) => m.message)).toEqual(['hello']);
    expect(f.calls.map((c) => (c.params as { account?: string }).account)).toEqual([BOT, BOT, BOT]);
  });

  it('a single-account daemon (-a) still takes them', async () => {
    const f = await daemon();
    await bridge(f).send(ALICE, 'hello');
    expect(f.repliesTo(ALICE)).toHaveLength(1);
  });
});

describe('Signal: doctor', () => {
  it('a multi-account daemon without the account fails, naming the account and what to do', async () => {
    const f = await daemon(['+4915559999']);
    const [check] = await signalChannel.doctor(config(f), 'with project "helper"');
    expect(check).toMatchObject({ status: 'fail' });
    expect(check!.detail).toContain(`does not hold ${BOT}`);
    expect(check!.detail).toContain(`-a ${BOT}`);
  });

  it('a multi-account daemon with the account, and a single-account one, pass', async () => {
    for (const f of [await daemon([BOT]), await daemon()]) {
      const [check] = await signalChannel.doctor(config(f), 'with project "helper"');
      expect(check, check?.detail).toMatchObject({ status: 'ok' });
    }
  });
});
