import type { BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cliAsync, screenshot, type TestHome } from '../helpers.js';
import { repliesShown, sendInChat, startBrowserRig, type BrowserRig } from '../helpers/browser-rig.js';
import { until } from '../helpers/until.js';

/**
 * The console as a control plane (issue 43), in real headless Chromium against a real berth
 * serving HTTP with real containers: a person chats in the web chat; the operator opens that run
 * from the list and reads its message, steps, answer and stderr; stops a run going on from the
 * console (and sees its container's memory from the engine while it runs); pauses the project and
 * the person's next message is refused in words; resumes it. At 1280 and 390 px, with screenshots.
 */
const TOKEN = 'console-control-admin-token-0123456789';
let rig: BrowserRig;
let h: TestHome;
let base: string;
let alice: BrowserContext;

beforeAll(async () => {
  rig = await startBrowserRig({ token: TOKEN, prepare: (home) => void home.create({ name: 'ops', workspace_isolation: true }) });
  ({ h, base } = rig);
  alice = await rig.browser.newContext({ viewport: { width: 800, height: 800 } });
}, 60_000);
afterAll(() => rig?.close());

// The page's globals as far as this file uses them (the project's TypeScript has no DOM types).
interface PageElement {
  textContent: string | null;
  hidden: boolean;
}
declare const document: {
  querySelector(selector: string): PageElement | null;
  querySelectorAll(selector: string): { length: number };
  documentElement: { scrollWidth: number };
};

async function openAliceChat(): Promise<Page> {
  const page = rig.watch(await alice.newPage(), /status of 40[14]/);
  await page.goto(rig.chatLink('ops', 'alice'));
  await rig.logIn(page);
  return page;
}

async function say(page: Page, text: string, replies: number): Promise<string> {
  await sendInChat(page, text);
  await repliesShown(page, replies, 60_000);
  return (await page.$$eval('#log .msg.reply', (els) => els.map((e) => e.textContent ?? '')))[replies - 1] as string;
}

const signIn = (width: number) => rig.consoleSignIn(width);

const rows = (page: Page, id: string) =>
  page.$$eval(`#${id} table tbody tr`, (trs) =>
    trs.map((tr) => [...(tr as unknown as { children: Array<{ textContent: string }> }).children].map((td) => td.textContent)),
  );

describe('the console as a control plane', () => {
  it('opens a run from the list (who, message, steps, answer, stderr in red), stops a running run, pauses the project (the chat is told in words) and resumes it', async () => {
    const chat = await openAliceChat();
    const first = await say(chat, 'echo hello from alice; cat /nope.txt; echo done', 1);
    expect(first).toContain('hello from alice');

    const page = await signIn(1280);
    // The recent list names who, by which way, and what; its steps are counted.
    await page.waitForFunction(() => (document.querySelector('#recent table tbody tr')?.textContent ?? '').includes('web:alice'));
    const [row] = await rows(page, 'recent');
    expect(row?.slice(1, 4)).toEqual(['ops', 'web:alice', 'web']);
    expect(row?.[5]).toBe('echo hello from alice; cat /nope.txt; echo done');
    expect(Number(row?.[10])).toBeGreaterThanOrEqual(3); // echo, cat, echo
    // Opened: its message, its steps with the failed one, its answer, its stderr.
    await page.click('#recent table tbody tr:first-child td:first-child a');
    await page.waitForFunction(
      () => document.querySelector('#s-detail')?.hidden === false && !!document.querySelector('#detail pre.answer'),
    );
    expect(await page.textContent('#detail h2')).toMatch(/^Run r[0-9a-z]+$/);
    expect(await page.textContent('#detail pre.answer')).toContain('hello from alice\ndone\n');
    expect(await page.textContent('#detail pre.stderr')).toContain('nope.txt');
    const steps = await page.$$eval('#detail ol.steps li', (lis) => lis.map((li) => li.textContent ?? ''));
    expect(steps.length).toBeGreaterThanOrEqual(3);
    expect(steps.some((s) => s.includes('cat /nope.txt'))).toBe(true);
    expect(await page.textContent('#detail dl.facts')).toContain('web:alice via web');
    await screenshot(page, 'console-run-detail-1280');

    // A run going on: seen live with its container's memory from the engine, then stopped from the console.
    const going = h.run('ops', 'web:bob', 'sleep 120');
    await page.waitForFunction(() => document.querySelectorAll('#live table tbody tr').length === 1, undefined, { timeout: 30_000 });
    await page.waitForFunction(() => /MiB/.test(document.querySelector('#containers table')?.textContent ?? ''), undefined, {
      timeout: 30_000,
    });
    await page.click('#live button:text-is("Stop")');
    expect(await page.textContent('#live .confirm .consequence')).toBe('The agent is stopped now; its answer says so.');
    await screenshot(page, 'console-stop-confirm-1280');
    const t0 = performance.now();
    await page.click('#live button:text-is("Yes, stop")');
    const stopped = await going;
    const stopMs = performance.now() - t0;
    expect(stopped.warnings).toContainEqual('stopped: the operator stopped it (console)');
    await page.waitForFunction(() => document.querySelector('#live')?.textContent === 'No run is in flight.');
    console.log(`console stop: the run ended ${Math.round(stopMs)} ms after "Yes, stop"`);

    // Paused from the console: the person's next message is refused in words; resumed, it runs.
    await page.click('#projects button:text-is("Pause")');
    await page.fill('#projects .confirm input', 'upgrading the image');
    await screenshot(page, 'console-pause-confirm-1280');
    await page.click('#projects button:text-is("Yes, pause")');
    // The state cell itself: the row's confirm text ("… told the operator paused it") says "paused" already.
    await page.waitForFunction(() =>
      (document.querySelector('#projects table tbody tr td:nth-child(2)')?.textContent ?? '').startsWith('paused'),
    );
    expect((await rows(page, 'projects'))[0]?.[1]).toMatch(/^paused .*: upgrading the image$/);
    const refused = await say(chat, 'echo while paused', 2);
    expect(refused).toContain('the operator has paused this agent for now');
    expect(refused).toContain('PROJECT_PAUSED');
    await screenshot(chat, 'chat-refused-while-paused');
    await screenshot(page, 'console-paused-1280');
    await page.click('#projects button:text-is("Resume")');
    await page.click('#projects button:text-is("Yes, resume")');
    await page.waitForFunction(() => document.querySelector('#projects table tbody tr td:nth-child(2)')?.textContent === 'open');
    expect(await say(chat, 'echo back again', 3)).toContain('back again');

    // Each action is in the audit log, by the console's caller.
    const actions = h.berth.audit
      .list({ limit: 50, kind: 'admin' })
      .map((e) => e.action)
      .filter((a) => ['run.stop', 'project.pause', 'project.resume'].includes(a));
    expect(actions).toEqual(['project.resume', 'project.pause', 'run.stop']);
    expect(rig.pageErrors).toEqual([]);
    await page.context().close();
    await chat.close();
  }, 180_000);

  it('berth runs stop, from another process of the home: the serve running the run stops it (it looks every 500 ms)', async () => {
    const going = h.run('ops', 'web:carol', 'sleep 120');
    const open = await until(() => h.berth.admin.openRuns('ops').find((r) => r.phase === 'started'), 'the run started', 30_000);
    const t0 = performance.now();
    const r = await cliAsync(['--home', h.home, 'runs', 'stop', 'ops', open.run, '--reason', 'runaway']);
    expect([r.code, r.stdout]).toEqual([0, `stopping run ${open.run} (asked of the berth process running it)\n`]);
    const stopped = await going;
    console.log(`berth runs stop (another process): the run ended ${Math.round(performance.now() - t0)} ms after the command started`);
    expect(stopped.warnings).toContainEqual('stopped: the operator stopped it: runaway');
    const refused = await cliAsync(['--home', h.home, 'runs', 'stop', 'ops', open.run]);
    expect([refused.code, refused.stderr]).toEqual([23, expect.stringMatching(/^NOT_FOUND: no run r[0-9a-z]+ is going on in ops/)]);
  }, 60_000);

  it('on a phone (390 px): a run, its session (the transcript as the person saw it) and its tenant open without sideways scrolling', async () => {
    const page = await signIn(390);
    const run = h.berth.admin.listRuns('ops', { user: 'web:alice', limit: 10 }).runs.at(-1);
    expect(run).toBeDefined();
    await page.goto(`${base}/console#run/ops/${run?.run}`);
    await page.waitForFunction(() => !!document.querySelector('#detail pre.answer'));
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBe(390);
    await screenshot(page, 'console-run-detail-390');
    await page.click('#detail dl.facts a:text-is("web:alice")');
    await page.waitForFunction(() => (document.querySelector('#detail h2')?.textContent ?? '').startsWith('Tenant web:alice'));
    expect(await page.textContent('#detail dl.facts')).toContain('2 run(s)'); // the refused message was never a run;
    await screenshot(page, 'console-tenant-390');
    await page.click('#detail-sessions table tbody tr:first-child a');
    await until(async () => (await page.textContent('#detail h2'))?.startsWith('Session'), 'the session view');
    const transcript = await page.textContent('#detail .transcript');
    expect(transcript).toContain('echo hello from alice');
    expect(transcript).toContain('operator has paused');
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBe(390);
    await screenshot(page, 'console-session-390');
    // Ended from its view: kept, its history too; audited.
    await page.click('#detail button:text-is("End session")');
    await page.click('#detail button:text-is("Yes, end it")');
    await until(() => h.berth.audit.list({ limit: 20, kind: 'admin' }).some((e) => e.action === 'session.end'), 'the session ended');
    await until(async () => (await page.textContent('#detail .transcript'))?.includes('echo hello from alice'), 'the history still shown');
    expect(rig.pageErrors).toEqual([]);
    await page.context().close();
  }, 60_000);

  it('at desktop width (1280 px): a tenant and a session open from the run view, as on the phone', async () => {
    const page = await signIn(1280);
    const run = h.berth.admin.listRuns('ops', { user: 'web:alice', limit: 10 }).runs.at(-1);
    await page.goto(`${base}/console#run/ops/${run?.run}`);
    await page.waitForFunction(() => !!document.querySelector('#detail pre.answer'));
    await page.click('#detail dl.facts a:text-is("web:alice")');
    await page.waitForFunction(() => (document.querySelector('#detail h2')?.textContent ?? '').startsWith('Tenant web:alice'));
    await screenshot(page, 'console-tenant-1280');
    await page.click('#detail-sessions table tbody tr:first-child a');
    await until(async () => (await page.textContent('#detail h2'))?.startsWith('Session'), 'the session view');
    expect(await page.textContent('#detail .transcript')).toContain('echo hello from alice');
    await screenshot(page, 'console-session-1280');
    expect(rig.pageErrors).toEqual([]);
    await page.context().close();
  }, 60_000);
});
