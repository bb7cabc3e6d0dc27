import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ChatTransport } from '../../src/bridges/chat-transport.js';
import { createBridgeCore } from '../../src/bridges/core.js';
import { bridgeDir } from '../../src/bridges/start.js';
import { createWebChat, type WebChat, type WebLogin } from '../../src/bridges/web.js';
import type { WebServerMessage } from '../../src/bridges/web-protocol.js';
import { homePaths } from '../../src/config/home.js';
import { openBridgeState } from '../../src/store/bridge-state.js';
import { openInbox } from '../../src/store/inbox.js';
import { testHome, type TestHome } from '../helpers.js';

/**
 * M1 (outside attack 3): one chat user with many sessions must not starve the others. Alice's
 * eight web chat sessions share one workspace, so their runs go one at a time (its lock); while
 * they wait for it they must not hold the bridge's run slots. Bob, another person, is answered
 * while alice's runs have barely begun — real containers, the web chat's own core.
 */
const RUN_SECONDS = 6;
let h: TestHome;
let chat: WebChat;
const pushed: Array<{ user: string; message: WebServerMessage }> = [];
const alice: WebLogin = { project: 'fair', user: 'alice' };
const bob: WebLogin = { project: 'fair', user: 'bob' };

beforeAll(() => {
  h = testHome({ config: ['runs:', '  max_concurrent: 8', '  per_tenant: 2', 'bridges:', '  max_concurrent_runs: 4', ''].join('\n') });
  h.create({ name: 'fair', workspace_isolation: true });
  const stateDir = homePaths(h.home).stateDir;
  chat = createWebChat({
    admin: h.berth.admin,
    config: () => h.berth.config,
    logger: pino({ level: 'silent' }),
    stateDir,
    bridgeDir: bridgeDir(stateDir),
  });
  for (const login of [alice, bob]) chat.attach(login, { push: (message) => pushed.push({ user: login.user, message }) });
});
afterAll(async () => {
  await chat?.core.idle();
  await h?.[Symbol.asyncDispose]();
});

const send = (login: WebLogin, session: string, input: string) =>
  chat.run(login, { type: 'run', id: randomUUID(), session_id: session, permission_level: 'medium', input });
const repliesTo = (user: string) =>
  pushed.filter((p) => p.user === user && p.message.type === 'reply').map((p) => (p.message as { text: string }).text);
async function waitFor<T>(fn: () => T | undefined | false, timeoutMs: number): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = fn();
    if (v) return v;
    if (Date.now() > end) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('bridge lanes: one chat user cannot starve another', () => {
  it(`bob's echo is answered before alice's 8 sessions (each running sleep ${RUN_SECONDS}) are past their first two`, async () => {
    const sessions = Array.from({ length: 8 }, () => chat.newSession(alice).id);
    for (const s of sessions) await send(alice, s, `sleep ${RUN_SECONDS}; echo alice-done`);
    await new Promise((r) => setTimeout(r, 1500));
    const bobSession = chat.newSession(bob).id;
    const t0 = Date.now();
    await send(bob, bobSession, 'echo bob-hi');
    await waitFor(() => repliesTo('bob').includes('bob-hi'), 120_000);
    // Measured by order, not the clock (a busy machine stretches every run alike): bob is answered
    // while alice's runs, one at a time on her workspace, have barely begun (at most the one
    // running when he wrote, and the next); queued behind them he would wait for all eight.
    const aliceDoneBeforeBob = repliesTo('alice').filter((t) => t === 'alice-done').length;
    console.log(`bob waited ${Date.now() - t0} ms; alice had ${aliceDoneBeforeBob} of 8 done`);
    expect(aliceDoneBeforeBob).toBeLessThanOrEqual(2);
    // Nobody is told how many of other people's messages wait.
    expect(repliesTo('bob').filter((t) => /\d+ ahead/.test(t))).toEqual([]);
    // Alice loses nothing: all eight are answered, one at a time on her workspace.
    await waitFor(() => repliesTo('alice').filter((t) => t === 'alice-done').length === 8, 120_000);
  }, 180_000);
});

describe('group chats: each writer joins its team', () => {
  it("ten groups' first messages at once: every team is recorded (read and written under the project lock)", async () => {
    const dir = join(homePaths(h.home).stateDir, 'bridges');
    const sent: string[] = [];
    const transport: ChatTransport = {
      name: 'teams',
      send: async (_chat, text) => void sent.push(text),
      typing: async () => undefined,
      acknowledge: async () => undefined,
      projectOf: () => 'fair',
    };
    const core = createBridgeCore({
      transport,
      inbox: openInbox(dir, 'teams'),
      state: openBridgeState(dir, 'teams'),
      admin: h.berth.admin,
      config: () => h.berth.config,
      logger: pino({ level: 'silent' }),
      senderAllowed: () => true,
    });
    const groups = Array.from({ length: 10 }, (_, i) => `teams-group:g${i}`);
    for (const [i, team] of groups.entries())
      core.receive({ id: `t${i}`, chat: team, tenant: team, sender: `teams:member${i}`, text: '/help' });
    await core.idle();
    expect(sent).toHaveLength(10);
    const teams = h.berth.admin.getProject('fair').teams;
    expect(groups.filter((g) => teams[g] === undefined)).toEqual([]);
    expect(teams[groups[3] as string]).toEqual({ members: ['teams:member3'] });
  });
});
