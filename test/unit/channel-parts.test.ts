import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import type { ChannelTransport } from '../../src/channels/contract.js';
import { createSlackBridge, SlackBridgeSchema } from '../../src/channels/slack.js';
import { createTelegramBridge, TelegramBridgeSchema } from '../../src/channels/telegram.js';

/**
 * Telegram and Slack send a long reply as several messages. Against a service that takes part 1
 * and fails part 2 once (a 500): the failed send says one part went through, and the next send,
 * told to start there, posts parts 2 and 3 only, so the chat shows each part once.
 */
let closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of closers.splice(0)) await c();
});

/** A service answering every send ok but the `failing`th (counted from 1) with HTTP 500; the texts it took, in order. */
async function scriptedService(failing: number, ok: () => unknown, failed: () => unknown) {
  const took: string[] = [];
  let sends = 0;
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      const send = /\/(sendMessage|chat\.postMessage)$/.test(req.url ?? '');
      const fail = send && ++sends === failing;
      if (send && !fail) took.push(String((JSON.parse(body) as { text: string }).text));
      res.writeHead(fail ? 500 : 200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(fail ? failed() : ok()));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  closers.push(() => new Promise((r) => server.close(() => r())));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, took };
}

const ctx = <C>(config: C) => ({
  config,
  logger: pino({ level: 'silent' }),
  dir: '/nonexistent',
  take: () => 'accepted' as const,
  postOut: async () => ({ status: 200 }),
});

const channels: Array<{ name: string; limit: number; start: () => Promise<{ transport: ChannelTransport; took: string[] }> }> = [
  {
    name: 'telegram',
    limit: 4096,
    async start() {
      const s = await scriptedService(
        2,
        () => ({ ok: true, result: { message_id: 1 } }),
        () => ({ ok: false, error_code: 500, description: 'Internal Server Error' }),
      );
      return { transport: createTelegramBridge(ctx(TelegramBridgeSchema.parse({ token: '1:x', api_url: s.url }))), took: s.took };
    },
  },
  {
    name: 'slack',
    limit: 3900,
    async start() {
      const s = await scriptedService(
        2,
        () => ({ ok: true, ts: '1.0' }),
        () => ({ ok: false, error: 'internal_error' }),
      );
      return {
        transport: createSlackBridge(ctx(SlackBridgeSchema.parse({ bot_token: 'xoxb-x', signing_secret: 's', api_url: s.url }))),
        took: s.took,
      };
    },
  },
];

describe.each(channels)('$name: a reply in parts goes on where it stopped', ({ limit, start }) => {
  it('part 2 fails: the error says 1 part went through; the next send from part 2 sends parts 2 and 3 once', async () => {
    const { transport, took } = await start();
    const parts = ['a'.repeat(limit - 100), 'b'.repeat(limit - 100), 'c'.repeat(limit - 100)];
    const text = parts.join('\n');
    const err = await transport.send('42', text).then(
      () => undefined,
      (e: unknown) => e as { partsSent?: number; status?: number },
    );
    expect(err).toMatchObject({ partsSent: 1, status: 500 });
    await transport.send('42', text, { fromPart: err!.partsSent });
    // Each character of the reply arrives once, in order (a part sent twice would show twice).
    expect(took).toHaveLength(3);
    expect(took.join('').replace(/\n/g, '')).toBe(parts.join(''));
  });
});
