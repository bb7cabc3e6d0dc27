import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listenHttp, type HttpSurface } from '../../src/cli/serve.js';
import { HOOKS_IN_FLIGHT_MAX } from '../../src/bridges/start.js';
import { webhookSignature } from '../../src/channels/webhook-signing.js';
import { testHome, type TestHome } from '../helpers.js';
import { until } from '../helpers/until.js';

/**
 * Signed webhooks (issue 27): POST /hooks/<name> on a real berth serve, signed with HMAC-SHA256
 * over timestamp + body, answered in the request or by a signed POST to a callback on the
 * egress rules. Every refusal has its code and the field at fault; nothing unsigned, stale or
 * malformed is journaled or run.
 */
const TOKEN = 'webhook-admin-token-0123456789abcdef';
const SYNC_SECRET = 'sync-secret-0123456789abcdef0123456789';
const CB_SECRET = 'callback-secret-0123456789abcdef01234567';
const quiet = { out: () => undefined, err: () => undefined };
let h: TestHome;
let server: HttpSurface;
let callbacks: Array<{ headers: http.IncomingHttpHeaders; body: string }>;
let receiver: http.Server;
let receiverPort: number;

const post = async (
  name: string,
  body: unknown,
  opts: { secret?: string; timestamp?: number; raw?: string; headers?: Record<string, string> } = {},
) => {
  const raw = opts.raw ?? JSON.stringify(body);
  const timestamp = String(opts.timestamp ?? Math.floor(Date.now() / 1000));
  const res = await fetch(`${server.url}/hooks/${name}`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'x-berth-timestamp': timestamp,
      'x-berth-signature': webhookSignature(opts.secret ?? SYNC_SECRET, timestamp, raw),
      ...opts.headers,
    },
    body: raw,
  });
  return { status: res.status, body: (await res.json().catch(() => undefined)) as Record<string, any> };
};

const inboxIds = () =>
  server.bridges
    .channel('webhook')!
    .inbox.all()
    .map((e) => e.id);

beforeAll(async () => {
  callbacks = [];
  receiver = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      callbacks.push({ headers: req.headers, body });
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
  receiverPort = (receiver.address() as AddressInfo).port;
  h = testHome({
    config: [
      'bridges:',
      '  webhook:',
      '    hooks:',
      '      ci:',
      `        secret: ${SYNC_SECRET}`,
      '        reply_timeout_seconds: 30',
      '      tickets:',
      `        secret: ${CB_SECRET}`,
      '        reply: callback',
      `        callback_url: http://127.0.0.1:${receiverPort}/answers`,
      '      broken:',
      '        secret_file: /nonexistent/berth-test/hook.key',
      '      nowhere:',
      `        secret: ${CB_SECRET}`,
      '        reply: callback',
      '        callback_url: http://127.0.0.1:9/answers',
      'routes:',
      '  webhook: { project: hooks }',
      'egress:',
      `  private_hosts: ['127.0.0.1:${receiverPort}']`,
      '',
    ].join('\n'),
  });
  h.create({ name: 'hooks', workspace_isolation: true });
  server = await listenHttp(h.berth, { host: '127.0.0.1', port: 0, token: TOKEN }, quiet);
}, 60_000);
afterAll(async () => {
  await server?.close();
  await h?.[Symbol.asyncDispose]();
  receiver?.close();
});

describe('signed webhooks', () => {
  it('a signed message runs as its user and the answer is the response; the same id again is a duplicate, not a second run', async () => {
    const first = await post('ci', { id: 'build-1', user: 'ci-bot', text: 'echo built >> log.txt; cat log.txt' });
    expect(first).toEqual({ status: 200, body: { id: 'build-1', status: 'answered', reply: 'built', notices: [] } });
    const again = await post('ci', { id: 'build-1', user: 'ci-bot', text: 'echo built >> log.txt; cat log.txt' });
    expect(again).toEqual({ status: 200, body: { id: 'build-1', status: 'duplicate' } });
    // The user's workspace is its own and continues: a second message sees the first one's file, once.
    expect((await post('ci', { id: 'build-2', user: 'ci-bot', text: 'cat log.txt | wc -l' })).body.reply).toBe('1');
    // Another user is another tenant: nothing of ci-bot's is there.
    expect((await post('ci', { id: 'other-1', user: 'someone-else', text: 'ls log.txt 2>&1 || echo none' })).body.reply).toMatch(
      /none|No such file/,
    );
  });

  it('refuses unsigned, wrongly signed, stale and malformed requests with a code and the field, and journals none of them', async () => {
    const before = inboxIds().length;
    const body = { id: 'x-1', user: 'mallory', text: 'echo pwned' };
    const wrong = await post('ci', body, { secret: 'not-the-secret-0123456789abcdef0123' });
    expect(wrong.status).toBe(401);
    expect(wrong.body.error).toMatchObject({ code: 'UNAUTHORIZED', message: expect.stringContaining('X-Berth-Signature') });
    const unsigned = await fetch(`${server.url}/hooks/ci`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    expect(unsigned.status).toBe(401);
    // A captured request replayed later: its timestamp is outside the window (the signature is right).
    const stale = await post('ci', body, { timestamp: Math.floor(Date.now() / 1000) - 3600 });
    expect(stale.status).toBe(401);
    expect(stale.body.error.message).toContain('replay');
    // Signed with another hook's secret: each hook has its own.
    expect((await post('ci', body, { secret: CB_SECRET })).status).toBe(401);
    const bad = await post('ci', { id: 'x-2', user: 'mallory' });
    expect(bad.status).toBe(400);
    expect(bad.body.error.issues).toEqual([{ field: 'text', reason: expect.any(String) }]);
    const extra = await post('ci', { ...body, admin: true });
    expect(extra.status).toBe(400);
    const notJson = await post('ci', undefined, { raw: '{"id": ' });
    expect(notJson).toMatchObject({ status: 400, body: { error: { code: 'CONFIG_INVALID', issues: [{ field: 'body' }] } } });
    const huge = await post('ci', { id: 'x-3', user: 'mallory', text: 'a'.repeat(300 * 1024) });
    expect(huge.status).toBe(413);
    expect((await post('nope', body)).status).toBe(404);
    expect((await fetch(`${server.url}/hooks/ci`)).status).toBe(405);
    expect(inboxIds().length).toBe(before);
    // Refusals at /hooks are counted under their own surface, as strangers' (never as the admin's).
    const metrics = await (await fetch(`${server.url}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } })).text();
    expect(Number(/berth_auth_failures_total\{surface="hooks"\} (\d+)/.exec(metrics)?.[1] ?? 0)).toBeGreaterThanOrEqual(4);
  });

  it('the same request sent again while the first waits takes nothing from it: the first gets the answer, the copy "duplicate"', async () => {
    const body = JSON.stringify({ id: 'slow-1', user: 'ci-bot', text: 'sleep 1; echo slow answer' });
    const ts = String(Math.floor(Date.now() / 1000));
    const send = () =>
      fetch(`${server.url}/hooks/ci`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'x-berth-timestamp': ts,
          'x-berth-signature': webhookSignature(SYNC_SECRET, ts, body),
        },
        body,
      }).then(async (r) => ({ status: r.status, body: await r.json() }));
    const first = send();
    // The copy comes once the first is journaled (and waits for its answer).
    await until(
      () =>
        server.bridges
          .channel('webhook')!
          .inbox.all()
          .some((e) => e.text === 'sleep 1; echo slow answer'),
      'the first to be journaled',
    );
    expect(await send()).toEqual({ status: 200, body: { id: 'slow-1', status: 'duplicate' } });
    expect(await first).toEqual({ status: 200, body: { id: 'slow-1', status: 'answered', reply: 'slow answer', notices: [] } });
    // Another user's message with the same id is theirs, not a duplicate.
    expect((await post('ci', { id: 'slow-1', user: 'someone-else', text: 'echo mine' })).body).toEqual({
      id: 'slow-1',
      status: 'answered',
      reply: 'mine',
      notices: [],
    });
  });

  it('a hook whose secret file cannot be read answers 500 without saying where it is', async () => {
    const res = await post('broken', { id: 'b-1', user: 'u', text: 'echo x' });
    expect(res.status).toBe(500);
    expect(JSON.stringify(res.body)).not.toContain('/nonexistent');
  });

  it(`bodies sent slowly before their signature is checked hold none of the ${HOOKS_IN_FLIGHT_MAX} slots of signed requests: a signed one beside ${HOOKS_IN_FLIGHT_MAX + 16} of them is answered`, async () => {
    const { port } = new URL(server.url);
    // Strangers: a current timestamp, a wrong signature, a large body sent a byte at a time.
    const held = await Promise.all(
      Array.from(
        { length: HOOKS_IN_FLIGHT_MAX + 16 },
        () =>
          new Promise<net.Socket>((resolve) => {
            const socket = net.connect(Number(port), '127.0.0.1', () => {
              socket.write(
                `POST /hooks/ci HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\nX-Berth-Timestamp: ${Math.floor(Date.now() / 1000)}\r\nX-Berth-Signature: v1=${'0'.repeat(64)}\r\n\r\n{"id":`,
              );
              resolve(socket);
            });
            socket.on('error', () => undefined);
          }),
      ),
    );
    const answers: string[] = [];
    const ended = new Set<net.Socket>();
    for (const s of held) {
      s.on('data', (d) => (answers.push(d.toString('latin1').slice(0, 12)), ended.add(s)));
      s.on('close', () => ended.add(s));
    }
    try {
      const signed = await post('ci', { id: 'beside-strangers', user: 'u', text: 'echo answered' });
      expect(signed).toEqual({ status: 200, body: { id: 'beside-strangers', status: 'answered', reply: 'answered', notices: [] } });
      // The strangers are cut (to make room, or for their pace), never answered with a success.
      await until(() => ended.size === held.length, 'every stranger to be cut', 40_000);
      expect(answers.filter((a) => !a.startsWith('HTTP/1.1 4'))).toEqual([]);
    } finally {
      for (const s of held) s.destroy();
    }
  });

  it('reply: callback answers 202 at once and POSTs the answer, signed, to the callback URL', async () => {
    const res = await post(
      'tickets',
      { id: 't-7', user: 'helpdesk', conversation: 'ticket-7', text: 'echo ticket seven' },
      { secret: CB_SECRET },
    );
    expect(res).toEqual({ status: 202, body: { id: 't-7', status: 'accepted' } });
    const got = await until(() => callbacks[0], 'the callback');
    expect(JSON.parse(got.body)).toEqual({ id: 't-7', user: 'helpdesk', conversation: 'ticket-7', reply: 'ticket seven' });
    const ts = String(got.headers['x-berth-timestamp']);
    expect(got.headers['x-berth-signature']).toBe(webhookSignature(CB_SECRET, ts, got.body));
  });

  it('a callback to a private address berth.yaml does not allow is never made (the egress rules)', async () => {
    const seen = callbacks.length;
    const res = await post('nowhere', { id: 'n-1', user: 'u', text: 'echo unseen' }, { secret: CB_SECRET });
    expect(res.status).toBe(202);
    const entry = async () =>
      server.bridges
        .channel('webhook')!
        .inbox.all()
        .find((e) => e.text === 'echo unseen');
    await until(async () => (await entry())?.phase === 'replied', 'the message to be answered');
    expect(callbacks.length).toBe(seen);
  });

  it('a conversation is a session of its own: /new in one leaves the other alone', async () => {
    const a1 = await post('ci', { id: 'c-1', user: 'carol', conversation: 'a', text: '/whoami' });
    const b1 = await post('ci', { id: 'c-2', user: 'carol', conversation: 'b', text: '/whoami' });
    expect(a1.body.reply).toContain('hook:ci:carol');
    const session = (reply: string) => /conversation[^\n]*?(chat-[0-9a-f]+-\d+)/.exec(reply)?.[1];
    expect(session(a1.body.reply)).toBeDefined();
    expect(session(a1.body.reply)).not.toBe(session(b1.body.reply));
  });
});
