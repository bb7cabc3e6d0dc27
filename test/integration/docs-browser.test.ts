import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serveApp, testHome, type TestHome, launchChromium } from '../helpers.js';

/**
 * The "API reference" link `make run` prints, opened in real headless Chromium: a browser
 * cannot send a bearer header, so /docs signs in with a form — the token never goes in a URL,
 * and the cookie it gets is HttpOnly and is not the token.
 */
const TOKEN = 'docs-browser-admin-token-0123456789';
let h: TestHome;
let base: string;
let close: () => void;
let browser: Browser;

beforeAll(async () => {
  h = testHome();
  ({ base, close } = await serveApp(h.berth, TOKEN));
  browser = await launchChromium();
}, 60_000);
afterAll(async () => {
  await browser?.close();
  close();
  await h[Symbol.asyncDispose]();
});

describe('/docs in a browser', () => {
  it('asks for the token in a form, opens the reference, and never puts the token in a URL or in script reach', async () => {
    const page = await browser.newPage();
    const urls: string[] = [];
    page.on('request', (r) => urls.push(r.url()));
    const first = await page.goto(`${base}/docs`);
    expect(first?.status()).toBe(401);
    await page.fill('input[name=token]', 'not-the-token');
    await page.click('button[type=submit]');
    expect(await page.textContent('[role=alert]')).toContain('not the admin token');

    await page.fill('input[name=token]', TOKEN);
    await Promise.all([page.waitForURL(`${base}/docs`), page.click('button[type=submit]')]);
    expect(await page.title()).toContain('berth');
    expect(await page.content()).toContain('/api/projects/{name}/runs');
    expect(urls.every((u) => !u.includes(TOKEN))).toBe(true);
    expect(await page.evaluate('document.cookie')).toBe(''); // HttpOnly: no script reads it
    const cookies = await page.context().cookies();
    expect(
      cookies
        .map((c) => ({ name: c.name, httpOnly: c.httpOnly, sameSite: c.sameSite, path: c.path }))
        .sort((a, b) => a.path.localeCompare(b.path)),
    ).toEqual([
      { name: 'berth_docs', httpOnly: true, sameSite: 'Strict', path: '/console' },
      { name: 'berth_docs', httpOnly: true, sameSite: 'Strict', path: '/docs' },
    ]);
    for (const cookie of cookies) expect(cookie.value).not.toContain(TOKEN);

    // The cookies open /docs and /console only: the API still wants the bearer token.
    const api = await page.goto(`${base}/api/projects`);
    expect(api?.status()).toBe(401);

    // "Sign out" ends the login: the reference asks for the token again, and the old cookie opens nothing.
    const header = `berth_docs=${cookies[0]?.value}`;
    await page.goto(`${base}/docs`);
    await page.click('button:text-is("Sign out")');
    await page.waitForSelector('input[name=token]');
    expect(await page.context().cookies()).toEqual([]);
    expect((await fetch(`${base}/docs`, { headers: { cookie: header } })).status).toBe(401);
    await page.close();
  });
});
