import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import type { ChannelMessage } from '../../src/channels/contract.js';
import { createWebhookBridge, WebhookBridgeSchema } from '../../src/channels/webhook.js';
import { webhookSignature } from '../../src/channels/webhook-signing.js';
import { SYNC_NOTICES } from '../../src/channels/webhook-sync.js';

/**
 * A sync webhook's answer carries berth's notices about the message (refused files, what a voice
 * note said, the agent's files' links, which come after the answer): the request is answered
 * when the message has ended. A request that stops waiting before its answer leaves its notices
 * to the callback, as the answer; notices past a sync answer's bound go there too.
 */
const SECRET = 'webhook-sync-secret-0123456789abcdef01';
const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});

function setup() {
  const dir = fs.mkdtempSync(join(os.tmpdir(), 'berth-hook-sync-'));
  dirs.push(dir);
  const taken: ChannelMessage[] = [];
  const posted: Array<Record<string, unknown>> = [];
  const config = WebhookBridgeSchema.parse({
    hooks: { alone: { secret: SECRET }, backed: { secret: SECRET, callback_url: 'http://127.0.0.1:9/answers' } },
  });
  const bridge = createWebhookBridge({
    config,
    dir,
    logger: pino({ level: 'silent' }),
    take: (m) => (taken.push(m), 'accepted'),
    postOut: async (_url, body) => (posted.push(JSON.parse(body) as Record<string, unknown>), { status: 204 }),
  });
  const post = (name: string, id: string, signal?: AbortSignal) => {
    const raw = JSON.stringify({ id, user: 'ci-bot', text: 'plot it' });
    const ts = String(Math.floor(Date.now() / 1000));
    return bridge.http!(
      new Request(`http://berth/hooks/${name}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-berth-timestamp': ts, 'x-berth-signature': webhookSignature(SECRET, ts, raw) },
        body: raw,
        ...(signal ? { signal } : {}),
      }),
      name,
    );
  };
  /** The message as the core has it, once taken. */
  const message = async (n: number) => {
    while (taken.length < n) await new Promise((r) => setImmediate(r));
    return taken[n - 1]!;
  };
  return { bridge, post, message, posted };
}

describe('webhook: a sync answer and its notices', () => {
  it('without a callback_url: the notices before and after the answer are in the answer, which waits for the message to end', async () => {
    const { bridge, post, message, posted } = setup();
    const res = post('alone', 'm1');
    const m = await message(1);
    await bridge.sendPlain!(m.chat, 'berth: a file was not saved (tool.zip: this kind of file is not taken here).', { answerTo: m.id });
    bridge.answered!(m.id, m.chat, 'done');
    await bridge.sendPlain!(
      m.chat,
      'berth: the agent sent a file to open at its link:\nchart.png (1 KB): /chat/api/runs/r1/files/chart.png',
      {
        answerTo: m.id,
      },
    );
    // Not answered before the message has ended: the links come after the answer.
    let settled = false;
    void res.then(() => (settled = true));
    await new Promise((r) => setImmediate(r));
    expect(settled).toBe(false);
    bridge.finished!(m.id, m.chat);
    const got = await res;
    expect(got.status).toBe(200);
    expect(await got.json()).toEqual({
      id: 'm1',
      status: 'answered',
      reply: 'done',
      notices: [
        'berth: a file was not saved (tool.zip: this kind of file is not taken here).',
        'berth: the agent sent a file to open at its link:\nchart.png (1 KB): /chat/api/runs/r1/files/chart.png',
      ],
    });
    expect(posted).toEqual([]);
  });

  it('an answer without notices has an empty list', async () => {
    const { bridge, post, message } = setup();
    const res = post('alone', 'm2');
    const m = await message(1);
    bridge.answered!(m.id, m.chat, 'ok');
    bridge.finished!(m.id, m.chat);
    expect(await (await res).json()).toEqual({ id: 'm2', status: 'answered', reply: 'ok', notices: [] });
  });

  it('a request that stops waiting before its answer: 202, and its notices and later answer go to the callback', async () => {
    const { bridge, post, message, posted } = setup();
    const caller = new AbortController();
    const res = post('backed', 'm3', caller.signal);
    const m = await message(1);
    await bridge.sendPlain!(m.chat, 'berth: heard: “plot it”', { answerTo: m.id });
    caller.abort();
    expect((await res).status).toBe(202);
    await bridge.sendPlain!(m.chat, 'berth: the agent sent a file …', { answerTo: m.id });
    bridge.answered!(m.id, m.chat, 'late');
    await new Promise((r) => setImmediate(r));
    expect(posted).toEqual([
      { id: 'm3', user: 'ci-bot', notice: 'berth: heard: “plot it”' },
      { id: 'm3', user: 'ci-bot', notice: 'berth: the agent sent a file …' },
      { id: 'm3', user: 'ci-bot', reply: 'late' },
    ]);
  });

  it(`past ${SYNC_NOTICES.count} notices the rest go to the callback, none dropped`, async () => {
    const { bridge, post, message, posted } = setup();
    const res = post('backed', 'm4');
    const m = await message(1);
    for (let i = 0; i <= SYNC_NOTICES.count; i++) await bridge.sendPlain!(m.chat, `notice ${i}`, { answerTo: m.id });
    bridge.answered!(m.id, m.chat, 'done');
    bridge.finished!(m.id, m.chat);
    const body = (await (await res).json()) as { notices: string[] };
    expect(body.notices).toEqual(Array.from({ length: SYNC_NOTICES.count }, (_, i) => `notice ${i}`));
    expect(posted).toEqual([{ id: 'm4', user: 'ci-bot', notice: `notice ${SYNC_NOTICES.count}` }]);
  });
});
