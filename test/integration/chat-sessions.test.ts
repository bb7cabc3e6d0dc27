import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import { join } from 'node:path';
import Docker from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import NodeWebSocket from 'ws';
import { listenHttp, type HttpSurface } from '../../src/cli/serve.js';
import { installationId } from '../../src/main.js';
import { agentHomeDir } from '../../src/store/agent-homes.js';
import { testHome, type TestHome } from '../helpers.js';

/**
 * A chat user's sessions (outside attack 3, M4): a bounded number per person and per minute, a
 * delete of their own (container, transcript and agent home go with it), and a list that reads
 * that person's sessions only — against a real `berth serve` wiring and real warm containers.
 */
const TOKEN = 'chat-sessions-admin-token-0123456789';
const CAP = 5;
const PER_MINUTE = 3;
const quiet = { out: () => undefined, err: () => undefined };
let h: TestHome;
let http: HttpSurface;
let base: string;

beforeAll(async () => {
  h = testHome({ warm: true, config: `bridges:\n  web:\n    max_sessions_per_user: ${CAP}\n    new_sessions_per_minute: ${PER_MINUTE}\n` });
  h.create({ name: 'cs', workspace_isolation: true });
  http = await listenHttp(h.berth, { host: '127.0.0.1', port: 0, token: TOKEN }, quiet);
  base = http.url;
}, 60_000);
afterAll(async () => {
  await http?.close();
  await h?.[Symbol.asyncDispose]();
});

/** A logged-in chat user's cookie (the link traded by the admin service, as /chat/login does). */
function cookieOf(user: string): string {
  const link = h.berth.admin.mintChatLink('cs', user);
  const token = new URL(link.path, base).searchParams.get('token') as string;
  return `berth_chat=${h.berth.admin.openChatLink(token).credential}`;
}

async function chat(cookie: string, method: string, path: string): Promise<{ status: number; body: any }> {
  const res = await fetch(`${base}${path}`, { method, headers: { cookie } });
  return { status: res.status, body: await res.json() };
}

/** One message over the real socket; resolves with what came back once it is done (or refused). */
async function say(cookie: string, session: string, input: string): Promise<Array<Record<string, unknown>>> {
  const ws = new NodeWebSocket(`${base.replace('http', 'ws')}/chat/ws`, { headers: { cookie } });
  await new Promise((resolve, reject) => (ws.once('open', resolve), ws.once('error', reject)));
  const id = randomUUID();
  const got: Array<Record<string, unknown>> = [];
  const done = new Promise<void>((resolve) =>
    ws.on('message', (data) => {
      const m = JSON.parse(data.toString()) as Record<string, unknown>;
      got.push(m);
      if ((m.type === 'done' || m.type === 'error') && m.id === id) resolve();
    }),
  );
  ws.send(JSON.stringify({ type: 'run', id, session_id: session, permission_level: 'medium', input }));
  await done;
  ws.close();
  return got;
}

const containersOf = async (session: string) =>
  new Docker().listContainers({
    all: true,
    filters: { label: [`berth.installation=${installationId(h.home)}`, `berth.session=${session}`] },
  });

describe('chat sessions per person are bounded', () => {
  it(`a person holds at most max_sessions_per_user (${CAP}); the next is 429 LIMIT_REACHED in their words, and deleting one makes room`, async () => {
    const bob = cookieOf('bob');
    for (let i = 0; i < CAP; i++) h.berth.admin.openSession('cs', `bob-${i}`, 'web:bob'); // not through the chat: the rate limit stays out of it
    const refused = await chat(bob, 'POST', '/chat/api/sessions');
    expect(refused).toEqual({
      status: 429,
      body: { error: { code: 'LIMIT_REACHED', message: `you have ${CAP} conversations; delete one to start another` } },
    });
    // /new in a chat is the same creation, answered in the chat.
    const replies = await say(bob, 'bob-0', '/new');
    expect(replies.filter((m) => m.type === 'reply').map((m) => m.text)).toEqual([
      `berth: you have ${CAP} conversations; delete one to start another`,
    ]);
    expect((await chat(bob, 'GET', '/chat/api/sessions')).body.sessions).toHaveLength(CAP);

    expect(await chat(bob, 'DELETE', '/chat/api/sessions/bob-1')).toEqual({ status: 200, body: { session: 'bob-1', deleted: true } });
    const made = await chat(bob, 'POST', '/chat/api/sessions');
    expect(made.status).toBe(201);
    expect((await chat(bob, 'GET', '/chat/api/sessions')).body.sessions.map((s: { id: string }) => s.id)).toEqual([
      'bob-0',
      'bob-2',
      'bob-3',
      'bob-4',
      made.body.session.id,
    ]);
  });

  it(`a person starts at most new_sessions_per_minute (${PER_MINUTE}); another person is not held back`, async () => {
    const carol = cookieOf('carol');
    for (let i = 0; i < PER_MINUTE; i++) expect((await chat(carol, 'POST', '/chat/api/sessions')).status).toBe(201);
    const refused = await chat(carol, 'POST', '/chat/api/sessions');
    expect(refused.status).toBe(429);
    expect(refused.body.error).toMatchObject({
      code: 'LIMIT_REACHED',
      message: `you started ${PER_MINUTE} conversations in the last minute; wait a minute before starting another`,
      retry_after: expect.any(Number),
    });
    expect(refused.body.error.retry_after).toBeGreaterThan(0);
    expect(refused.body.error.retry_after).toBeLessThanOrEqual(60);
    expect((await chat(carol, 'GET', '/chat/api/sessions')).body.sessions).toHaveLength(PER_MINUTE);
    expect((await chat(cookieOf('dave'), 'POST', '/chat/api/sessions')).status).toBe(201);
  });
});

describe('a person deletes their own session', () => {
  it('its warm container, transcript and agent home go; another person cannot delete it (404) and it stays whole', async () => {
    const erin = cookieOf('erin');
    const { session } = (await chat(erin, 'POST', '/chat/api/sessions')).body as { session: { id: string } };
    const got = await say(erin, session.id, 'echo kept-warm');
    expect(got.filter((m) => m.type === 'reply').map((m) => m.text)).toEqual(['kept-warm']);
    const transcript = join(h.home, '.berth/projects/cs/chat', `${session.id}.jsonl`);
    const home = agentHomeDir(h.berth.store.get('cs'), session.id);
    expect(fs.existsSync(transcript)).toBe(true);
    expect(fs.existsSync(home)).toBe(true);
    expect(await containersOf(session.id)).toHaveLength(1); // kept warm for the next message

    const frank = cookieOf('frank');
    expect(await chat(frank, 'DELETE', `/chat/api/sessions/${session.id}`)).toMatchObject({
      status: 404,
      body: { error: { code: 'SESSION_NOT_FOUND' } },
    });
    expect(await chat(frank, 'DELETE', '/chat/api/sessions/..%2Ft-x')).toMatchObject({ status: 400 });
    expect((await chat(erin, 'GET', `/chat/api/sessions/${session.id}/history`)).body.entries).toHaveLength(2);
    expect(await containersOf(session.id)).toHaveLength(1);

    expect(await chat(erin, 'DELETE', `/chat/api/sessions/${session.id}`)).toEqual({
      status: 200,
      body: { session: session.id, deleted: true },
    });
    await expect.poll(async () => (await containersOf(session.id)).length, { timeout: 15_000 }).toBe(0);
    expect(fs.existsSync(transcript)).toBe(false);
    expect(fs.existsSync(home)).toBe(false);
    expect((await chat(erin, 'GET', '/chat/api/sessions')).body.sessions.map((s: { id: string }) => s.id)).not.toContain(session.id);
    expect(await chat(erin, 'GET', `/chat/api/sessions/${session.id}/history`)).toMatchObject({ status: 404 });
    expect(await chat(erin, 'DELETE', `/chat/api/sessions/${session.id}`)).toMatchObject({ status: 404 });
  }, 60_000);
});

describe("listing a person's sessions", () => {
  it("reads that person's sessions only: 2,000 sessions of other people do not slow bob's list", async () => {
    const bob = cookieOf('lister');
    h.berth.admin.openSession('cs', 'lister-1', 'web:lister');
    h.berth.admin.openSession('cs', 'lister-2', 'web:lister');
    const project = h.berth.store.get('cs');
    /** The event loop held by one list (it is synchronous): the best of 5. */
    const listMs = () => {
      const chatBridge = http.bridges.web!;
      const login = { project: 'cs', user: 'lister' };
      let best = Infinity;
      for (let i = 0; i < 5; i++) {
        const t0 = performance.now();
        expect(chatBridge.sessions(login).map((s) => s.id)).toEqual(['lister-1', 'lister-2']);
        best = Math.min(best, performance.now() - t0);
      }
      return best;
    };
    const few = listMs();
    for (let i = 0; i < 2000; i++) h.berth.sessions.open(project, { sessionId: `other-${i}`, tenantKey: `web:u${i % 50}` });
    const many = listMs();
    // For comparison, the way it was done before the index: every session file of the project read, then filtered.
    const t0 = performance.now();
    expect(h.berth.admin.listSessions('cs').filter((s) => s.tenant_key === 'web:lister')).toHaveLength(2);
    const scan = performance.now() - t0;
    console.log(
      `bob's list (event loop held, best of 5): ${few.toFixed(2)} ms beside a few other sessions, ${many.toFixed(2)} ms beside 2,000 more; a scan of the whole project: ${scan.toFixed(2)} ms`,
    );
    // Today's scan of every session file took +20 ms here for 2,000 (490 ms in the report's run): the index reads bob's two.
    // A ratio to that scan of the same run, not a wall-clock bound: a list that read every file would cost about as much.
    expect(many - few).toBeLessThan((scan - few) / 4);
    await new Promise((r) => setTimeout(r, 200)); // the loop was busy for seconds: let the server close idle keep-alive sockets first
    const listed = await chat(bob, 'GET', '/chat/api/sessions');
    expect(listed.body.sessions.map((s: { id: string }) => s.id)).toEqual(['lister-1', 'lister-2']);
    // The admin's list of the whole project still has everyone's.
    expect(h.berth.admin.listSessions('cs').length).toBeGreaterThanOrEqual(2002);
  }, 120_000);

  it('sessions made before the index existed are found (the index is built once, from the session files)', async () => {
    const project = h.berth.store.get('cs');
    h.berth.admin.openSession('cs', 'old-1', 'web:olduser');
    // A home from before the per-person index: no index at all.
    fs.rmSync(join(project.paths.stateDir, 'session-index'), { recursive: true, force: true });
    const olduser = cookieOf('olduser');
    expect((await chat(olduser, 'GET', '/chat/api/sessions')).body.sessions.map((s: { id: string }) => s.id)).toEqual(['old-1']);
    expect((await chat(olduser, 'POST', '/chat/api/sessions')).status).toBe(201);
    expect((await chat(olduser, 'GET', '/chat/api/sessions')).body.sessions).toHaveLength(2);
    // Another person's list is still theirs alone after the rebuild.
    expect((await chat(cookieOf('lister'), 'GET', '/chat/api/sessions')).body.sessions.map((s: { id: string }) => s.id)).toEqual([
      'lister-1',
      'lister-2',
    ]);
  });
});
