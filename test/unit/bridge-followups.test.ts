import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import type { InboundMessage } from '../../src/bridges/chat-transport.js';
import { createBridgeCore, type BridgeDeps } from '../../src/bridges/core.js';
import { createLanes, TENANT_PENDING_MAX, type LaneKey } from '../../src/bridges/lanes.js';
import { createSignalBridge } from '../../src/channels/signal.js';
import { createSseReader } from '../../src/channels/sse-events.js';
import { BerthConfigSchema } from '../../src/config/berth-config-schema.js';
import { BerthError } from '../../src/base/errors.js';
import { openBridgeState } from '../../src/store/bridge-state.js';
import { openInbox } from '../../src/store/inbox.js';
import { fakeCoreAdmin, runViewOf, sessionOf } from '../fakes/core-admin.js';
import { eventually, until } from '../helpers/until.js';

/**
 * Follow-ups of the chat bridges' security review, in memory: waiting messages bounded per
 * sender (one person in many groups), a message that outlived its session or its sender's login
 * is not run, and one event the core could not take does not lose the events behind it.
 */
const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});

/**
 * A core over a fake admin: sessions are a Set, a run opens its session as the runner does
 * (made when missing), waits for admission, calls whenReady, then waits until the test lets it end.
 */
function setup(over: Partial<BridgeDeps> = {}) {
  const dir = fs.mkdtempSync(join(os.tmpdir(), 'berth-followups-'));
  dirs.push(dir);
  const sent: Array<{ chat: string; text: string }> = [];
  const sessions = new Set<string>();
  const ran: string[] = [];
  const admissions: Array<() => void> = [];
  const gates: Array<() => void> = [];
  let admitAtOnce = true;
  const admin = fakeCoreAdmin({
    getSession(_project, id) {
      if (!sessions.has(id)) throw new BerthError('SESSION_NOT_FOUND', `no session ${id}`);
      return sessionOf(id, 'web:alice');
    },
    async runMessage(_project, request) {
      if (request.session) sessions.add(request.session); // the runner's sessions.open: made if missing
      if (!admitAtOnce) await new Promise<void>((r) => admissions.push(r));
      await request.whenReady?.();
      ran.push(request.message);
      await new Promise<void>((r) => gates.push(r));
      return runViewOf({ stdout: `done ${request.message}` });
    },
  });
  const inbox = openInbox(dir, 'test');
  const config = BerthConfigSchema.parse({ bridges: { max_concurrent_runs: 4 } });
  const core = createBridgeCore({
    transport: {
      name: 'test',
      send: async (chat, text) => void sent.push({ chat, text }),
      typing: async () => undefined,
      acknowledge: async () => undefined,
      projectOf: () => 'p',
    },
    inbox,
    state: openBridgeState(dir, 'test'),
    admin,
    config: () => config,
    logger: pino({ level: 'silent' }),
    senderAllowed: () => true,
    ...over,
  });
  let n = 0;
  const message = (m: Omit<InboundMessage, 'id'>): InboundMessage => ({ id: `m${n++}`, ...m });
  const releaseAll = () =>
    until(() => {
      admissions.splice(0).forEach((g) => g());
      gates.splice(0).forEach((g) => g());
      return gates.length === 0 && admissions.length === 0 && inbox.open().length === 0;
    }, 'every run to end');
  return {
    core,
    inbox,
    sessions,
    ran,
    message,
    releaseAll,
    holdAdmission: () => (admitAtOnce = false),
    admit: () => admissions.splice(0).forEach((g) => g()),
    waitingAdmission: () => admissions.length,
    endRuns: () => gates.splice(0).forEach((g) => g()),
    to: (chat: string) => sent.filter((s) => s.chat === chat).map((s) => s.text),
    entry: (id: string) => inbox.all().find((e) => e.id === id),
  };
}

describe('waiting messages are bounded per sender too (one person in many groups)', () => {
  it('lanes: a sender whose groups are separate tenants is refused past the per-tenant bound, across groups', () => {
    const lanes = createLanes(() => ({ slots: 1, perTenant: 1, chatPending: 3, tenantPending: 4, totalPending: 100 }));
    const key = (group: string, sender: string): LaneKey => ({ chat: group, tenant: `group:${group}`, sender });
    const never = () => new Promise<void>(() => undefined);
    const outcomes = ['g1', 'g1', 'g2', 'g2', 'g3'].map((g) => lanes.run(key(g, 'alice'), never).accepted);
    expect(outcomes).toEqual([true, true, true, true, false]);
    expect(lanes.run(key('g3', 'alice'), never)).toEqual({ accepted: false, full: 'sender' });
    // Another person in the same group is not held back by alice's count.
    expect(lanes.run(key('g3', 'bob'), never)).toEqual({ accepted: true, ahead: 0 });
  });

  it(`core: one Signal sender's messages across groups past ${TENANT_PENDING_MAX} are refused with the same words as a tenant's`, async () => {
    const t = setup();
    const groups = Math.ceil(TENANT_PENDING_MAX / 20) + 1; // 20 per chat: enough groups to pass the bound
    const ids: string[] = [];
    for (let g = 0; g < groups; g++) {
      for (let i = 0; i < 20; i++) {
        const m = t.message({ chat: `group:g${g}`, tenant: `signal-group:g${g}`, sender: 'signal:alice', text: `echo ${g}-${i}` });
        t.core.receive(m);
        ids.push(m.id);
      }
    }
    await eventually(() => expect(ids.filter((id) => t.entry(id)?.phase === 'failed')).toHaveLength(groups * 20 - TENANT_PENDING_MAX));
    const refused = ids.filter((id) => t.entry(id)?.phase === 'failed');
    expect(t.entry(refused[0] as string)).toMatchObject({ reason: 'too many messages waiting (sender)' });
    const last = `group:g${groups - 1}`;
    expect(
      t
        .to(last)
        .filter((s) => s.includes('was not run'))
        .at(-1),
    ).toBe(
      `berth: ${TENANT_PENDING_MAX} of your messages are waiting already, so "echo ${groups - 1}-19" was not run. Send it again once I have answered the others.`,
    );
    // Someone else is still taken (in a group of their own: alice's groups have full lanes).
    const bob = t.message({ chat: 'group:other', tenant: 'signal-group:other', sender: 'signal:bob', text: 'echo bob' });
    t.core.receive(bob);
    await t.releaseAll();
    await t.core.idle();
    expect(t.entry(bob.id)?.phase).toBe('replied');
    expect(t.to('group:other')).toEqual(['done echo bob']);
  });
});

describe('a message that outlived its session is not run (and does not make it again)', () => {
  const web = { chat: 'p/alice/s1', tenant: 'web:alice', sender: 'web:alice', session: 's1' };

  it('deleted while the message waited in its lane: it ends failed with plain words, the session stays gone', async () => {
    const t = setup();
    t.sessions.add('s1');
    t.core.receive(t.message({ ...web, text: 'echo first' }));
    const second = t.message({ ...web, text: 'echo second' });
    t.core.receive(second);
    await eventually(() => expect(t.ran).toEqual(['echo first']));
    t.sessions.delete('s1'); // the person deleted the conversation
    t.endRuns();
    await until(() => t.entry(second.id)?.phase === 'failed', 'the second message to end');
    const ran = [...t.ran];
    await t.releaseAll();
    await t.core.idle();
    expect(ran).toEqual(['echo first']);
    expect(t.sessions.has('s1')).toBe(false);
    expect(t.to(web.chat).at(-1)).toBe('berth: that conversation was deleted; your message "echo second" was not run.');
    expect(t.entry(second.id)).toMatchObject({ phase: 'failed', reason: 'its session was deleted before it ran' });
  });

  it('deleted while its run waited for admission: the run does not start', async () => {
    const t = setup();
    t.sessions.add('s1');
    t.holdAdmission();
    const m = t.message({ ...web, text: 'echo waits' });
    t.core.receive(m);
    await until(() => t.waitingAdmission() === 1, 'the run to wait for admission');
    t.sessions.delete('s1');
    t.admit();
    await until(() => t.entry(m.id)?.phase === 'failed', 'the message to end');
    const ran = [...t.ran];
    await t.releaseAll();
    await t.core.idle();
    expect(ran).toEqual([]);
    expect(t.sessions.has('s1')).toBe(false);
    expect(t.to(web.chat).at(-1)).toBe('berth: that conversation was deleted; your message "echo waits" was not run.');
    expect(t.entry(m.id)).toMatchObject({ phase: 'failed', reason: 'its session was deleted before it ran' });
  });
});

describe('a message whose sender was logged out while it waited is not run', () => {
  it('stillAllowed is asked when its turn comes: false ends it failed, with a reply', async () => {
    let loggedIn = true;
    const t = setup({ stillAllowed: () => loggedIn });
    t.sessions.add('s1');
    const web = { chat: 'p/alice/s1', tenant: 'web:alice', sender: 'web:alice', session: 's1' };
    t.core.receive(t.message({ ...web, text: 'echo first' }));
    const second = t.message({ ...web, text: 'echo second' });
    t.core.receive(second);
    await eventually(() => expect(t.ran).toEqual(['echo first']));
    loggedIn = false;
    t.endRuns();
    await until(() => t.entry(second.id)?.phase === 'failed', 'the second message to end');
    const ran = [...t.ran];
    await t.releaseAll();
    await t.core.idle();
    expect(ran).toEqual(['echo first']);
    expect(t.to(web.chat).at(-1)).toBe('berth: you were logged out before your message "echo second" ran; it was not run.');
    expect(t.entry(second.id)).toMatchObject({ phase: 'failed', reason: 'its sender was logged out before it ran' });
  });
});

describe('one event the core cannot take loses nothing behind it', () => {
  it('sse reader: a handler that throws leaves no part of its event in the next one', () => {
    const events: string[] = [];
    const reader = createSseReader({
      maxEventBytes: 100,
      onEvent: (d) => {
        if (d === 'bad') throw new Error('inbox lock timed out');
        events.push(d);
      },
      onOversized: () => undefined,
    });
    expect(() => reader.push(Buffer.from('data:bad\n\n'))).toThrow();
    reader.push(Buffer.from('data:good\n\n'));
    expect(events).toEqual(['good']);
  });

  it('signal: onMessage throwing for one event of a chunk still delivers the rest of the chunk, and logs no text', async () => {
    const envelope = (uuid: string, text: string) =>
      `event:receive\ndata:${JSON.stringify({ envelope: { sourceUuid: uuid, timestamp: 1, dataMessage: { timestamp: 1, message: text } } })}\n\n`;
    const a = '00000000-0000-4000-8000-00000000000a';
    const b = '00000000-0000-4000-8000-00000000000b';
    const c = '00000000-0000-4000-8000-00000000000c';
    let connections = 0;
    const server = http.createServer((req, res) => {
      if (!req.url?.startsWith('/api/v1/events')) return void res.writeHead(404).end();
      connections++;
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      if (connections === 1) res.write(envelope(a, 'secret-a') + envelope(b, 'secret-b') + envelope(c, 'secret-c')); // one chunk
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const logs: string[] = [];
    const got: string[] = [];
    const bridge = createSignalBridge({
      url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
      account: '+10000000000',
      logger: pino({ level: 'info' }, { write: (line: string) => void logs.push(line) }),
      backoffMs: { min: 10, max: 20 },
      onMessage: (m) => {
        if (m.sender === `signal:${a}`) throw new BerthError('BUSY', 'the inbox is locked');
        got.push(m.text);
      },
    });
    try {
      bridge.start();
      await until(() => got.length >= 2, 'two messages taken');
      expect(got).toEqual(['secret-b', 'secret-c']);
      expect(connections).toBe(1); // not a dropped connection either
      expect(logs.some((l) => l.includes(`signal:${a}`) && /could not take/.test(l))).toBe(true);
      expect(logs.join('\n')).not.toContain('secret-');
    } finally {
      await bridge.stop();
      server.closeAllConnections();
      server.close();
    }
  });
});
