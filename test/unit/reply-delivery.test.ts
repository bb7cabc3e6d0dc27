import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import type { ChatTransport } from '../../src/bridges/chat-transport.js';
import { createBridgeCore } from '../../src/bridges/core.js';
import { ChannelApiError, type ReplyFile } from '../../src/channels/contract.js';
import { BerthConfigSchema } from '../../src/config/berth-config-schema.js';
import { createMetrics } from '../../src/base/metrics.js';
import { openBridgeState } from '../../src/store/bridge-state.js';
import { openInbox } from '../../src/store/inbox.js';
import { fakeCoreAdmin, runViewOf } from '../fakes/core-admin.js';
import { until } from '../helpers/until.js';

/**
 * The core's deliver step against a transport that fails the way chat services do: 400 for
 * markup it will not take, 500 once, 500 always, 429 with a retry-after. The backoff's waits are
 * recorded, not slept; the inbox is a real journal in a temporary directory.
 */
const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});

type Way = 'send' | 'plain' | 'file';
/** How a way fails: each call takes the next entry (the last repeats); ok: it goes through. */
type Script = Array<'ok' | 400 | 500 | 429>;

function setup(scripts: Partial<Record<Way, Script>>, opts: { can?: Way[]; notice?: Script } = {}) {
  const dir = fs.mkdtempSync(join(os.tmpdir(), 'berth-deliver-'));
  dirs.push(dir);
  const can = new Set(opts.can ?? ['send', 'plain', 'file']);
  const got: Array<{ way: Way; text: string; name?: string }> = [];
  const calls: Way[] = [];
  const counts: Record<Way, number> = { send: 0, plain: 0, file: 0 };
  const notices = [...(opts.notice ?? ['ok'])];
  const attempt = async (way: Way, text: string, name?: string) => {
    calls.push(way);
    // A short text is the notice (it goes the plainest way there is): its own script.
    const isNotice = text.startsWith('berth: the answer');
    const script = isNotice ? notices : (scripts[way] ?? ['ok']);
    const outcome = isNotice
      ? script.length > 1
        ? script.shift()!
        : script[0]!
      : (script[Math.min(counts[way]++, script.length - 1)] ?? 'ok');
    if (outcome === 400) throw new ChannelApiError("sendMessage: Bad Request: can't parse entities", 400);
    if (outcome === 500) throw new ChannelApiError('M_UNKNOWN: Internal server error', 500);
    if (outcome === 429) throw new ChannelApiError('sendMessage: rate limited', 429, 7);
    got.push({ way, text, ...(name ? { name } : {}) });
  };
  const transport: ChatTransport = {
    name: 'test',
    send: (_chat, text) => attempt('send', text),
    ...(can.has('plain') ? { sendPlain: (_chat: string, text: string) => attempt('plain', text) } : {}),
    ...(can.has('file')
      ? { sendFile: (_chat: string, file: ReplyFile) => attempt('file', Buffer.from(file.data).toString(), file.name) }
      : {}),
    typing: async () => undefined,
    acknowledge: async () => undefined,
    projectOf: () => 'p',
  };
  const admin = fakeCoreAdmin({
    async runMessage(_project, request) {
      await request.whenReady?.();
      return runViewOf({ stdout: `the *answer* to ${request.message}` });
    },
  });
  const inbox = openInbox(dir, 'test');
  const lines: Array<Record<string, unknown>> = [];
  const logger = pino({ level: 'info' }, new Writable({ write: (chunk, _enc, done) => (lines.push(JSON.parse(String(chunk))), done()) }));
  const metrics = createMetrics({ processMetrics: false });
  const waits: number[] = [];
  let clock = 0;
  const core = createBridgeCore({
    transport,
    inbox,
    state: openBridgeState(dir, 'test'),
    admin,
    config: () => BerthConfigSchema.parse({}),
    logger,
    senderAllowed: () => true,
    metrics,
    delivery: { sleep: async (ms) => void (waits.push(ms), (clock += ms)), now: () => clock },
  });
  const ask = async (text = 'q') => {
    core.receive({ id: 'm1', chat: 'c', tenant: 'test:a', sender: 'test:a', text });
    await until(() => inbox.open().length === 0, 'the message to end');
    await core.idle();
    return inbox.all().find((e) => e.id === 'm1')!;
  };
  const undelivered = async () => (await metrics.render()).body.split('\n').find((l) => l.startsWith('berth_undelivered_replies_total{'));
  return { core, inbox, got, calls, waits, lines, ask, undelivered, transport };
}

describe('a reply always arrives', () => {
  it('markup the service refuses (400): sent again without markup at once, never the same send twice', async () => {
    const t = setup({ send: [400] });
    const entry = await t.ask();
    expect(t.calls).toEqual(['send', 'plain']);
    expect(t.got).toEqual([{ way: 'plain', text: 'the *answer* to q' }]);
    expect(t.waits).toEqual([]);
    expect(entry.phase).toBe('replied');
  });

  it('a 500 once: the send is tried again after a backoff, and the reply arrives once', async () => {
    const t = setup({ send: [500, 'ok'] });
    const entry = await t.ask();
    expect(t.calls).toEqual(['send', 'send']);
    expect(t.got).toEqual([{ way: 'send', text: 'the *answer* to q' }]);
    expect(t.waits).toEqual([2000]);
    expect(entry.phase).toBe('replied');
  });

  it('a rate limit the channel could not wait out: the core waits what the service asked', async () => {
    const t = setup({ send: [429, 'ok'] });
    await t.ask();
    expect(t.waits).toEqual([7000]);
    expect(t.got.map((g) => g.way)).toEqual(['send']);
  });

  it('500 always as a message: backoff, plain, then the whole reply as a file', async () => {
    const t = setup({ send: [500], plain: [500] });
    const entry = await t.ask();
    expect(t.calls).toEqual(['send', 'send', 'send', 'plain', 'file']);
    expect(t.waits).toEqual([2000, 4000]);
    expect(t.got).toEqual([{ way: 'file', text: 'the *answer* to q', name: 'reply.txt' }]);
    expect(entry.phase).toBe('replied');
    expect(await t.undelivered()).toBeUndefined();
  });

  it('nothing goes through but a short notice: the person is told, the journal says failed, the operator gets a log line and a metric', async () => {
    const t = setup({ send: [400], plain: [400], file: [500] });
    const entry = await t.ask();
    expect(t.calls).toEqual(['send', 'plain', 'file', 'plain']);
    expect(t.got).toHaveLength(1);
    expect(t.got[0]!.text).toMatch(
      /^berth: the answer to your message could not be delivered here \(the chat service refused it\)\. The operator can find it as message m1\.$/,
    );
    expect(entry.phase).toBe('failed');
    expect(entry.reason).toMatch(/the reply could not be delivered \(send: HTTP 400 .*; file: HTTP 500 M_UNKNOWN/);
    expect(t.lines.some((l) => l.msg === 'a reply could not be delivered' && l.id === 'm1' && l.level === 50)).toBe(true);
    expect(await t.undelivered()).toBe('berth_undelivered_replies_total{channel="test"} 1');
  });

  it('500 always, the notice too: still never silent for the operator (journal, log, metric), and bounded', async () => {
    const t = setup({ send: [500], plain: [500], file: [500] }, { notice: [500] });
    const entry = await t.ask();
    expect(t.calls).toEqual(['send', 'send', 'send', 'plain', 'file', 'plain']);
    expect(t.got).toEqual([]);
    expect(entry.phase).toBe('failed');
    expect(await t.undelivered()).toBe('berth_undelivered_replies_total{channel="test"} 1');
  });

  it('a transport with only send (web chat): backoff, then the notice through send', async () => {
    const t = setup({ send: [500, 500, 500] }, { can: ['send'] });
    const entry = await t.ask();
    expect(t.calls).toEqual(['send', 'send', 'send', 'send']);
    expect(t.got.map((g) => g.text)).toEqual([
      expect.stringMatching(/^berth: the answer to your message could not be delivered here \(the chat service failed\)/),
    ]);
    expect(entry.phase).toBe('failed');
  });
});

describe('a reply after a crash mid-delivery', () => {
  it('goes on from the step the journal holds: what an earlier step already tried is not sent again', async () => {
    const t = setup({});
    // A berth that reached the file step and died before the journal said replied.
    t.inbox.receive({ id: 'm9', chat: 'c', sender: 'test:a', tenant: 'test:a', text: 'q', owner: 'gone' });
    t.inbox.mark('m9', 'started');
    t.inbox.mark('m9', 'answered', { reply: 'the long answer' });
    t.inbox.mark('m9', 'answered', { delivery: 'file' });
    t.core.recover();
    await t.core.idle();
    expect(t.got).toEqual([{ way: 'file', text: 'the long answer', name: 'reply.txt' }]);
    expect(t.inbox.all().find((e) => e.id === 'm9')?.phase).toBe('replied');
  });

  it('each fallback is journaled before it is tried', async () => {
    const t = setup({ send: [400], plain: [400] });
    await t.ask();
    const journal = fs
      .readFileSync(join(dirs.at(-1)!, 'test.jsonl'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { phase: string; delivery?: string });
    expect(journal.filter((e) => e.delivery).map((e) => e.delivery)).toEqual(['plain', 'file']);
  });
});
