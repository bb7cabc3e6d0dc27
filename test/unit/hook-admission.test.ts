import { describe, expect, it } from 'vitest';
import { createHookGate } from '../../src/channels/hook-admission.js';
import type { HookBounds } from '../../src/channels/hook-admission.js';

/**
 * What a request to /hooks may hold before and after it proves who sent it (outside attack 4,
 * M1): strangers' body reads share a small budget per source and across berth, a newcomer is
 * never refused for want of room (the read furthest behind the pace is cut instead), and only
 * an authenticated request takes one of its channel's slots.
 */
const bounds = (over: Partial<HookBounds> = {}): HookBounds => ({
  inFlightPerChannel: 2,
  unverifiedPerSource: 2,
  unverifiedTotal: 3,
  // Long enough that no read here is cut for its pace unless a test asks for that.
  unverifiedGraceMs: 600_000,
  unverifiedMinBytesPerSecond: 1024,
  ...over,
});

/** A request whose body sends `chunks` and then hangs until `end()` (or ends at once). */
function body(chunks: string[], opts: { hang?: boolean; length?: number } = {}) {
  let controller: ReadableStreamDefaultController<Uint8Array> | undefined;
  const req = new Request('http://x/hooks/ci', {
    method: 'POST',
    headers: opts.length === undefined ? {} : { 'content-length': String(opts.length) },
    body: new ReadableStream<Uint8Array>({
      start(c) {
        controller = c;
        for (const chunk of chunks) c.enqueue(new TextEncoder().encode(chunk));
        if (!opts.hang) c.close();
      },
    }),
    duplex: 'half',
  } as RequestInit);
  return { req, send: (text: string) => controller!.enqueue(new TextEncoder().encode(text)), end: () => controller!.close() };
}

/** The outcome of a read, without awaiting it: 'reading' until it settles. */
function watch(p: Promise<Buffer>) {
  const state: { outcome: 'reading' | 'read' | string; text?: string; message?: string } = { outcome: 'reading' };
  const settled = p.then(
    (b) => Object.assign(state, { outcome: 'read', text: b.toString() }),
    (e: { code?: string; message?: string }) => Object.assign(state, { outcome: e.code ?? 'error', message: e.message }),
  );
  return { state, settled };
}
const tick = () => new Promise((r) => setImmediate(r));

describe("strangers' body reads (before the signature is checked)", () => {
  it('a whole body is read and gives its room back', async () => {
    const gate = createHookGate(bounds());
    const b = body(['{"a":', '1}']);
    expect((await gate.admit('webhook', '10.0.0.1').unverifiedBody(b.req, 100)).toString()).toBe('{"a":1}');
    expect(gate.held()).toEqual({ unverified: 0, sources: 0, inFlight: 0 });
  });

  it("past a source's share, a newcomer from it is read: that source's read furthest behind is cut (BUSY), another source's are not touched", async () => {
    const gate = createHookGate(bounds({ unverifiedTotal: 10 }));
    const a1 = body(['{'], { hang: true });
    const a2 = body(['{'], { hang: true });
    const b1 = body(['{'], { hang: true });
    const r1 = watch(gate.admit('webhook', 'A').unverifiedBody(a1.req, 100));
    await tick();
    const r2 = watch(gate.admit('webhook', 'A').unverifiedBody(a2.req, 100));
    const rb = watch(gate.admit('slack', 'B').unverifiedBody(b1.req, 100));
    await tick();
    expect(gate.held()).toMatchObject({ unverified: 3, sources: 2 });
    const a3 = body(['{"signed":true}']);
    expect((await gate.admit('webhook', 'A').unverifiedBody(a3.req, 100)).toString()).toBe('{"signed":true}');
    await r1.settled;
    expect(r1.state).toMatchObject({ outcome: 'BUSY', message: expect.stringContaining('cut to make room') });
    expect([r2.state.outcome, rb.state.outcome]).toEqual(['reading', 'reading']);
    a2.end();
    b1.end();
    await Promise.all([r2.settled, rb.settled]);
    expect(gate.held().unverified).toBe(0);
  });

  it("with berth's total taken, a new source's request cuts the busiest source's laggard", async () => {
    const gate = createHookGate(bounds());
    const hang = () => body(['{'], { hang: true });
    const a = [hang(), hang()];
    const b = hang();
    const ra = a.map((x) => watch(gate.admit('webhook', 'A').unverifiedBody(x.req, 100)));
    const rb = watch(gate.admit('webhook', 'B').unverifiedBody(b.req, 100));
    await tick();
    expect(gate.held()).toMatchObject({ unverified: 3 });
    expect((await gate.admit('webhook', 'C').unverifiedBody(body(['ok']).req, 100)).toString()).toBe('ok');
    await ra[0]!.settled;
    expect(ra.map((r) => r.state.outcome)).toEqual(['BUSY', 'reading']);
    expect(rb.state.outcome).toBe('reading');
    for (const x of [a[1]!, b]) x.end();
    await Promise.all([ra[1]!.settled, rb.settled]);
  });

  it('a body arriving at a good pace is not the one cut: an older read that kept sending outlasts a newer silent one', async () => {
    const gate = createHookGate(bounds({ unverifiedPerSource: 2, unverifiedTotal: 10 }));
    const busy = body(['{'], { hang: true });
    const rBusy = watch(gate.admit('webhook', 'A').unverifiedBody(busy.req, 1_000_000));
    busy.send('x'.repeat(64 * 1024)); // 64 s of pace at 1 KiB/s
    await tick();
    const silent = body([], { hang: true });
    const rSilent = watch(gate.admit('webhook', 'A').unverifiedBody(silent.req, 1_000_000));
    await tick();
    await gate.admit('webhook', 'A').unverifiedBody(body(['new']).req, 100);
    await rSilent.settled;
    expect(rSilent.state.outcome).toBe('BUSY');
    expect(rBusy.state.outcome).toBe('reading');
    busy.end();
    await rBusy.settled;
    expect(rBusy.state.outcome).toBe('read');
  });

  it('a body that falls behind the minimum rate after the grace is cut (BUSY, saying why); one that keeps up is read', async () => {
    const gate = createHookGate(bounds({ unverifiedGraceMs: 30, unverifiedMinBytesPerSecond: 1024 }));
    const slow = body(['{'], { hang: true });
    const r = watch(gate.admit('webhook', 'A').unverifiedBody(slow.req, 100));
    await r.settled;
    expect(r.state).toMatchObject({ outcome: 'BUSY', message: expect.stringContaining('slower than 1 KiB a second') });
    expect(gate.held().unverified).toBe(0);
  });

  it('a declared length over what the service sends is refused before the body is read, and cuts nobody to make room', async () => {
    const gate = createHookGate(bounds());
    const hang = [body(['{'], { hang: true }), body(['{'], { hang: true })];
    const held = hang.map((x) => watch(gate.admit('webhook', 'A').unverifiedBody(x.req, 100)));
    await tick();
    const big = body(['{'], { hang: true, length: 101 });
    await expect(gate.admit('webhook', 'A').unverifiedBody(big.req, 100)).rejects.toMatchObject({ code: 'PAYLOAD_TOO_LARGE' });
    await tick();
    expect(held.map((r) => r.state.outcome)).toEqual(['reading', 'reading']);
    for (const x of hang) x.end();
    await Promise.all(held.map((r) => r.settled));
  });

  it('without a source address every caller is one source (a reverse proxy): the share still makes room for the newest', async () => {
    const gate = createHookGate(bounds());
    const hang = [body(['{'], { hang: true }), body(['{'], { hang: true })];
    const held = hang.map((x) => watch(gate.admit('webhook', undefined).unverifiedBody(x.req, 100)));
    await tick();
    expect((await gate.admit('slack', undefined).unverifiedBody(body(['signed']).req, 100)).toString()).toBe('signed');
    await held[0]!.settled;
    expect(held.map((r) => r.state.outcome)).toEqual(['BUSY', 'reading']);
    hang[1]!.end();
    await held[1]!.settled;
  });
});

describe('authenticated work', () => {
  it('each channel answers so many authenticated requests at once; more are BUSY; a slot is given back once, when answered', () => {
    const gate = createHookGate(bounds());
    const t1 = gate.admit('webhook', 'A');
    const t2 = gate.admit('webhook', 'B');
    t1.verified();
    t1.verified(); // once per request
    t2.verified();
    const t3 = gate.admit('webhook', 'C');
    expect(() => t3.verified()).toThrow(expect.objectContaining({ code: 'BUSY' }));
    // Another channel's callers are not crowded out.
    gate.admit('slack', 'A').verified();
    expect(gate.held().inFlight).toBe(3);
    t1.release();
    t1.release();
    t3.release(); // held nothing
    expect(gate.held().inFlight).toBe(2);
    gate.admit('webhook', 'C').verified();
    expect(gate.held().inFlight).toBe(3);
  });
});
