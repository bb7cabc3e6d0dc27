import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEMO_PROJECT, ensureDemoProject } from '../../src/cli/demo.js';
import { screenshot, type TestHome } from '../helpers.js';
import { chatConnected as connected, repliesShown, sendInChat as send, startBrowserRig, type BrowserRig } from '../helpers/browser-rig.js';
import { startLoopbackSite } from '../helpers/loopback-site.js';

/**
 * The web chat as a person sees it (issue 42 item 8), in real headless Chromium against a real
 * berth and the demo project's shell: a header that names the project on one row at 1280 px,
 * the person's bubbles on the right and the agent's on the left, the agent's steps folded under
 * one line, stderr in its place and marked apart (item 2), an approval card whose answer (who,
 * when) is still there after a reload (item 3), a composer in view, no sideways scroll at
 * 390 px, dark when the system is. Screenshots: test-results/screens/web-chat-look-*.png.
 */
const TOKEN = 'web-chat-look-admin-token-0123456';
const quiet = { out: () => undefined, err: () => undefined };
let rig: BrowserRig;
let h: TestHome;
let browser: Browser;
let alice: BrowserContext;

beforeAll(async () => {
  rig = await startBrowserRig({ token: TOKEN, prepare: (home) => void ensureDemoProject(home.berth, quiet) });
  ({ h, browser } = rig);
  alice = await browser.newContext({ viewport: { width: 1280, height: 800 } });
}, 60_000);
afterAll(() => rig?.close());

// The page's globals as far as this file uses them (the project's TypeScript has no DOM types).
interface Box {
  top: number;
  bottom: number;
  left: number;
  right: number;
  height: number;
}
interface El {
  textContent: string | null;
  open: boolean;
  className: string;
  getBoundingClientRect(): Box;
  querySelector(s: string): El | null;
  querySelectorAll(s: string): ArrayLike<El>;
}
declare const document: {
  querySelector(s: string): El | null;
  querySelectorAll(s: string): ArrayLike<El>;
  documentElement: { scrollWidth: number; clientWidth: number };
  body: El;
};
declare function getComputedStyle(el: El): { color: string; backgroundColor: string; display: string };
declare const window: { innerHeight: number };

const openAlice = async (): Promise<Page> => rig.watch(await alice.newPage());

/** The sideways scroll a page has (0: none). */
const sideways = (page: Page) => page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);

describe('the web chat looks like a product', () => {
  let page: Page;

  it('1280 px: the project in a one-row header, an empty state, then bubbles, folded steps, and stderr in its place, marked apart', async () => {
    page = await openAlice();
    const link = rig.chatLink(DEMO_PROJECT, 'alice');
    await page.goto(link);
    // The link's page is a styled card too (the chat's stylesheet, no script).
    const card = () => page.$eval('main.card', (e) => getComputedStyle(e as unknown as El).backgroundColor);
    expect(await card()).not.toBe(await page.evaluate(() => getComputedStyle(document.body).backgroundColor));
    await screenshot(page, 'web-chat-look-1280-login');
    await rig.logIn(page);
    expect(await page.textContent('#title')).toBe(DEMO_PROJECT);
    expect(await page.title()).toBe(`${DEMO_PROJECT} · berth chat`);
    // A new conversation says what to do.
    expect(await page.isVisible('#log #empty-state')).toBe(true);
    // ... from the project's agent preset: the demo's is a shell.
    expect(await page.textContent('#log #empty-state .what')).toMatch(
      /^This agent is a shell: it runs your message as a command \(sh -c\).*Try ls -la/,
    );
    expect(await page.textContent('#log #empty-state')).toContain('/help');
    await screenshot(page, 'web-chat-look-1280-empty');
    // The link again (used up), on a phone: the refusal is a card as well, and fits.
    const again = await (await browser.newContext({ viewport: { width: 390, height: 844 } })).newPage();
    await again.goto(link);
    expect(await again.textContent('main.card [role=alert]')).toBe('This chat link does not work.');
    expect(await sideways(again)).toBe(0);
    await screenshot(again, 'web-chat-look-390-link-used');
    await again.context().close();
    // One row: the name, the controls and the status share the header's line.
    const rows = await page.evaluate(() =>
      ['.brand', '.controls', '#status'].map((s) => document.querySelector(s)!.getBoundingClientRect()),
    );
    for (const r of rows) expect(r.top).toBeLessThan(rows[0]!.bottom);

    // Two pipes (stdout, stderr) keep their order only as far as time tells them apart: a pause between the streams.
    await send(page, 'echo hi > notes.txt; cat notes.txt; sleep 0.2; cat nope.txt; sleep 0.2; echo ok');
    await repliesShown(page, 1);
    expect(await page.isVisible('#log #empty-state')).toBe(false);
    // stderr in the order it was printed, between the two lines of stdout, and nothing about an exit (it was 0).
    const parts = await page.$$eval('#log .msg.reply pre > *', (els) => els.map((e) => [e.className, e.textContent]));
    expect(parts).toEqual([
      ['stdout', 'hi\n'],
      ['stderr', expect.stringMatching(/nope\.txt.*No such file or directory\n$/)],
      ['stdout', 'ok\n'],
    ]);
    // Marked apart: its own colour and background, and it says what it is.
    const look = await page.evaluate(() => {
      const [out, err] = [document.querySelector('#log .msg.reply .stdout')!, document.querySelector('#log .msg.reply .stderr')!];
      return { out: getComputedStyle(out), err: getComputedStyle(err), title: (err as unknown as { title: string }).title };
    });
    expect(look.err.color).not.toBe(look.out.color);
    expect(look.err.backgroundColor).not.toBe(look.out.backgroundColor);
    expect(look.title).toBe('stderr');
    // The person's bubble on the right, the agent's on the left.
    const [user, reply, log] = await page.evaluate(() =>
      ['#log .msg.user pre', '#log .msg.reply pre', '#log'].map((s) => document.querySelector(s)!.getBoundingClientRect()),
    );
    expect(user!.right).toBeGreaterThan(reply!.right);
    expect(reply!.left).toBeLessThan(user!.left);
    expect(log!.right - user!.right).toBeLessThan(user!.left - log!.left);
    // The steps: folded under one line once the answer is there, and they open.
    const steps = '#log details.msg.steps';
    expect(await page.textContent(`${steps} summary`)).toBe('6 steps');
    expect(await page.$eval(steps, (e) => (e as unknown as El).open)).toBe(false);
    expect(await page.isVisible(`${steps} .step`)).toBe(false);
    await page.click(`${steps} summary`);
    expect(await page.isVisible(`${steps} .step`)).toBe(true);
    expect(await page.$$eval(`${steps} .step .tool + span`, (els) => els.map((e) => e.textContent))).toEqual([
      'echo hi > notes.txt',
      'cat notes.txt',
      'sleep 0.2',
      'cat nope.txt',
      'sleep 0.2',
      'echo ok',
    ]);
    // The composer is in view, at the bottom.
    const composer = await page.evaluate(() => [document.querySelector('#composer')!.getBoundingClientRect(), window.innerHeight] as const);
    expect(composer[0].bottom).toBeLessThanOrEqual(composer[1]);
    expect(composer[0].top).toBeGreaterThan(composer[1] / 2);
    expect(await sideways(page)).toBe(0);
    await screenshot(page, 'web-chat-look-1280');
  });

  it('an approval card: answered, it says who and when, and says so again after a reload, also at 390 px and in the dark', async () => {
    const site = await startLoopbackSite();
    await h.berth.operator.setConfig(['egress', 'private_hosts'], [`localhost:${site.port}`]);
    try {
      await send(page, `wget -q -O - http://localhost:${site.port}/look 2>&1; echo rc=$?`);
      const card = '#log .msg.approval';
      await page.waitForSelector(`${card} button`);
      expect(await page.isVisible(`${card} button[data-decision="once"]`)).toBe(true);
      await screenshot(page, 'web-chat-look-1280-approval');
      await page.click(`${card} button[data-decision="once"]`);
      await repliesShown(page, 2);
      const answered = async () => ({
        outcome: await page.textContent(`${card} .outcome`),
        by: await page.textContent(`${card} .by`),
        buttons: await page.$$eval(`${card} button`, (els) => els.length),
      });
      const expected = { outcome: 'Allowed for this message', by: expect.stringMatching(/^by you at \d{1,2}:\d{2}/), buttons: 0 };
      expect(await answered()).toEqual(expected);
      expect(site.hits()).toBe(1);

      // Reloaded: the card and its answer are still there, in the conversation's order.
      await page.reload();
      await connected(page);
      await repliesShown(page, 2);
      expect(await answered()).toEqual(expected);
      expect(await page.$$eval('#log > .msg', (els) => els.map((e) => e.className.replace(/ (settled|allowed)/g, '')))).toEqual([
        'msg note',
        'msg user',
        'msg steps',
        'msg reply',
        'msg user',
        'msg approval',
        'msg steps',
        'msg reply',
      ]);

      // A phone: nothing scrolls sideways, the header stays short, the composer is in view.
      await page.setViewportSize({ width: 390, height: 844 });
      await page.reload();
      await connected(page);
      await repliesShown(page, 2);
      expect(await sideways(page)).toBe(0);
      expect(await answered()).toEqual(expected);
      const phone = await page.evaluate(() => ({
        header: document.querySelector('header')!.getBoundingClientRect().height,
        composer: document.querySelector('#composer')!.getBoundingClientRect().bottom,
        height: window.innerHeight,
      }));
      expect(phone.header).toBeLessThan(phone.height / 5);
      expect(phone.composer).toBeLessThanOrEqual(phone.height);
      await screenshot(page, 'web-chat-look-390');

      // Dark, as the system is.
      const background = () => page.evaluate(() => getComputedStyle(document.body).backgroundColor);
      const light = await background();
      await page.emulateMedia({ colorScheme: 'dark' });
      const dark = await background();
      expect(dark).not.toBe(light);
      const [r, g, b] = (dark.match(/\d+/g) ?? []).map(Number);
      expect(r! + g! + b!).toBeLessThan(3 * 64);
      await screenshot(page, 'web-chat-look-390-dark');
      await page.setViewportSize({ width: 1280, height: 800 });
      await screenshot(page, 'web-chat-look-1280-dark');
      expect(rig.pageErrors).toEqual([]);
    } finally {
      await h.berth.operator.unsetConfig(['egress', 'private_hosts']);
      site.close();
    }
  });
});
