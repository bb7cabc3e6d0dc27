import fs from 'node:fs';
import { join } from 'node:path';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listenHttp, type HttpSurface } from '../../src/cli/serve.js';
import { homePaths } from '../../src/config/home.js';
import { launchChromium, screenshot, unitHome, type TestHome } from '../helpers.js';
import { startTestProvider, type TestProvider } from '../helpers/oidc-provider.js';

/**
 * Signing in with an OpenID provider, in real headless Chromium, against a real certified provider
 * (oidc-provider on loopback, its own sign-in pages) and a real berth serving HTTP: operators and
 * viewers of the console by group and verified domain, a person outside refused in words, an
 * unverified address naming nobody, a login that expires and one signed out of, a callback replayed
 * in another browser, and a chat user who becomes tenant "oidc:<subject>". The admin token's own
 * sign-in is console.test.ts's, unchanged.
 */
const TOKEN = 'oidc-admin-token-0123456789abcdef';
const quiet = { out: () => undefined, err: () => undefined };
let h: TestHome;
let server: HttpSurface;
let provider: TestProvider;
let browser: Browser;
let base: string;

beforeAll(async () => {
  h = unitHome();
  h.create({ name: 'helper', workspace_isolation: true });
  server = await listenHttp(h.berth, { host: '127.0.0.1', port: 0, token: TOKEN }, quiet);
  base = server.url;
  provider = await startTestProvider(
    {
      alice: { email: 'alice@example.org', email_verified: true, groups: ['berth-ops'], name: 'Alice' },
      vera: { email: 'vera@partner.example', email_verified: true, groups: ['berth-viewers'] },
      mallory: { email: 'mallory@elsewhere.example', email_verified: true, groups: ['staff'] },
      eve: { email: 'eve@example.org', email_verified: false },
      carol: { email: 'carol@chat.example', email_verified: true },
    },
    `${base}/oidc/callback`,
  );
  const secret = join(h.home, 'oidc-secret');
  fs.writeFileSync(secret, `${provider.clientSecret}\n`, { mode: 0o600 });
  fs.appendFileSync(
    join(h.home, 'berth.yaml'),
    [
      'oidc:',
      `  issuer: ${provider.issuer}`,
      `  client_id: ${provider.clientId}`,
      `  client_secret_file: ${secret}`,
      '  name: Example SSO',
      '  scopes: [openid, email, profile, groups]',
      '  operators: { groups: [berth-ops] }',
      '  viewers: { groups: [berth-viewers], domains: [example.org] }',
      '  chat: { people: { domains: [chat.example] }, projects: [helper] }',
      '',
    ].join('\n'),
  );
  browser = await launchChromium();
}, 60_000);
afterAll(async () => {
  await browser?.close();
  await server?.close();
  await provider?.close();
  await h?.[Symbol.asyncDispose]();
});

/** Through the provider's own pages: any password, the login names the person. */
async function throughProvider(page: Page, login: string): Promise<void> {
  await page.waitForSelector('input[name=login]');
  await page.fill('input[name=login]', login);
  await page.fill('input[name=password]', 'any password');
  await page.click('button[type=submit]');
  await page.waitForSelector('button[type=submit]');
  // The consent page ("Continue"), then back to berth.
  if (page.url().startsWith(provider.issuer)) await page.click('button[type=submit]');
}

async function fresh(width = 1280): Promise<{ context: BrowserContext; page: Page }> {
  const context = await browser.newContext({ viewport: { width, height: 900 } });
  return { context, page: await context.newPage() };
}

async function consoleAs(login: string, width = 1280): Promise<{ context: BrowserContext; page: Page }> {
  const { context, page } = await fresh(width);
  await page.goto(`${base}/console`);
  await page.click('#sso');
  await throughProvider(page, login);
  return { context, page };
}

const state = (page: Page) =>
  page.evaluate(async () => {
    const r = await fetch('/console/api/state');
    return { status: r.status, body: (await r.json()) as { you?: { role: string; who?: string; can_act: boolean } } };
  });

describe('the console, signed in with the provider', () => {
  it('shows the provider beside the admin token form, and an operator by group gets in and may act', async () => {
    const { context, page } = await fresh();
    const first = await page.goto(`${base}/console`);
    expect(first?.status()).toBe(401);
    expect(await page.textContent('#sso')).toBe('Sign in with Example SSO');
    await screenshot(page, 'oidc-console-login');
    await context.close();

    const alice = await consoleAs('alice');
    await alice.page.waitForURL(`${base}/console`);
    await alice.page.waitForSelector('#projects');
    const s = await state(alice.page);
    expect(s.status).toBe(200);
    expect(s.body.you).toEqual({ role: 'operator', who: 'alice@example.org', can_act: true });
    // An operator signed in with the provider acts as the admin token's operator does: pause and resume a project.
    const act = (path: string) =>
      alice.page.evaluate(async (p) => {
        const r = await fetch(p, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
        return r.status;
      }, path);
    expect(await act('/console/api/projects/helper/pause')).toBe(200);
    expect(await act('/console/api/projects/helper/resume')).toBe(200);
    const paused = h.berth.audit.list({ limit: 20 } as never).find((l) => l.action === 'project.pause');
    expect(paused?.actor).toBe('oidc:alice@example.org');
    await screenshot(alice.page, 'oidc-console-operator-1280');
    await alice.context.close();
  });

  it('a viewer sees the console and cannot act', async () => {
    const vera = await consoleAs('vera', 390);
    await vera.page.waitForURL(`${base}/console`);
    const s = await state(vera.page);
    expect(s.body.you).toEqual({ role: 'viewer', who: 'vera@partner.example', can_act: false });
    const answer = await vera.page.evaluate(async () => {
      const r = await fetch('/console/api/approvals/nothing-here', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ decision: 'allow_once' }),
      });
      return { status: r.status, body: (await r.json()) as { error: { code: string; message: string } } };
    });
    expect(answer.status).toBe(403);
    expect(answer.body.error.code).toBe('PERMISSION_DENIED');
    expect(answer.body.error.message).toContain('viewer');
    await vera.page.waitForSelector('#updated:has-text("may look, not act")');
    await screenshot(vera.page, 'oidc-console-viewer-390');
    await vera.context.close();
  });

  it('refuses a person outside the allowed groups and domains, in words, and signs nobody in', async () => {
    const mallory = await consoleAs('mallory');
    await mallory.page.waitForSelector('[role=alert]');
    expect(await mallory.page.textContent('[role=alert]')).toContain("mallory@elsewhere.example may not use this berth's console");
    await screenshot(mallory.page, 'oidc-console-refused');
    expect((await mallory.page.goto(`${base}/console`))?.status()).toBe(401);
    await mallory.context.close();
  });

  it('an address the provider did not verify names nobody (eve@example.org is not a viewer by domain)', async () => {
    const eve = await consoleAs('eve');
    await eve.page.waitForSelector('[role=alert]');
    expect(await eve.page.textContent('[role=alert]')).toContain('subject eve may not use');
    await eve.context.close();
  });

  it('a login ends when it expires, and at sign-out', async () => {
    const alice = await consoleAs('alice');
    await alice.page.waitForURL(`${base}/console`);
    expect((await state(alice.page)).status).toBe(200);
    const dir = join(homePaths(h.home).stateDir, 'console-logins');
    for (const name of fs.readdirSync(dir)) {
      const file = join(dir, name);
      const record = JSON.parse(fs.readFileSync(file, 'utf8')) as { who?: string; expires_at: string };
      if (record.who === 'alice@example.org')
        fs.writeFileSync(file, JSON.stringify({ ...record, expires_at: new Date(Date.now() - 1000).toISOString() }));
    }
    expect((await state(alice.page)).status).toBe(401);
    await alice.context.close();

    const again = await consoleAs('alice');
    await again.page.waitForURL(`${base}/console`);
    expect((await state(again.page)).status).toBe(200);
    await again.page.click('#signout');
    await again.page.waitForSelector('#sso');
    expect((await state(again.page)).status).toBe(401);
    await again.context.close();
  });

  it('a callback opened in another browser (or twice) signs nobody in', async () => {
    const { context, page } = await fresh();
    await page.goto(`${base}/console`);
    let callback = '';
    page.on('request', (r) => {
      if (r.url().startsWith(`${base}/oidc/callback`)) callback = r.url();
    });
    await page.click('#sso');
    await throughProvider(page, 'alice');
    await page.waitForURL(`${base}/console`);
    expect(callback).toContain('code=');
    const other = await fresh();
    const replay = await other.page.goto(callback);
    expect(replay?.status()).toBe(400);
    expect(await other.page.textContent('[role=alert]')).toContain('did not start in this browser');
    expect((await other.page.goto(`${base}/console`))?.status()).toBe(401);
    const twice = await page.goto(callback);
    expect(twice?.status()).toBe(400);
    await other.context.close();
    await context.close();
  });
});

describe('the web chat, signed in with the provider', () => {
  it('a chat user becomes tenant oidc:<subject> of the project berth.yaml names', async () => {
    const { context, page } = await fresh(390);
    await page.goto(`${base}/chat`);
    await page.waitForSelector('#out:not([hidden])');
    expect(await page.textContent('#sso')).toBe('Sign in with Example SSO');
    await page.click('#sso');
    await throughProvider(page, 'carol');
    await page.waitForURL(`${base}/chat`);
    const me = await page.evaluate(async () => (await (await fetch('/chat/api/me')).json()) as { project: string; tenant: string });
    expect(me).toMatchObject({ project: 'helper', tenant: 'oidc:carol' });
    await screenshot(page, 'oidc-chat-390');
    await context.close();
  });

  it('refuses someone berth.yaml does not let into the chat', async () => {
    const { context, page } = await fresh();
    await page.goto(`${base}/oidc/start?to=chat`);
    await throughProvider(page, 'alice');
    await page.waitForSelector('[role=alert]');
    expect(await page.textContent('[role=alert]')).toContain("alice@example.org may not use project helper's chat");
    await context.close();
  });
});
