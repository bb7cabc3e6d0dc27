import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import type { ChatTransport } from '../../src/bridges/chat-transport.js';
import { createBridgeCore } from '../../src/bridges/core.js';
import { ChannelApiError, type SendAbout } from '../../src/channels/contract.js';
import { BerthConfigSchema } from '../../src/config/berth-config-schema.js';
import { openBridgeState } from '../../src/store/bridge-state.js';
import { openInbox } from '../../src/store/inbox.js';
import { fakeCoreAdmin, runViewOf } from '../fakes/core-admin.js';
import { until } from '../helpers/until.js';

/**
 * A reply a channel sends in several parts, against a transport that takes some parts and fails
 * the next: the person sees each part exactly once, on a retry, on the plain step and after a
 * restart. The transport says how many parts went through as channels do (`partsSent` on its
 * error) and starts where it is told (`fromPart`). Waits are recorded, not slept.
 */
const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});

const REPLY = 'part one|part two|part three';

/** `fail`: the call that fails (1 is the first part ever tried, counting retries) and how. */
function setup(fail: Array<{ call: number; status: 400 | 500 }>) {
  const dir = fs.mkdtempSync(join(os.tmpdir(), 'berth-parts-'));
  dirs.push(dir);
  const seen: Array<{ way: 'send' | 'plain'; part: string }> = [];
  let calls = 0;
  const sendParts = async (way: 'send' | 'plain', text: string, about?: SendAbout & { fromPart?: number }) => {
    const parts = text.split('|');
    for (let i = about?.fromPart ?? 0; i < parts.length; i++) {
      const failure = fail.find((f) => f.call === calls + 1);
      calls++;
      if (failure) throw Object.assign(new ChannelApiError('sendMessage: failed', failure.status), { partsSent: i });
      seen.push({ way, part: parts[i]! });
    }
  };
  const transport: ChatTransport = {
    name: 'test',
    send: (_chat, text, about) => sendParts('send', text, about),
    sendPlain: (_chat, text, about) => sendParts('plain', text, about),
    typing: async () => undefined,
    acknowledge: async () => undefined,
    projectOf: () => 'p',
  };
  const admin = fakeCoreAdmin({
    async runMessage(_project, request) {
      await request.whenReady?.();
      return runViewOf({ stdout: REPLY });
    },
  });
  const inbox = openInbox(dir, 'test');
  const waits: number[] = [];
  const core = createBridgeCore({
    transport,
    inbox,
    state: openBridgeState(dir, 'test'),
    admin,
    config: () => BerthConfigSchema.parse({}),
    logger: pino({ level: 'silent' }),
    senderAllowed: () => true,
    delivery: { sleep: async (ms) => void waits.push(ms), now: () => 0 },
  });
  const ask = async () => {
    core.receive({ id: 'm1', chat: 'c', tenant: 'test:a', sender: 'test:a', text: 'q' });
    await until(() => inbox.open().length === 0, 'the message to end');
    await core.idle();
    return inbox.all().find((e) => e.id === 'm1')!;
  };
  const journal = () =>
    fs
      .readFileSync(join(dir, 'test.jsonl'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
  return { core, inbox, seen, waits, ask, journal };
}

describe('a reply in several parts', () => {
  it('part 2 fails once (500): the retry starts at part 2, and the person sees each part once', async () => {
    const t = setup([{ call: 2, status: 500 }]);
    const entry = await t.ask();
    expect(t.seen).toEqual([
      { way: 'send', part: 'part one' },
      { way: 'send', part: 'part two' },
      { way: 'send', part: 'part three' },
    ]);
    expect(t.waits).toEqual([2000]);
    expect(entry.phase).toBe('replied');
  });

  it('part 2 refused (400): the plain step starts at part 2, never part 1 again', async () => {
    const t = setup([{ call: 2, status: 400 }]);
    const entry = await t.ask();
    expect(t.seen).toEqual([
      { way: 'send', part: 'part one' },
      { way: 'plain', part: 'part two' },
      { way: 'plain', part: 'part three' },
    ]);
    expect(entry.phase).toBe('replied');
  });

  it('the parts that went through are journaled before the next try', async () => {
    const t = setup([
      { call: 2, status: 500 },
      { call: 4, status: 500 },
    ]);
    await t.ask();
    expect(
      t
        .journal()
        .filter((e) => e.sent !== undefined)
        .map((e) => [e.delivery, e.sent]),
    ).toEqual([
      ['send', 1],
      ['send', 2],
    ]);
    expect(t.seen.map((s) => s.part)).toEqual(['part one', 'part two', 'part three']);
  });

  it('after a restart: a berth that sent part 1 and died goes on from part 2', async () => {
    const t = setup([]);
    t.inbox.receive({ id: 'm9', chat: 'c', sender: 'test:a', tenant: 'test:a', text: 'q', owner: 'gone' });
    t.inbox.mark('m9', 'started');
    t.inbox.mark('m9', 'answered', { reply: REPLY });
    t.inbox.mark('m9', 'answered', { delivery: 'send', sent: 1 });
    t.core.recover();
    await t.core.idle();
    expect(t.seen).toEqual([
      { way: 'send', part: 'part two' },
      { way: 'send', part: 'part three' },
    ]);
    expect(t.inbox.all().find((e) => e.id === 'm9')?.phase).toBe('replied');
  });
});
