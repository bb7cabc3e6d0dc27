import fs from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startBridges, type RunningBridges } from '../../src/bridges/start.js';
import { homePaths } from '../../src/config/home.js';
import { startFakeSignalCli, type FakeSignalCli } from '../fakes/signal-cli.js';
import { testConfig, testHome, type TestHome } from '../helpers.js';
import { pino } from 'pino';

/**
 * A running berth follows berth.yaml's bridges (issue 23, live reconfiguration): a Signal bridge
 * added is started, one pointed at another signal-cli is restarted there, one removed is stopped;
 * each answers its own messages once, and a message in flight across a restart is answered.
 */
const ALICE = '55555555-5555-4555-8555-555555555501';
let one: FakeSignalCli;
let two: FakeSignalCli;
let h: TestHome;
let bridges: RunningBridges;

const writeConfig = (signalUrl?: string, account?: string) => {
  const signal = signalUrl ? ['bridges:', '  signal:', `    url: ${signalUrl}`, `    account: '${account}'`, '    senders: open'] : [];
  // A file of another size each time: the config source sees the change even within one mtime tick.
  fs.writeFileSync(
    join(h.home, 'berth.yaml'),
    testConfig([...signal, 'routes:', '  signal: { project: sig }', `# ${Date.now()}`, ''].join('\n')) ?? '',
  );
};

beforeAll(async () => {
  one = await startFakeSignalCli({ keepaliveMs: 200, receiveMode: 'on-connection' });
  two = await startFakeSignalCli({ keepaliveMs: 200, receiveMode: 'on-connection', account: '+15550000002' });
  h = testHome({ config: 'routes:\n  signal: { project: sig }\n' });
  h.create({ name: 'sig', workspace_isolation: true });
  bridges = startBridges({
    admin: h.berth.admin,
    config: () => h.berth.config,
    logger: pino({ level: 'silent' }),
    stateDir: homePaths(h.home).stateDir,
    backoffMs: { min: 50, max: 200 },
  });
});
afterAll(async () => {
  await bridges?.stop();
  await h?.[Symbol.asyncDispose]();
  await one?.close();
  await two?.close();
});

describe('berth.yaml bridges, followed while berth runs', () => {
  it('nothing configured: nothing runs, and nothing changes until berth.yaml does', () => {
    expect(bridges.channel('signal')).toBeUndefined();
    expect(bridges.reconfigure()).toBeUndefined();
  });

  it('a Signal bridge added is started and answers', async () => {
    writeConfig(one.url, one.account);
    expect(bridges.reconfigure()).toBe(`signal bridge started: ${one.account} at ${one.url}`);
    await one.waitForClients(1, 10_000);
    one.deliverText({ fromUuid: ALICE, fromNumber: null, text: 'echo via-one' });
    await one.waitFor(() => one.repliesTo(ALICE).some((m) => m.message === 'via-one'), 30_000);
    expect(bridges.reconfigure()).toBeUndefined(); // unchanged: left alone
  });

  it('pointed at another signal-cli: restarted there; a message in flight on the old one is still answered, once', async () => {
    one.deliverText({ fromUuid: ALICE, fromNumber: null, text: 'sleep 2; echo slow-on-one' });
    await one.waitFor(
      () =>
        bridges
          .channel('signal')!
          .inbox.all()
          .some((e) => e.text === 'sleep 2; echo slow-on-one' && e.phase === 'started'),
      15_000,
    );
    writeConfig(two.url, two.account);
    expect(bridges.reconfigure()).toBe(`signal bridge restarted: ${two.account} at ${two.url} (was ${one.account} at ${one.url})`);
    await one.waitForClients(0, 10_000);
    await two.waitForClients(1, 10_000);
    two.deliverText({ fromUuid: ALICE, fromNumber: null, text: 'echo via-two' });
    await two.waitFor(() => two.repliesTo(ALICE).some((m) => m.message === 'via-two'), 30_000);
    await one.waitFor(() => one.repliesTo(ALICE).some((m) => m.message === 'slow-on-one'), 30_000);
    expect(
      one
        .repliesTo(ALICE)
        .filter((m) => /slow-on-one|restarted/.test(m.message))
        .map((m) => m.message),
    ).toEqual(['slow-on-one']);
    expect(two.repliesTo(ALICE).map((m) => m.message)).toEqual(['via-two']);
  });

  it('removed: stopped; its messages are no longer read', async () => {
    writeConfig();
    expect(bridges.reconfigure()).toBe(`signal bridge stopped (berth.yaml has no bridges.signal now; it was ${two.account} at ${two.url})`);
    await two.waitForClients(0, 10_000);
    expect(bridges.channel('signal')).toBeUndefined();
  });
});
