/**
 * The Telegram Bot API fake against the documented protocol (https://core.telegram.org/bots/api)
 * and the reference server's wording, with plain fetch: routing and auth, parameter encodings,
 * getUpdates confirmation / redelivery / long polling / conflicts, webhooks with retries,
 * sendMessage validation (MarkdownV2 escaping, lengths after parsing), sendChatAction,
 * sendDocument uploads, injected failures and input bounds.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { startFakeTelegram, type FakeTelegram, type FakeTelegramOptions, type Message, type Update } from '../fakes/telegram.js';

const ANN = { id: 1001, first_name: 'Ann', username: 'ann_tester' };
const BOB = { id: 1002, first_name: 'Bob' };
const DM = { id: 1001, type: 'private' as const };
const TEAM = { id: -1001234567890, type: 'supergroup' as const, title: 'Team' };

let fakes: FakeTelegram[] = [];
let servers: http.Server[] = [];

async function start(opts: FakeTelegramOptions = {}): Promise<FakeTelegram> {
  const f = await startFakeTelegram(opts);
  fakes.push(f);
  return f;
}

afterEach(async () => {
  await Promise.all(fakes.map((f) => f.close()));
  fakes = [];
  for (const s of servers) {
    s.closeAllConnections();
    s.close();
  }
  servers = [];
});

interface Answer {
  status: number;
  json: any;
  headers: Headers;
}

async function answerOf(res: Response): Promise<Answer> {
  const text = await res.text();
  return { status: res.status, json: text ? JSON.parse(text) : undefined, headers: res.headers };
}

/** POST the params as JSON (the common client encoding). */
async function call(f: FakeTelegram, method: string, params: Record<string, unknown> = {}, init: RequestInit = {}): Promise<Answer> {
  const res = await fetch(`${f.apiBase}/${method}`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify(params),
    ...init,
  });
  return answerOf(res);
}

const err = (code: number, description: string): unknown => ({ ok: false, error_code: code, description });

/** A webhook receiver; `answer(n)` gives the status for the n-th request (from 1). */
async function receiver(
  answer: (n: number) => number = () => 200,
): Promise<{ url: string; hits: Array<{ headers: http.IncomingHttpHeaders; body: Update }>; port: number }> {
  const hits: Array<{ headers: http.IncomingHttpHeaders; body: Update }> = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      hits.push({ headers: req.headers, body: JSON.parse(Buffer.concat(chunks).toString('utf8')) as Update });
      res.writeHead(answer(hits.length));
      res.end();
    });
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}/hook`, hits, port };
}

/** A port nothing listens on. */
async function deadPort(): Promise<number> {
  const s = http.createServer();
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', () => resolve()));
  const { port } = s.address() as AddressInfo;
  await new Promise<void>((resolve) => s.close(() => resolve()));
  return port;
}

describe('fake telegram: routing, auth, encodings', () => {
  it('routes /bot<token>/<method> case-insensitively; 404 / 401 / 404 otherwise', async () => {
    const f = await start();
    const me = await answerOf(await fetch(`${f.apiBase}/GETME`));
    expect(me.status).toBe(200);
    expect(me.headers.get('content-type')).toBe('application/json');
    expect(me.json).toEqual({
      ok: true,
      result: expect.objectContaining({
        id: 7000000001,
        is_bot: true,
        first_name: 'Berth Test',
        username: 'berth_test_bot',
        can_join_groups: true,
        can_read_all_group_messages: false,
      }),
    });
    expect(f.bot.id).toBe(7000000001);

    expect(await answerOf(await fetch(`${f.url}/getMe`))).toMatchObject({ status: 404, json: err(404, 'Not Found') });
    expect(await answerOf(await fetch(`${f.url}/bot${f.token}`))).toMatchObject({ status: 404, json: err(404, 'Not Found') });
    expect(await answerOf(await fetch(`${f.url}/bot7000000001:wrong/getMe`))).toMatchObject({
      status: 401,
      json: err(401, 'Unauthorized'),
    });
    expect(await answerOf(await fetch(`${f.url}/botnotatoken/getMe`))).toMatchObject({
      status: 401,
      json: err(401, 'Unauthorized: invalid token specified'),
    });
    expect(await call(f, 'getMyFavouriteThings')).toMatchObject({ status: 404, json: err(404, 'Not Found: method not found') });
    // Every authorised request is recorded, lower-cased.
    expect(f.calls.map((c) => c.method)).toEqual(['getme', 'getmyfavouritethings']);
  });

  it('takes parameters from the query string, JSON, urlencoded forms and multipart; an empty method falls back to `method`', async () => {
    const f = await start();
    f.deliverText({ chat: DM, from: ANN, text: 'hi' });
    const q = await answerOf(await fetch(`${f.apiBase}/sendMessage?chat_id=${DM.id}&text=${encodeURIComponent('from the query')}`));
    expect(q.json.result.text).toBe('from the query');
    const form = await answerOf(
      await fetch(`${f.apiBase}/sendMessage`, {
        method: 'POST',
        body: new URLSearchParams({ chat_id: String(DM.id), text: 'from a form' }),
      }),
    );
    expect(form.json.result.text).toBe('from a form');
    const fd = new FormData();
    fd.set('chat_id', String(DM.id));
    fd.set('text', 'from multipart');
    expect((await answerOf(await fetch(`${f.apiBase}/sendMessage`, { method: 'POST', body: fd }))).json.result.text).toBe('from multipart');
    // JSON numbers, objects and strings all work; the query string wins on duplicates.
    const j = await answerOf(
      await fetch(`${f.apiBase}/?text=query+wins`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ method: 'sendMessage', chat_id: DM.id, text: 'body' }),
      }),
    );
    expect(j.json).toMatchObject({ ok: true, result: { text: 'query wins', chat: { id: DM.id } } });
    expect(f.sent.map((s) => s.params.chat_id)).toEqual(['1001', '1001', '1001', '1001']);
  });

  it('bounds bodies (413) and answers malformed input with 400, then keeps serving', async () => {
    const f = await start({ maxBodyBytes: 1000, maxUploadBytes: 2000 });
    const big = await call(f, 'sendMessage', { chat_id: 1, text: 'x'.repeat(2000) });
    expect(big.status).toBe(413);
    expect(big.json).toMatchObject({ ok: false, error_code: 413, description: expect.stringMatching(/^Request Entity Too Large/) });
    const fd = new FormData();
    fd.set('chat_id', '1');
    fd.set('document', new Blob([Buffer.alloc(5000)]), 'big.bin');
    expect((await answerOf(await fetch(`${f.apiBase}/sendDocument`, { method: 'POST', body: fd }))).status).toBe(413);

    const badJson = await call(f, 'getMe', {}, { body: '{"chat_id":' });
    expect(badJson.status).toBe(400);
    expect(badJson.json.description).toMatch(/^Bad Request: can't parse JSON object/);
    expect((await call(f, 'getMe', {}, { body: '[1,2]' })).json).toEqual(err(400, 'Bad Request: JSON object expected'));
    const noBoundary = await answerOf(
      await fetch(`${f.apiBase}/getMe`, { method: 'POST', headers: { 'Content-Type': 'multipart/form-data' }, body: 'x' }),
    );
    expect(noBoundary.json).toEqual(err(400, 'Bad Request: boundary not found'));
    const brokenParts = await answerOf(
      await fetch(`${f.apiBase}/getMe`, {
        method: 'POST',
        headers: { 'Content-Type': 'multipart/form-data; boundary=zz' },
        body: '--zz\r\nContent-Disposition: form-data; name="a"\r\n\r\nno end',
      }),
    );
    expect(brokenParts.json).toEqual(err(400, 'Bad Request: unexpected end of request content'));
    const gz = await call(f, 'getMe', {}, { headers: { 'Content-Type': 'application/json', 'Content-Encoding': 'gzip' } });
    expect(gz.status).toBe(415);
    // Odd parameter values are tolerated the way the API tolerates them (non-numbers read as 0).
    expect((await call(f, 'getUpdates', { limit: 'lots', timeout: 'never', offset: { x: 1 } })).json).toEqual({ ok: true, result: [] });
    expect((await call(f, 'getMe')).status).toBe(200);
  });
});

describe('fake telegram: getUpdates', () => {
  it('confirms updates below offset forever, redelivers the rest, limits, and handles a negative offset', async () => {
    const f = await start({ firstUpdateId: 500 });
    const [u1, u2, u3] = ['one', 'two', 'three'].map((text) => f.deliverText({ chat: DM, from: ANN, text }));
    expect([u1!.update_id, u2!.update_id, u3!.update_id]).toEqual([500, 501, 502]);

    const ids = async (params: Record<string, unknown>): Promise<number[]> =>
      ((await call(f, 'getUpdates', params)).json.result as Update[]).map((u) => u.update_id);
    expect(await ids({})).toEqual([500, 501, 502]);
    expect(await ids({})).toEqual([500, 501, 502]); // unconfirmed: delivered again
    expect(await ids({ offset: 501 })).toEqual([501, 502]);
    expect(await ids({})).toEqual([501, 502]); // 500 is gone for good
    expect(await ids({ offset: 0, limit: 1 })).toEqual([501]);
    expect(await ids({ limit: 0 })).toEqual([501]); // clamped to 1
    expect(f.pendingCount()).toBe(2);
    expect(await ids({ offset: -1 })).toEqual([502]); // keeps only the last one
    expect(f.pendingCount()).toBe(1);
    expect(await ids({ offset: 10_000 })).toEqual([502]); // far in the future: ignored
    expect(await ids({ offset: 503 })).toEqual([]);
    expect(f.pendingCount()).toBe(0);

    const [first] = (await call(f, 'getUpdates', {})).json.result as Update[];
    expect(first).toBeUndefined();
    const u = f.deliverText({ chat: DM, from: ANN, text: 'again' });
    expect(u.update_id).toBe(503);
    expect(u.message).toMatchObject({
      message_id: 4,
      from: { id: ANN.id, is_bot: false, first_name: 'Ann', username: 'ann_tester' },
      chat: { id: DM.id, type: 'private', first_name: 'Ann' },
      text: 'again',
    });
  });

  it('holds a long poll until an update exists, and answers [] when the timeout ends', async () => {
    const f = await start({ longPollCapMs: 150 });
    const t0 = Date.now();
    const empty = await call(f, 'getUpdates', { timeout: 30 });
    expect(empty.json).toEqual({ ok: true, result: [] });
    expect(Date.now() - t0).toBeGreaterThanOrEqual(140);

    const g = await start();
    const held = call(g, 'getUpdates', { timeout: 10 });
    await g.waitFor(() => g.longPolling());
    g.deliverText({ chat: DM, from: ANN, text: 'one' });
    g.deliverText({ chat: DM, from: ANN, text: 'two' }); // same tick: answered together
    const got = await held;
    expect(got.json.result.map((u: Update) => u.message!.text)).toEqual(['one', 'two']);
    expect(g.longPolling()).toBe(false);
  });

  it('a second waiting getUpdates ends the first with 409; getUpdates while a webhook is set is 409', async () => {
    const f = await start();
    const first = call(f, 'getUpdates', { timeout: 20 });
    await f.waitFor(() => f.longPolling());
    const second = call(f, 'getUpdates', { timeout: 20 });
    expect(await first).toMatchObject({
      status: 409,
      json: err(409, 'Conflict: terminated by other getUpdates request; make sure that only one bot instance is running'),
    });
    f.deliverText({ chat: DM, from: ANN, text: 'for the survivor' });
    expect((await second).json.result[0].message.text).toBe('for the survivor');

    const third = call(f, 'getUpdates', { offset: f.updates[0]!.update_id + 1, timeout: 20 });
    await f.waitFor(() => f.longPolling());
    const hook = await receiver();
    expect((await call(f, 'setWebhook', { url: hook.url })).json).toEqual({ ok: true, result: true, description: 'Webhook was set' });
    expect(await third).toMatchObject({ status: 409, json: err(409, 'Conflict: terminated by setWebhook request') });
    expect(await call(f, 'getUpdates')).toMatchObject({
      status: 409,
      json: err(409, "Conflict: can't use getUpdates method while webhook is active; use deleteWebhook to delete the webhook first"),
    });
  });

  it('allowed_updates filters updates created afterwards', async () => {
    const f = await start();
    f.deliverText({ chat: DM, from: ANN, text: 'before' });
    expect((await call(f, 'getUpdates', { allowed_updates: ['edited_message'] })).json.result).toHaveLength(1);
    const dropped = f.deliverText({ chat: DM, from: ANN, text: 'a message' });
    const edit = f.deliverEdit({ chat: DM, from: ANN, message_id: dropped.message!.message_id, text: 'an edit' });
    expect(f.filtered).toEqual([dropped]);
    const got = (await call(f, 'getUpdates', { offset: edit.update_id })).json.result as Update[];
    expect(got).toHaveLength(1);
    expect(got[0]!.edited_message).toMatchObject({
      message_id: dropped.message!.message_id,
      text: 'an edit',
      edit_date: expect.any(Number),
      date: dropped.message!.date,
    });
    // [] means the default again.
    await call(f, 'getUpdates', { allowed_updates: '[]', offset: edit.update_id + 1 });
    f.deliverText({ chat: DM, from: ANN, text: 'visible' });
    expect((await call(f, 'getUpdates')).json.result[0].message.text).toBe('visible');
  });

  it('close() ends a held long poll at once', async () => {
    const f = await start();
    const HELD_S = 50;
    const held = call(f, 'getUpdates', { timeout: HELD_S });
    await f.waitFor(() => f.longPolling());
    const t0 = Date.now();
    await f.close();
    // Answered (not cut off: that would reject), and before the poll's own timeout: the bound is
    // the poll's own parameter, thousands of times what close takes, so a busy host never reaches it.
    expect((await held).json).toEqual({ ok: true, result: [] });
    expect(Date.now() - t0).toBeLessThan(HELD_S * 1000);
  });
});

describe('fake telegram: webhooks', () => {
  it('validates setWebhook and words its answers like the API', async () => {
    const f = await start();
    expect((await call(f, 'setWebhook', { url: 'http://127.0.0.1:1/x', secret_token: 'has space' })).json).toEqual(
      err(400, 'Bad Request: secret token contains unallowed characters'),
    );
    expect((await call(f, 'setWebhook', { url: 'http://127.0.0.1:1/x', secret_token: 'a'.repeat(257) })).json).toEqual(
      err(400, 'Bad Request: secret token is too long'),
    );
    expect((await call(f, 'setWebhook', { url: 'ftp://example.org/x' })).json).toEqual(
      err(400, 'Bad Request: invalid webhook URL specified'),
    );
    expect((await call(f, 'deleteWebhook')).json).toEqual({ ok: true, result: true, description: 'Webhook is already deleted' });
    const hook = await receiver();
    expect((await call(f, 'setWebhook', { url: hook.url, secret_token: 'S3cret_-x' })).json.description).toBe('Webhook was set');
    expect((await call(f, 'setWebhook', { url: hook.url, secret_token: 'S3cret_-x' })).json.description).toBe('Webhook is already set');
    expect((await call(f, 'getWebhookInfo')).json.result).toEqual({
      url: hook.url,
      has_custom_certificate: false,
      pending_update_count: 0,
      max_connections: 40,
      ip_address: '127.0.0.1',
    });
    expect((await call(f, 'deleteWebhook')).json.description).toBe('Webhook was deleted');
    expect((await call(f, 'getWebhookInfo')).json.result).toEqual({ url: '', has_custom_certificate: false, pending_update_count: 0 });
  });

  it('POSTs updates one at a time in order with the secret header; a non-2xx keeps the update and it is retried', async () => {
    const f = await start({ webhookBackoffMs: 20 });
    const hook = await receiver((n) => (n <= 2 ? 500 : 200));
    await call(f, 'setWebhook', { url: hook.url, secret_token: 'tok_1' });
    const u1 = f.deliverText({ chat: DM, from: ANN, text: 'first' });
    const u2 = f.deliverText({ chat: DM, from: ANN, text: 'second' });
    await f.waitFor(() => f.pendingCount() === 0);
    expect(hook.hits.map((h) => h.body.update_id)).toEqual([u1.update_id, u1.update_id, u1.update_id, u2.update_id]);
    expect(hook.hits[0]!.body).toEqual(u1);
    expect(
      hook.hits.every((h) => h.headers['x-telegram-bot-api-secret-token'] === 'tok_1' && h.headers['content-type'] === 'application/json'),
    ).toBe(true);
    expect(f.webhookDeliveries.map((d) => [d.updateId, d.attempt, d.status, d.ok])).toEqual([
      [u1.update_id, 1, 500, false],
      [u1.update_id, 2, 500, false],
      [u1.update_id, 3, 200, true],
      [u2.update_id, 1, 200, true],
    ]);
    expect(f.webhookDeliveries[0]!.error).toBe('Wrong response from the webhook: 500 Internal Server Error');
    const info = (await call(f, 'getWebhookInfo')).json.result;
    expect(info).toMatchObject({
      pending_update_count: 0,
      last_error_message: 'Wrong response from the webhook: 500 Internal Server Error',
      last_error_date: expect.any(Number),
    });
  });

  it('a connection error keeps the update pending; after deleteWebhook getUpdates gets it; drop_pending_updates forgets', async () => {
    const f = await start({ webhookBackoffMs: 10, webhookMaxBackoffMs: 40 });
    const port = await deadPort();
    await call(f, 'setWebhook', { url: `http://127.0.0.1:${port}/hook` });
    const u = f.deliverText({ chat: DM, from: ANN, text: 'nobody home' });
    await f.waitFor(() => f.webhookDeliveries.length >= 3);
    expect(f.webhookDeliveries.every((d) => !d.ok && d.error === 'Connection refused' && d.updateId === u.update_id)).toBe(true);
    const info = (await call(f, 'getWebhookInfo')).json.result;
    expect(info).toMatchObject({ pending_update_count: 1, last_error_message: 'Connection refused' });

    await call(f, 'deleteWebhook');
    expect((await call(f, 'getUpdates')).json.result).toEqual([u]);
    f.deliverText({ chat: DM, from: ANN, text: 'also pending' });
    expect((await call(f, 'deleteWebhook', { drop_pending_updates: true })).json).toEqual({
      ok: true,
      result: true,
      description: 'Webhook is already deleted',
    });
    expect(f.pendingCount()).toBe(0);
    expect((await call(f, 'getUpdates')).json.result).toEqual([]);
  });
});

describe('fake telegram: sendMessage', () => {
  it('returns a Message with per-chat increasing ids; unknown chats are not found', async () => {
    const f = await start();
    expect((await call(f, 'sendMessage', { chat_id: DM.id, text: 'hi' })).json).toEqual(err(400, 'Bad Request: chat not found'));
    expect((await call(f, 'sendMessage', { text: 'hi' })).json).toEqual(err(400, 'Bad Request: chat_id is empty'));
    f.deliverText({ chat: DM, from: ANN, text: 'hello bot' });
    const a = await call(f, 'sendMessage', { chat_id: DM.id, text: 'hello Ann' });
    expect(a.json).toEqual({
      ok: true,
      result: {
        message_id: 2,
        from: { id: 7000000001, is_bot: true, first_name: 'Berth Test', username: 'berth_test_bot' },
        chat: { id: DM.id, first_name: 'Ann', username: 'ann_tester', type: 'private' },
        date: expect.any(Number),
        text: 'hello Ann',
      },
    });
    expect((await call(f, 'sendMessage', { chat_id: String(DM.id), text: 'again' })).json.result.message_id).toBe(3);
    f.deliverText({ chat: TEAM, from: BOB, text: 'in the group' });
    expect((await call(f, 'sendMessage', { chat_id: TEAM.id, text: 'group reply' })).json.result).toMatchObject({
      message_id: 2,
      chat: { id: TEAM.id, title: 'Team', type: 'supergroup' },
    });

    expect(f.repliesTo(DM.id).map((s) => s.text)).toEqual(['hello Ann', 'again']);
    expect(f.sent.map((s) => s.ok)).toEqual([false, false, true, true, true]);
    expect(f.sent[0]).toMatchObject({ chatIdParam: '1001', ok: false, error: { code: 400, description: 'Bad Request: chat not found' } });
    expect(f.messages(DM.id).map((m) => m.message_id)).toEqual([1, 2, 3]);
  });

  it('checks the text: empty, whitespace only, too long after parsing (code points), too long before parsing', async () => {
    const f = await start();
    f.deliverText({ chat: DM, from: ANN, text: 'hi' });
    const send = (text: string, parse_mode?: string) =>
      call(f, 'sendMessage', { chat_id: DM.id, text, ...(parse_mode ? { parse_mode } : {}) });
    expect((await send('')).json).toEqual(err(400, 'Bad Request: message text is empty'));
    expect((await send(' \n ')).json).toEqual(err(400, 'Bad Request: text must be non-empty'));
    expect((await send('a'.repeat(4097))).json).toEqual(err(400, 'Bad Request: message is too long'));
    expect((await send('a'.repeat(4096))).json.ok).toBe(true);
    expect((await send('😀'.repeat(4096))).json.ok).toBe(true); // 4096 code points, 8192 UTF-16 units
    expect((await send(`*${'a'.repeat(4096)}*`, 'MarkdownV2')).json.result.entities).toEqual([{ type: 'bold', offset: 0, length: 4096 }]);
    expect((await send('\\.'.repeat(4096), 'MarkdownV2')).json.result.text).toBe('.'.repeat(4096));
    expect((await send(`*${'a'.repeat(4097)}*`, 'MarkdownV2')).json).toEqual(err(400, 'Bad Request: message is too long'));
    expect((await send('a'.repeat(40_000))).json).toEqual(err(400, 'Bad Request: text is too long'));
    expect((await send('x', 'Klingon')).json).toEqual(err(400, 'Bad Request: unsupported parse_mode'));
    // Trimmed, tabs become spaces, \r goes.
    expect((await send('\n  tab\there\r\n  ')).json.result.text).toBe('tab here');
  });

  it('validates MarkdownV2 escaping like Telegram, naming the character, and returns the entities', async () => {
    const f = await start();
    f.deliverText({ chat: DM, from: ANN, text: 'hi' });
    const md = (text: string) => call(f, 'sendMessage', { chat_id: DM.id, text, parse_mode: 'MarkdownV2' });
    const reserved = (c: string) =>
      err(400, `Bad Request: can't parse entities: Character '${c}' is reserved and must be escaped with the preceding '\\'`);
    expect((await md('Done.')).json).toEqual(reserved('.'));
    expect((await md('Done!')).json).toEqual(reserved('!'));
    expect((await md('a-b')).json).toEqual(reserved('-'));
    expect((await md('1+1=2')).json).toEqual(reserved('+'));
    expect((await md('(x)')).json).toEqual(reserved('('));
    expect((await md('a > b')).json).toEqual(reserved('>'));
    expect((await md('#tag')).json).toEqual(reserved('#'));
    expect((await md('*bold')).json).toEqual(err(400, "Bad Request: can't parse entities: Can't find end of Bold entity at byte offset 0"));
    expect((await md('ok _it')).json).toEqual(
      err(400, "Bad Request: can't parse entities: Can't find end of Italic entity at byte offset 3"),
    );
    expect((await md('[a](http://x.org')).json).toEqual(
      err(400, "Bad Request: can't parse entities: Can't find end of a URL at byte offset 4"),
    );

    const r = await md(
      '*bold* _it_ __u__ ~s~ ||sp|| [link](https://example.com/a\\)b) `co\\`de 1.5` \\. \\! 😀 [me](tg://user?id=42)\n```py\nprint(1)\n```',
    );
    expect(r.status).toBe(200);
    const m = r.json.result as Message;
    // The pre block's own trailing newline falls to the final trim (as in tdlib's fix_formatted_text).
    expect(m.text).toBe('bold it u s sp link co`de 1.5 . ! 😀 me\nprint(1)');
    expect(m.entities).toEqual([
      { type: 'bold', offset: 0, length: 4 },
      { type: 'italic', offset: 5, length: 2 },
      { type: 'underline', offset: 8, length: 1 },
      { type: 'strikethrough', offset: 10, length: 1 },
      { type: 'spoiler', offset: 12, length: 2 },
      { type: 'text_link', offset: 15, length: 4, url: 'https://example.com/a)b' },
      { type: 'code', offset: 20, length: 9 },
      { type: 'text_mention', offset: 37, length: 2, user: { id: 42, is_bot: false, first_name: '' } },
      { type: 'pre', offset: 40, length: 8, language: 'py' },
    ]);
    expect(m.entities!.map((e) => m.text!.slice(e.offset, e.offset + e.length))).toEqual([
      'bold',
      'it',
      'u',
      's',
      'sp',
      'link',
      'co`de 1.5',
      'me',
      'print(1)',
    ]);
    // Block quotations: '>' only at the start of a line.
    const q = await md('>quoted\n>more\nafter');
    expect(q.json.result).toMatchObject({ text: 'quoted\nmore\nafter', entities: [{ type: 'blockquote', offset: 0, length: 12 }] });
    // Without parse_mode nothing is reserved.
    expect((await call(f, 'sendMessage', { chat_id: DM.id, text: 'Done. (really!)' })).json.result.text).toBe('Done. (really!)');
  });

  it('parses HTML and legacy Markdown too', async () => {
    const f = await start();
    f.deliverText({ chat: DM, from: ANN, text: 'hi' });
    const html = await call(f, 'sendMessage', {
      chat_id: DM.id,
      text: '<b>bold</b> &lt;3 <a href="https://x.org">x</a> <pre><code class="language-ts">let a;</code></pre>',
      parse_mode: 'HTML',
    });
    expect(html.json.result).toMatchObject({
      text: 'bold <3 x let a;',
      entities: [
        { type: 'bold', offset: 0, length: 4 },
        { type: 'text_link', offset: 8, length: 1, url: 'https://x.org/' },
        { type: 'pre', offset: 10, length: 6, language: 'ts' },
      ],
    });
    expect((await call(f, 'sendMessage', { chat_id: DM.id, text: '<blink>x</blink>', parse_mode: 'HTML' })).json).toEqual(
      err(400, 'Bad Request: can\'t parse entities: Unsupported start tag "blink" at byte offset 0'),
    );
    expect((await call(f, 'sendMessage', { chat_id: DM.id, text: '<b>x</i>', parse_mode: 'HTML' })).json).toEqual(
      err(400, 'Bad Request: can\'t parse entities: Unmatched end tag at byte offset 4, expected "</b>", found "</i>"'),
    );
    expect((await call(f, 'sendMessage', { chat_id: DM.id, text: '*bold* plain.', parse_mode: 'Markdown' })).json.result).toMatchObject({
      text: 'bold plain.',
      entities: [{ type: 'bold', offset: 0, length: 4 }],
    });
    expect((await call(f, 'sendMessage', { chat_id: DM.id, text: 'a_b', parse_mode: 'Markdown' })).json).toEqual(
      err(400, "Bad Request: can't parse entities: Can't find end of the entity starting at byte offset 1"),
    );
  });

  it('replies: reply_parameters, reply_to_message_id, unknown targets, allow_sending_without_reply; forum threads', async () => {
    const f = await start();
    const incoming = f.deliverText({ chat: DM, from: ANN, text: 'question' });
    const id = incoming.message!.message_id;
    const r1 = await call(f, 'sendMessage', { chat_id: DM.id, text: 'answer', reply_parameters: { message_id: id } });
    expect(r1.json.result.reply_to_message).toMatchObject({ message_id: id, text: 'question', from: { id: ANN.id } });
    const r2 = await answerOf(
      await fetch(`${f.apiBase}/sendMessage`, {
        method: 'POST',
        body: new URLSearchParams({ chat_id: String(DM.id), text: 'legacy', reply_to_message_id: String(id) }),
      }),
    );
    expect(r2.json.result.reply_to_message.message_id).toBe(id);
    const r3 = await call(f, 'sendMessage', { chat_id: DM.id, text: 'x', reply_parameters: JSON.stringify({ message_id: 999 }) });
    expect(r3.json).toEqual(err(400, 'Bad Request: message to be replied not found'));
    const r4 = await call(f, 'sendMessage', {
      chat_id: DM.id,
      text: 'x',
      reply_parameters: { message_id: 999, allow_sending_without_reply: true },
    });
    expect(r4.json.ok).toBe(true);
    expect(r4.json.result).not.toHaveProperty('reply_to_message');
    expect((await call(f, 'sendMessage', { chat_id: DM.id, text: 'x', reply_parameters: '{nope' })).json).toEqual(
      err(400, "Bad Request: can't parse reply parameters JSON object"),
    );
    expect(f.sent.map((s) => s.replyToMessageId)).toEqual([id, id, 999, 999, undefined]);

    // A reply to the bot's own message, delivered by the user.
    const bots = r1.json.result as Message;
    const back = f.deliverText({ chat: DM, from: ANN, text: 'thanks', reply_to_message: bots.message_id });
    expect(back.message!.reply_to_message).toMatchObject({ message_id: bots.message_id, from: { is_bot: true }, text: 'answer' });
    expect(back.message!.reply_to_message).not.toHaveProperty('reply_to_message');

    const forum = { id: -1009, type: 'supergroup' as const, title: 'Forum', is_forum: true };
    const inTopic = f.deliverText({ chat: forum, from: BOB, text: 'in a topic', message_thread_id: 77 });
    expect(inTopic.message).toMatchObject({ message_thread_id: 77, is_topic_message: true, chat: { is_forum: true } });
    const t = await call(f, 'sendMessage', { chat_id: forum.id, text: 'topic reply', message_thread_id: 77 });
    expect(t.json.result).toMatchObject({ message_thread_id: 77, is_topic_message: true });
    expect(f.sent.at(-1)!.messageThreadId).toBe(77);
  });
});

describe('fake telegram: sendChatAction, sendDocument', () => {
  it('sendChatAction answers true and is recorded; a wrong action or chat fails', async () => {
    const f = await start();
    f.deliverText({ chat: DM, from: ANN, text: 'hi' });
    expect((await call(f, 'sendChatAction', { chat_id: DM.id, action: 'typing' })).json).toEqual({ ok: true, result: true });
    expect((await call(f, 'sendChatAction', { chat_id: DM.id, action: 'dancing' })).json).toEqual(
      err(400, 'Bad Request: wrong parameter action in request'),
    );
    expect((await call(f, 'sendChatAction', { chat_id: 5, action: 'typing' })).json).toEqual(err(400, 'Bad Request: chat not found'));
    expect(f.actions.map((a) => [a.chatId, a.action, a.ok])).toEqual([
      [DM.id, 'typing', true],
      [undefined, 'dancing', false],
      [undefined, 'typing', false],
    ]);
  });

  it('sendDocument takes an uploaded file and records its name and bytes; re-sends by file_id; checks caption and file', async () => {
    const f = await start();
    f.deliverText({ chat: DM, from: ANN, text: 'send me the report' });
    const upload = async (fields: Record<string, string>, file?: { name: string; bytes: Buffer; field?: string }) => {
      const fd = new FormData();
      for (const [k, v] of Object.entries(fields)) fd.set(k, v);
      if (file) fd.set(file.field ?? 'document', new Blob([file.bytes]), file.name);
      return answerOf(await fetch(`${f.apiBase}/sendDocument`, { method: 'POST', body: fd }));
    };
    const bytes = Buffer.from('line 1\nline 2\n');
    const r = await upload(
      { chat_id: String(DM.id), caption: '*Report* for you', parse_mode: 'MarkdownV2' },
      { name: 'report.txt', bytes },
    );
    expect(r.status).toBe(200);
    expect(r.json.result).toMatchObject({
      message_id: 2,
      from: { is_bot: true },
      chat: { id: DM.id },
      document: {
        file_name: 'report.txt',
        mime_type: 'text/plain',
        file_id: expect.any(String),
        file_unique_id: expect.any(String),
        file_size: bytes.length,
      },
      caption: 'Report for you',
      caption_entities: [{ type: 'bold', offset: 0, length: 6 }],
    });
    const [s] = f.sent;
    expect(s).toMatchObject({
      method: 'sendDocument',
      chatId: DM.id,
      caption: '*Report* for you',
      parseMode: 'MarkdownV2',
      ok: true,
      document: { source: 'upload', fileName: 'report.txt' },
    });
    expect(s!.document!.bytes!.equals(bytes)).toBe(true);

    const again = await call(f, 'sendDocument', { chat_id: DM.id, document: r.json.result.document.file_id });
    expect(again.json.result.document).toEqual(r.json.result.document);
    const attached = await upload(
      { chat_id: String(DM.id), document: 'attach://thefile' },
      { name: 'a.bin', bytes: Buffer.from([1, 2, 3]), field: 'thefile' },
    );
    expect(attached.json.result.document).toMatchObject({ file_name: 'a.bin', file_size: 3 });

    expect((await upload({ chat_id: String(DM.id) })).json).toEqual(err(400, 'Bad Request: there is no document in the request'));
    expect((await upload({ chat_id: String(DM.id), caption: 'c'.repeat(1025) }, { name: 'x.txt', bytes })).json).toEqual(
      err(400, 'Bad Request: message caption is too long'),
    );
    expect((await upload({ chat_id: String(DM.id) }, { name: 'empty.txt', bytes: Buffer.alloc(0) })).json).toEqual(
      err(400, 'Bad Request: file must be non-empty'),
    );
    expect((await upload({ chat_id: '42' }, { name: 'x.txt', bytes })).json).toEqual(err(400, 'Bad Request: chat not found'));
    expect((await call(f, 'sendDocument', { chat_id: DM.id, document: 'no-such-file-id' })).json).toEqual(
      err(400, 'Bad Request: wrong file identifier/HTTP URL specified'),
    );
    expect(f.repliesTo(DM.id)).toHaveLength(3);
  });
});

describe('fake telegram: injected failures', () => {
  it('failNext: 429 with retry_after and Retry-After, 403 blocked, raw bodies, resets; then calls succeed again', async () => {
    const f = await start();
    f.deliverText({ chat: DM, from: ANN, text: 'hi' });
    f.failNext('sendMessage', { code: 429, retryAfter: 3 });
    const limited = await call(f, 'sendMessage', { chat_id: DM.id, text: 'a' });
    expect(limited.status).toBe(429);
    expect(limited.json).toEqual({
      ok: false,
      error_code: 429,
      description: 'Too Many Requests: retry after 3',
      parameters: { retry_after: 3 },
    });
    expect(limited.headers.get('retry-after')).toBe('3');
    expect((await call(f, 'sendMessage', { chat_id: DM.id, text: 'a' })).json.ok).toBe(true);

    // Validation comes first: an invalid send is a 400 and does not use up the failure.
    f.failNext('sendMessage', { code: 403 });
    expect((await call(f, 'sendMessage', { chat_id: DM.id, text: '' })).json.error_code).toBe(400);
    expect((await call(f, 'sendMessage', { chat_id: DM.id, text: 'b' })).json).toEqual(err(403, 'Forbidden: bot was blocked by the user'));

    f.failNext('getUpdates', { code: 502, body: '<html><body>502 Bad Gateway</body></html>' });
    const gw = await fetch(`${f.apiBase}/getUpdates`);
    expect(gw.status).toBe(502);
    expect(await gw.text()).toContain('Bad Gateway');
    f.failNext('getme', { code: 500, reset: true });
    await expect(fetch(`${f.apiBase}/getMe`)).rejects.toThrow();
    f.failNext('*', { code: 500, count: 2 });
    expect((await call(f, 'getMe')).json).toEqual(err(500, 'Internal Server Error'));
    expect((await call(f, 'sendChatAction', { chat_id: DM.id, action: 'typing' })).json.error_code).toBe(500);
    expect((await call(f, 'getMe')).json.ok).toBe(true);

    f.deliverText({ chat: TEAM, from: BOB, text: 'hi' });
    f.failNext('sendMessage', {
      code: 400,
      description: 'Bad Request: group chat was upgraded to a supergroup chat',
      parameters: { migrate_to_chat_id: -100777 },
      chatId: TEAM.id,
    });
    expect((await call(f, 'sendMessage', { chat_id: DM.id, text: 'dm still fine' })).json.ok).toBe(true);
    expect((await call(f, 'sendMessage', { chat_id: TEAM.id, text: 'x' })).json).toEqual({
      ok: false,
      error_code: 400,
      description: 'Bad Request: group chat was upgraded to a supergroup chat',
      parameters: { migrate_to_chat_id: -100777 },
    });
    expect(f.sent.filter((s) => !s.ok).map((s) => s.error!.code)).toEqual([429, 400, 403, 400]);
  });

  it('blockChat: 403 until unblocked; setHandler adds a method', async () => {
    const f = await start();
    f.deliverText({ chat: DM, from: ANN, text: 'hi' });
    f.blockChat(DM.id);
    expect((await call(f, 'sendMessage', { chat_id: DM.id, text: 'x' })).json).toEqual(err(403, 'Forbidden: bot was blocked by the user'));
    expect((await call(f, 'sendChatAction', { chat_id: DM.id, action: 'typing' })).json.error_code).toBe(403);
    f.blockChat(DM.id, false);
    expect((await call(f, 'sendMessage', { chat_id: DM.id, text: 'x' })).json.ok).toBe(true);

    f.setHandler('setMyCommands', (params) => {
      expect(JSON.parse(params.commands!)).toEqual([{ command: 'start', description: 'Start' }]);
      return true;
    });
    expect((await call(f, 'setMyCommands', { commands: [{ command: 'start', description: 'Start' }] })).json).toEqual({
      ok: true,
      result: true,
    });
  });
});

describe('fake telegram: injected updates', () => {
  it('deliverText builds real Updates: entities for /commands and @mentions with UTF-16 offsets; groups', async () => {
    const f = await start();
    const text = '/start@berth_test_bot hi @someone 😀 /help a/b x@abcd @abc';
    const u = f.deliverText({ chat: TEAM, from: { ...BOB, last_name: 'B', language_code: 'en' }, text });
    expect(u.message).toEqual({
      message_id: 1,
      from: { id: BOB.id, is_bot: false, first_name: 'Bob', last_name: 'B', language_code: 'en' },
      chat: { id: TEAM.id, title: 'Team', type: 'supergroup' },
      date: expect.any(Number),
      text,
      entities: [
        { type: 'bot_command', offset: 0, length: 21 },
        { type: 'mention', offset: 25, length: 8 },
        { type: 'bot_command', offset: 37, length: 5 },
      ],
    });
    expect(text.slice(37, 42)).toBe('/help');
    expect(f.deliverText({ chat: DM, from: ANN, text: 'plain' }).message).not.toHaveProperty('entities');

    const raw = f.deliverRaw({
      callback_query: { id: 'cb1', from: { id: ANN.id, is_bot: false, first_name: 'Ann' }, data: 'yes', chat_instance: '1' },
    });
    expect(raw.update_id).toBe(u.update_id + 2);
    const got = (await call(f, 'getUpdates')).json.result as Update[];
    expect(got.map((x) => Object.keys(x)[1])).toEqual(['message', 'message', 'callback_query']);
    expect(() => f.deliverText({ chat: DM, from: ANN, text: 'x', reply_to_message: 99 })).toThrow(/no message 99/);
  });
});
