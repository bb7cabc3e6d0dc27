import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import type http from 'node:http';
import { join } from 'node:path';
import { serve } from '@hono/node-server';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import NodeWebSocket from 'ws';
import type { AdminService } from '../../src/admin/service.js';
import type { RunView } from '../../src/admin/views.js';
import { appDepsFrom, createApp } from '../../src/api/app.js';
import { bridgeDir } from '../../src/bridges/start.js';
import { createWebChat, type WebChat } from '../../src/bridges/web.js';
import { attachWebChatSocket } from '../../src/bridges/web-socket.js';
import { homePaths } from '../../src/config/home.js';
import { createChatLinks } from '../../src/store/chat-links.js';
import type { ApprovalEvent } from '../../src/store/approvals.js';
import { testHome, type TestHome } from '../helpers.js';
import { until } from '../helpers/until.js';

/**
 * The web chat's follow-ups of the security review, over the real HTTP and WebSocket wiring of
 * `berth serve` (app, chat routes, socket on the upgrade event) and the real stores; only the run
 * is a fake that opens its session as the runner does and waits until the test lets it end:
 * writes to /chat/api from another origin are refused, a message waiting for a deleted session
 * is not run (nor makes the session again), and a revoked person is logged out at once.
 */
const TOKEN = 'chat-followups-admin-token-0123456789';
const PROJECT = 'cf';
let h: TestHome;
let chat: WebChat;
let server: http.Server;
let closeSockets: () => void;
let base: string;
let stateDir: string;
const ran: string[] = [];
const gates = new Map<string, () => void>();
/** What the egress proxy tells a run's chat while it works, by message (the proxy's own test is outbound.test.ts). */
const approvalStories = new Map<string, ApprovalEvent[]>();
let closing = false;

beforeAll(async () => {
  h = testHome();
  h.create({ name: PROJECT, workspace_isolation: true });
  stateDir = homePaths(h.home).stateDir;
  const logger = pino({ level: 'silent' });
  const admin: AdminService = {
    ...h.berth.admin,
    async runMessage(project, request) {
      // What the runner does first: open the session, making it when missing.
      h.berth.sessions.open(h.berth.store.get(project), { sessionId: request.session, tenantKey: request.user });
      await request.whenReady?.();
      ran.push(request.message);
      for (const event of approvalStories.get(request.message) ?? []) request.onApproval?.(event);
      if (!closing) await new Promise<void>((r) => gates.set(request.message, r));
      return { exit_code: 0, stdout: `done ${request.message}`, stderr: '', timed_out: false, warnings: [] } as unknown as RunView;
    },
  };
  chat = createWebChat({ admin, config: () => h.berth.config, logger, stateDir, bridgeDir: bridgeDir(stateDir) });
  const app = createApp(appDepsFrom(h.berth, { token: TOKEN, logger, webChat: chat }));
  server = serve({ fetch: app.fetch, hostname: '127.0.0.1', port: 0 }) as http.Server;
  await new Promise((r) => server.once('listening', r));
  base = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  closeSockets = attachWebChatSocket(server, { chat, logger }).close;
});
afterAll(async () => {
  closing = true;
  for (const end of gates.values()) end();
  await chat?.core.idle();
  closeSockets?.();
  server?.closeAllConnections();
  await new Promise((r) => server?.close(r));
  await h?.[Symbol.asyncDispose]();
});

/** A logged-in chat user's cookie (the link traded by the admin service, as /chat/login does). */
function cookieOf(user: string): string {
  const link = h.berth.admin.mintChatLink(PROJECT, user);
  const token = new URL(link.path, 'http://x').searchParams.get('token') as string;
  return `berth_chat=${h.berth.admin.openChatLink(token).credential}`;
}

async function api(
  cookie: string,
  method: string,
  path: string,
  headers: Record<string, string> = {},
  body?: string,
): Promise<{ status: number; body: any }> {
  const res = await fetch(`${base}${path}`, { method, headers: { cookie, ...headers }, body });
  return { status: res.status, body: await res.json() };
}

async function newSession(cookie: string): Promise<{ id: string; permission_level: string }> {
  const made = await api(cookie, 'POST', '/chat/api/sessions');
  expect(made.status).toBe(201);
  return made.body.session;
}

/** An open chat socket: what it received, the code it closed with, and how to send a run. */
async function socketOf(cookie: string) {
  const ws = new NodeWebSocket(`${base.replace('http', 'ws')}/chat/ws`, { headers: { cookie } });
  const got: Array<Record<string, unknown>> = [];
  ws.on('message', (d) => got.push(JSON.parse(d.toString()) as Record<string, unknown>));
  const closed = new Promise<number>((r) => ws.once('close', (code) => r(code)));
  await new Promise((resolve, reject) => (ws.once('open', resolve), ws.once('error', reject)));
  return {
    ws,
    got,
    closed,
    replies: () => got.filter((m) => m.type === 'reply').map((m) => m.text),
    run(session: { id: string; permission_level: string }, input: string): string {
      const id = randomUUID();
      ws.send(JSON.stringify({ type: 'run', id, session_id: session.id, permission_level: session.permission_level, input }));
      return id;
    },
  };
}

const entryOf = (user: string, id: string) => chat.inbox.all().find((e) => e.id === `${PROJECT}/${user}/${id}`);
const transcriptOf = (session: string) => join(stateDir, 'projects', PROJECT, 'chat', `${session}.jsonl`);

describe('/chat/api writes come from the chat page only', () => {
  it('a POST, DELETE or PUT from another origin (another port of the host) is 403 and changes nothing; the page itself and non-browsers pass', async () => {
    const cookie = cookieOf('olga');
    const login = { project: PROJECT, user: 'olga' };
    const otherPort = { origin: 'http://127.0.0.1:1', 'sec-fetch-site': 'same-site' };
    const refused = await api(cookie, 'POST', '/chat/api/sessions', otherPort);
    expect(refused).toMatchObject({ status: 403, body: { error: { code: 'PERMISSION_DENIED' } } });
    expect((await api(cookie, 'POST', '/chat/api/sessions', { origin: 'http://127.0.0.1:1' })).status).toBe(403);
    expect((await api(cookie, 'POST', '/chat/api/sessions', { 'sec-fetch-site': 'same-site' })).status).toBe(403);
    expect((await api(cookie, 'POST', '/chat/api/sessions', { origin: 'null' })).status).toBe(403);
    expect(chat.sessions(login)).toEqual([]);

    const made = await api(cookie, 'POST', '/chat/api/sessions', { origin: base, 'sec-fetch-site': 'same-origin' });
    expect(made.status).toBe(201);
    const id = made.body.session.id as string;
    expect((await api(cookie, 'DELETE', `/chat/api/sessions/${id}`, otherPort)).status).toBe(403);
    const level = await api(
      cookie,
      'PUT',
      `/chat/api/sessions/${id}/settings`,
      { ...otherPort, 'content-type': 'application/json' },
      JSON.stringify({ permission_level: 'low' }),
    );
    expect(level.status).toBe(403);
    expect(chat.sessions(login).map((s) => [s.id, s.permission_level])).toEqual([[id, made.body.session.permission_level]]);
    // Reading stays as it was (another origin cannot read the answer anyway).
    expect((await api(cookie, 'GET', '/chat/api/sessions', otherPort)).status).toBe(200);
  });
});

describe('a message waiting for a session its person deletes', () => {
  it('is not run: it ends failed in plain words, and the session (and its transcript) is not made again', async () => {
    const cookie = cookieOf('dora');
    const session = await newSession(cookie);
    const a = await socketOf(cookie);
    const b = await socketOf(cookie);
    a.run(session, 'echo dora-first');
    await until(() => ran.includes('echo dora-first'));
    const second = b.run(session, 'echo dora-second');
    await until(() => entryOf('dora', second));
    expect((await api(cookie, 'DELETE', `/chat/api/sessions/${session.id}`)).status).toBe(200);

    gates.get('echo dora-first')?.();
    await until(() => ran.includes('echo dora-second') || b.got.some((m) => m.type === 'done' && m.id === second));
    expect(ran).not.toContain('echo dora-second');
    expect(b.replies()).toContain('berth: that conversation was deleted; your message "echo dora-second" was not run.');
    expect(entryOf('dora', second)).toMatchObject({ phase: 'failed', reason: 'its session was deleted before it ran' });
    expect(() => h.berth.admin.getSession(PROJECT, session.id)).toThrow(expect.objectContaining({ code: 'SESSION_NOT_FOUND' }));
    expect((await api(cookie, 'GET', '/chat/api/sessions')).body.sessions).toEqual([]);
    expect(fs.existsSync(transcriptOf(session.id))).toBe(false);
    a.ws.close();
    b.ws.close();
  });
});

describe('revoking a person logs them out at once', () => {
  it('their open sockets close with 4401 right away, another person stays; the message they had waiting is not run', async () => {
    const cookie = cookieOf('rita');
    const session = await newSession(cookie);
    const a = await socketOf(cookie);
    const b = await socketOf(cookie);
    const bystander = await socketOf(cookieOf('sam'));
    a.run(session, 'echo rita-first');
    await until(() => ran.includes('echo rita-first'));
    const second = b.run(session, 'echo rita-second');
    await until(() => entryOf('rita', second));

    const revoked = await fetch(`${base}/api/projects/${PROJECT}/chat-links?user=rita`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    expect(revoked.status).toBe(200);
    expect(await a.closed).toBe(4401);
    expect(await b.closed).toBe(4401);
    expect(a.got.at(-1)).toMatchObject({ type: 'error', code: 'UNAUTHORIZED' });
    expect(bystander.ws.readyState).toBe(NodeWebSocket.OPEN);

    gates.get('echo rita-first')?.();
    await until(() => ran.includes('echo rita-second') || entryOf('rita', second)?.phase === 'failed');
    expect(ran).not.toContain('echo rita-second');
    expect(entryOf('rita', second)).toMatchObject({ phase: 'failed', reason: 'its sender was logged out before it ran' });
    bystander.ws.close();
  });

  it('a revoke by another process (the CLI) is seen at the next push: the socket closes before the reply reaches it, and the waiting message is not run', async () => {
    const cookie = cookieOf('tom');
    const session = await newSession(cookie);
    const a = await socketOf(cookie);
    const b = await socketOf(cookie);
    a.run(session, 'echo tom-first');
    await until(() => ran.includes('echo tom-first'));
    const second = b.run(session, 'echo tom-second');
    await until(() => entryOf('tom', second));

    createChatLinks(stateDir).revokeUser(PROJECT, 'tom'); // what `berth chat-link revoke` does from its own process
    await new Promise((r) => setTimeout(r, 1100)); // past the socket's re-check interval
    gates.get('echo tom-first')?.();
    expect(await a.closed).toBe(4401);
    expect(await b.closed).toBe(4401);
    expect(a.replies()).not.toContain('done echo tom-first');
    await until(() => ran.includes('echo tom-second') || entryOf('tom', second)?.phase === 'failed');
    expect(ran).not.toContain('echo tom-second');
    expect(entryOf('tom', second)).toMatchObject({ phase: 'failed', reason: 'its sender was logged out before it ran' });
  });
});

describe('an approval card in the conversation: its answer is kept, and an allowed host that still fails is told', () => {
  it('the socket hears the reason in one line; the history (after a reload, or for the console) keeps who answered what, and when', async () => {
    const cookie = cookieOf('uma');
    const session = await newSession(cookie);
    const s = await socketOf(cookie);
    const asked_at = '2026-11-27T17:31:00.000Z';
    approvalStories.set('wget -qO- http://example.com', [
      {
        type: 'asked',
        approval: {
          id: 'a1b2c3d4e5',
          kind: 'egress',
          project: PROJECT,
          tenant: 'web:uma',
          session: session.id,
          target: 'example.com:80',
          approver: 'person',
          asked_at,
          expires_at: '2026-11-27T17:33:00.000Z',
        },
      },
      {
        type: 'answered',
        id: 'a1b2c3d4e5',
        decision: 'once',
        by: 'tenant:web:uma',
        target: 'example.com:80',
        asked_at,
        at: '2026-11-27T17:31:02.000Z',
      },
      { type: 'unreachable', target: 'example.com:80', reason: 'example.com does not resolve' },
    ]);
    s.run(session, 'wget -qO- http://example.com');
    await until(() => ran.includes('wget -qO- http://example.com'));
    gates.get('wget -qO- http://example.com')?.();
    await until(() => s.replies().length > 0);
    const told = 'berth: example.com:80 was allowed, but your agent could not reach it: example.com does not resolve.';
    expect(s.got.filter((m) => m.type === 'note' || m.type === 'approval_answered')).toEqual([
      {
        type: 'approval_answered',
        session_id: session.id,
        id: 'a1b2c3d4e5',
        decision: 'once',
        by: 'tenant:web:uma',
        at: '2026-11-27T17:31:02.000Z',
      },
      { type: 'note', session_id: session.id, text: told },
    ]);
    const history = (await api(cookie, 'GET', `/chat/api/sessions/${session.id}/history`)).body.entries as Array<Record<string, unknown>>;
    expect(history.map((e) => [e.role, e.text])).toEqual([
      ['user', 'wget -qO- http://example.com'],
      ['approval', 'asked to reach example.com:80'],
      ['answer', 'berth: you allowed example.com:80 for this message.'],
      ['reply', told],
      ['reply', 'done wget -qO- http://example.com'],
    ]);
    expect(history[1]?.approval).toEqual({
      id: 'a1b2c3d4e5',
      kind: 'egress',
      target: 'example.com:80',
      approver: 'person',
      asked_at,
      expires_at: '2026-11-27T17:33:00.000Z',
    });
    expect(history[2]?.answer).toEqual({ id: 'a1b2c3d4e5', decision: 'once', by: 'tenant:web:uma', at: '2026-11-27T17:31:02.000Z' });
    s.ws.close();
  });
});
