import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createRelayServer, createRelayTokens, RELAY_BOUNDS } from '../../src/launch/kubernetes/relay.js';

/**
 * The relay listener under the attack of outside-attack-4 M5: every tenant pod may reach it (its
 * NetworkPolicy lets pods reach berth's gateway port, and the address is in each pod's
 * environment), and a connection costs nothing until its opening line. A pod that opens many
 * connections and says nothing must not shut the other pods (their berth-bridge: model calls,
 * egress, the gateway socket) out. Sources are told apart by their address: mallory connects
 * from 127.0.0.1 (or many 127.0.0.x), bob, who holds a live token, from 127.0.0.2.
 */

const dir = fs.mkdtempSync(join(os.tmpdir(), 'berth-relay-src-'));
const refused: string[] = [];
const tokens = createRelayTokens();
let port = 0;
let server: net.Server;
let echo: net.Server;
/** mallory's connections, closed after each case. */
let held: net.Socket[] = [];
let holding = false;
/** Connections the listener has taken (its own handler has decided on each by then). */
let seen = 0;

beforeAll(async () => {
  echo = net.createServer((s) => s.on('data', (d) => s.write(d)));
  await new Promise<void>((r) => echo.listen(join(dir, 'egress.sock'), r));
  server = createRelayServer(tokens, (why) => refused.push(why));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  server.on('connection', () => seen++);
  port = (server.address() as net.AddressInfo).port;
});
afterEach(async () => {
  holding = false;
  for (const s of held) s.destroy();
  held = [];
  // Until the listener has let go of every connection of the case.
  while (await new Promise<number>((r) => server.getConnections((_e, n) => r(n)))) await new Promise((r) => setImmediate(r));
});
afterAll(() => {
  server.close();
  echo.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

/** One silent connection from `from`, opened again whenever the relay closes it (as long as the case holds). */
function silent(from: string): Promise<void> {
  return new Promise((resolve) => {
    const s = net.connect({ port, host: '127.0.0.1', localAddress: from });
    held.push(s);
    s.on('error', () => undefined);
    s.once('connect', () => resolve());
    s.once('close', () => {
      resolve();
      if (holding) void silent(from);
    });
  });
}

/** Open `n` silent connections from each address, and keep them open. */
async function flood(from: string[], n: number): Promise<void> {
  holding = true;
  const until = seen + from.length * n;
  for (const a of from) await Promise.all(Array.from({ length: n }, () => silent(a)));
  // Until the listener has taken every one of them (accepted, or refused and opened again).
  while (seen < until) await new Promise((r) => setImmediate(r));
}

/** bob's berth-bridge: his token's opening line and a message, the echo back or what the relay did. */
function bob(token: string, from = '127.0.0.2'): Promise<string> {
  return new Promise((resolve) => {
    const s = net.connect({ port, host: '127.0.0.1', localAddress: from }, () => s.write(`BERTH1 ${token} egress.sock\nping`));
    let got = '';
    s.on('data', (d) => {
      got += d.toString();
      if (got === 'ping') s.destroy();
    });
    s.on('error', () => undefined);
    s.on('close', () => resolve(got || 'refused'));
  });
}

const tally = (answers: string[]) =>
  answers.reduce<Record<string, number>>((t, a) => ((t[a === 'ping' ? 'ok' : a] = (t[a === 'ping' ? 'ok' : a] ?? 0) + 1), t), {});

describe('the relay under silent connections (outside-attack-4 M5)', () => {
  it("one pod's silent connections, reopened as they close, leave another pod's token served", async () => {
    const token = tokens.issue(dir);
    expect(tally(await Promise.all(Array.from({ length: 5 }, () => bob(token))))).toEqual({ ok: 5 });
    await flood(['127.0.0.1'], 300);
    const during = [];
    for (let i = 0; i < 10; i++) during.push(await bob(token));
    expect(tally(during)).toEqual({ ok: 10 });
  });

  it('holds no more than its per-address bound of silent connections from one address', async () => {
    const before = refused.length;
    const n = RELAY_BOUNDS.openingPerSource + 12;
    const until = seen + n;
    await Promise.all(Array.from({ length: n }, () => silent('127.0.0.5')));
    while (seen < until) await new Promise((r) => setImmediate(r));
    expect(refused.slice(before)).toEqual(
      Array.from({ length: n - RELAY_BOUNDS.openingPerSource }, () => 'too many connections opening from one address'),
    );
  });

  it('silent connections from many addresses (more than the listener holds) leave a token holder served, first connection and later ones', async () => {
    const token = tokens.issue(dir);
    // 40 addresses, 10 silent connections each: more than the whole listener holds.
    const sources = Array.from({ length: 40 }, (_, i) => `127.0.1.${i + 1}`);
    await flood(sources, 10);
    // The listener is full of them (give or take one being replaced).
    const open = await new Promise<number>((r) => server.getConnections((_e, n) => r(n)));
    expect(open).toBeGreaterThanOrEqual(RELAY_BOUNDS.opening);
    // A source the relay has never seen (127.0.0.3: its first connection), and bob's again.
    const first = await bob(token, '127.0.0.3');
    const during = [];
    for (let i = 0; i < 10; i++) during.push(await bob(token));
    expect(tally([first, ...during])).toEqual({ ok: 11 });
    expect(refused.some((why) => why.startsWith('too many connections opening at once'))).toBe(true);
  });

  it('a silent connection is closed once the opening-line deadline passes (berth-bridge writes its line at once)', async () => {
    expect(RELAY_BOUNDS.lineMs).toBeLessThanOrEqual(1000);
    const before = refused.length;
    const s = net.connect({ port, host: '127.0.0.1', localAddress: '127.0.0.4' });
    s.on('error', () => undefined);
    await new Promise((r) => s.once('close', r));
    expect(refused.slice(before)).toEqual(['no opening line in time']);
  });
});
