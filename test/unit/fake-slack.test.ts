/**
 * The Slack fake against Slack's documented wire protocols, with plain fetch, node:http (as the
 * app's Events API endpoint) and ws (as a Socket Mode client): Web API answers and errors, token
 * rules, rate limits, body bounds; url_verification, request signing, HTTP retries with their
 * headers; Socket Mode hello, envelopes, acks, redelivery and disconnect; the events the
 * injection helpers build; which way an event goes.
 */
import http from 'node:http';
import { createHmac } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import {
  startFakeSlack,
  slackSignature,
  type EventCallback,
  type FakeSlack,
  type FakeSlackOptions,
  type SocketEnvelopeFrame,
} from '../fakes/slack.js';

const ALICE = 'U0ALICE001';
const DM = 'D0ALICE001';
const GENERAL = 'C0GENERAL1';

let fakes: FakeSlack[] = [];
let cleanups: Array<() => Promise<void> | void> = [];

async function start(opts: FakeSlackOptions = {}): Promise<FakeSlack> {
  const f = await startFakeSlack({ ackTimeoutMs: 2_000, retryDelaysMs: [10, 10, 10], httpTimeoutMs: 2_000, ...opts });
  fakes.push(f);
  return f;
}

afterEach(async () => {
  for (const c of cleanups) await c();
  cleanups = [];
  await Promise.all(fakes.map((f) => f.close()));
  fakes = [];
});

interface ApiAnswer {
  status: number;
  headers: Headers;
  json: any;
}

async function call(
  f: FakeSlack,
  method: string,
  args: Record<string, unknown> = {},
  o: { token?: string | null; form?: boolean; contentType?: string } = {},
): Promise<ApiAnswer> {
  const token = o.token === undefined ? f.botToken : o.token;
  const headers: Record<string, string> = {};
  let body: string;
  if (o.form) {
    const form = new URLSearchParams();
    for (const [k, v] of Object.entries(args)) form.set(k, typeof v === 'string' ? v : JSON.stringify(v));
    if (token) form.set('token', token);
    body = form.toString();
    headers['Content-Type'] = 'application/x-www-form-urlencoded';
  } else {
    body = JSON.stringify(args);
    headers['Content-Type'] = o.contentType ?? 'application/json; charset=utf-8';
    if (token) headers.Authorization = `Bearer ${token}`;
  }
  const res = await fetch(`${f.apiUrl}${method}`, { method: 'POST', headers, body });
  const text = await res.text();
  return { status: res.status, headers: res.headers, json: text ? JSON.parse(text) : undefined };
}

// --- the app's side of the Events API: a plain node:http endpoint

interface AppRequest {
  headers: http.IncomingHttpHeaders;
  body: string;
}

interface App {
  url: string;
  requests: AppRequest[];
}

async function startApp(handle: (r: AppRequest, res: http.ServerResponse, n: number) => void): Promise<App> {
  const requests: AppRequest[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const r = { headers: req.headers, body: Buffer.concat(chunks).toString('utf8') };
      requests.push(r);
      handle(r, res, requests.length);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  cleanups.push(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/slack/events`, requests };
}

/** An app that checks Slack's signature and timestamp the way Slack tells apps to. */
function verifying(secret: string, then: (r: AppRequest, res: http.ServerResponse) => void) {
  return (r: AppRequest, res: http.ServerResponse): void => {
    const ts = String(r.headers['x-slack-request-timestamp'] ?? '');
    const sig = String(r.headers['x-slack-signature'] ?? '');
    const expected = `v0=${createHmac('sha256', secret).update(`v0:${ts}:${r.body}`).digest('hex')}`;
    if (!/^\d+$/.test(ts) || Math.abs(Date.now() / 1000 - Number(ts)) > 300 || sig !== expected) {
      res.writeHead(401).end();
      return;
    }
    then(r, res);
  };
}

// --- a Socket Mode client

interface Client {
  ws: WebSocket;
  frames: any[];
  closed: Promise<number>;
  envelopes(): SocketEnvelopeFrame[];
  ack(envelopeId: string, extra?: Record<string, unknown>): void;
}

async function connect(f: FakeSlack, opts: { autoAck?: boolean } = {}): Promise<Client> {
  const open = await call(f, 'apps.connections.open', {}, { token: f.appToken });
  expect(open.json.ok).toBe(true);
  const ws = new WebSocket(open.json.url as string);
  const frames: any[] = [];
  const closed = new Promise<number>((resolve) => ws.on('close', (code) => resolve(code)));
  ws.on('message', (data) => {
    const frame = JSON.parse(data.toString());
    frames.push(frame);
    if (opts.autoAck && frame.envelope_id) ws.send(JSON.stringify({ envelope_id: frame.envelope_id }));
  });
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('error', reject);
  });
  cleanups.push(() => ws.terminate());
  await f.waitFor(() => frames.length > 0);
  return {
    ws,
    frames,
    closed,
    envelopes: () => frames.filter((x) => x.type === 'events_api'),
    ack: (envelopeId, extra = {}) => ws.send(JSON.stringify({ envelope_id: envelopeId, ...extra })),
  };
}

describe('fake Slack: Web API', () => {
  it('auth.test answers the bot identity; token from the header or a form field', async () => {
    const f = await start({ teamId: 'T0TEAM0001', botUserId: 'U0BOT00001', botId: 'B0BOT00001' });
    const viaHeader = await call(f, 'auth.test');
    expect(viaHeader.status).toBe(200);
    expect(viaHeader.headers.get('content-type')).toBe('application/json; charset=utf-8');
    expect(viaHeader.json).toEqual({
      ok: true,
      url: 'https://berth-fake.slack.com/',
      team: 'Berth Fake Workspace',
      user: 'berth',
      team_id: 'T0TEAM0001',
      user_id: 'U0BOT00001',
      bot_id: 'B0BOT00001',
      is_enterprise_install: false,
    });
    const viaForm = await call(f, 'auth.test', {}, { form: true });
    expect(viaForm.json).toMatchObject({ ok: true, user_id: 'U0BOT00001' });
    expect(f.calls.map((c) => c.tokenFrom)).toEqual(['header', 'form']);
  });

  it('token errors: not_authed, invalid_auth, not_allowed_token_type; a JSON body token is not read', async () => {
    const f = await start();
    expect((await call(f, 'auth.test', {}, { token: null })).json).toEqual({ ok: false, error: 'not_authed' });
    expect((await call(f, 'auth.test', {}, { token: 'xoxb-nope' })).json).toEqual({ ok: false, error: 'invalid_auth' });
    expect((await call(f, 'auth.test', {}, { token: f.appToken })).json).toEqual({ ok: false, error: 'not_allowed_token_type' });
    expect((await call(f, 'apps.connections.open', {}, { token: f.botToken })).json).toEqual({
      ok: false,
      error: 'not_allowed_token_type',
    });
    expect((await call(f, 'chat.postMessage', { channel: GENERAL, text: 'x' }, { token: f.appToken })).json.error).toBe(
      'not_allowed_token_type',
    );
    const jsonToken = await call(f, 'auth.test', { token: f.botToken }, { token: null });
    expect(jsonToken.json).toEqual({ ok: false, error: 'not_authed' });
    expect(f.posted).toEqual([]); // refused before the method ran
  });

  it('unknown methods → 404 unknown_method; other paths 404; other HTTP methods 405', async () => {
    const f = await start();
    const r = await call(f, 'chat.postMessagez');
    expect(r.status).toBe(404);
    expect(r.json).toMatchObject({ ok: false, error: 'unknown_method' });
    expect((await fetch(`${f.url}/nope`)).status).toBe(404);
    expect((await fetch(`${f.apiUrl}auth.test`, { method: 'PUT' })).status).toBe(405);
  });

  it('chat.postMessage answers the message with a unique increasing ts and records it', async () => {
    const f = await start();
    const a = await call(f, 'chat.postMessage', { channel: GENERAL, text: 'hello *world*', mrkdwn: true });
    expect(a.json).toMatchObject({
      ok: true,
      channel: GENERAL,
      message: { type: 'message', text: 'hello *world*', user: f.botUserId, bot_id: f.botId, app_id: f.appId },
    });
    expect(a.json.ts).toMatch(/^\d{10}\.\d{6}$/);
    expect(a.json.message.ts).toBe(a.json.ts);
    expect(a.json.message).not.toHaveProperty('thread_ts');

    const b = await call(f, 'chat.postMessage', { channel: GENERAL, text: 'in thread', thread_ts: a.json.ts }, { form: true });
    expect(b.json.message).toMatchObject({ thread_ts: a.json.ts, parent_user_id: f.botUserId });
    const c = await call(f, 'chat.postMessage', { channel: GENERAL, text: 'again' });
    expect(Number(b.json.ts)).toBeGreaterThan(Number(a.json.ts));
    expect(Number(c.json.ts)).toBeGreaterThan(Number(b.json.ts));

    expect(f.posted.map((p) => [p.channel, p.text, p.thread_ts, p.ok])).toEqual([
      [GENERAL, 'hello *world*', undefined, true],
      [GENERAL, 'in thread', a.json.ts, true],
      [GENERAL, 'again', undefined, true],
    ]);
    expect(f.posted[0]!.mrkdwn).toBe(true);
    expect(f.repliesIn(GENERAL).map((p) => p.text)).toEqual(['hello *world*', 'in thread', 'again']);
    expect(f.repliesIn(GENERAL, a.json.ts).map((p) => p.text)).toEqual(['in thread']);
  });

  it('chat.postMessage: blocks as JSON or form text, a user id posts to the DM', async () => {
    const f = await start();
    const blocks = [{ type: 'section', text: { type: 'mrkdwn', text: '*hi*' } }];
    const json = await call(f, 'chat.postMessage', { channel: GENERAL, blocks });
    expect(json.json).toMatchObject({ ok: true, message: { blocks, text: '' } });
    const form = await call(f, 'chat.postMessage', { channel: GENERAL, blocks, text: 'fallback' }, { form: true });
    expect(form.json).toMatchObject({ ok: true, message: { blocks, text: 'fallback' } });
    expect((await call(f, 'chat.postMessage', { channel: GENERAL, blocks: '[not json' }, { form: true })).json.error).toBe(
      'invalid_blocks',
    );
    const dm = await call(f, 'chat.postMessage', { channel: ALICE, text: 'psst' });
    expect(dm.json.channel).toBe(DM);
    expect(f.repliesIn(ALICE)).toHaveLength(1);
    expect(f.repliesIn(DM)).toHaveLength(1);
  });

  it('chat.postMessage errors: no_text, msg_too_long past 40,000 characters, channel_not_found', async () => {
    const f = await start({ channels: { [GENERAL]: 'channel' } });
    expect((await call(f, 'chat.postMessage', { channel: GENERAL })).json).toEqual({ ok: false, error: 'no_text' });
    expect((await call(f, 'chat.postMessage', { channel: GENERAL, text: 'x'.repeat(40_000) })).json.ok).toBe(true);
    expect((await call(f, 'chat.postMessage', { channel: GENERAL, text: 'x'.repeat(40_001) })).json).toEqual({
      ok: false,
      error: 'msg_too_long',
    });
    expect((await call(f, 'chat.postMessage', { channel: 'C0UNKNOWN1', text: 'x' })).json.error).toBe('channel_not_found');
    expect((await call(f, 'chat.postMessage', { text: 'x' })).json.error).toBe('channel_not_found');
    expect((await call(f, 'chat.postMessage', { channel: GENERAL, text: 42 })).json.error).toBe('invalid_arguments');
    expect(f.posted.map((p) => p.error)).toEqual([
      'no_text',
      undefined,
      'msg_too_long',
      'channel_not_found',
      'channel_not_found',
      'invalid_arguments',
    ]);
    expect(f.repliesIn(GENERAL)).toHaveLength(1);

    const t = await start({ longText: 'truncate' });
    const long = await call(t, 'chat.postMessage', { channel: GENERAL, text: 'y'.repeat(40_010) });
    expect(long.json.message.text).toHaveLength(40_000);
  });

  it('body errors: invalid_json, json_not_object, invalid_post_type; missing_charset warning', async () => {
    const f = await start();
    const post = (body: string, contentType: string) =>
      fetch(`${f.apiUrl}chat.postMessage`, {
        method: 'POST',
        headers: { 'Content-Type': contentType, Authorization: `Bearer ${f.botToken}` },
        body,
      }).then((r) => r.json() as Promise<any>);
    expect(await post('{"channel":', 'application/json; charset=utf-8')).toMatchObject({ ok: false, error: 'invalid_json' });
    expect(await post('[1]', 'application/json; charset=utf-8')).toMatchObject({ ok: false, error: 'json_not_object' });
    expect(await post('hello', 'text/csv')).toMatchObject({ ok: false, error: 'invalid_post_type' });
    const warned = await post(JSON.stringify({ channel: GENERAL, text: 'x' }), 'application/json');
    expect(warned).toMatchObject({ ok: true, warning: 'missing_charset', response_metadata: { warnings: ['missing_charset'] } });
  });

  it('rateLimitNext: HTTP 429 with Retry-After, then normal again; failNext: ok:false', async () => {
    const f = await start();
    f.rateLimitNext('chat.postMessage', 7);
    const limited = await call(f, 'chat.postMessage', { channel: GENERAL, text: 'a' });
    expect(limited.status).toBe(429);
    expect(limited.headers.get('retry-after')).toBe('7');
    expect(limited.json).toEqual({ ok: false, error: 'ratelimited' });
    expect((await call(f, 'auth.test')).json.ok).toBe(true); // other methods unaffected
    expect((await call(f, 'chat.postMessage', { channel: GENERAL, text: 'b' })).status).toBe(200);

    f.failNext('chat.postMessage', 'not_in_channel', 2);
    expect((await call(f, 'chat.postMessage', { channel: GENERAL, text: 'c' })).json).toEqual({ ok: false, error: 'not_in_channel' });
    expect((await call(f, 'chat.postMessage', { channel: GENERAL, text: 'd' })).json.error).toBe('not_in_channel');
    expect((await call(f, 'chat.postMessage', { channel: GENERAL, text: 'e' })).json.ok).toBe(true);
    expect(f.posted.map((p) => `${p.text}:${p.ok ? 'ok' : p.error}`)).toEqual([
      'a:ratelimited',
      'b:ok',
      'c:not_in_channel',
      'd:not_in_channel',
      'e:ok',
    ]);
  });

  it('assistant.threads.setStatus records the status; missing fields → invalid_arguments', async () => {
    const f = await start();
    const ok = await call(f, 'assistant.threads.setStatus', { channel_id: DM, thread_ts: '1700000000.000100', status: 'is thinking…' });
    expect(ok.json).toEqual({ ok: true });
    expect((await call(f, 'assistant.threads.setStatus', { channel_id: DM, thread_ts: '1700000000.000100', status: '' })).json.ok).toBe(
      true,
    );
    const bad = await call(f, 'assistant.threads.setStatus', { channel_id: DM });
    expect(bad.json).toMatchObject({ ok: false, error: 'invalid_arguments' });
    expect(f.statuses.map((s) => [s.channel_id, s.thread_ts, s.status, s.ok])).toEqual([
      [DM, '1700000000.000100', 'is thinking…', true],
      [DM, '1700000000.000100', '', true],
      [DM, '', '', false],
    ]);
  });

  it('bounds bodies at 1 MiB (413) and survives garbage', async () => {
    const f = await start();
    const big = await fetch(`${f.apiUrl}chat.postMessage`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json; charset=utf-8', Authorization: `Bearer ${f.botToken}` },
      body: JSON.stringify({ channel: GENERAL, text: 'x'.repeat(1024 * 1024 + 10) }),
    });
    expect(big.status).toBe(413);
    await fetch(`${f.apiUrl}chat.postMessage`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
      body: '%%%&&&=',
    });
    expect((await call(f, 'auth.test')).json.ok).toBe(true);
  });
});

describe('fake Slack: Events API over HTTP', () => {
  it('url_verification: true only when the app echoes the challenge', async () => {
    const f = await start();
    const echo = await startApp(
      verifying(f.signingSecret, (r, res) => {
        const body = JSON.parse(r.body);
        res.writeHead(200, { 'Content-Type': 'application/json' }).end(JSON.stringify({ challenge: body.challenge }));
      }),
    );
    f.setRequestUrl(echo.url);
    expect(await f.verifyUrl()).toBe(true);
    expect(JSON.parse(echo.requests[0]!.body)).toMatchObject({
      type: 'url_verification',
      token: expect.any(String),
      challenge: expect.any(String),
    });

    const plain = await startApp((r, res) => res.writeHead(200).end(JSON.parse(r.body).challenge));
    f.setRequestUrl(plain.url);
    expect(await f.verifyUrl()).toBe(true);

    const wrong = await startApp((_r, res) => res.writeHead(200).end('nope'));
    f.setRequestUrl(wrong.url);
    expect(await f.verifyUrl()).toBe(false);
    expect(f.httpAttempts.map((a) => a.kind)).toEqual(['url_verification', 'url_verification', 'url_verification']);
  });

  it('delivers a signed event_callback once the app answers 200', async () => {
    const f = await start();
    const app = await startApp(verifying(f.signingSecret, (_r, res) => res.writeHead(200).end()));
    f.setRequestUrl(app.url);
    const d = f.deliverMessage({ channel: DM, channelType: 'im', user: ALICE, text: 'hello <@U0BOB00001>!' });
    expect(await d.done).toEqual({ eventId: d.eventId, delivered: true, via: 'http', attempts: 1 });

    const req = app.requests[0]!;
    expect(req.headers['content-type']).toBe('application/json');
    expect(req.headers['user-agent']).toMatch(/^Slackbot 1\.0/);
    expect(req.headers['x-slack-signature']).toBe(
      slackSignature(f.signingSecret, String(req.headers['x-slack-request-timestamp']), req.body),
    );
    expect(req.headers).not.toHaveProperty('x-slack-retry-num');
    const body = JSON.parse(req.body) as EventCallback;
    expect(body).toMatchObject({
      type: 'event_callback',
      team_id: f.teamId,
      api_app_id: f.appId,
      event_id: d.eventId,
      authorizations: [{ team_id: f.teamId, user_id: f.botUserId, is_bot: true }],
      event: { type: 'message', channel: DM, channel_type: 'im', user: ALICE, text: 'hello <@U0BOB00001>!', ts: d.ts, event_ts: d.ts },
    });
    expect(body.event_id).toMatch(/^Ev[0-9A-Z]+$/);
    expect(body.event_time).toBe(Math.floor(Number(d.ts)));
    expect(body.event.client_msg_id).toMatch(/^[0-9a-f-]{36}$/);
    expect(body.event).not.toHaveProperty('thread_ts');
    expect((body.event.blocks as any)[0].elements[0].elements).toEqual([
      { type: 'text', text: 'hello ' },
      { type: 'user', user_id: 'U0BOB00001' },
      { type: 'text', text: '!' },
    ]);
    expect(f.httpAttempts).toHaveLength(1);
    expect(f.httpAttempts[0]).toMatchObject({ kind: 'event', eventId: d.eventId, retryNum: 0, outcome: 'ok', status: 200 });
  });

  it('retries errors with X-Slack-Retry-Num / -Reason and the same event_id, up to 3 times', async () => {
    const f = await start();
    const app = await startApp((_r, res, n) => res.writeHead(n <= 2 ? 500 : 200).end());
    f.setRequestUrl(app.url);
    const d = f.deliverMention({ channel: GENERAL, user: ALICE, text: 'status?' });
    expect(await d.done).toMatchObject({ delivered: true, via: 'http', attempts: 3 });
    expect(app.requests.map((r) => [r.headers['x-slack-retry-num'], r.headers['x-slack-retry-reason']])).toEqual([
      [undefined, undefined],
      ['1', 'http_error'],
      ['2', 'http_error'],
    ]);
    expect(new Set(app.requests.map((r) => JSON.parse(r.body).event_id))).toEqual(new Set([d.eventId]));
    expect(f.httpAttempts.map((a) => [a.retryNum, a.outcome, a.status])).toEqual([
      [0, 'http_error', 500],
      [1, 'http_error', 500],
      [2, 'ok', 200],
    ]);

    const never = await startApp((_r, res) => res.writeHead(503).end());
    f.setRequestUrl(never.url);
    const lost = f.deliverMessage({ channel: GENERAL, channelType: 'channel', user: ALICE, text: 'x' });
    expect(await lost.done).toMatchObject({ delivered: false, attempts: 4, reason: 'http_error' });
    expect(never.requests.map((r) => r.headers['x-slack-retry-num'])).toEqual([undefined, '1', '2', '3']);
  });

  it('a slow answer is an http_timeout; X-Slack-No-Retry: 1 stops the retries', async () => {
    const f = await start({ httpTimeoutMs: 150 });
    const slow = await startApp((_r, res, n) => {
      if (n === 1) setTimeout(() => res.writeHead(200).end(), 600).unref();
      else res.writeHead(200).end();
    });
    f.setRequestUrl(slow.url);
    const d = f.deliverMessage({ channel: GENERAL, channelType: 'channel', user: ALICE, text: 'slow' });
    expect(await d.done).toMatchObject({ delivered: true, attempts: 2 });
    expect(slow.requests[1]!.headers).toMatchObject({ 'x-slack-retry-num': '1', 'x-slack-retry-reason': 'http_timeout' });
    expect(f.httpAttempts[0]!.outcome).toBe('http_timeout');

    const refusing = await startApp((_r, res) => res.writeHead(500, { 'X-Slack-No-Retry': '1' }).end());
    f.setRequestUrl(refusing.url);
    const once = f.deliverMessage({ channel: GENERAL, channelType: 'channel', user: ALICE, text: 'once' });
    expect(await once.done).toMatchObject({ delivered: false, attempts: 1 });
    expect(refusing.requests).toHaveLength(1);
  });

  it('a refused connection is connection_failed', async () => {
    const f = await start({ retryDelaysMs: [5, 5, 5] });
    const gone = await startApp((_r, res) => res.end());
    const url = gone.url;
    await cleanups.pop()!(); // close the app's server: its port now refuses
    f.setRequestUrl(url);
    const d = f.deliverMessage({ channel: GENERAL, channelType: 'channel', user: ALICE, text: 'x' });
    expect(await d.done).toMatchObject({ delivered: false, reason: 'connection_failed', attempts: 4 });
  });

  it('postRaw lets the test send a stale timestamp or a bad signature', async () => {
    const f = await start();
    const app = await startApp(verifying(f.signingSecret, (_r, res) => res.writeHead(200).end()));
    f.setRequestUrl(app.url);
    const body = { type: 'event_callback', event: { type: 'message' } };
    expect((await f.postRaw(body)).status).toBe(200);
    const stale = String(Math.floor(Date.now() / 1000) - 600);
    expect((await f.postRaw(body, { 'X-Slack-Request-Timestamp': stale })).status).toBe(401);
    expect(app.requests[1]!.headers['x-slack-signature']).toBe(f.sign(JSON.stringify(body), stale)); // signed, just stale
    expect((await f.postRaw(body, { 'X-Slack-Signature': 'v0=deadbeef' })).status).toBe(401);
    expect((await f.postRaw(body, { 'X-Slack-Signature': null })).status).toBe(401);
    expect(app.requests[3]!.headers).not.toHaveProperty('x-slack-signature');
  });
});

describe('fake Slack: Socket Mode', () => {
  it('apps.connections.open gives a one-use ws URL; the socket says hello', async () => {
    const f = await start({ appId: 'A0APP00001' });
    const open = await call(f, 'apps.connections.open', {}, { token: f.appToken });
    expect(open.json.url).toMatch(/^ws:\/\/127\.0\.0\.1:\d+\/link\/\?ticket=[0-9a-f-]+&app_id=A0APP00001$/);
    const c = await connect(f);
    expect(c.frames[0]).toEqual({
      type: 'hello',
      num_connections: 1,
      debug_info: { host: expect.any(String), build_number: expect.any(Number), approximate_connection_time: expect.any(Number) },
      connection_info: { app_id: 'A0APP00001' },
    });
    await f.waitForSocketClients(1);

    // connect() asked for its own URL; the one above opens once, then never again.
    const first = new WebSocket(open.json.url as string);
    cleanups.push(() => first.terminate());
    await new Promise<void>((resolve) => first.once('open', () => resolve()));
    const again = new WebSocket(open.json.url as string);
    again.on('error', () => {}); // the refused handshake
    const refused = await new Promise<string>((resolve) =>
      again.once('unexpected-response', (_req, res) => resolve(String(res.statusCode))),
    );
    expect(refused).toBe('401');
    expect(f.socketConnections()).toBe(2);
  });

  it('sends events_api envelopes; an ack settles the event and is recorded', async () => {
    const f = await start();
    const c = await connect(f);
    const d = f.deliverMessage({ channel: GENERAL, channelType: 'channel', user: ALICE, text: 'hi' });
    await f.waitFor(() => c.envelopes().length === 1);
    const env = c.envelopes()[0]!;
    expect(env).toEqual({
      envelope_id: expect.stringMatching(/^[0-9a-f-]{36}$/),
      payload: d.body,
      type: 'events_api',
      accepts_response_payload: false,
      retry_attempt: 0,
      retry_reason: '',
    });
    c.ack(env.envelope_id);
    expect(await d.done).toEqual({ eventId: d.eventId, delivered: true, via: 'socket', attempts: 1 });
    expect(f.acks).toMatchObject([{ envelopeId: env.envelope_id, known: true, frame: { envelope_id: env.envelope_id } }]);
    expect(f.envelopes[0]!.ackedAt).toBeDefined();

    c.ws.send('not json');
    c.ack('made-up-id');
    await f.waitFor(() => f.acks.length === 2 && f.socketNoise.length === 1);
    expect(f.acks[1]!.known).toBe(false);
  });

  it('redelivers unacked envelopes with retry_attempt+1 and retry_reason "timeout", up to 3 times', async () => {
    const f = await start({ ackTimeoutMs: 80 });
    const c = await connect(f);
    const d = f.deliverMessage({ channel: DM, channelType: 'im', user: ALICE, text: 'anyone?' });
    expect(await d.done).toMatchObject({ delivered: false, via: 'socket', attempts: 4, reason: 'not acknowledged' });
    const envs = c.envelopes();
    expect(envs.map((e) => [e.retry_attempt, e.retry_reason])).toEqual([
      [0, ''],
      [1, 'timeout'],
      [2, 'timeout'],
      [3, 'timeout'],
    ]);
    expect(new Set(envs.map((e) => e.payload.event_id))).toEqual(new Set([d.eventId]));
    expect(new Set(envs.map((e) => e.envelope_id)).size).toBe(4);

    // Acking the redelivery settles it.
    const e2 = f.deliverMessage({ channel: DM, channelType: 'im', user: ALICE, text: 'second' });
    await f.waitFor(() => c.envelopes().filter((e) => e.payload.event_id === e2.eventId).length === 2);
    c.ack(c.envelopes().filter((e) => e.payload.event_id === e2.eventId)[1]!.envelope_id);
    const settled = await e2.done;
    expect(settled.delivered).toBe(true);
    expect(settled.attempts).toBeGreaterThanOrEqual(2); // a slow ack may cross one more redelivery
  });

  it('disconnect sends the frame and closes; events wait for the next connection', async () => {
    const f = await start();
    const c = await connect(f, { autoAck: true });
    expect(f.disconnect('refresh_requested')).toBe(1);
    expect(await c.closed).toBe(1000);
    expect(c.frames.at(-1)).toMatchObject({ type: 'disconnect', reason: 'refresh_requested', debug_info: { host: expect.any(String) } });
    await f.waitForSocketClients(0);

    const d = f.deliverMessage({ channel: DM, channelType: 'im', user: ALICE, text: 'while away' });
    await new Promise((r) => setTimeout(r, 50));
    expect(f.outcome(d.eventId)).toBeUndefined(); // held
    const c2 = await connect(f, { autoAck: true });
    expect(await d.done).toMatchObject({ delivered: true, via: 'socket' });
    expect(c2.frames[0].type).toBe('hello');
    expect(c2.envelopes()[0]!.payload.event_id).toBe(d.eventId);
  });
});

describe('fake Slack: injected events and routing', () => {
  it("threads, mentions, bot messages and edits look like Slack's", async () => {
    const f = await start();
    const c = await connect(f, { autoAck: true });
    const root = f.deliverMessage({ channel: GENERAL, channelType: 'channel', user: ALICE, text: 'root' });
    const reply = f.deliverMessage({ channel: GENERAL, channelType: 'channel', user: 'U0BOB00001', text: 'reply', threadTs: root.ts! });
    const mention = f.deliverMention({ channel: GENERAL, user: ALICE, text: 'help', threadTs: root.ts! });
    const bot = f.deliverBotMessage({ channel: GENERAL, text: 'I said this' });
    const edit = f.deliverMessage({
      channel: GENERAL,
      channelType: 'channel',
      user: ALICE,
      text: 'root, edited',
      edited: { ts: root.ts! },
    });
    for (const d of [root, reply, mention, bot, edit]) expect((await d.done).delivered).toBe(true);
    const byId = new Map(c.envelopes().map((e) => [e.payload.event_id, e.payload.event]));

    expect(byId.get(reply.eventId)).toMatchObject({ type: 'message', thread_ts: root.ts, parent_user_id: ALICE });
    expect(byId.get(mention.eventId)).toMatchObject({
      type: 'app_mention',
      text: `<@${f.botUserId}> help`,
      user: ALICE,
      thread_ts: root.ts,
    });
    expect(byId.get(mention.eventId)).not.toHaveProperty('channel_type');
    expect(byId.get(bot.eventId)).toMatchObject({
      type: 'message',
      subtype: 'bot_message',
      bot_id: f.botId,
      text: 'I said this',
      channel_type: 'channel',
    });
    expect(byId.get(edit.eventId)).toMatchObject({
      type: 'message',
      subtype: 'message_changed',
      hidden: true,
      channel: GENERAL,
      message: { type: 'message', user: ALICE, text: 'root, edited', ts: root.ts, edited: { user: ALICE } },
      previous_message: { text: 'root', ts: root.ts },
    });
    expect(edit.ts).toBe(root.ts);
    expect(() => f.deliverMessage({ channel: GENERAL, channelType: 'channel', user: 'U0NOBODY01', text: 'x', edited: true })).toThrow(
      /no earlier message/,
    );
  });

  it('auto mode: socket when connected, else HTTP; held until a receiver appears; or dropped', async () => {
    const f = await start();
    const early = f.deliverMessage({ channel: DM, channelType: 'im', user: ALICE, text: 'early' });
    const app = await startApp((_r, res) => res.writeHead(200).end());
    f.setRequestUrl(app.url);
    expect(await early.done).toMatchObject({ delivered: true, via: 'http' });

    const c = await connect(f, { autoAck: true });
    expect(await f.deliverMessage({ channel: DM, channelType: 'im', user: ALICE, text: 'now' }).done).toMatchObject({ via: 'socket' });
    expect(await f.deliverMessage({ channel: DM, channelType: 'im', user: ALICE, text: 'forced', mode: 'http' }).done).toMatchObject({
      via: 'http',
    });
    expect(app.requests).toHaveLength(2);
    expect(c.envelopes()).toHaveLength(1);

    const d = await start({ whenNoReceiver: 'drop' });
    const lost = d.deliverMessage({ channel: DM, channelType: 'im', user: ALICE, text: 'void' });
    expect(await lost.done).toMatchObject({ delivered: false, reason: 'no receiver' });
    expect(d.dropped.map((b) => b.event_id)).toEqual([lost.eventId]);
  });

  it("echoPosts: the bot's own post comes back as its message event", async () => {
    const f = await start({ echoPosts: true });
    const c = await connect(f, { autoAck: true });
    const r = await call(f, 'chat.postMessage', { channel: DM, text: 'my answer' });
    await f.waitFor(() => c.envelopes().length === 1);
    expect(c.envelopes()[0]!.payload.event).toMatchObject({
      type: 'message',
      user: f.botUserId,
      bot_id: f.botId,
      text: 'my answer',
      ts: r.json.ts,
      channel: DM,
      channel_type: 'im',
    });
  });

  it('close settles what is under way', async () => {
    const f = await startFakeSlack();
    const d = f.deliverMessage({ channel: DM, channelType: 'im', user: ALICE, text: 'x' });
    await f.close();
    expect(await d.done).toMatchObject({ delivered: false, reason: 'closed' });
  });
});
