import { createHmac, timingSafeEqual } from 'node:crypto';
import type { Context } from 'hono';

/**
 * /docs and /console in a browser, which cannot send a bearer header: a login form posts the
 * admin token once (never in a URL), and berth answers with HttpOnly, SameSite=Strict cookies
 * (one with Path=/docs, one with Path=/console) holding a value derived from the token — they open
 * /docs and /console and nothing else (they never travel to /api or /chat), and are not the token.
 */
export const SIGN_IN_PAGES = { '/docs': 'Open the API reference', '/console': 'Open the console' } as const;
export type SignInPage = keyof typeof SIGN_IN_PAGES;
export const DOCS_COOKIE = 'berth_docs';

export function docsCookieValue(token: string): string {
  return createHmac('sha256', token).update('berth /docs session').digest('hex');
}

export function hasDocsCookie(c: Context, token: string): boolean {
  const given = /(?:^|;\s*)berth_docs=([0-9a-f]{64})(?:;|$)/.exec(c.req.header('cookie') ?? '')?.[1];
  return given !== undefined && timingSafeEqual(Buffer.from(given), Buffer.from(docsCookieValue(token)));
}

export function loginPage(error?: string, next: SignInPage = '/docs'): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1"><title>berth — sign in</title>
<style>body{font:16px system-ui,sans-serif;max-width:28rem;margin:4rem auto;padding:0 1rem}input,button{font:inherit;padding:.4rem;width:100%;box-sizing:border-box;margin:.3rem 0}.error{color:#b00}</style></head>
<body><h1>berth</h1><p>The ${next === '/console' ? 'console' : 'API reference'} needs the admin token (<code>make run</code> prints it; it is also in <code>.berth/admin-token</code> in berth's home).</p>
${error ? `<p class="error" role="alert">${error}</p>` : ''}
<form method="post" action="/docs/login"><input type="hidden" name="next" value="${next}"><label>Admin token <input type="password" name="token" autocomplete="current-password" required autofocus></label><button type="submit">${SIGN_IN_PAGES[next]}</button></form>
</body></html>`;
}
