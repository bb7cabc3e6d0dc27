import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listenHttp, type HttpSurface } from '../../src/cli/serve.js';
import { homePaths } from '../../src/config/home.js';
import { bridgeDir } from '../../src/bridges/start.js';
import { openBridgeState } from '../../src/store/bridge-state.js';
import { startFakeSignalCli, type FakeSignalCli } from '../fakes/signal-cli.js';
import { launchChromium, screenshot, testHome, type TestHome } from '../helpers.js';
import { startLoopbackSite } from '../helpers/loopback-site.js';
import { CONSOLE_LOGIN_SECONDS } from '../../src/store/console-logins.js';

/**
 * The operator's console in real headless Chromium against a real berth serving HTTP (the same
 * wiring as `berth serve`): signed in by the /docs form (never a token in a URL), it shows what
 * waits for the operator and answers it — a run's request for a host outside its allowlist (the
 * run then goes through), a stranger of the Signal bot (through the signal-cli fake) — plus runs,
 * projects, sessions, model use, the last hour in charts (uPlot, served by berth) and the audit
 * log with filters; at desktop and phone widths, with screenshots.
 */
const TOKEN = 'console-admin-token-0123456789abcdef';
const STRANGER = 'signal:88888888-8888-4888-8888-888888888801';
const quiet = { out: () => undefined, err: () => undefined };
let h: TestHome;
let fake: FakeSignalCli;
let server: HttpSurface;
let base: string;
let browser: Browser;
let site: Awaited<ReturnType<typeof startLoopbackSite>>;
let port: number;
const pageErrors: string[] = [];

beforeAll(async () => {
  site = await startLoopbackSite();
  port = site.port;
  fake = await startFakeSignalCli({ keepaliveMs: 200, receiveMode: 'on-connection' });
  h = testHome({
    config: [
      'bridges:',
      '  signal:',
      `    url: ${fake.url}`,
      `    account: '${fake.account}'`,
      'routes:',
      '  signal: { project: ops }',
      'egress:',
      `  private_hosts: ['localhost:${port}']`,
      '',
    ].join('\n'),
  });
  h.create({ name: 'ops', workspace_isolation: true, chat: { approvals: 'operator', approval_timeout_seconds: 120 } });
  await h.run('ops', 'web:olivia', 'echo first run', 'low');
  server = await listenHttp(h.berth, { host: '127.0.0.1', port: 0, token: TOKEN }, quiet);
  base = server.url;
  browser = await launchChromium();
}, 60_000);
afterAll(async () => {
  await browser?.close();
  await server?.close();
  await h?.[Symbol.asyncDispose]();
  await fake?.close();
  site?.close();
});

declare const document: { querySelectorAll(selector: string): { length: number }; documentElement: { scrollWidth: number } };

async function signIn(width: number): Promise<Page> {
  const page = await (await browser.newContext({ viewport: { width, height: 900 } })).newPage();
  page.on('pageerror', (e) => pageErrors.push(String(e)));
  page.on(
    'console',
    (m) => void (m.type() === 'error' && !/status of 401/.test(m.text()) && pageErrors.push(`${m.text()} (${m.location().url})`)),
  );
  const first = await page.goto(`${base}/console`);
  expect(first?.status()).toBe(401);
  expect(await page.textContent('button[type=submit]')).toBe('Open the console');
  await page.fill('input[name=token]', TOKEN);
  await page.click('button[type=submit]');
  await page.waitForURL(`${base}/console`);
  expect(page.url()).not.toContain(TOKEN);
  await page.waitForFunction(() => document.querySelectorAll('#projects table tbody tr').length > 0);
  return page;
}

const rows = (page: Page, id: string) =>
  page.$$eval(`#${id} table tbody tr`, (trs) =>
    trs.map((tr) => [...(tr as unknown as { children: Array<{ textContent: string }> }).children].map((td) => td.textContent)),
  );

describe('the operator console', () => {
  it('signs in by form, shows projects, runs, sessions and the last hour; answers a run waiting for a host (the run goes through) and turns a stranger away; the audit log filters', async () => {
    const page = await signIn(1280);
    expect((await rows(page, 'projects'))[0]?.slice(0, 2)).toEqual(['ops', 'open']);
    expect((await rows(page, 'projects'))[0]?.slice(3, 6)).toEqual(['shell', 'runc', 'on']);
    const recent = (await rows(page, 'recent'))[0];
    expect(recent?.slice(1, 4)).toEqual(['ops', 'web:olivia', 'web']);
    expect(recent?.slice(5, 9)).toEqual(['echo first run', 'low', 'cold', '0']);
    expect((await rows(page, 'sessions'))[0]?.slice(1, 3)).toEqual(['ops', 'web:olivia']);
    // The chat bridges: the web chat first (berth serve answers it), then berth.yaml's Signal.
    await page.waitForFunction(() => document.querySelectorAll('#bridges table tbody tr').length === 2);
    expect((await rows(page, 'bridges')).map((r) => r.slice(0, 2))).toEqual([
      ['web', 'yes'],
      ['signal', expect.any(String)],
    ]);
    // The last hour: four charts drawn by uPlot (served by berth, no CDN).
    await page.waitForFunction(() => document.querySelectorAll('#charts canvas').length === 4);
    const script = await page.$eval('script[src]', (e) => (e as unknown as { getAttribute(n: string): string }).getAttribute('src'));
    expect(script).toMatch(/^\/console\/assets\/uplot-[0-9a-f]{12}\.js$/);

    // A run waits in the egress proxy for the operator: the console answers it.
    const run = h.run('ops', 'web:olivia', `wget -q -O - http://localhost:${port}/console 2>&1; echo rc=$?`, 'medium');
    await page.waitForFunction(() => document.querySelectorAll('#approvals table tbody tr').length === 1, undefined, { timeout: 15_000 });
    expect((await rows(page, 'approvals'))[0]?.slice(1, 5)).toEqual(['ops', 'web:olivia', expect.any(String), `localhost:${port}`]);
    // A stranger of the Signal bot waits too.
    openBridgeState(bridgeDir(homePaths(h.home).stateDir), 'signal').noteStranger(STRANGER, 'Mallory', new Date(), 3600_000);
    await page.waitForFunction(() => document.querySelectorAll('#senders table tbody tr').length === 1);
    await screenshot(page, 'console-desktop-waiting');
    await page.click('#approvals button:text-is("Allow once")');
    expect((await run).stdout).toBe('fetched /console\nrc=0\n');
    expect(site.hits()).toBe(1);
    await page.click('#senders button:text-is("Deny")');
    await page.waitForFunction(
      () => document.querySelectorAll('#senders table').length === 0 && document.querySelectorAll('#approvals table').length === 0,
    );
    expect(openBridgeState(bridgeDir(homePaths(h.home).stateDir), 'signal').isDenied(STRANGER)).toBe(true);
    expect(await page.textContent('#approvals')).toBe('Nothing waits for your answer.');
    // The audit log, filtered to the operator's own answers.
    await page.fill('#audit-actor', 'operator');
    await page.click('#audit-form button[type=submit]');
    await page.waitForFunction(() => document.querySelectorAll('#audit table tbody tr').length === 2);
    expect((await rows(page, 'audit')).map((r) => [r[2], r[3], r[6]])).toEqual([
      ['bridge.deny', 'operator', 'ok'],
      ['approval.allow_once', 'operator', 'ok'],
    ]);
    await screenshot(page, 'console-desktop');
    expect(pageErrors).toEqual([]);
    await page.context().close();
  });

  it("shows a tenant frozen for a decoy credential (where, which run) and a run's receipt in its view; screenshots", async () => {
    const first = h.berth.admin.listRuns('ops', { user: 'web:olivia', limit: 10 }).runs.at(-1)!;
    h.berth.honeytokens.trip({ project: 'ops', tenantKey: 'web:mallory', runId: first.run }, 'egress GET attacker.example:80/x');
    const page = await signIn(1280);
    await page.waitForFunction(() => document.querySelectorAll('#frozen table tbody tr').length === 1);
    const frozen = await rows(page, 'frozen');
    expect(frozen[0]!.slice(1, 5)).toEqual(['ops', 'web:mallory', 'egress GET attacker.example:80/x', first.run]);
    await screenshot(page, 'console-desktop-frozen');
    await page.goto(`${base}/console#run/ops/${first.run}`);
    await page.waitForSelector('#detail >> text=as planned');
    const text = (await page.textContent('#detail')) ?? '';
    expect(text).toContain(first.receipt_digest!);
    expect(text).toMatch(/isolation(runc|runsc), (cold|warm|pool) start, folder: own, no network/);
    await screenshot(page, 'console-desktop-run-receipt');
    expect(h.berth.tenants.unfreeze('ops', 'web:mallory').unfrozen).toBe(true);
    await page.context().close();
  });

  it('on a phone (360 px) nothing scrolls sideways (wide tables scroll inside their section)', async () => {
    const page = await signIn(360);
    await page.waitForFunction(() => document.querySelectorAll('#charts canvas').length === 4);
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBe(360);
    await screenshot(page, 'console-phone-360');
    await page.context().close();
  });

  it('"Sign out" ends the login: back at the sign-in form, and the cookie it had opens nothing any more', async () => {
    const page = await signIn(1280);
    const [cookie] = (await page.context().cookies()).filter((c) => c.path === '/console');
    expect(cookie?.name).toBe('berth_docs');
    const header = `${cookie?.name}=${cookie?.value}`;
    expect((await fetch(`${base}/console/api/state`, { headers: { cookie: header } })).status).toBe(200);
    await page.click('header button:text-is("Sign out")');
    await page.waitForSelector('input[name=token]');
    expect(await page.textContent('button[type=submit]')).toBe('Open the console');
    expect(await page.context().cookies()).toEqual([]);
    // A copy of the cookie (a proxy log, a second browser) is refused too: the login ended on the server.
    expect((await fetch(`${base}/console/api/state`, { headers: { cookie: header } })).status).toBe(401);
    expect(pageErrors).toEqual([]);
    await page.context().close();
  });

  it('its API takes the sign-in cookie only, answers only JSON from its own page, and the cookie opens no admin API', async () => {
    expect((await fetch(`${base}/console/api/state`)).status).toBe(401);
    const login = await fetch(`${base}/docs/login`, {
      method: 'POST',
      redirect: 'manual',
      body: new URLSearchParams({ token: TOKEN, next: '/console' }),
    });
    expect([login.status, login.headers.get('location')]).toEqual([303, '/console']);
    const set = login.headers.getSetCookie();
    expect(set.map((c) => c.split('; ').slice(1).join('; '))).toEqual([
      `HttpOnly; SameSite=Strict; Path=/docs; Max-Age=${CONSOLE_LOGIN_SECONDS}`,
      `HttpOnly; SameSite=Strict; Path=/console; Max-Age=${CONSOLE_LOGIN_SECONDS}`,
    ]);
    const cookie = (set[1] ?? '').split(';')[0] as string;
    expect((await fetch(`${base}/console/api/state`, { headers: { cookie } })).status).toBe(200);
    expect((await fetch(`${base}/api/projects`, { headers: { cookie } })).status).toBe(401);
    const answer = (headers: Record<string, string>, body = '{"decision":"deny"}') =>
      fetch(`${base}/console/api/approvals/abcdef0123`, { method: 'POST', headers: { cookie, ...headers }, body });
    expect((await answer({ 'content-type': 'application/json', origin: 'http://evil.example' })).status).toBe(403);
    expect((await answer({ 'content-type': 'application/x-www-form-urlencoded' }, 'decision=deny')).status).toBe(415);
    expect(await (await answer({ 'content-type': 'application/json' }, '{"decision":"maybe"}')).json()).toMatchObject({
      error: { code: 'CONFIG_INVALID' },
    });
    expect(await (await answer({ 'content-type': 'application/json' })).json()).toMatchObject({ error: { code: 'APPROVAL_NOT_FOUND' } });
    // A "next" the form names is one of berth's own pages, never a URL elsewhere.
    const away = await fetch(`${base}/docs/login`, {
      method: 'POST',
      redirect: 'manual',
      body: new URLSearchParams({ token: TOKEN, next: 'https://evil.example/' }),
    });
    expect(away.headers.get('location')).toBe('/docs');
  });
});
