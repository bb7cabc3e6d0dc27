/**
 * The signal-cli fake against the protocol notes (/work/shared/signal-cli-protocol.md), with
 * plain fetch: SSE framing and keepalives, fan-out, HTTP status rules of /api/v1/rpc, JSON-RPC
 * errors, send results and failure payloads, on-start drop / on-connection hold, and
 * re-delivery until a receipt.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { startFakeSignalCli, type FakeSignalCli, type FakeSignalCliOptions, type ReceivePayload } from '../fakes/signal-cli.js';

const ALICE = { fromUuid: 'a11ce000-0000-4000-8000-000000000001', fromNumber: '+15551230001' };
const BOB_HIDDEN = { fromUuid: 'b0b00000-0000-4000-8000-000000000002', fromNumber: null };

let fakes: FakeSignalCli[] = [];
let streams: Sse[] = [];

async function start(opts: FakeSignalCliOptions = {}): Promise<FakeSignalCli> {
  const f = await startFakeSignalCli({ keepaliveMs: 25, ...opts });
  fakes.push(f);
  return f;
}

afterEach(async () => {
  for (const s of streams) s.close();
  streams = [];
  await Promise.all(fakes.map((f) => f.close()));
  fakes = [];
});

interface Sse {
  status: number;
  contentType: string | null;
  /** Everything received so far, raw. */
  raw(): string;
  /** `data:` payloads of complete `receive` events. */
  events(): ReceivePayload[];
  /** Resolves once the stream has ended (server closed it). */
  ended: Promise<void>;
  close(): void;
}

async function openSse(fake: FakeSignalCli, query = ''): Promise<Sse> {
  const ac = new AbortController();
  const res = await fetch(`${fake.url}/api/v1/events${query}`, { signal: ac.signal });
  let raw = '';
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  const ended = (async () => {
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) return;
        raw += decoder.decode(value, { stream: true });
      }
    } catch {
      // aborted or reset
    }
  })();
  const sse: Sse = {
    status: res.status,
    contentType: res.headers.get('content-type'),
    raw: () => raw,
    events: () =>
      raw
        .split('\n\n')
        .slice(0, -1)
        .map((frame) => frame.split('\n').filter((l) => !l.startsWith(':')))
        .filter((lines) => lines.includes('event:receive'))
        .map((lines) => JSON.parse(lines.find((l) => l.startsWith('data:'))!.slice(5)) as ReceivePayload),
    ended,
    close: () => ac.abort(),
  };
  streams.push(sse);
  return sse;
}

async function rpc(fake: FakeSignalCli, body: unknown, init: RequestInit = {}): Promise<{ status: number; text: string; json: any }> {
  const res = await fetch(`${fake.url}/api/v1/rpc`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: typeof body === 'string' ? body : JSON.stringify(body),
    ...init,
  });
  const text = await res.text();
  return { status: res.status, text, json: text ? JSON.parse(text) : undefined };
}

const send = (fake: FakeSignalCli, params: Record<string, unknown>, id: number | string = 1) =>
  rpc(fake, { jsonrpc: '2.0', method: 'send', params, id });

/** A keepalive after the connect proves the connect-time burst (if any) is already in `raw`. */
async function settled(fake: FakeSignalCli, s: Sse): Promise<void> {
  const before = s.raw().length;
  await fake.waitFor(() => s.raw().slice(before).includes(':\n'), 2_000);
}

describe('fake signal-cli: endpoints and SSE', () => {
  it('answers /check, 404 elsewhere, 405 for wrong methods', async () => {
    const f = await start();
    expect((await fetch(`${f.url}/api/v1/check`)).status).toBe(200);
    expect((await fetch(`${f.url}/api/v1/check`, { method: 'POST' })).status).toBe(405);
    expect((await fetch(`${f.url}/api/v1/events`, { method: 'POST' })).status).toBe(405);
    expect((await fetch(`${f.url}/api/v1/nope`)).status).toBe(404);
  });

  it('frames events as event:receive/data: without id lines, and sends keepalives', async () => {
    const f = await start();
    const s = await openSse(f, '?account=%2B15550000000');
    expect(s.status).toBe(200);
    expect(s.contentType).toBe('text/event-stream');
    await f.waitForClients(1);
    const d = f.deliverText({ ...BOB_HIDDEN, name: 'Bob', text: 'hello\nworld' });
    await f.waitFor(() => s.events().length === 1);
    await settled(f, s);
    await settled(f, s);

    const raw = s.raw();
    // Only event:receive + one data: line per event, and `:` keepalive comments; no id: lines.
    expect(raw).toMatch(/(^|\n)event:receive\ndata:\{[^\n]*\}\n\n/);
    expect(raw).not.toMatch(/^id:/m);
    expect(raw.split('\n').filter((l) => l !== '' && l !== ':' && l !== 'event:receive' && !l.startsWith('data:{'))).toEqual([]);
    expect(raw.match(/^:\n/gm)!.length).toBeGreaterThanOrEqual(2);

    const [ev] = s.events();
    expect(ev!.account).toBe('+15550000000');
    expect(ev!.envelope).toMatchObject({
      source: BOB_HIDDEN.fromUuid, // hidden number: the legacy identifier is the uuid
      sourceNumber: null,
      sourceUuid: BOB_HIDDEN.fromUuid,
      sourceName: 'Bob',
      sourceDevice: 1,
      timestamp: d.timestamp,
      dataMessage: { timestamp: d.timestamp, message: 'hello\nworld', expiresInSeconds: 0, viewOnce: false },
    });
    expect(ev!.envelope!.serverReceivedTimestamp).toBeGreaterThanOrEqual(d.timestamp);
    expect(ev!.envelope!.dataMessage).not.toHaveProperty('groupInfo');
    expect(d.sourceUuid).toBe(BOB_HIDDEN.fromUuid);
  });

  it('fans every event out to every connected client; group messages carry groupInfo', async () => {
    const f = await start();
    const [a, b] = [await openSse(f), await openSse(f)];
    await f.waitForClients(2);
    f.deliverText({ ...ALICE, text: 'to the group', groupId: 'c2IzL0I5aXZhcisyNHFhODNib2F4PQ==' });
    f.deliverRaw({ sourceUuid: ALICE.fromUuid, sourceNumber: ALICE.fromNumber, typingMessage: { action: 'STARTED', timestamp: 1 } });
    await f.waitFor(() => a.events().length === 2 && b.events().length === 2);
    expect(a.events()).toEqual(b.events());
    expect(a.events()[0]!.envelope!.dataMessage!.groupInfo).toMatchObject({ groupId: 'c2IzL0I5aXZhcisyNHFhODNib2F4PQ==', type: 'DELIVER' });
    expect(a.events()[1]!.envelope).toMatchObject({ source: ALICE.fromNumber, sourceDevice: 1, typingMessage: { action: 'STARTED' } });
  });

  it('dropConnections ends every stream; clients reconnect', async () => {
    const f = await start();
    const s = await openSse(f);
    await f.waitForClients(1);
    f.dropConnections();
    await s.ended;
    await f.waitForClients(0);
    await openSse(f);
    await f.waitForClients(1);
    expect(f.connections()).toBe(2);
  });
});

describe('fake signal-cli: JSON-RPC over HTTP', () => {
  it('415 without application/json, 405 for other methods, 201 for a notification', async () => {
    const f = await start();
    const body = JSON.stringify({ jsonrpc: '2.0', method: 'sendTyping', params: { recipient: ALICE.fromNumber }, id: 1 });
    const plain = await fetch(`${f.url}/api/v1/rpc`, { method: 'POST', body }); // text/plain
    expect(plain.status).toBe(415);
    expect((await fetch(`${f.url}/api/v1/rpc`)).status).toBe(405);

    const note = await rpc(f, { jsonrpc: '2.0', method: 'sendTyping', params: { recipient: ALICE.fromNumber } });
    expect(note).toMatchObject({ status: 201, text: '' });
    expect(f.typing()).toHaveLength(1); // a notification still runs
    expect(f.calls.map((c) => c.method)).toEqual(['sendTyping']);
    expect(f.calls[0]!.id).toBeUndefined();
  });

  it('errors are HTTP 200 with a JSON-RPC error: -32601, -32700, -32600, -32602', async () => {
    const f = await start();
    const unknown = await rpc(f, { jsonrpc: '2.0', method: 'listGroupz', id: 'x' });
    expect(unknown.status).toBe(200);
    expect(unknown.json).toEqual({ jsonrpc: '2.0', error: { code: -32601, message: 'Method not implemented', data: null }, id: 'x' });

    const parse = await rpc(f, '{"jsonrpc":');
    expect(parse.status).toBe(200);
    expect(parse.json).toMatchObject({ error: { code: -32700 }, id: null });

    expect((await rpc(f, { jsonrpc: '2.0' })).json).toEqual({
      jsonrpc: '2.0',
      error: { code: -32600, message: 'method field must be set', data: null },
      id: null,
    });
    expect((await send(f, { recipient: 42, message: 'x' })).json.error.code).toBe(-32602);
    expect((await send(f, { message: 'x' })).json.error).toEqual({ code: -1, message: 'No recipients given', data: null });
  });

  it('batches: one response per request with an id, [] when all were notifications', async () => {
    const f = await start();
    const batch = await rpc(f, [
      { jsonrpc: '2.0', method: 'sendTyping', params: { recipient: ALICE.fromNumber }, id: 1 },
      { jsonrpc: '2.0', method: 'sendTyping', params: { recipient: ALICE.fromNumber, stop: true } },
      { jsonrpc: '2.0', method: 'nope', id: 2 },
    ]);
    expect(batch.status).toBe(200);
    expect(batch.json).toHaveLength(2);
    expect(batch.json[0]).toMatchObject({ id: 1, result: { results: [{ type: 'SUCCESS' }] } });
    expect(batch.json[1]).toMatchObject({ id: 2, error: { code: -32601 } });
    expect(f.typing().map((t) => t.stop)).toEqual([false, true]);

    const notes = await rpc(f, [{ jsonrpc: '2.0', method: 'sendTyping', params: { recipient: ALICE.fromNumber } }]);
    expect(notes).toMatchObject({ status: 200, json: [] });
  });

  it('send: result shape, recording, repliesTo by uuid or number', async () => {
    const f = await start();
    f.deliverText({ ...ALICE, text: 'hi' }); // learns Alice's uuid ↔ number
    const r = await send(
      f,
      { recipient: [ALICE.fromUuid], message: 'hello back', attachments: ['data:text/plain;filename=a.txt;base64,aGk='] },
      7,
    );
    expect(r.status).toBe(200);
    expect(r.json).toEqual({
      jsonrpc: '2.0',
      result: {
        timestamp: expect.any(Number),
        results: [{ recipientAddress: { uuid: ALICE.fromUuid, number: ALICE.fromNumber, username: null }, type: 'SUCCESS' }],
      },
      id: 7,
    });
    const [s] = f.sent();
    expect(s).toMatchObject({ recipients: [ALICE.fromUuid], message: 'hello back', ok: true, timestamp: r.json.result.timestamp });
    expect(s!.files[0]).toMatchObject({ source: 'data-uri', contentType: 'text/plain', filename: 'a.txt' });
    expect(s!.files[0]!.data!.toString()).toBe('hi');
    expect(f.repliesTo(ALICE.fromNumber)).toHaveLength(1);
    expect(f.repliesTo(ALICE.fromUuid)).toHaveLength(1);

    const empty = await send(f, { recipient: ALICE.fromNumber });
    expect(empty.json.error.code).toBe(-1);
    const unknownGroup = await send(f, { groupId: 'bm9wZQ==', message: 'x' });
    expect(unknownGroup.json.error.code).toBe(-1);
  });

  it("failNextSend: the notes' total-failure payloads, then sends succeed again", async () => {
    const f = await start();
    f.failNextSend({ type: 'rate_limit', retryAfterSeconds: 86_400 });
    const limited = await send(f, { recipient: ALICE.fromNumber, message: 'a' });
    expect(limited.status).toBe(200);
    expect(limited.json.error).toMatchObject({
      code: -5,
      data: {
        response: {
          timestamp: expect.any(Number),
          results: [{ recipientAddress: { number: ALICE.fromNumber }, type: 'RATE_LIMIT_FAILURE', retryAfterSeconds: 86_400 }],
        },
      },
    });
    expect((await send(f, { recipient: ALICE.fromNumber, message: 'a' })).json.result.results[0].type).toBe('SUCCESS');

    f.failNextSend({ type: 'untrusted' }, { count: 2 });
    for (let i = 0; i < 2; i++) {
      const r = await send(f, { recipient: ALICE.fromNumber, message: 'b' });
      expect(r.json.error).toMatchObject({ code: -4, data: { response: { results: [{ type: 'IDENTITY_FAILURE' }] } } });
    }
    f.failNextSend({ type: 'unregistered' });
    expect((await send(f, { recipient: ALICE.fromNumber, message: 'c' })).json.error).toMatchObject({
      code: -1,
      message: 'Failed to send message',
      data: { response: { results: [{ type: 'UNREGISTERED_FAILURE' }] } },
    });

    // Per recipient: only that one fails, so the send as a whole succeeds.
    f.failNextSend({ type: 'unregistered' }, { recipient: BOB_HIDDEN.fromUuid });
    const partial = await send(f, { recipient: [ALICE.fromNumber, BOB_HIDDEN.fromUuid], message: 'd' });
    expect(partial.json.result.results.map((x: { type: string }) => x.type)).toEqual(['SUCCESS', 'UNREGISTERED_FAILURE']);

    expect(f.sent().map((s) => s.ok)).toEqual([false, true, false, false, false, true]);
    expect(f.repliesTo(ALICE.fromNumber)).toHaveLength(2);
  });
});

describe('fake signal-cli: delivery modes', () => {
  it('on-start (default) drops what arrives while nobody listens', async () => {
    const f = await start();
    f.deliverText({ ...ALICE, text: 'lost' });
    expect(f.dropped).toHaveLength(1);
    const s = await openSse(f);
    await settled(f, s);
    expect(s.events()).toEqual([]);
  });

  it('on-connection holds events until a client connects', async () => {
    const f = await start({ receiveMode: 'on-connection' });
    const first = f.deliverText({ ...ALICE, text: 'one' });
    f.deliverText({ ...ALICE, text: 'two' });
    expect(f.dropped).toEqual([]);
    const s = await openSse(f);
    await f.waitFor(() => s.events().length === 2);
    expect(s.events().map((e) => e.envelope!.dataMessage!.message)).toEqual(['one', 'two']);
    expect(s.events()[0]!.envelope!.timestamp).toBe(first.timestamp);
    // Held events go out once.
    const again = await openSse(f);
    await settled(f, again);
    expect(again.events()).toEqual([]);
  });

  it('redeliverUntilReceipt: each new connection gets unreceipted messages again, same (sourceUuid, timestamp)', async () => {
    const f = await start({ redeliverUntilReceipt: true });
    const first = await openSse(f);
    await f.waitForClients(1);
    const m1 = f.deliverText({ ...ALICE, text: 'journal me' });
    const m2 = f.deliverText({ ...BOB_HIDDEN, text: 'me too' });
    f.deliverTyping({ ...ALICE, action: 'STARTED' }); // not a message: never re-delivered
    await f.waitFor(() => first.events().length === 3);

    f.dropConnections(); // the bridge crashed before receipting
    const second = await openSse(f);
    await settled(f, second);
    expect(second.events().map((e) => [e.envelope!.sourceUuid, e.envelope!.timestamp])).toEqual([
      [m1.sourceUuid, m1.timestamp],
      [m2.sourceUuid, m2.timestamp],
    ]);
    expect(second.events()[0]).toEqual(first.events()[0]);

    // Receipt for m1 (by number) and m2 (by uuid: hidden number) acknowledges them.
    const r1 = await rpc(f, {
      jsonrpc: '2.0',
      method: 'sendReceipt',
      params: { recipient: ALICE.fromNumber, targetTimestamp: [m1.timestamp], type: 'read' },
      id: 1,
    });
    expect(r1.json.result.results[0]).toMatchObject({ type: 'SUCCESS', recipientAddress: { uuid: ALICE.fromUuid } });
    expect(f.unacknowledged()).toHaveLength(1);
    await rpc(f, { jsonrpc: '2.0', method: 'sendReceipt', params: { recipient: m2.sourceUuid, targetTimestamp: m2.timestamp }, id: 2 });
    expect(f.receipts().map((r) => [r.recipient, r.targetTimestamps, r.type])).toEqual([
      [ALICE.fromNumber, [m1.timestamp], 'read'],
      [m2.sourceUuid, [m2.timestamp], 'read'],
    ]);

    f.dropConnections();
    const third = await openSse(f);
    await settled(f, third);
    expect(third.events()).toEqual([]);
    expect(f.dropped).toEqual([]);
  });
});
