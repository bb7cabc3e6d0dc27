import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import NodeWebSocket from 'ws';
import { DEMO_PROJECT, ensureDemoProject } from '../../src/demo.js';
import { listenHttp, type HttpSurface } from '../../src/serve.js';
import { createChatLinks } from '../../src/store/chat-links.js';
import { openChatTranscripts, TRANSCRIPT_ENTRY_BYTES, TRANSCRIPT_KEEP } from '../../src/store/chat-transcripts.js';
import { cliAsync, testHome, type TestHome, launchChromium } from '../helpers.js';

/**
 * The web chat in real headless Chromium against a real berth (the same HTTP wiring as
 * `berth serve`: app, chat bridge, WebSocket on the upgrade event) and real containers of the
 * demo project's shell preset: log in by link, watch output stream in, change the level, reload,
 * and a second person who sees nothing of the first.
 */
const TOKEN = 'web-chat-admin-token-0123456789';
const quiet = { out: () => undefined, err: () => undefined };
let h: TestHome;
let http: HttpSurface;
let base: string;
let browser: Browser;
let aliceLink: string;
let aliceSession: string;
const pageErrors: string[] = [];

beforeAll(async () => {
  h = testHome();
  ensureDemoProject(h.berth, quiet);
  http = await listenHttp(h.berth, { host: '127.0.0.1', port: 0, token: TOKEN }, quiet);
  base = http.url;
  aliceLink = `${base}${h.berth.admin.mintChatLink(DEMO_PROJECT, 'alice').path}`;
  browser = await launchChromium();
}, 60_000);
afterAll(async () => {
  await browser?.close();
  await http?.close();
  await h?.[Symbol.asyncDispose]();
});

async function openChat(link: string): Promise<Page> {
  const context = await browser.newContext();
  const page = await context.newPage();
  page.on('pageerror', (e) => pageErrors.push(String(e)));
  page.on('console', (m) => void (m.type() === 'error' && pageErrors.push(m.text())));
  await page.goto(link);
  await page.waitForURL(`${base}/chat`);
  await connected(page);
  return page;
}

// The page's globals as far as this file uses them (the project's TypeScript has no DOM types).
// Code for the page is passed as functions: the page's CSP (rightly) refuses string evaluation.
interface PageElement {
  textContent: string | null;
  value: string;
}
declare const document: { querySelector(selector: string): PageElement | null; querySelectorAll(selector: string): { length: number } };
declare const location: { host: string };
declare const WebSocket: new (url: string) => { onopen: () => void; onmessage: (ev: { data: unknown }) => void; send(data: string): void; close(): void };

const connected = (page: Page) => page.waitForFunction(() => document.querySelector('#status')?.textContent === 'connected');
const replies = (page: Page) => page.$$eval('#log .msg.reply pre', (els) => els.map((e) => e.textContent));

async function send(page: Page, text: string) {
  await page.fill('#input', text);
  await page.click('#send');
}

/** Wait for the nth reply (1-based) of the shown session. */
async function nthReply(page: Page, n: number): Promise<string> {
  await page.waitForFunction((count) => document.querySelectorAll('#log .msg.reply').length >= count, n, { timeout: 30_000 });
  return (await replies(page))[n - 1] as string;
}

/** A raw socket from inside the page (its cookie, its origin): the messages that come back. */
function socketExchange(page: Page, message: unknown): Promise<Array<Record<string, unknown>>> {
  return page.evaluate(
    (msg) =>
      new Promise<Array<Record<string, unknown>>>((resolve) => {
        const ws = new WebSocket(`ws://${location.host}/chat/ws`);
        const got: Array<Record<string, unknown>> = [];
        ws.onopen = () => ws.send(msg);
        ws.onmessage = (ev) => {
          const m = JSON.parse(String(ev.data)) as Record<string, unknown>;
          got.push(m);
          if (m.type === 'error' || m.type === 'done') {
            ws.close();
            resolve(got);
          }
        };
      }),
    JSON.stringify(message),
  );
}

describe('web chat in a browser', () => {
  it('a chat link logs the person in with an HttpOnly cookie, the output streams in while the run goes on', async () => {
    const page = await openChat(aliceLink);
    const [cookie] = await page.context().cookies();
    expect(cookie).toMatchObject({ name: 'berth_chat', httpOnly: true, sameSite: 'Strict', path: '/chat' });
    expect(await page.evaluate('document.cookie')).toBe('');
    expect(page.url()).toBe(`${base}/chat`); // the link's token is gone from the address bar
    expect(await page.textContent('#who')).toBe(`alice @ ${DEMO_PROJECT}`);
    aliceSession = await page.inputValue('#session');

    await send(page, 'for i in 1 2 3; do echo line $i; sleep 0.3; done');
    // Seen at the moment "line 1" shows: the run is still going (no reply, no "line 3" yet).
    const early = await page.waitForFunction(() => {
      const live = document.querySelector('#log .msg.live');
      return live?.textContent?.includes('line 1') ? { live: live.textContent, replies: document.querySelectorAll('#log .msg.reply').length } : undefined;
    });
    const snapshot = (await early.jsonValue()) as { live: string; replies: number };
    expect(snapshot.replies).toBe(0);
    expect(snapshot.live).not.toContain('line 3');
    expect(await nthReply(page, 1)).toBe('line 1\nline 2\nline 3');
    expect(await page.$('#log .msg.live')).toBeNull(); // the live block became the reply
    // The message went through the bridge core's durable inbox, keyed by user and message id.
    expect(http.bridges.web!.inbox.all().find((e) => e.sender === 'web:alice')).toMatchObject({ phase: 'replied', tenant: 'web:alice', session: aliceSession, id: expect.stringMatching(/^demo\/alice\/[0-9a-f-]{36}$/) });
    await page.close();
  });

  it('level low takes the network away from the next run; a reload keeps the level and the history', async () => {
    const page = await openChat(aliceLink);
    expect(await page.inputValue('#session')).toBe(aliceSession);
    await page.selectOption('#level', 'low');
    await expect.poll(() => h.berth.admin.getSession(DEMO_PROJECT, aliceSession).settings.permission_level).toBe('low');
    await send(page, 'ls /sys/class/net; echo ${HTTPS_PROXY:-none}');
    expect(await nthReply(page, 2)).toBe('lo\nnone');

    await page.reload();
    await connected(page);
    expect(await page.inputValue('#level')).toBe('low');
    expect(await page.inputValue('#session')).toBe(aliceSession);
    expect(await page.$$eval('#log .msg.user pre', (els) => els.map((e) => e.textContent))).toEqual(['for i in 1 2 3; do echo line $i; sleep 0.3; done', 'ls /sys/class/net; echo ${HTTPS_PROXY:-none}']);
    expect(await replies(page)).toEqual(['line 1\nline 2\nline 3', 'lo\nnone']);
    expect(pageErrors).toEqual([]); // no script error, nothing the page's CSP refused
    await page.close();
  });

  it("a second person sees none of the first one's sessions, in the page or by asking for them", async () => {
    const minted = await fetch(`${base}/api/projects/${DEMO_PROJECT}/chat-links`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ user: 'bob' }),
    });
    expect(minted.status).toBe(201);
    const link = (await minted.json()) as { url: string; tenant: string };
    expect(link.tenant).toBe('web:bob');
    const page = await openChat(link.url);
    const options = await page.$$eval('#session option', (els) => els.map((e) => e.getAttribute('value') ?? ''));
    expect(options).toHaveLength(1);
    expect(options).not.toContain(aliceSession);
    const asBob = (path: string, init: RequestInit = {}) => page.evaluate(async ([p, i]) => (await fetch(p, i)).status, [path, init] as const);
    expect(await asBob(`/chat/api/sessions/${aliceSession}/history`)).toBe(404);
    expect(await asBob(`/chat/api/sessions/${aliceSession}/settings`, { method: 'PUT', headers: { 'content-type': 'application/json' }, body: '{"permission_level":"high"}' })).toBe(404);
    const listed = (await page.evaluate(async () => (await fetch('/chat/api/sessions')).json())) as { sessions: Array<{ id: string }> };
    expect(listed.sessions.map((s) => s.id)).toEqual(options);
    const hijack = await socketExchange(page, { type: 'run', id: crypto.randomUUID(), session_id: aliceSession, permission_level: 'low', input: 'cat /etc/hostname' });
    expect(hijack.at(-1)).toMatchObject({ type: 'error', code: 'SESSION_NOT_FOUND' });
    // The cookie opens the chat only: the admin API still wants the admin token.
    expect(await asBob('/api/projects')).toBe(401);

    // /new (answered by the bridge core) starts a session and the page switches to it.
    await send(page, '/new');
    await page.waitForFunction((first) => document.querySelector('#session')?.value !== first, options[0]);
    expect(await page.$$eval('#session option', (els) => els.length)).toBe(2);
    await page.close();
  });

  it('an invalid level over the WebSocket is a clear error naming the field, and nothing runs', async () => {
    const page = await openChat(aliceLink);
    const runsBefore = h.berth.admin.getSession(DEMO_PROJECT, aliceSession).runs;
    const got = await socketExchange(page, { type: 'run', id: crypto.randomUUID(), session_id: aliceSession, permission_level: 'root', input: 'echo nope' });
    expect(got).toEqual([{ type: 'error', code: 'CONFIG_INVALID', field: 'permission_level', message: expect.stringMatching(/^permission_level: .*"low"\|"medium"\|"high"/), id: expect.any(String) }]);
    const missing = await socketExchange(page, { type: 'run', id: crypto.randomUUID(), session_id: aliceSession, input: 'echo nope' });
    expect(missing).toEqual([expect.objectContaining({ type: 'error', code: 'CONFIG_INVALID', field: 'permission_level' })]);
    expect(h.berth.admin.getSession(DEMO_PROJECT, aliceSession).runs).toBe(runsBefore);
    await page.close();
  });
});

describe('web chat: who gets in', () => {
  it('a socket without a login is refused with 401; a wrong or unknown link gets no cookie', async () => {
    const status = await new Promise<number>((resolve, reject) => {
      const ws = new NodeWebSocket(`${base.replace('http', 'ws')}/chat/ws`);
      ws.on('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0));
      ws.on('open', () => reject(new Error('opened without a login')));
      ws.on('error', () => undefined);
    });
    expect(status).toBe(401);
    for (const token of ['nope', `bcl_${'A'.repeat(32)}`]) {
      const res = await fetch(`${base}/chat/login?token=${token}`, { redirect: 'manual' });
      expect(res.status).toBe(401);
      expect(res.headers.get('set-cookie')).toBeNull();
    }
    expect((await fetch(`${base}/chat/api/sessions`)).status).toBe(401);
  });

  it('berth chat-link (CLI) mints a link the server honours; raising a level follows the project rule', async () => {
    h.create({ name: 'strict', workspace_isolation: true }); // chat.raise_level: admins (the default)
    const r = await cliAsync(['--home', h.home, 'chat-link', 'strict', '--user', 'carol', '--base', base]);
    expect(r).toMatchObject({ code: 0, stdout: expect.stringMatching(new RegExp(`^${base}/chat/login\\?token=bcl_[A-Za-z0-9_-]{32}\\n$`)) });
    expect((await cliAsync(['--home', h.home, 'chat-link', 'strict', '--user', 'no/slash'])).stderr).toMatch(/^CONFIG_INVALID: .*user: must be 1-64 characters/);
    const login = await fetch(r.stdout.trim(), { redirect: 'manual' });
    expect(login.status).toBe(303);
    const cookie = (login.headers.get('set-cookie') ?? '').split(';')[0] as string;
    const call = (method: string, path: string, body?: unknown) =>
      fetch(`${base}${path}`, { method, headers: { cookie, ...(body ? { 'content-type': 'application/json' } : {}) }, body: body ? JSON.stringify(body) : undefined });
    const { session } = (await (await call('POST', '/chat/api/sessions')).json()) as { session: { id: string } };
    expect((await call('PUT', `/chat/api/sessions/${session.id}/settings`, { permission_level: 'low' })).status).toBe(200);
    const raise = await call('PUT', `/chat/api/sessions/${session.id}/settings`, { permission_level: 'high' });
    expect(raise.status).toBe(403);
    expect(await raise.json()).toMatchObject({ error: { code: 'PERMISSION_DENIED', rule: 'raise_level' } });
    const bad = await call('PUT', `/chat/api/sessions/${session.id}/settings`, { permission_level: 'banana' });
    expect(await bad.json()).toMatchObject({ error: { code: 'CONFIG_INVALID', issues: [{ field: 'permission_level' }] } });
    // Deleting the project logs its chat users out.
    await h.berth.admin.deleteProject('strict', 'strict');
    expect((await call('GET', '/chat/api/sessions')).status).toBe(401);
  });
});

describe('web chat state on disk', () => {
  it('a transcript keeps its last entries, each bounded; an expired link logs nobody in', () => {
    const dir = fs.mkdtempSync(join(os.tmpdir(), 'berth-chat-state-'));
    try {
      const transcripts = openChatTranscripts(dir);
      for (let i = 0; i < 3 * TRANSCRIPT_KEEP; i++) transcripts.append('p', 's1', { role: 'user', text: `m${i}` });
      transcripts.append('p', 's1', { role: 'reply', text: 'é'.repeat(TRANSCRIPT_ENTRY_BYTES) });
      const kept = transcripts.read('p', 's1');
      expect(kept).toHaveLength(TRANSCRIPT_KEEP);
      expect(kept[0]?.text).toBe(`m${2 * TRANSCRIPT_KEEP + 1}`);
      expect(Buffer.byteLength(kept.at(-1)!.text)).toBeLessThanOrEqual(TRANSCRIPT_ENTRY_BYTES);
      expect(kept.at(-1)!.text).toMatch(/\[… cut: the whole text was \d+ bytes\]$/);
      expect(fs.readFileSync(join(dir, 'projects/p/chat/s1.jsonl'), 'utf8').split('\n').length).toBeLessThanOrEqual(2 * TRANSCRIPT_KEEP + 1);
      expect(() => transcripts.read('p', '../s1')).toThrow(/transcript is invalid/);

      const links = createChatLinks(dir);
      const expired = links.mintLink('p', 'dave', -1);
      expect(() => links.login(expired.token)).toThrow(/has expired/);
      const { token } = links.mintLink('p', 'dave');
      expect(fs.readdirSync(join(dir, 'chat-links')).join()).not.toContain(token.slice(4)); // stored as a digest only
      const login = links.login(token);
      expect(links.verifyLogin(login.credential)).toMatchObject({ project: 'p', user: 'dave' });
      expect(links.revokeProject('p')).toBe(2);
      expect(() => links.verifyLogin(login.credential)).toThrow(/unknown or revoked/);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
