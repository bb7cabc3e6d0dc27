import { createHash, createHmac } from 'node:crypto';
import fs from 'node:fs';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import { appDepsFrom, createApp } from '../../src/api/app.js';
import { homePaths } from '../../src/config/home.js';
import { CONSOLE_LOGIN_SECONDS, MAX_CONSOLE_LOGINS } from '../../src/store/console-logins.js';
import { unitHome } from '../helpers.js';

/**
 * The browser sign-in of /console and /docs (finding L2 of outside-attack-4): each sign-in gets a
 * random login of its own, kept in berth's state only as a digest, that expires, signs out, ends
 * when the admin token changes, outlives a restart, and is `__Host-berth_docs` (Secure) over https.
 */
const TOKEN = 'console-login-admin-token-0123456789';
const h = unitHome();
afterAll(() => h[Symbol.asyncDispose]());
afterEach(() => void vi.useRealTimers());

const HOST = 'berth.test';
const appWith = (token = TOKEN) => createApp(appDepsFrom(h.berth, { token, logger: pino({ level: 'silent' }) }));
const app = appWith();
const loginDir = join(homePaths(h.home).stateDir, 'console-logins');

async function signIn(
  opts: { https?: boolean; a?: ReturnType<typeof createApp> } = {},
): Promise<{ set: string[]; cookie: string; id: string }> {
  const res = await (opts.a ?? app).request(`http://${HOST}/docs/login`, {
    method: 'POST',
    headers: { host: HOST, ...(opts.https ? { 'x-forwarded-proto': 'https' } : {}) },
    body: new URLSearchParams({ token: TOKEN, next: '/console' }),
  });
  expect([res.status, res.headers.get('location')]).toEqual([303, '/console']);
  const set = res.headers.getSetCookie();
  const cookie = (set[0] ?? '').split(';')[0] as string;
  return { set, cookie, id: cookie.slice(cookie.indexOf('=') + 1) };
}

/** What the console's API answers a cookie with (200: signed in; 401: not). */
const stateWith = async (cookie: string, opts: { https?: boolean; a?: ReturnType<typeof createApp> } = {}) =>
  (
    await (opts.a ?? app).request(`http://${HOST}/console/api/state`, {
      headers: { host: HOST, cookie, ...(opts.https ? { 'x-forwarded-proto': 'https' } : {}) },
    })
  ).status;

const signOut = (cookie: string, headers: Record<string, string> = { origin: `http://${HOST}` }) =>
  app.request(`http://${HOST}/docs/logout`, {
    method: 'POST',
    headers: { host: HOST, cookie, ...headers },
    body: new URLSearchParams({ next: '/console' }),
  });

describe('console sign-in', () => {
  it('the old cookie (the HMAC of the admin token, the same for every login) opens nothing', async () => {
    const fixed = createHmac('sha256', TOKEN).update('berth /docs session').digest('hex');
    expect(await stateWith(`berth_docs=${fixed}`)).toBe(401);
    expect((await app.request(`http://${HOST}/docs`, { headers: { host: HOST, cookie: `berth_docs=${fixed}` } })).status).toBe(401);
    expect((await app.request(`http://${HOST}/console`, { headers: { host: HOST, cookie: `berth_docs=${fixed}` } })).status).toBe(401);
  });

  it('each sign-in gets a login of its own: two logins, two cookies, both open the console; neither is the token nor kept as itself', async () => {
    const a = await signIn();
    const b = await signIn();
    expect(a.id).not.toBe(b.id);
    expect(a.id).not.toContain(TOKEN);
    // Over plain http: the plain name, once per signed-in page, with the lifetime as Max-Age.
    expect(a.set).toEqual([
      `berth_docs=${a.id}; HttpOnly; SameSite=Strict; Path=/docs; Max-Age=${CONSOLE_LOGIN_SECONDS}`,
      `berth_docs=${a.id}; HttpOnly; SameSite=Strict; Path=/console; Max-Age=${CONSOLE_LOGIN_SECONDS}`,
    ]);
    expect([await stateWith(a.cookie), await stateWith(b.cookie)]).toEqual([200, 200]);
    expect((await app.request(`http://${HOST}/docs`, { headers: { host: HOST, cookie: a.cookie } })).status).toBe(200);
    // It opens the pages only, never the admin API.
    expect((await app.request(`http://${HOST}/api/projects`, { headers: { host: HOST, cookie: a.cookie } })).status).toBe(401);
    // On disk: a digest of each id, never the id (nor the token).
    const files = fs.readdirSync(loginDir);
    expect(files).toEqual(expect.arrayContaining([a.id, b.id].map((id) => `${createHash('sha256').update(id).digest('hex')}.json`)));
    for (const f of files) {
      const text = fs.readFileSync(join(loginDir, f), 'utf8');
      expect(text).not.toContain(a.id);
      expect(text).not.toContain(b.id);
      expect(text).not.toContain(TOKEN);
      expect(fs.statSync(join(loginDir, f)).mode & 0o777).toBe(0o600);
    }
    // A stray cookie of the same name beside a live one (another page of the host set it) does not hide it.
    expect(await stateWith(`berth_docs=bcn_${'x'.repeat(32)}; ${a.cookie}`)).toBe(200);
  });

  it('sign-out ends the login on the server (the cookie replayed opens nothing) and clears the cookies; another login stays; another origin may not sign out', async () => {
    const a = await signIn();
    const b = await signIn();
    const foreign = await signOut(a.cookie, { origin: 'http://evil.example' });
    expect([foreign.status, ((await foreign.json()) as { error: { code: string } }).error.code]).toEqual([403, 'PERMISSION_DENIED']);
    expect(await stateWith(a.cookie)).toBe(200);
    const crossSite = await signOut(a.cookie, { 'sec-fetch-site': 'cross-site' });
    expect(crossSite.status).toBe(403);

    const out = await signOut(a.cookie);
    expect([out.status, out.headers.get('location')]).toEqual([303, '/console']);
    expect(out.headers.getSetCookie()).toEqual([
      'berth_docs=; HttpOnly; SameSite=Strict; Path=/docs; Max-Age=0',
      'berth_docs=; HttpOnly; SameSite=Strict; Path=/console; Max-Age=0',
    ]);
    expect(await stateWith(a.cookie)).toBe(401);
    expect((await app.request(`http://${HOST}/console`, { headers: { host: HOST, cookie: a.cookie } })).status).toBe(401);
    expect(await stateWith(b.cookie)).toBe(200);
    // Only a POST signs out (a link or an image cannot).
    expect((await app.request(`http://${HOST}/docs/logout`, { headers: { host: HOST, cookie: b.cookie } })).status).toBe(405);
    expect(await stateWith(b.cookie)).toBe(200);
  });

  it(`a login ends ${CONSOLE_LOGIN_SECONDS / 3600} h after the sign-in, used or not`, async () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    const start = Date.now();
    const a = await signIn();
    vi.setSystemTime(start + (CONSOLE_LOGIN_SECONDS - 60) * 1000);
    expect(await stateWith(a.cookie)).toBe(200);
    vi.setSystemTime(start + CONSOLE_LOGIN_SECONDS * 1000);
    expect(await stateWith(a.cookie)).toBe(401);
    expect((await app.request(`http://${HOST}/console`, { headers: { host: HOST, cookie: a.cookie } })).status).toBe(401);
    // A new sign-in works then.
    expect(await stateWith((await signIn()).cookie)).toBe(200);
  });

  it('over https the cookie is __Host-berth_docs (Secure, Path=/); each scheme counts its own name only', async () => {
    const s = await signIn({ https: true });
    expect(s.set).toEqual([`__Host-berth_docs=${s.id}; HttpOnly; Secure; SameSite=Strict; Path=/; Max-Age=${CONSOLE_LOGIN_SECONDS}`]);
    expect(await stateWith(s.cookie, { https: true })).toBe(200);
    // The same login under the other scheme's name does not count, either way.
    expect(await stateWith(`berth_docs=${s.id}`, { https: true })).toBe(401);
    expect(await stateWith(s.cookie)).toBe(401);
    // Signing out over https clears the __Host- cookie (same attributes, or the browser keeps it).
    const out = await app.request(`http://${HOST}/docs/logout`, {
      method: 'POST',
      headers: { host: HOST, origin: `https://${HOST}`, 'x-forwarded-proto': 'https', cookie: s.cookie },
    });
    expect(out.headers.getSetCookie()).toEqual(['__Host-berth_docs=; HttpOnly; Secure; SameSite=Strict; Path=/; Max-Age=0']);
    expect(await stateWith(s.cookie, { https: true })).toBe(401);
  });

  it('logins outlive a restart of the server, and end when the admin token changes', async () => {
    const a = await signIn();
    // A new app over the same home (berth serve started again): the login holds.
    expect(await stateWith(a.cookie, { a: appWith() })).toBe(200);
    // The admin token changed: the login opens nothing, not even once the old token is back.
    expect(await stateWith(a.cookie, { a: appWith('another-admin-token-0123456789') })).toBe(401);
    expect(await stateWith(a.cookie, { a: appWith() })).toBe(401);
  });

  it(`keeps at most ${MAX_CONSOLE_LOGINS} logins: a new one drops the oldest`, async () => {
    fs.rmSync(loginDir, { recursive: true }); // the logins of the cases above (one made "12 h later") are not this case's
    vi.useFakeTimers({ toFake: ['Date'] });
    const logins = [];
    // A second apart, so "oldest" is one login, not a tie.
    for (let i = 0; i < MAX_CONSOLE_LOGINS + 1; i++) {
      vi.setSystemTime(Date.now() + 1000);
      logins.push(await signIn());
    }
    expect(fs.readdirSync(loginDir)).toHaveLength(MAX_CONSOLE_LOGINS);
    expect(await stateWith(logins[0]?.cookie ?? '')).toBe(401);
    for (const l of logins.slice(1)) expect(await stateWith(l.cookie)).toBe(200);
  });
});
