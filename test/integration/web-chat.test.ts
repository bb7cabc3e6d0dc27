import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import NodeWebSocket from 'ws';
import { DEMO_PROJECT, ensureDemoProject } from '../../src/cli/demo.js';
import { listenHttp, type HttpSurface } from '../../src/cli/serve.js';
import { CHAT_LINK_OPEN_SECONDS, createChatLinks, MAX_CHAT_LOGINS_PER_USER } from '../../src/store/chat-links.js';
import { openChatTranscripts, TRANSCRIPT_ENTRY_BYTES, TRANSCRIPT_KEEP } from '../../src/store/chat-transcripts.js';
import { cliAsync, testHome, type TestHome, launchChromium, screenshot } from '../helpers.js';
import { startLoopbackSite } from '../helpers/loopback-site.js';

/**
 * The web chat in real headless Chromium against a real berth (the same HTTP wiring as
 * `berth serve`: app, chat bridge, WebSocket on the upgrade event) and real containers of the
 * demo project's shell preset: log in by link, watch output stream in, change the level, reload,
 * and a second person who sees nothing of the first. Then who gets in (outside attack 3, M5 and
 * L7): a link works once and can be revoked, logins are listed and bounded, and the login cookie
 * cannot be shadowed by another page of the host.
 */
const TOKEN = 'web-chat-admin-token-0123456789';
const quiet = { out: () => undefined, err: () => undefined };
let h: TestHome;
let server: HttpSurface;
let base: string;
let browser: Browser;
let aliceLink: string;
let alice: BrowserContext;
let aliceSession: string;
const pageErrors: string[] = [];

beforeAll(async () => {
  h = testHome();
  ensureDemoProject(h.berth, quiet);
  server = await listenHttp(h.berth, { host: '127.0.0.1', port: 0, token: TOKEN }, quiet);
  base = server.url;
  aliceLink = `${base}${h.berth.admin.mintChatLink(DEMO_PROJECT, 'alice').path}`;
  browser = await launchChromium();
}, 60_000);
afterAll(async () => {
  await browser?.close();
  await server?.close();
  await h?.[Symbol.asyncDispose]();
});

async function newPage(context: BrowserContext): Promise<Page> {
  const page = await context.newPage();
  page.on('pageerror', (e) => pageErrors.push(String(e)));
  page.on('console', (m) => void (m.type() === 'error' && !/status of 401/.test(m.text()) && pageErrors.push(m.text())));
  return page;
}

/** A new browser logged in by a link: the link's page asks, the button logs in (and uses the link up). */
async function openChat(link: string, user?: string): Promise<Page> {
  const page = await newPage(await browser.newContext());
  await page.goto(link);
  if (user) expect(await page.textContent('#login')).toBe(`Log in as ${user}`);
  await page.click('#login');
  await page.waitForURL(`${base}/chat`);
  await connected(page);
  return page;
}

/** Alice's browser again (her link worked once; her cookie stays). */
async function openAlice(): Promise<Page> {
  const page = await newPage(alice);
  await page.goto(`${base}/chat`);
  await connected(page);
  return page;
}

const tokenOf = (link: string) => new URL(link, base).searchParams.get('token') as string;
/** The link page's button, as a client without a browser sends it. */
const postLogin = (token: string, headers: Record<string, string> = {}) =>
  fetch(`${base}/chat/login`, { method: 'POST', redirect: 'manual', headers, body: new URLSearchParams({ token }) });
const cookieFrom = (res: Response) => (res.headers.get('set-cookie') ?? '').split(';')[0] as string;
const me = (cookie: string, headers: Record<string, string> = {}) => fetch(`${base}/chat/api/me`, { headers: { cookie, ...headers } });
/** A logged-in cookie of `user` (through the HTTP login). */
async function loginCookie(user: string): Promise<string> {
  const res = await postLogin(tokenOf(h.berth.admin.mintChatLink(DEMO_PROJECT, user).path));
  expect(res.status).toBe(303);
  return cookieFrom(res);
}

// The page's globals as far as this file uses them (the project's TypeScript has no DOM types).
// Code for the page is passed as functions: the page's CSP (rightly) refuses string evaluation.
interface PageElement {
  textContent: string | null;
  value: string;
}
declare const document: { querySelector(selector: string): PageElement | null; querySelectorAll(selector: string): { length: number } };
declare const location: { host: string };
declare const WebSocket: new (url: string) => {
  onopen: () => void;
  onmessage: (ev: { data: unknown }) => void;
  send(data: string): void;
  close(): void;
};

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
    const page = await openChat(aliceLink, 'alice');
    alice = page.context();
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
      return live?.textContent?.includes('line 1')
        ? { live: live.textContent, replies: document.querySelectorAll('#log .msg.reply').length }
        : undefined;
    });
    const snapshot = (await early.jsonValue()) as { live: string; replies: number };
    expect(snapshot.replies).toBe(0);
    expect(snapshot.live).not.toContain('line 3');
    expect(await nthReply(page, 1)).toBe('line 1\nline 2\nline 3');
    expect(await page.$('#log .msg.live')).toBeNull(); // the live block became the reply
    // The message went through the bridge core's durable inbox, keyed by user and message id.
    expect(server.bridges.web!.inbox.all().find((e) => e.sender === 'web:alice')).toMatchObject({
      phase: 'replied',
      tenant: 'web:alice',
      session: aliceSession,
      id: expect.stringMatching(/^demo\/alice\/[0-9a-f-]{36}$/),
    });
    await page.close();
  });

  it('level low takes the network away from the next run; a reload keeps the level and the history', async () => {
    const page = await openAlice();
    expect(await page.inputValue('#session')).toBe(aliceSession);
    await page.selectOption('#level', 'low');
    await expect.poll(() => h.berth.admin.getSession(DEMO_PROJECT, aliceSession).settings.permission_level).toBe('low');
    await send(page, 'ls /sys/class/net; echo ${HTTPS_PROXY:-none}');
    expect(await nthReply(page, 2)).toBe('lo\nnone');

    await page.reload();
    await connected(page);
    expect(await page.inputValue('#level')).toBe('low');
    expect(await page.inputValue('#session')).toBe(aliceSession);
    expect(await page.$$eval('#log .msg.user pre', (els) => els.map((e) => e.textContent))).toEqual([
      'for i in 1 2 3; do echo line $i; sleep 0.3; done',
      'ls /sys/class/net; echo ${HTTPS_PROXY:-none}',
    ]);
    expect(await replies(page)).toEqual(['line 1\nline 2\nline 3', 'lo\nnone']);
    // The history says at which level the messages ran, and where it changed.
    expect(await page.$$eval('#log .msg.note', (els) => els.map((e) => e.textContent))).toEqual(['level medium', 'level changed to low']);
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
    const page = await openChat(link.url, 'bob');
    const options = await page.$$eval('#session option', (els) => els.map((e) => e.getAttribute('value') ?? ''));
    expect(options).toHaveLength(1);
    expect(options).not.toContain(aliceSession);
    const asBob = (path: string, init: { method?: string; headers?: Record<string, string>; body?: string } = {}) =>
      page.evaluate(async ([p, i]) => (await fetch(p, i)).status, [path, init] as const);
    expect(await asBob(`/chat/api/sessions/${aliceSession}/history`)).toBe(404);
    expect(
      await asBob(`/chat/api/sessions/${aliceSession}/settings`, {
        method: 'PUT',
        headers: { 'content-type': 'application/json' },
        body: '{"permission_level":"high"}',
      }),
    ).toBe(404);
    const listed = (await page.evaluate(async () => (await fetch('/chat/api/sessions')).json())) as { sessions: Array<{ id: string }> };
    expect(listed.sessions.map((s) => s.id)).toEqual(options);
    const hijack = await socketExchange(page, {
      type: 'run',
      id: crypto.randomUUID(),
      session_id: aliceSession,
      permission_level: 'low',
      input: 'cat /etc/hostname',
    });
    expect(hijack.at(-1)).toMatchObject({ type: 'error', code: 'SESSION_NOT_FOUND' });
    // The cookie opens the chat only: the admin API still wants the admin token.
    expect(await asBob('/api/projects')).toBe(401);

    // /new (answered by the bridge core) starts a session and the page switches to it.
    await send(page, '/new');
    await page.waitForFunction((first) => document.querySelector('#session')?.value !== first, options[0]);
    expect(await page.$$eval('#session option', (els) => els.length)).toBe(2);

    // The page's Delete button removes the shown session (after asking), and shows the other one.
    const shown = await page.inputValue('#session');
    await page.click('#delete');
    // The page's own question box, not the browser's confirm().
    expect(await page.textContent('#ask[open] #ask-text')).toMatch(/^Delete this conversation\?/);
    expect(await page.isVisible('#ask-input')).toBe(false);
    await page.click('#ask-ok');
    await page.waitForFunction(() => document.querySelectorAll('#session option').length === 1);
    expect(await page.inputValue('#session')).toBe(options[0]);
    expect(h.berth.admin.listSessions(DEMO_PROJECT, 'web:bob').map((s) => s.id)).toEqual(options);
    expect(() => h.berth.admin.getSession(DEMO_PROJECT, shown)).toThrow(/does not exist/);
    await page.close();
  });

  it('a person whose default session the API made (the README: curl as carol, then her link) chats in it and changes its level', async () => {
    const viaApi = await fetch(`${base}/api/projects/${DEMO_PROJECT}/runs`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ user: 'web:carol', message: 'echo from the api > api.txt' }),
    });
    expect(viaApi.status).toBe(200);
    const made = ((await viaApi.json()) as { session: string }).session;
    expect(made).toMatch(/^t-/);
    const page = await openChat(`${base}${h.berth.admin.mintChatLink(DEMO_PROJECT, 'carol').path}`, 'carol');
    expect(await page.inputValue('#session')).toBe(made); // the page picks the session she has
    await send(page, 'cat api.txt');
    expect(await nthReply(page, 1)).toBe('from the api');
    await page.selectOption('#level', 'low');
    await expect.poll(() => h.berth.admin.getSession(DEMO_PROJECT, made).settings.permission_level).toBe('low');
    await send(page, 'ls /sys/class/net');
    expect(await nthReply(page, 2)).toBe('lo');
    expect(await page.$$eval('.error, #error', (els) => els.map((e) => e.textContent).filter(Boolean))).toEqual([]);
    await screenshot(page, 'web-chat-api-session-then-chat');
    await page.close();
  });

  it('a conversation is named by its first message and renamed by its person (kept over a reload); the list shows level and last activity; nobody else can rename it', async () => {
    const page = await openChat(`${base}${h.berth.admin.mintChatLink(DEMO_PROJECT, 'dora').path}`, 'dora');
    const id = await page.inputValue('#session');
    const shown = () =>
      page.$eval(
        '#session',
        (el) => (el as unknown as { selectedOptions: Array<{ textContent: string }> }).selectedOptions[0]?.textContent ?? '',
      );
    expect(await shown()).toBe('new conversation · medium · just now');
    await send(page, 'echo  planning   the release\necho second line');
    expect(await nthReply(page, 1)).toBe('planning the release\nsecond line');
    await page.waitForFunction(() =>
      /^echo planning the release · medium · just now$/.test(
        (document.querySelector('#session') as unknown as { selectedOptions: Array<{ textContent: string }> }).selectedOptions[0]
          ?.textContent ?? '',
      ),
    );
    await page.click('#rename');
    await page.fill('#ask[open] #ask-input', 'Release plan');
    await screenshot(page, 'web-chat-rename-dialog');
    await page.press('#ask-input', 'Enter');
    await page.waitForFunction(() =>
      (
        (document.querySelector('#session') as unknown as { selectedOptions: Array<{ textContent: string }> }).selectedOptions[0]
          ?.textContent ?? ''
      ).startsWith('Release plan · '),
    );
    expect(h.berth.admin.getSession(DEMO_PROJECT, id).title).toBe('Release plan');
    await page.reload();
    await connected(page);
    expect(await shown()).toBe('Release plan · medium · just now');
    await screenshot(page, 'web-chat-named-conversation');

    // A name is one line of at most 80 characters: refused with the field, nothing changed.
    const put = (cookiePage: Page, session: string, body: string) =>
      cookiePage.evaluate(
        async ([path, b]) => {
          const r = await fetch(path, { method: 'PUT', headers: { 'content-type': 'application/json' }, body: b });
          return { status: r.status, body: await r.json() };
        },
        [`/chat/api/sessions/${session}`, body] as const,
      );
    expect(await put(page, id, JSON.stringify({ title: 'x'.repeat(81) }))).toMatchObject({
      status: 400,
      body: { error: { code: 'CONFIG_INVALID', issues: [{ field: 'title' }] } },
    });
    // Another person cannot rename it (it is not theirs: not found), and their page never shows it.
    const other = await openChat(`${base}${h.berth.admin.mintChatLink(DEMO_PROJECT, 'eve').path}`, 'eve');
    expect(await put(other, id, JSON.stringify({ title: 'mine now' }))).toMatchObject({
      status: 404,
      body: { error: { code: 'SESSION_NOT_FOUND' } },
    });
    expect(h.berth.admin.getSession(DEMO_PROJECT, id).title).toBe('Release plan');
    await other.close();
    await page.close();
  });

  it("the agent at work: each of the demo shell's commands shows as a step when it starts and ends, above the answer; the history keeps them folded", async () => {
    pageErrors.length = 0; // the tests before refuse requests on purpose (400, 404): the console says so
    const page = await openChat(`${base}${h.berth.admin.mintChatLink(DEMO_PROJECT, 'stepper').path}`, 'stepper');
    await send(page, 'echo one; sleep 1; ls /nope; echo two');
    // While it runs: the sleep shows as running before any answer.
    const running = await page.waitForFunction(() => {
      const steps = document.querySelector('#log .msg.steps.current');
      return steps?.textContent?.includes('sleep 1') && steps.textContent.includes('running…')
        ? { replies: document.querySelectorAll('#log .msg.reply').length }
        : undefined;
    });
    expect(((await running.jsonValue()) as { replies: number }).replies).toBe(0);
    // stdout and, marked apart, the shell's stderr (its trace taken out); their relative order is the two pipes'.
    await nthReply(page, 1);
    const streams = await page.$$eval('#log .msg.reply pre > *', (els) => els.map((e) => [e.className, e.textContent]));
    expect(
      streams
        .filter(([c]) => c === 'stdout')
        .map(([, t]) => t)
        .join(''),
    ).toBe('one\ntwo\n');
    expect(streams.filter(([c]) => c === 'stderr')).toEqual([['stderr', 'ls: /nope: No such file or directory\n']]);
    const shown = () =>
      page.$$eval('#log .msg.steps .step', (els) =>
        els.map((e) => [e.className, e.querySelector('.tool')?.textContent, e.querySelector('.tool + span')?.textContent]),
      );
    expect(await shown()).toEqual([
      ['step ended', '· sh', 'echo one'],
      ['step ended', '· sh', 'sleep 1'],
      ['step ended', '· sh', 'ls /nope'],
      ['step ok', '✓ sh', 'echo two'],
    ]);
    // The steps come before the answer they led to.
    expect(await page.$$eval('#log .msg', (els) => els.map((e) => e.className))).toEqual(
      ['msg note', 'msg user', 'msg steps', 'msg live', 'msg reply'].filter((c) => c !== 'msg live'),
    );
    await screenshot(page, 'web-chat-agent-steps');
    await page.reload();
    await connected(page);
    await page.waitForFunction(() => document.querySelectorAll('#log .msg.reply').length === 1);
    expect(await page.textContent('#log details.steps summary')).toBe('4 steps');
    expect(await shown()).toHaveLength(4);
    expect(pageErrors).toEqual([]);
    await page.close();
  });

  it("a project whose answers are Markdown: rendered and sanitized (no script, no handler, no image loads), links open outside, code has a copy button; the shell demo's stay text", async () => {
    pageErrors.length = 0; // the tests before refuse requests on purpose (400, 404): the console says so
    h.create({ name: 'md', workspace_isolation: true, chat: { raise_level: 'anyone', format: 'markdown' } });
    const page = await openChat(`${base}${h.berth.admin.mintChatLink('md', 'mia').path}`, 'mia');
    const fence = '```';
    const answer = [
      '# Plan',
      '',
      '- one',
      '- **two**',
      '',
      '[the docs](https://example.com/x)',
      '',
      fence,
      'code here',
      fence,
      '',
      '<img src="/chat/api/me" onerror="document.title=1"><script>document.title=2</script><a href="javascript:document.title=3">x</a>',
    ].join('\n');
    await send(page, `cat <<'EOF'\n${answer}\nEOF`);
    await page.waitForSelector('#log .msg.reply .md h1');
    const md = await page.$eval('#log .msg.reply .md', (el) => {
      const box = el as unknown as {
        querySelector(s: string): { textContent: string; getAttribute(n: string): string | null } | null;
        querySelectorAll(s: string): { length: number };
        innerHTML: string;
      };
      const link = box.querySelector('a[href^="https:"]');
      return {
        h1: box.querySelector('h1')?.textContent,
        items: box.querySelectorAll('li').length,
        strong: box.querySelector('strong')?.textContent,
        link: link && [link.getAttribute('href'), link.getAttribute('target'), link.getAttribute('rel')],
        code: box.querySelector('pre code')?.textContent,
        copy: box.querySelector('pre button.copy')?.textContent,
        html: box.innerHTML,
      };
    });
    expect(md).toMatchObject({
      h1: 'Plan',
      items: 2,
      strong: 'two',
      link: ['https://example.com/x', '_blank', 'noopener noreferrer'],
      code: 'code here\n',
      copy: 'Copy',
    });
    expect(md.html).not.toMatch(/<script|<img|onerror|javascript:/i);
    expect(await page.title()).toBe('md · berth chat'); // nothing the answer carried ran (the page names the project)
    await page.click('#log .msg.reply .md pre button.copy');
    await page.waitForFunction(() => document.querySelector('#log .msg.reply .md pre button.copy')?.textContent === 'Copied');
    await screenshot(page, 'web-chat-markdown-answer');
    // The history shows it the same way after a reload.
    await page.reload();
    await connected(page);
    await page.waitForSelector('#log .msg.reply .md h1');
    // The libraries and the page's own script and style come from berth itself, cacheable, named by their content; nothing is inline.
    const assets = await page.$$eval('script[src]', (els) => els.map((e) => e.getAttribute('src') ?? ''));
    expect(assets).toEqual([
      expect.stringMatching(/^\/chat\/assets\/marked-[0-9a-f]{12}\.js$/),
      expect.stringMatching(/^\/chat\/assets\/purify-[0-9a-f]{12}\.js$/),
      expect.stringMatching(/^\/chat\/assets\/chat-[0-9a-f]{12}\.js$/),
    ]);
    expect(await page.$$eval('link[rel=stylesheet]', (els) => els.map((e) => e.getAttribute('href')))).toEqual([
      expect.stringMatching(/^\/chat\/assets\/chat-[0-9a-f]{12}\.css$/),
    ]);
    expect(await page.$$eval('script:not([src]), style', (els) => els.length)).toBe(0);
    const res = await fetch(`${base}${assets[0]}`);
    expect([res.status, res.headers.get('content-type'), res.headers.get('cache-control')]).toEqual([
      200,
      'text/javascript; charset=utf-8',
      'public, max-age=31536000, immutable',
    ]);
    // The one complaint: the page's CSP refusing the handler the answer carried (as DOMPurify parsed it, inert).
    expect(
      pageErrors.filter((e) => !/^Executing inline event handler violates the following Content Security Policy directive/.test(e)),
    ).toEqual([]);
    pageErrors.length = 0;
    await page.close();
  });

  it('plain output keeps its order: stdout and stderr apart as printed, the exit status only when it is not 0 (also after a reload)', async () => {
    pageErrors.length = 0;
    // A custom argv: berth reads no progress from it, so its output is shown as it was printed.
    h.create({ name: 'plain', workspace_isolation: true, agent: ['sh', '-c', '{message}'] });
    const page = await openChat(`${base}${h.berth.admin.mintChatLink('plain', 'olga').path}`, 'olga');
    const parts = () =>
      page.$$eval('#log .msg.reply pre', (els) =>
        els.map((pre) =>
          [...(pre as unknown as { children: Array<{ className: string; textContent: string }> }).children].map((c) => [
            c.className,
            c.textContent,
          ]),
        ),
      );
    // Low: an agent's first message at medium starts with the memory instructions, which sh would run.
    await page.selectOption('#level', 'low');
    await send(page, 'echo out1; sleep 0.2; echo err1 >&2; sleep 0.2; echo out2; exit 3');
    await nthReply(page, 1);
    const failed = [
      ['stdout', 'out1\n'],
      ['stderr', 'err1\n'],
      ['stdout', 'out2\n'],
      ['exit', 'exit 3'],
    ];
    expect(await parts()).toEqual([failed]);
    await send(page, 'echo fine; sleep 0.2; echo note >&2');
    await nthReply(page, 2);
    expect((await parts())[1]).toEqual([
      ['stdout', 'fine\n'],
      ['stderr', 'note\n'],
    ]);
    await send(page, 'echo quiet');
    expect(await nthReply(page, 3)).toBe('quiet');
    await screenshot(page, 'web-chat-output-in-order');
    await page.reload();
    await connected(page);
    await page.waitForFunction(() => document.querySelectorAll('#log .msg.reply').length === 3);
    expect(await parts()).toEqual([
      failed,
      [
        ['stdout', 'fine\n'],
        ['stderr', 'note\n'],
      ],
      [],
    ]);
    expect(pageErrors).toEqual([]);
    await page.close();
  });

  it('on a phone (360 px), by keyboard alone: nothing scrolls sideways, Tab reaches the message box, Enter sends; the page names its parts for a screen reader', async () => {
    const context = await browser.newContext({ viewport: { width: 360, height: 740 } });
    const page = await newPage(context);
    await page.goto(`${base}${h.berth.admin.mintChatLink(DEMO_PROJECT, 'pia').path}`);
    await page.click('#login');
    await page.waitForURL(`${base}/chat`);
    await connected(page);
    let focused = '';
    for (let i = 0; i < 12 && focused !== 'input'; i++) {
      await page.keyboard.press('Tab');
      focused = await page.evaluate(() => (document as unknown as { activeElement: { id: string } | null }).activeElement?.id ?? '');
    }
    expect(focused).toBe('input');
    await page.keyboard.type(`printf 'a%.0s' $(seq 400); echo; echo done`);
    await page.keyboard.press('Enter');
    expect((await nthReply(page, 1)).endsWith('\ndone')).toBe(true);
    const width = await page.evaluate(() => {
      const d = (document as unknown as { documentElement: { scrollWidth: number; clientWidth: number } }).documentElement;
      return [d.scrollWidth, d.clientWidth];
    });
    expect(width).toEqual([360, 360]);
    const roles = await page.evaluate(() =>
      ['#log', '#alert', '#session', '#level', '#input'].map((sel) => {
        const el = document.querySelector(sel) as unknown as { getAttribute(n: string): string | null };
        return [el.getAttribute('aria-live') ?? el.getAttribute('role') ?? el.getAttribute('aria-label')];
      }),
    );
    expect(roles).toEqual([['polite'], ['alert'], ['session'], ['permission level'], ['message']]);
    await screenshot(page, 'web-chat-phone-360');
    await context.close();
  });

  it('the agent asks before it reaches a host outside the allowlist: a card (allow once, for this session, deny) that a reload keeps; allowed, the request goes through; denied, it gets 403; nobody else can answer it', async () => {
    pageErrors.length = 0;
    const site = await startLoopbackSite();
    const port = site.port;
    // A loopback "site" stands in for the internet: the operator lets the proxy reach it at all.
    await h.berth.operator.setConfig(['egress', 'private_hosts'], [`localhost:${port}`]);
    try {
      const context = await browser.newContext({ viewport: { width: 360, height: 740 } });
      const page = await newPage(context);
      await page.goto(`${base}${h.berth.admin.mintChatLink(DEMO_PROJECT, 'asker').path}`);
      await page.click('#login');
      await page.waitForURL(`${base}/chat`);
      await connected(page);
      await send(page, `wget -q -O - http://localhost:${port}/card 2>&1; echo rc=$?`);
      const card = '#log .msg.approval';
      await page.waitForSelector(`${card} button`);
      expect(await page.textContent(`${card} p`)).toBe(`Your agent wants to reach localhost:${port}, which this project does not allow.`);
      expect(await page.$$eval(`${card} button`, (els) => els.map((e) => e.textContent))).toEqual([
        'Allow once',
        'Allow for this session',
        'Deny',
      ]);
      expect(await page.textContent(`${card} .when`)).toBe('No answer within 2 min: denied.');
      const width = await page.evaluate(
        () => (document as unknown as { documentElement: { scrollWidth: number } }).documentElement.scrollWidth,
      );
      expect(width).toBe(360);
      await screenshot(page, 'web-chat-approval-card-phone');
      // The page is reloaded while the agent waits: the question is still there to answer.
      await page.reload();
      await connected(page);
      await page.waitForSelector(`${card} button`);
      expect(site.hits()).toBe(0);
      // Someone else's page cannot answer it (the id is as unknown to them as a made-up one).
      const id = (await page.$eval(card, (e) => (e as unknown as { id: string }).id)).slice('approval-'.length);
      const other = await openChat(`${base}${h.berth.admin.mintChatLink(DEMO_PROJECT, 'bystander').path}`);
      expect(await socketExchange(other, { type: 'approve', id, decision: 'once' })).toEqual([
        { type: 'error', code: 'APPROVAL_NOT_FOUND', message: expect.stringMatching(/nothing of that id waits for your answer/), id },
      ]);
      await other.close();
      await page.click(`${card} button[data-decision="once"]`);
      expect(await nthReply(page, 1)).toBe('fetched /card\nrc=0');
      expect(await page.textContent(`${card} .outcome`)).toBe('Allowed for this message');
      expect(site.hits()).toBe(1);
      await screenshot(page, 'web-chat-approval-answered-phone');
      // Denied: the waiting request gets 403, and the site is never reached.
      await send(page, `wget -q -O - http://localhost:${port}/denied 2>&1; echo rc=$?`);
      await page.waitForSelector(`${card}:not([id="approval-${id}"]) button[data-decision="deny"]`);
      await page.click(`${card}:not([id="approval-${id}"]) button[data-decision="deny"]`);
      const denied = await nthReply(page, 2);
      expect(denied).toMatch(/403/);
      expect(denied).toMatch(/rc=1/);
      expect(site.hits()).toBe(1);
      expect(await page.$$eval(`${card} .outcome`, (els) => els.map((e) => e.textContent))).toEqual(['Allowed for this message', 'Denied']);
      expect(
        h.berth.audit
          .list({ project: DEMO_PROJECT, limit: 20 })
          .filter((e) => e.action.startsWith('approval.'))
          .map((e) => [e.action, e.actor]),
      ).toEqual([
        ['approval.deny', 'tenant:web:asker'],
        ['approval.allow_once', 'tenant:web:asker'],
      ]);
      expect(pageErrors).toEqual([]);
      await context.close();
    } finally {
      await h.berth.operator.unsetConfig(['egress', 'private_hosts']);
      site.close();
    }
  });

  it('an invalid level over the WebSocket is a clear error naming the field, and nothing runs', async () => {
    const page = await openAlice();
    const runsBefore = h.berth.admin.getSession(DEMO_PROJECT, aliceSession).runs;
    const got = await socketExchange(page, {
      type: 'run',
      id: crypto.randomUUID(),
      session_id: aliceSession,
      permission_level: 'root',
      input: 'echo nope',
    });
    expect(got).toEqual([
      {
        type: 'error',
        code: 'CONFIG_INVALID',
        field: 'permission_level',
        message: expect.stringMatching(/^permission_level: .*"low"\|"medium"\|"high"/),
        id: expect.any(String),
      },
    ]);
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
    expect(r).toMatchObject({
      code: 0,
      stdout: expect.stringMatching(new RegExp(`^${base}/chat/login\\?token=bcl_[A-Za-z0-9_-]{32}\\n$`)),
    });
    expect(r.stderr).toMatch(
      /^berth: a chat link for web:carol in project strict: it works once, until \S+; the login it opens lasts until \S+\. Whoever opens it first chats as web:carol\.\n$/,
    );
    expect((await cliAsync(['--home', h.home, 'chat-link', 'strict', '--user', 'no/slash'])).stderr).toMatch(
      /^CONFIG_INVALID: .*user: must be 1-64 characters/,
    );
    expect((await cliAsync(['--home', h.home, 'chat-link', 'strict', '--user', 'carol', '--ttl', String(30 * 86400 + 1)])).stderr).toMatch(
      /^USAGE: --ttl must be 60-2592000 seconds/,
    );
    const login = await postLogin(tokenOf(r.stdout.trim()));
    expect(login.status).toBe(303);
    const cookie = cookieFrom(login);
    const call = (method: string, path: string, body?: unknown) =>
      fetch(`${base}${path}`, {
        method,
        headers: { cookie, ...(body ? { 'content-type': 'application/json' } : {}) },
        body: body ? JSON.stringify(body) : undefined,
      });
    const { session } = (await (await call('POST', '/chat/api/sessions')).json()) as { session: { id: string } };
    expect((await call('PUT', `/chat/api/sessions/${session.id}/settings`, { permission_level: 'low' })).status).toBe(200);
    const raise = await call('PUT', `/chat/api/sessions/${session.id}/settings`, { permission_level: 'high' });
    expect(raise.status).toBe(403);
    expect(await raise.json()).toMatchObject({
      error: {
        code: 'PERMISSION_DENIED',
        rule: 'raise_level',
        message: expect.stringMatching(/it stays low\)\. I asked the operator to allow high; you will hear here when they answer/),
      },
    });
    // The operator allows it from the CLI (another process): the session is raised, the chat told.
    const listed = JSON.parse((await cliAsync(['--home', h.home, 'approvals', 'list', '--json', '--project', 'strict'])).stdout) as Array<{
      id: string;
      kind: string;
      target: string;
    }>;
    expect(listed).toEqual([expect.objectContaining({ kind: 'level', target: 'high' })]);
    // The person's page gets no card for it (the operator answers; the person hears the outcome).
    const pushed: string[] = [];
    const socket = new NodeWebSocket(`${base.replace('http', 'ws')}/chat/ws`, { headers: { cookie, origin: base } });
    socket.on('message', (d) => pushed.push(String(d)));
    await new Promise((r) => socket.once('open', r));
    await new Promise((r) => setTimeout(r, 300));
    expect(pushed.filter((m) => m.includes('"approval"'))).toEqual([]);
    socket.close();
    expect(await cliAsync(['--home', h.home, 'approvals', 'allow', listed[0]!.id])).toMatchObject({ code: 0 });
    await expect.poll(() => h.berth.admin.getSession('strict', session.id).settings.permission_level, { timeout: 5000 }).toBe('high');
    const history = (await (await call('GET', `/chat/api/sessions/${session.id}/history`)).json()) as { entries: Array<{ text: string }> };
    expect(history.entries.map((e) => e.text)).toContain("berth: the operator raised this conversation's level to high.");
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
      expect(fs.readFileSync(join(dir, 'projects/p/chat/s1.jsonl'), 'utf8').split('\n').length).toBeLessThanOrEqual(
        2 * TRANSCRIPT_KEEP + 1,
      );
      expect(() => transcripts.read('p', '../s1')).toThrow(/transcript is invalid/);

      const links = createChatLinks(dir);
      const expired = links.mintLink('p', 'dave', -1);
      expect(() => links.login(expired.token)).toThrow(/has expired/);
      const { token } = links.mintLink('p', 'dave');
      expect(fs.readdirSync(join(dir, 'chat-links')).join()).not.toContain(token.slice(4)); // stored as a digest only
      const login = links.login(token);
      expect(links.verifyLogin(login.credential)).toMatchObject({ project: 'p', user: 'dave' });
      expect(() => links.login(token)).toThrow(/unknown, used or revoked/); // used up
      links.mintLink('p', 'erin');
      expect(links.revokeProject('p')).toBe(2); // dave's login, erin's unused link
      expect(() => links.verifyLogin(login.credential)).toThrow(/unknown, used or revoked/);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

/** A socket as a client without a browser opens it; resolves once open (or with the refusal's status). */
function nodeSocket(headers: Record<string, string>): Promise<NodeWebSocket | number> {
  return new Promise((resolve) => {
    const ws = new NodeWebSocket(`${base.replace('http', 'ws')}/chat/ws`, { headers });
    ws.on('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0));
    ws.on('open', () => resolve(ws));
    ws.on('error', () => undefined);
  });
}

describe('chat links: once, revocable, bounded (M5)', () => {
  it('opening a link asks and mints nothing; the first login uses it up; a second, even at the same moment, gets the plain page and no cookie', async () => {
    const link = h.berth.admin.mintChatLink(DEMO_PROJECT, 'gina');
    const asked = await fetch(`${base}${link.path}`, { redirect: 'manual' });
    expect(asked.status).toBe(200);
    expect(asked.headers.get('set-cookie')).toBeNull();
    expect(asked.headers.get('content-security-policy')).toContain("form-action 'self'");
    expect(await asked.text()).toContain('Log in as gina</button>');
    expect(h.berth.admin.listChatAccess(DEMO_PROJECT, 'gina')).toMatchObject({ links: [{ user: 'gina' }], logins: [] });

    const both = await Promise.all([postLogin(tokenOf(link.path)), postLogin(tokenOf(link.path))]);
    expect(both.map((r) => r.status).sort()).toEqual([303, 401]);
    const [won, lost] = both[0]!.status === 303 ? both : [both[1]!, both[0]!];
    expect(won!.headers.get('set-cookie')).toMatch(/^berth_chat=bcs_/);
    expect(lost!.headers.get('set-cookie')).toBeNull();
    expect(await lost!.text()).toContain('This chat link does not work.');
    const again = await fetch(`${base}${link.path}`, { redirect: 'manual' });
    expect(again.status).toBe(401);
    expect(again.headers.get('set-cookie')).toBeNull();
    expect(await again.text()).toContain('ask the admin for a new one');
    expect(h.berth.admin.listChatAccess(DEMO_PROJECT, 'gina')).toMatchObject({ links: [], logins: [{ user: 'gina' }] });
    expect((await me(cookieFrom(won!))).status).toBe(200);
  });

  it("another site's form cannot log a browser in (login CSRF), and the link stays unused", async () => {
    const { path } = h.berth.admin.mintChatLink(DEMO_PROJECT, 'mallory');
    expect((await postLogin(tokenOf(path), { origin: 'http://evil.example' })).status).toBe(403);
    expect((await postLogin(tokenOf(path), { origin: 'null' })).status).toBe(403);
    expect((await postLogin(tokenOf(path), { 'sec-fetch-site': 'cross-site' })).status).toBe(403);
    // The same from a real browser: a page on another port submits a form with the attacker's token.
    const evil = http.createServer((_req, res) => {
      res.setHeader('content-type', 'text/html');
      res.end(
        `<!doctype html><form method="post" action="${base}/chat/login"><input type="hidden" name="token" value="${tokenOf(path)}"></form><script>document.forms[0].submit()</script>`,
      );
    });
    await new Promise<void>((r) => evil.listen(0, '127.0.0.1', r));
    try {
      const context = await browser.newContext();
      const page = await context.newPage();
      const refused = page.waitForResponse(`${base}/chat/login`);
      await page.goto(`http://127.0.0.1:${(evil.address() as AddressInfo).port}/`);
      expect((await refused).status()).toBe(403);
      expect(await context.cookies()).toEqual([]);
      await context.close();
    } finally {
      evil.close();
    }
    expect(h.berth.admin.listChatAccess(DEMO_PROJECT, 'mallory')).toMatchObject({ links: [{ user: 'mallory' }], logins: [] });
    expect((await postLogin(tokenOf(path), { origin: base, 'sec-fetch-site': 'same-origin' })).status).toBe(303);
  });

  it('revoke (CLI and API) logs a person out everywhere: cookies refused, an open socket closed, an open page logged out, unused links void', async () => {
    const first = await loginCookie('henry');
    const second = await loginCookie('henry');
    const unused = h.berth.admin.mintChatLink(DEMO_PROJECT, 'henry');
    const page = await openChat(`${base}${h.berth.admin.mintChatLink(DEMO_PROJECT, 'henry').path}`, 'henry');
    const socket = await nodeSocket({ cookie: first });
    if (typeof socket === 'number') throw new Error(`socket refused: ${socket}`);
    const bystander = await loginCookie('ivy');

    const listed = await cliAsync(['--home', h.home, 'chat-link', 'logins', DEMO_PROJECT, '--user', 'henry']);
    expect(listed.code).toBe(0);
    expect(
      listed.stdout
        .split('\n')
        .filter(Boolean)
        .map((l) => l.split('  ').slice(0, 2).join(' | ')),
    ).toEqual(['henry | login', 'henry | login', 'henry | login', 'henry | link (unused)']);
    const api = await fetch(`${base}/api/projects/${DEMO_PROJECT}/chat-links?user=henry`, {
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    const access = (await api.json()) as { logins: unknown[]; links: unknown[] };
    expect(access).toMatchObject({
      project: DEMO_PROJECT,
      logins: [{ user: 'henry', created_at: expect.any(String), expires_at: expect.any(String) }, {}, {}],
      links: [{ user: 'henry' }],
    });
    expect(JSON.stringify(access)).not.toMatch(/bc[ls]_/); // never a token

    const revoked = await cliAsync(['--home', h.home, 'chat-link', 'revoke', DEMO_PROJECT, '--user', 'henry']);
    expect(revoked).toMatchObject({ code: 0, stdout: `web:henry in project ${DEMO_PROJECT}: 3 login(s) ended, 1 unused link(s) voided\n` });
    for (const cookie of [first, second]) expect((await me(cookie)).status).toBe(401);
    expect((await fetch(`${base}${unused.path}`, { redirect: 'manual' })).status).toBe(401);
    // The socket opened before the revoke is refused at its next message and closed.
    const closed = new Promise<number>((resolve) => socket.once('close', (code) => resolve(code)));
    const answer = new Promise<Record<string, unknown>>((resolve) => socket.once('message', (d) => resolve(JSON.parse(d.toString()))));
    socket.send(
      JSON.stringify({ type: 'run', id: crypto.randomUUID(), session_id: 'x', permission_level: 'low', input: 'echo still here' }),
    );
    expect(await answer).toMatchObject({ type: 'error', code: 'UNAUTHORIZED' });
    expect(await closed).toBe(4401);
    expect(await nodeSocket({ cookie: second })).toBe(401);
    // The open page: its next request finds it logged out, and it says so.
    await page.click('#new');
    await page.waitForSelector('#out', { state: 'visible' });
    expect(await page.textContent('#out')).toContain('ask the admin for a new one');
    await page.close();

    const viaApi = await fetch(`${base}/api/projects/${DEMO_PROJECT}/chat-links?user=ivy`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    expect(await viaApi.json()).toEqual({ project: DEMO_PROJECT, user: 'ivy', tenant: 'web:ivy', links_revoked: 0, logins_revoked: 1 });
    expect((await me(bystander)).status).toBe(401);
    expect(
      (
        await fetch(`${base}/api/projects/${DEMO_PROJECT}/chat-links?user=a%20b`, {
          method: 'DELETE',
          headers: { authorization: `Bearer ${TOKEN}` },
        })
      ).status,
    ).toBe(400);
    const audited = fs
      .readFileSync(join(h.home, '.berth/audit.jsonl'), 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as { action: string; target?: string });
    expect(audited.filter((e) => e.action === 'chat_link.revoke').map((e) => e.target)).toEqual(['henry', 'ivy']);
  });

  it(`a person holds at most ${MAX_CHAT_LOGINS_PER_USER} logins: a new one ends the oldest`, async () => {
    const cookies: string[] = [];
    for (let i = 0; i < MAX_CHAT_LOGINS_PER_USER + 2; i++) cookies.push(await loginCookie('jack'));
    expect(h.berth.admin.listChatAccess(DEMO_PROJECT, 'jack').logins).toHaveLength(MAX_CHAT_LOGINS_PER_USER);
    expect(await Promise.all(cookies.map(async (c) => (await me(c)).status))).toEqual([
      401,
      401,
      ...Array(MAX_CHAT_LOGINS_PER_USER).fill(200),
    ]);
    expect(fs.readdirSync(join(h.home, '.berth/chat-logins')).length).toBeLessThan(40); // every person's, bounded
  });

  it('a link works within a day; the login it opens lasts the access asked for (default 7 days, at most 30)', async () => {
    // Each time bracketed by the clock read before and after the call that made it: exact, with
    // no slack a busy host could pass.
    const before = Date.now();
    const link = h.berth.admin.mintChatLink(DEMO_PROJECT, 'kate');
    const after = Date.now();
    const opens = Date.parse(link.expires_at);
    expect(opens).toBeGreaterThanOrEqual(before + CHAT_LINK_OPEN_SECONDS * 1000);
    expect(opens).toBeLessThanOrEqual(after + CHAT_LINK_OPEN_SECONDS * 1000);
    expect(Date.parse(link.login_expires_at) - opens).toBe(7 * 86400_000 - CHAT_LINK_OPEN_SECONDS * 1000);
    const sent = Date.now();
    const res = await postLogin(tokenOf(link.path));
    const answered = Date.now();
    const maxAge = Number(/Max-Age=(\d+)/.exec(res.headers.get('set-cookie') ?? '')?.[1]);
    expect(maxAge).toBeGreaterThanOrEqual(Math.floor((Date.parse(link.login_expires_at) - answered) / 1000));
    expect(maxAge).toBeLessThanOrEqual(Math.floor((Date.parse(link.login_expires_at) - sent) / 1000));
    expect(h.berth.admin.listChatAccess(DEMO_PROJECT, 'kate').logins[0]?.expires_at).toBe(link.login_expires_at);
    const short = h.berth.admin.mintChatLink(DEMO_PROJECT, 'kate', 600);
    expect(short.expires_at).toBe(short.login_expires_at);
    const tooLong = await fetch(`${base}/api/projects/${DEMO_PROJECT}/chat-links`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ user: 'kate', ttl_seconds: 31 * 86400 }),
    });
    expect(await tooLong.json()).toMatchObject({ error: { code: 'CONFIG_INVALID', issues: [{ field: 'ttl_seconds' }] } });
  });
});

describe('the login cookie cannot be shadowed (L7)', () => {
  it('over https it is __Host-berth_chat (Secure, Path=/, no Domain), and a plain berth_chat beside it counts for nothing', async () => {
    const https = { 'x-forwarded-proto': 'https' };
    const res = await postLogin(tokenOf(h.berth.admin.mintChatLink(DEMO_PROJECT, 'liam').path), https);
    const set = res.headers.get('set-cookie') ?? '';
    expect(set).toMatch(/^__Host-berth_chat=bcs_[A-Za-z0-9_-]{32}; HttpOnly; Secure; SameSite=Strict; Path=\/; Max-Age=\d+$/);
    const credential = cookieFrom(res).split('=')[1] as string;
    expect((await me(`__Host-berth_chat=${credential}`, https)).status).toBe(200);
    expect((await me(`berth_chat=${credential}`, https)).status).toBe(401); // a name any page of the host can set
    expect((await me(`__Host-berth_chat=${credential}`)).status).toBe(401); // over http only berth_chat counts
    const socket = await nodeSocket({ cookie: `__Host-berth_chat=${credential}`, ...https });
    expect(socket).toBeInstanceOf(NodeWebSocket);
    (socket as NodeWebSocket).close();
  });

  it('a request carrying two chat cookies is refused with words, on the API and the socket (not "first wins")', async () => {
    const victim = await loginCookie('nina');
    const attacker = await loginCookie('oscar');
    const refused = await me(`${attacker}; ${victim}`);
    expect(refused.status).toBe(401);
    expect(await refused.json()).toMatchObject({
      error: { code: 'UNAUTHORIZED', message: expect.stringContaining('your browser sent two chat logins for this site') },
    });
    expect(await nodeSocket({ cookie: `${attacker}; ${victim}` })).toBe(401);
    expect((await me(victim)).status).toBe(200);
  });

  it("a page on another port of the host tosses its own login at /chat/api: the victim's page is refused, never logged in as the attacker", async () => {
    const attacker = (await loginCookie('oscar2')).split('=')[1] as string;
    const evil = http.createServer((_req, res) => {
      res.setHeader('content-type', 'text/html');
      res.end(`<!doctype html><script>document.cookie = "berth_chat=${attacker}; path=/chat/api"</script>ok`);
    });
    await new Promise<void>((r) => evil.listen(0, '127.0.0.1', r));
    try {
      const victim = await openChat(`${base}${h.berth.admin.mintChatLink(DEMO_PROJECT, 'paula').path}`, 'paula');
      expect(await victim.textContent('#who')).toBe(`paula @ ${DEMO_PROJECT}`);
      const tosser = await victim.context().newPage();
      await tosser.goto(`http://127.0.0.1:${(evil.address() as AddressInfo).port}/`);
      await expect.poll(async () => (await victim.context().cookies()).filter((c) => c.name === 'berth_chat').length).toBe(2);
      await victim.reload();
      await victim.waitForSelector('#out', { state: 'visible' });
      expect(await victim.textContent('#why')).toMatch(/^your browser sent two chat logins for this site/);
      expect(await victim.textContent('#who')).not.toContain('oscar2');
      await victim.context().close();
    } finally {
      evil.close();
    }
  });
});
