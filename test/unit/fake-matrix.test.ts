/**
 * The Matrix homeserver fake against the Client-Server API, with plain fetch: auth and error
 * shapes, the /sync long poll (initial, incremental, limited, replay of a since token, invites,
 * leaves, ephemeral), idempotent sends, typing, receipts, joins, injected rate limits, bounds.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { startFakeMatrix, type FakeMatrix, type FakeMatrixOptions, type SyncResponse } from '../fakes/matrix.js';

const ALICE = '@alice:berth.test';
const BOB = '@bob:berth.test';
const BOT = '@berth:berth.test';
const TOKEN = 'berth-bot-token';

let fakes: FakeMatrix[] = [];

async function start(opts: FakeMatrixOptions = {}): Promise<FakeMatrix> {
  const f = await startFakeMatrix({ serverName: 'berth.test', ...opts });
  fakes.push(f);
  return f;
}

afterEach(async () => {
  await Promise.all(fakes.map((f) => f.close()));
  fakes = [];
});

interface Res {
  status: number;
  json: any;
  headers: Headers;
}

async function call(
  f: FakeMatrix,
  method: string,
  path: string,
  o: { token?: string | null; body?: unknown; raw?: string | Buffer; signal?: AbortSignal } = {},
): Promise<Res> {
  const headers: Record<string, string> = {};
  const token = o.token === undefined ? TOKEN : o.token;
  if (token !== null) headers.Authorization = `Bearer ${token}`;
  let body: string | Buffer | undefined;
  if (o.raw !== undefined) body = o.raw;
  else if (o.body !== undefined) body = JSON.stringify(o.body);
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const res = await fetch(`${f.url}${path}`, {
    method,
    headers,
    ...(body !== undefined ? { body } : {}),
    ...(o.signal ? { signal: o.signal } : {}),
  });
  const text = await res.text();
  return { status: res.status, json: text ? JSON.parse(text) : undefined, headers: res.headers };
}

const C = '/_matrix/client/v3';
const enc = encodeURIComponent;

async function sync(f: FakeMatrix, query = '', token?: string): Promise<SyncResponse> {
  const r = await call(f, 'GET', `${C}/sync${query ? `?${query}` : ''}`, token !== undefined ? { token } : {});
  expect(r.status).toBe(200);
  return r.json as SyncResponse;
}

describe('fake matrix: auth, errors, bounds', () => {
  it('versions without auth, whoami with it', async () => {
    const f = await start();
    const v = await call(f, 'GET', '/_matrix/client/versions', { token: null });
    expect(v.status).toBe(200);
    expect(v.headers.get('content-type')).toBe('application/json');
    expect(v.json.versions).toContain('v1.12');
    expect(v.json.unstable_features).toEqual({});
    expect((await call(f, 'GET', `${C}/account/whoami`)).json).toEqual({ user_id: BOT, device_id: 'BERTHBOT', is_guest: false });
    // The query-string form is accepted too.
    expect((await call(f, 'GET', `${C}/account/whoami?access_token=${TOKEN}`, { token: null })).json.user_id).toBe(BOT);
  });

  it('401 M_MISSING_TOKEN / M_UNKNOWN_TOKEN with soft_logout; revoked tokens', async () => {
    const f = await start();
    expect(await call(f, 'GET', `${C}/account/whoami`, { token: null })).toMatchObject({
      status: 401,
      json: { errcode: 'M_MISSING_TOKEN', error: expect.any(String) },
    });
    const wrong = await call(f, 'GET', `${C}/account/whoami`, { token: 'nope' });
    expect(wrong.status).toBe(401);
    expect(wrong.json).toEqual({ errcode: 'M_UNKNOWN_TOKEN', error: expect.any(String), soft_logout: false });
    const basic = await fetch(`${f.url}${C}/account/whoami`, { headers: { Authorization: `Basic ${TOKEN}` } });
    expect(basic.status).toBe(401);
    expect(((await basic.json()) as { errcode: string }).errcode).toBe('M_MISSING_TOKEN');

    const carol = f.addUser({ userId: '@carol:berth.test', accessToken: 'carol-token' });
    expect((await call(f, 'GET', `${C}/account/whoami`, { token: carol.accessToken })).json.user_id).toBe('@carol:berth.test');
    f.revokeToken('carol-token', { softLogout: true });
    expect((await call(f, 'GET', `${C}/account/whoami`, { token: 'carol-token' })).json).toMatchObject({
      errcode: 'M_UNKNOWN_TOKEN',
      soft_logout: true,
    });
  });

  it('404 / 405 M_UNRECOGNIZED, M_NOT_JSON, M_BAD_JSON, 413 M_TOO_LARGE past 1 MiB', async () => {
    const f = await start();
    const room = f.createRoom({ members: [ALICE] });
    expect(await call(f, 'GET', `${C}/nope`)).toMatchObject({ status: 404, json: { errcode: 'M_UNRECOGNIZED' } });
    expect(await call(f, 'GET', '/elsewhere')).toMatchObject({ status: 404, json: { errcode: 'M_UNRECOGNIZED' } });
    expect(await call(f, 'POST', `${C}/sync`, { body: {} })).toMatchObject({ status: 405, json: { errcode: 'M_UNRECOGNIZED' } });
    const send = `${C}/rooms/${enc(room)}/send/m.room.message/`;
    expect(await call(f, 'PUT', `${send}t1`, { raw: '{"msgtype":' })).toMatchObject({ status: 400, json: { errcode: 'M_NOT_JSON' } });
    expect(await call(f, 'PUT', `${send}t2`, { raw: '[1,2]' })).toMatchObject({ status: 400, json: { errcode: 'M_BAD_JSON' } });
    expect(await call(f, 'PUT', `${send}t3`, { raw: '' })).toMatchObject({ status: 400, json: { errcode: 'M_NOT_JSON' } });
    const huge = await call(f, 'PUT', `${send}t4`, { raw: JSON.stringify({ msgtype: 'm.text', body: 'x'.repeat(1_100_000) }) });
    expect(huge).toMatchObject({ status: 413, json: { errcode: 'M_TOO_LARGE' } });
    // Bad percent-encoding is an error, not a crash.
    expect((await call(f, 'PUT', `${C}/rooms/%E0%A4%A/send/m.room.message/t5`, { body: {} })).status).toBe(400);
    expect(f.sent).toEqual([]);
    expect((await call(f, 'GET', `${C}/account/whoami`)).status).toBe(200);
  });
});

describe('fake matrix: sync', () => {
  it('initial sync: joined room timeline in client format, limited at 10 by default with state', async () => {
    const f = await start();
    const room = f.createRoom({ members: [ALICE], name: 'Chat' }); // 9 events
    f.sendText(room, ALICE, 'first');
    const msg = f.sendText(room, ALICE, 'hello', { html: '<b>hello</b>' });
    expect(msg).toMatchObject({
      type: 'm.room.message',
      room_id: room,
      sender: ALICE,
      content: { msgtype: 'm.text', body: 'hello', format: 'org.matrix.custom.html', formatted_body: '<b>hello</b>' },
    });
    expect(msg.event_id).toMatch(/^\$[A-Za-z0-9_-]{43}$/);
    expect(room).toMatch(/^![A-Za-z]{18}:berth\.test$/);

    const s = await sync(f);
    expect(s.next_batch).toEqual(expect.any(String));
    const j = s.rooms!.join![room]!;
    expect(j.timeline.events.length).toBe(10);
    expect(j.timeline.limited).toBe(true);
    expect(j.timeline.prev_batch).toEqual(expect.any(String));
    const last = j.timeline.events.at(-1)!;
    expect(last).toMatchObject({
      event_id: msg.event_id,
      type: 'm.room.message',
      sender: ALICE,
      content: msg.content,
      unsigned: { age: expect.any(Number), membership: 'join' },
    });
    expect(last).not.toHaveProperty('room_id'); // ClientEventWithoutRoomID
    expect(j.state.events.map((e) => e.type)).toContain('m.room.create');
    expect(j.ephemeral).toEqual({ events: [] });
    expect(j.unread_notifications).toEqual({ notification_count: 2, highlight_count: 0 });
    expect(j.summary).toEqual({}); // Synapse: only with lazy_load_members
    expect(s).not.toHaveProperty('presence'); // empty sections left out, like Synapse
    expect(s.device_one_time_keys_count).toEqual({ signed_curve25519: 0 });

    // With a bigger limit the whole history fits: not limited, empty state.
    const all = await sync(f, `filter=${enc(JSON.stringify({ room: { timeline: { limit: 50 }, state: { lazy_load_members: true } } }))}`);
    const aj = all.rooms!.join![room]!;
    expect(aj.timeline.limited).toBe(false);
    expect(aj.state.events).toEqual([]);
    expect(aj.timeline.events[0]!.type).toBe('m.room.create');
    expect(aj.timeline.events.filter((e) => e.type === 'm.room.member').map((e) => [e.state_key, e.content.membership])).toEqual([
      [ALICE, 'join'],
      [BOT, 'invite'],
      [BOT, 'join'],
    ]);
    expect(aj.summary).toEqual({ 'm.joined_member_count': 2, 'm.invited_member_count': 0 }); // named room: no heroes
  });

  it('long poll: held until something new, then the event once; replaying since gives it again', async () => {
    const f = await start();
    const room = f.createRoom({ members: [ALICE] });
    const first = await sync(f);
    const held = sync(f, `since=${first.next_batch}&timeout=10000`);
    await f.waitForPoll();
    expect(f.pendingSyncs(BOT)).toBe(1);
    const ev = f.sendText(room, ALICE, 'are you there?');
    const got = await held;
    expect(got.next_batch).not.toBe(first.next_batch);
    const tl = got.rooms!.join![room]!.timeline;
    expect(tl.limited).toBe(false);
    expect(tl.events.map((e) => e.event_id)).toEqual([ev.event_id]);
    expect(got.rooms!.join![room]!.state.events).toEqual([]);

    // A client that crashed before saving next_batch asks again with the old token.
    const again = await sync(f, `since=${first.next_batch}&timeout=10000`);
    expect(again.rooms!.join![room]!.timeline.events.map((e) => e.event_id)).toEqual([ev.event_id]);
    expect(again.next_batch).toBe(got.next_batch);
  });

  it('timeout: an answer without rooms and the same next_batch; timeout=0 answers at once', async () => {
    const f = await start();
    f.createRoom({ members: [ALICE] });
    const { next_batch } = await sync(f);
    const t0 = Date.now();
    const idle = await sync(f, `since=${next_batch}&timeout=150`);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(140);
    expect(idle.next_batch).toBe(next_batch);
    expect(idle).not.toHaveProperty('rooms');
    const now = await sync(f, `since=${next_batch}&timeout=0`);
    expect(now).not.toHaveProperty('rooms');
  });

  it('bad since → 400 M_UNKNOWN; a token from the future is clamped; bad params → M_INVALID_PARAM', async () => {
    const f = await start();
    const room = f.createRoom({ members: [ALICE] });
    expect(await call(f, 'GET', `${C}/sync?since=garbage`)).toMatchObject({
      status: 400,
      json: { errcode: 'M_UNKNOWN', error: 'Invalid stream token' },
    });
    const future = sync(f, 'since=s999999&timeout=5000');
    await f.waitForPoll();
    const ev = f.sendText(room, ALICE, 'after');
    expect((await future).rooms!.join![room]!.timeline.events.map((e) => e.event_id)).toEqual([ev.event_id]);
    expect((await call(f, 'GET', `${C}/sync?timeout=soon`)).json.errcode).toBe('M_INVALID_PARAM');
    expect((await call(f, 'GET', `${C}/sync?full_state=yes`)).json.errcode).toBe('M_INVALID_PARAM');
    expect((await call(f, 'GET', `${C}/sync?filter=%7Bnope`)).json.errcode).toBe('M_NOT_JSON');
    expect((await call(f, 'GET', `${C}/sync?filter=42`)).json).toMatchObject({ errcode: 'M_INVALID_PARAM', error: 'No such filter' });
  });

  it('many events since the last sync: limited, last N, state delta; /messages fills the gap', async () => {
    const f = await start();
    const room = f.createRoom({ members: [ALICE] });
    const { next_batch } = await sync(f);
    const filter = enc(JSON.stringify({ room: { timeline: { limit: 3 } } }));
    f.join(room, BOB);
    const texts = Array.from({ length: 6 }, (_, i) => f.sendText(room, ALICE, `m${i}`));
    const s = await sync(f, `since=${next_batch}&timeout=1000&filter=${filter}`);
    const j = s.rooms!.join![room]!;
    expect(j.timeline.limited).toBe(true);
    expect(j.timeline.events.map((e) => e.content.body)).toEqual(['m3', 'm4', 'm5']);
    expect(j.state.events.map((e) => [e.type, e.state_key])).toEqual([['m.room.member', BOB]]);
    const gap = await call(f, 'GET', `${C}/rooms/${enc(room)}/messages?dir=b&from=${j.timeline.prev_batch}&to=${next_batch}&limit=50`);
    expect(gap.status).toBe(200);
    expect(gap.json.chunk.map((e: any) => e.event_id)).toEqual(
      [texts[2]!, texts[1]!, texts[0]!].map((e) => e.event_id).concat([expect.any(String)]),
    );
    expect(gap.json.chunk[3]).toMatchObject({ type: 'm.room.member', state_key: BOB, room_id: room });
  });

  it('invites: stripped state plus the invite event; joining moves the room to join (limited)', async () => {
    const f = await start();
    const room = f.createRoom({ members: [ALICE], direct: true, invite: true });
    const s = await sync(f);
    expect(s.rooms!.join).toBeUndefined();
    const inv = s.rooms!.invite![room]!.invite_state.events;
    expect(inv.map((e) => e.type)).toEqual(['m.room.create', 'm.room.join_rules', 'm.room.member', 'm.room.member']);
    expect(inv[0]).toEqual({ type: 'm.room.create', state_key: '', sender: ALICE, content: { creator: ALICE, room_version: '10' } });
    expect(inv[2]).toEqual({
      type: 'm.room.member',
      state_key: ALICE,
      sender: ALICE,
      content: { membership: 'join', displayname: 'alice' },
    });
    expect(inv[3]).toMatchObject({
      type: 'm.room.member',
      state_key: BOT,
      sender: ALICE,
      event_id: expect.any(String),
      content: { membership: 'invite', is_direct: true },
    });

    const held = sync(f, `since=${s.next_batch}&timeout=5000`);
    await f.waitForPoll();
    const joined = await call(f, 'POST', `${C}/join/${enc(room)}`, { body: {} });
    expect(joined).toMatchObject({ status: 200, json: { room_id: room } });
    const after = await held;
    expect(after.rooms!.invite).toBeUndefined();
    const j = after.rooms!.join![room]!;
    expect(j.timeline.limited).toBe(true); // newly joined, like Synapse
    expect(j.timeline.events.at(-1)).toMatchObject({ type: 'm.room.member', state_key: BOT, sender: BOT, content: { membership: 'join' } });
    expect(f.members(room)).toEqual({ [ALICE]: 'join', [BOT]: 'join' });
    // Joining again is a no-op.
    expect((await call(f, 'POST', `${C}/rooms/${enc(room)}/join`)).status).toBe(200);
    expect(f.events(room).filter((e) => e.state_key === BOT)).toHaveLength(2);
  });

  it('invite() into an existing room; rejecting it shows the room under leave', async () => {
    const f = await start();
    const room = f.createRoom({ members: [ALICE, BOB], invite: true });
    await call(f, 'POST', `${C}/rooms/${enc(room)}/leave`);
    const second = f.invite(room, BOB);
    expect(second).toMatchObject({ sender: BOB, state_key: BOT, content: { membership: 'invite' } });
    const { next_batch } = await sync(f);
    expect(Object.keys((await sync(f)).rooms!.invite!)).toEqual([room]);
    await call(f, 'POST', `${C}/rooms/${enc(room)}/leave`, { body: { reason: 'no thanks' } });
    const s = await sync(f, `since=${next_batch}&timeout=1000`);
    expect(s.rooms!.leave![room]!.timeline.events).toEqual([
      expect.objectContaining({ type: 'm.room.member', content: { membership: 'leave', reason: 'no thanks' } }),
    ]);
    expect((await call(f, 'POST', `${C}/join/${enc(room)}`)).json).toMatchObject({
      errcode: 'M_FORBIDDEN',
      error: 'You are not invited to this room.',
    });
  });

  it('close() answers held syncs at once', async () => {
    const f = await start();
    f.createRoom({ members: [ALICE] });
    const { next_batch } = await sync(f);
    const HELD_MS = 30_000;
    const held = sync(f, `since=${next_batch}&timeout=${HELD_MS}`);
    await f.waitForPoll();
    const t0 = Date.now();
    await f.close();
    // Answered (not cut off: that would reject), and before the sync's own timeout: the bound is
    // the poll's own parameter, thousands of times what close takes, so a busy host never reaches it.
    expect((await held).next_batch).toBe(next_batch);
    expect(Date.now() - t0).toBeLessThan(HELD_MS);
  });

  it('includeEmptySections and summary: always', async () => {
    const f = await start({ includeEmptySections: true, summary: 'always' });
    const room = f.createRoom({ members: [ALICE, BOB] });
    const s = await sync(f);
    expect(s).toMatchObject({ presence: { events: [] }, account_data: { events: [] }, rooms: { invite: {}, leave: {} } });
    expect(s.rooms!.join![room]!.summary).toEqual({ 'm.joined_member_count': 3, 'm.invited_member_count': 0, 'm.heroes': [ALICE, BOB] });
  });
});

describe('fake matrix: sending and room participation', () => {
  it('send: {event_id}, idempotent per txnId, the own event in sync with transaction_id', async () => {
    const f = await start();
    const room = f.createRoom({ members: [ALICE] });
    const { next_batch } = await sync(f);
    const path = `${C}/rooms/${enc(room)}/send/m.room.message/txn-1`;
    const a = await call(f, 'PUT', path, { body: { msgtype: 'm.text', body: 'hi alice' } });
    expect(a.status).toBe(200);
    expect(a.json).toEqual({ event_id: expect.stringMatching(/^\$/) });
    const b = await call(f, 'PUT', path, { body: { msgtype: 'm.text', body: 'different' } });
    expect(b.json.event_id).toBe(a.json.event_id);
    expect(f.sent).toEqual([
      expect.objectContaining({
        roomId: room,
        type: 'm.room.message',
        txnId: 'txn-1',
        content: { msgtype: 'm.text', body: 'hi alice' },
        eventId: a.json.event_id,
      }),
    ]);
    expect(f.repliesIn(room)).toHaveLength(1);

    const s = await sync(f, `since=${next_batch}&timeout=1000`);
    const ev = s.rooms!.join![room]!.timeline.events;
    expect(ev).toEqual([
      expect.objectContaining({ event_id: a.json.event_id, sender: BOT, unsigned: expect.objectContaining({ transaction_id: 'txn-1' }) }),
    ]);
    // Another device of someone else does not see the transaction id.
    const alice = f.user(ALICE)!;
    const hers = await sync(f, `since=${next_batch}&timeout=1000`, alice.accessToken);
    expect(hers.rooms!.join![room]!.timeline.events[0]!.unsigned).not.toHaveProperty('transaction_id');
  });

  it('send errors: 403 not joined, 404 unknown room, 400 bad room id, 413 event too large', async () => {
    const f = await start();
    const theirs = f.createRoom({ members: [ALICE, BOB], invite: true });
    const mine = f.createRoom({ members: [ALICE] });
    const put = (room: string, txn: string, body: unknown) =>
      call(f, 'PUT', `${C}/rooms/${enc(room)}/send/m.room.message/${txn}`, { body });
    expect(await put(theirs, 'a', { body: 'x' })).toMatchObject({ status: 403, json: { errcode: 'M_FORBIDDEN' } });
    expect(await put('!nowhere:berth.test', 'b', { body: 'x' })).toMatchObject({ status: 404, json: { errcode: 'M_NOT_FOUND' } });
    expect(await put('not-a-room', 'c', { body: 'x' })).toMatchObject({ status: 400, json: { errcode: 'M_INVALID_PARAM' } });
    expect(await put(mine, 'd', { msgtype: 'm.text', body: 'x'.repeat(70_000) })).toMatchObject({
      status: 413,
      json: { errcode: 'M_TOO_LARGE' },
    });
    expect((await put(mine, 'e', { msgtype: 'm.text', body: 'x'.repeat(60_000) })).status).toBe(200);
    // A failed txn is not remembered: the retry sends.
    expect((await put(mine, 'd', { msgtype: 'm.text', body: 'short' })).status).toBe(200);
    expect(f.sent.map((s) => s.txnId)).toEqual(['e', 'd']);
  });

  it('typing: own user recorded and seen as m.typing; someone else → M_FORBIDDEN', async () => {
    const f = await start();
    const room = f.createRoom({ members: [ALICE] });
    const { next_batch } = await sync(f);
    const path = (u: string) => `${C}/rooms/${enc(room)}/typing/${enc(u)}`;
    expect(await call(f, 'PUT', path(BOT), { body: { typing: true, timeout: 30000 } })).toMatchObject({ status: 200, json: {} });
    expect(f.typing).toEqual([expect.objectContaining({ roomId: room, userId: BOT, typing: true, timeout: 30000 })]);
    const s = await sync(f, `since=${next_batch}&timeout=1000`);
    expect(s.rooms!.join![room]!.ephemeral.events).toEqual([{ type: 'm.typing', content: { user_ids: [BOT] } }]);
    expect(await call(f, 'PUT', path(ALICE), { body: { typing: true } })).toMatchObject({ status: 400, json: { errcode: 'M_FORBIDDEN' } });
    expect(await call(f, 'PUT', path(BOT), { body: { timeout: 5 } })).toMatchObject({ status: 400, json: { errcode: 'M_BAD_JSON' } });
    f.setTyping(room, ALICE, true);
    const s2 = await sync(f, `since=${s.next_batch}&timeout=1000`);
    expect(s2.rooms!.join![room]!.ephemeral.events[0]!.content.user_ids).toEqual([BOT, ALICE]);
  });

  it('receipts: recorded, m.receipt in sync, unread count reset; bad type → 400', async () => {
    const f = await start();
    const room = f.createRoom({ members: [ALICE] });
    const ev = f.sendText(room, ALICE, `hey ${BOT}`, { mentions: [BOT] });
    const first = await sync(f);
    expect(first.rooms!.join![room]!.unread_notifications).toEqual({ notification_count: 1, highlight_count: 1 });
    const r = await call(f, 'POST', `${C}/rooms/${enc(room)}/receipt/m.read/${enc(ev.event_id)}`, { body: {} });
    expect(r).toMatchObject({ status: 200, json: {} });
    expect(f.receipts).toEqual([
      expect.objectContaining({ roomId: room, userId: BOT, receiptType: 'm.read', eventId: ev.event_id, known: true }),
    ]);
    const s = await sync(f, `since=${first.next_batch}&timeout=1000`);
    const j = s.rooms!.join![room]!;
    expect(j.ephemeral.events).toEqual([
      { type: 'm.receipt', content: { [ev.event_id]: { 'm.read': { [BOT]: { ts: expect.any(Number) } } } } },
    ]);
    expect(j.unread_notifications).toEqual({ notification_count: 0, highlight_count: 0 });
    expect((await call(f, 'POST', `${C}/rooms/${enc(room)}/receipt/m.seen/${enc(ev.event_id)}`, { body: {} })).json.errcode).toBe(
      'M_INVALID_PARAM',
    );
  });

  it('edits, replies and raw events have the real content shapes', async () => {
    const f = await start();
    const room = f.createRoom({ members: [ALICE] });
    const orig = f.sendText(room, ALICE, 'helo');
    const ed = f.edit(room, ALICE, orig.event_id, 'hello');
    expect(ed.content).toEqual({
      msgtype: 'm.text',
      body: '* hello',
      'm.new_content': { msgtype: 'm.text', body: 'hello' },
      'm.relates_to': { rel_type: 'm.replace', event_id: orig.event_id },
    });
    const reply = f.sendText(room, ALICE, 'and?', { replyTo: orig.event_id });
    expect(reply.content['m.relates_to']).toEqual({ 'm.in_reply_to': { event_id: orig.event_id } });
    const raw = f.sendRaw(room, {
      type: 'm.reaction',
      sender: ALICE,
      content: { 'm.relates_to': { rel_type: 'm.annotation', event_id: orig.event_id, key: '👍' } },
    });
    const s = await sync(f, `filter=${enc(JSON.stringify({ room: { timeline: { limit: 3 } } }))}`);
    expect(s.rooms!.join![room]!.timeline.events.map((e) => e.event_id)).toEqual([ed.event_id, reply.event_id, raw.event_id]);
    expect(() => f.sendText(room, BOB, 'not a member')).toThrow(/not joined/);
  });

  it('rateLimitNext: 429 M_LIMIT_EXCEEDED with retry_after_ms and Retry-After; then normal', async () => {
    const f = await start();
    const room = f.createRoom({ members: [ALICE] });
    f.rateLimitNext('/send/', 1500);
    const path = `${C}/rooms/${enc(room)}/send/m.room.message/r1`;
    const limited = await call(f, 'PUT', path, { body: { msgtype: 'm.text', body: 'x' } });
    expect(limited.status).toBe(429);
    expect(limited.json).toEqual({ errcode: 'M_LIMIT_EXCEEDED', error: 'Too Many Requests', retry_after_ms: 1500 });
    expect(limited.headers.get('retry-after')).toBe('2');
    expect(f.sent).toEqual([]);
    expect((await call(f, 'PUT', path, { body: { msgtype: 'm.text', body: 'x' } })).status).toBe(200);
    f.failNext(/\/sync$/, { status: 502, errcode: 'M_UNKNOWN', error: 'bad gateway' });
    expect(await call(f, 'GET', `${C}/sync`)).toMatchObject({ status: 502, json: { errcode: 'M_UNKNOWN', error: 'bad gateway' } });
    expect(f.requests.map((r) => r.status)).toEqual([429, 200, 502]);
  });

  it('filters by id; joined_members, state, joined_rooms; account data shows in sync', async () => {
    const f = await start();
    const room = f.createRoom({ members: [ALICE], alias: '#lobby:berth.test', joinRule: 'public' });
    const made = await call(f, 'POST', `${C}/user/${enc(BOT)}/filter`, { body: { room: { timeline: { limit: 1, types: ['m.room.*'] } } } });
    expect(made.json).toEqual({ filter_id: '0' });
    expect((await call(f, 'POST', `${C}/user/${enc(ALICE)}/filter`, { body: {} })).status).toBe(403);
    const s = await sync(f, 'filter=0');
    expect(s.rooms!.join![room]!.timeline.events).toHaveLength(1);
    expect((await call(f, 'GET', `${C}/joined_rooms`)).json).toEqual({ joined_rooms: [room] });
    expect((await call(f, 'GET', `${C}/rooms/${enc(room)}/joined_members`)).json.joined).toEqual({
      [ALICE]: { display_name: 'alice', avatar_url: null },
      [BOT]: { display_name: 'berth', avatar_url: null },
    });
    expect((await call(f, 'GET', `${C}/rooms/${enc(room)}/state/m.room.canonical_alias`)).json).toEqual({ alias: '#lobby:berth.test' });
    expect((await call(f, 'GET', `${C}/rooms/${enc(room)}/state/m.room.name/`)).status).toBe(404);
    // Bob joins the public room by alias with his own token.
    const bob = f.addUser(BOB);
    expect((await call(f, 'POST', `${C}/join/${enc('#lobby:berth.test')}`, { token: bob.accessToken })).json).toEqual({ room_id: room });
    expect(f.members(room)[BOB]).toBe('join');

    expect((await call(f, 'PUT', `${C}/user/${enc(BOT)}/account_data/m.direct`, { body: { [ALICE]: [room] } })).status).toBe(200);
    const s2 = await sync(f, `since=${s.next_batch}&timeout=1000`);
    expect(s2.account_data).toEqual({ events: [{ type: 'm.direct', content: { [ALICE]: [room] } }] });
    expect((await call(f, 'GET', `${C}/user/${enc(BOT)}/account_data/m.direct`)).json).toEqual({ [ALICE]: [room] });
  });
});
