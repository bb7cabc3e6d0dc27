import type { Hono } from 'hono';
import { BerthError } from '../base/errors.js';
import { fromOwnOrigin } from '../bridges/web-cookie.js';
import { isAdminBearer, isAdminToken } from './auth.js';
import { docsCookies, docsLoginIds, docsLoginOf, loginPage, type SignInPage } from './docs-login.js';
import { ssoLinkFor } from './oidc/pages.js';
import { registerOidcRoutes, type LogEnv, type OidcDeps } from './oidc/routes.js';

/**
 * How a browser signs in to /docs and /console: the admin token's form (docs-login.ts), the
 * organisation's provider (oidc/), and sign-out. The console's own routes check the login these set.
 */
export function registerSignInRoutes(app: Hono<LogEnv>, deps: OidcDeps & { docsHtml: () => string }): void {
  const { token, logins } = deps;
  const sso = () => ssoLinkFor(deps.settings().oidc, 'console');
  registerOidcRoutes(app, deps);
  app.get('/docs', (c) => {
    if (!isAdminBearer(c.req.header('authorization'), token) && !docsLoginOf(c, logins, token))
      return c.html(loginPage(undefined, '/docs', sso()), 401);
    return c.html(deps.docsHtml());
  });
  app.post('/docs/login', async (c) => {
    const form = await c.req.parseBody().catch(() => ({}) as Record<string, unknown>);
    const given = typeof form.token === 'string' ? form.token.trim() : '';
    // Where to go after: one of the signed-in pages, never a URL the form names.
    const next: SignInPage = form.next === '/console' ? '/console' : '/docs';
    if (!given || !isAdminToken(given, token)) {
      c.get('log').warn({ code: 'UNAUTHORIZED' }, 'docs sign-in refused');
      return c.html(loginPage('That is not the admin token.', next, sso()), 401);
    }
    // A login of its own per sign-in (docs-login.ts decides the cookie's name and paths by scheme).
    const login = logins.open(token);
    for (const cookie of docsCookies(c, login.id, login.max_age_seconds)) c.header('set-cookie', cookie, { append: true });
    return c.redirect(next, 303);
  });
  // Sign-out from berth's own pages only (another site may not end the operator's login either).
  app.post('/docs/logout', async (c) => {
    if (!fromOwnOrigin({ origin: c.req.header('origin'), host: c.req.header('host'), fetchSite: c.req.header('sec-fetch-site') })) {
      throw new BerthError('PERMISSION_DENIED', 'sign-out comes from berth’s own pages', { rule: 'same_origin' });
    }
    for (const id of docsLoginIds(c)) logins.close(id);
    for (const cookie of docsCookies(c, '', 0)) c.header('set-cookie', cookie, { append: true });
    const form = await c.req.parseBody().catch(() => ({}) as Record<string, unknown>);
    return c.redirect(form.next === '/console' ? '/console' : '/docs', 303);
  });
}
