import type { Context } from 'hono';
import { reachedOverHttps } from '../bridges/web-cookie.js';
import type { ConsoleLogin, ConsoleLogins } from '../store/console-logins.js';

/**
 * /docs and /console in a browser, which cannot send a bearer header: a login form posts the
 * admin token once (never in a URL), and berth answers with a cookie holding a random login id of
 * its own (store/console-logins.ts: it expires, signs out, and ends when the token changes), never
 * the token. HttpOnly, SameSite=Strict, with Max-Age. Over https (TLS, or X-Forwarded-Proto from
 * the proxy in front, as the chat's cookie decides) it is `__Host-berth_docs` (Secure, Path=/, no
 * Domain): a page on another port or a sibling host cannot set or shadow it. Over plain http it is
 * `berth_docs` twice, on Path=/docs and Path=/console, so it never travels to /api or /chat.
 * Only the name of the request's scheme counts.
 */
export const SIGN_IN_PAGES = { '/docs': 'Open the API reference', '/console': 'Open the console' } as const;
export type SignInPage = keyof typeof SIGN_IN_PAGES;
export const DOCS_COOKIE = 'berth_docs';
export const DOCS_HTTPS_COOKIE = '__Host-berth_docs';

export function overHttps(c: Context): boolean {
  return reachedOverHttps({ tls: new URL(c.req.url).protocol === 'https:', forwardedProto: c.req.header('x-forwarded-proto') });
}

/** Every login id the request carries under its scheme's cookie name (another page of the host may have added one). */
export function docsLoginIds(c: Context): string[] {
  const name = overHttps(c) ? DOCS_HTTPS_COOKIE : DOCS_COOKIE;
  return (c.req.header('cookie') ?? '').split(';').flatMap((part) => {
    const eq = part.indexOf('=');
    return eq > 0 && part.slice(0, eq).trim() === name ? [part.slice(eq + 1).trim()] : [];
  });
}

/** The live console login the request carries, if any (a stray cookie beside it does not hide it; an operator's wins over a viewer's). */
export function docsLoginOf(c: Context, logins: ConsoleLogins, token: string): ConsoleLogin | undefined {
  const live = docsLoginIds(c).flatMap((id) => logins.verify(id, token) ?? []);
  return live.find((l) => l.role === 'operator') ?? live[0];
}

/** The Set-Cookie values that sign a browser in (value = the login id) or out (empty, Max-Age=0). */
export function docsCookies(c: Context, id: string, maxAgeSeconds: number): string[] {
  const maxAge = Math.max(0, Math.floor(maxAgeSeconds));
  if (overHttps(c)) return [`${DOCS_HTTPS_COOKIE}=${id}; HttpOnly; Secure; SameSite=Strict; Path=/; Max-Age=${maxAge}`];
  return Object.keys(SIGN_IN_PAGES).map((page) => `${DOCS_COOKIE}=${id}; HttpOnly; SameSite=Strict; Path=${page}; Max-Age=${maxAge}`);
}

/** The sign-in form for the admin token; `sso`: the provider's link beside it (oidc/pages.ts), when berth.yaml has one. */
export function loginPage(error?: string, next: SignInPage = '/docs', sso = ''): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1"><title>berth — sign in</title>
<style>body{font:16px system-ui,sans-serif;max-width:28rem;margin:4rem auto;padding:0 1rem}input,button{font:inherit;padding:.4rem;width:100%;box-sizing:border-box;margin:.3rem 0}.error{color:#b00}</style></head>
<body><h1>berth</h1><p>The ${next === '/console' ? 'console' : 'API reference'} needs the admin token (<code>make run</code> prints it; it is also in <code>.berth/admin-token</code> in berth's home).</p>
${error ? `<p class="error" role="alert">${error}</p>` : ''}
<form method="post" action="/docs/login"><input type="hidden" name="next" value="${next}"><label>Admin token <input type="password" name="token" autocomplete="current-password" required autofocus></label><button type="submit">${SIGN_IN_PAGES[next]}</button></form>
${sso}</body></html>`;
}
