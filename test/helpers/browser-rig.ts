import type { Browser, Page } from 'playwright-core';
import { listenHttp, type HttpSurface } from '../../src/cli/serve.js';
import { launchChromium, testHome, type TestHome } from '../helpers.js';

/**
 * A real berth serving HTTP and headless Chromium against it, as the browser tests share them
 * (console-control, web-chat-look, web-chat-round-4): pages watched for script errors, a web chat
 * login by a fresh chat link, and the chat's own waits (connected, replies shown).
 */
export interface BrowserRig {
  h: TestHome;
  server: HttpSurface;
  base: string;
  browser: Browser;
  /** Script errors and console errors of every watched page (a test ends asserting none). */
  pageErrors: string[];
  /** The page, its errors counted in pageErrors (a console error matching `expected` is not: a 401 the test asks for). */
  watch(page: Page, expected?: RegExp): Page;
  /** A fresh chat link for `user` in `project` (it works once). */
  chatLink(project: string, user: string): string;
  /** On a chat link's page: its button used, the chat open and connected. */
  logIn(page: Page): Promise<void>;
  /** A new browser at `width`, signed in to the console by its form with the admin token (watched; the 401 before is expected). */
  consoleSignIn(width: number): Promise<Page>;
  close(): Promise<void>;
}

const quiet = { out: () => undefined, err: () => undefined };

/** `prepare`: what the home needs before berth serves it (projects, config). */
export async function startBrowserRig(opts: {
  token: string;
  home?: Parameters<typeof testHome>[0];
  prepare?: (h: TestHome) => void | Promise<void>;
}): Promise<BrowserRig> {
  const h = testHome(opts.home);
  await opts.prepare?.(h);
  const server = await listenHttp(h.berth, { host: '127.0.0.1', port: 0, token: opts.token }, quiet);
  const base = server.url;
  const browser = await launchChromium();
  const pageErrors: string[] = [];
  const watch = (page: Page, expected?: RegExp) => {
    page.on('pageerror', (e) => pageErrors.push(String(e)));
    page.on('console', (m) => void (m.type() === 'error' && !expected?.test(m.text()) && pageErrors.push(m.text())));
    return page;
  };
  return {
    h,
    server,
    base,
    browser,
    pageErrors,
    watch,
    chatLink: (project, user) => `${base}${h.berth.admin.mintChatLink(project, user).path}`,
    async logIn(page) {
      await page.click('#login');
      await page.waitForURL(`${base}/chat`);
      await chatConnected(page);
    },
    async consoleSignIn(width) {
      const page = watch(await (await browser.newContext({ viewport: { width, height: 900 } })).newPage(), /status of 40[14]/);
      await page.goto(`${base}/console`);
      await page.fill('input[name=token]', opts.token);
      await page.click('button[type=submit]');
      await page.waitForURL(`${base}/console`);
      await page.waitForFunction(() => document.querySelectorAll('#projects table tbody tr').length > 0);
      return page;
    },
    async close() {
      await browser.close();
      await server.close();
      await h[Symbol.asyncDispose]();
    },
  };
}

// The page's globals as far as these waits use them (the project's TypeScript has no DOM types).
declare const document: {
  querySelector(s: string): { textContent: string | null } | null;
  querySelectorAll(s: string): { length: number };
};

/** The chat page's socket is open. */
export const chatConnected = (page: Page) => page.waitForFunction(() => document.querySelector('#status')?.textContent === 'connected');

/** At least `n` answers are shown in the chat's log. */
export const repliesShown = (page: Page, n: number, timeout = 30_000) =>
  page.waitForFunction((count) => document.querySelectorAll('#log .msg.reply').length >= count, n, { timeout });

/** A message typed and sent in the chat. */
export async function sendInChat(page: Page, text: string) {
  await page.fill('#input', text);
  await page.click('#send');
}
