import type { Context, Hono } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import type { Logger } from 'pino';
import { z } from 'zod';
import { parseOrThrow } from '../../config/parse.js';
import { SessionIdSchema, SessionTitleUpdateSchema } from '../../config/session.js';
import { BerthError } from '../../base/errors.js';
import { tenantOfChatUser } from '../../store/chat-links.js';
import type { WebChat, WebLogin } from '../../bridges/web.js';
import { ChatSettingsBodySchema, type ChatMe } from '../../bridges/web-protocol.js';
import { chatCredentialOf, chatLoginCookie, fromOwnOrigin, reachedOverHttps } from '../../bridges/web-cookie.js';
import { chatAssets } from './assets.js';
import { assetHeaders } from '../package-assets.js';
import { chatLoginConfirmPage, chatLoginFailedPage, chatPage, LOGIN_PAGE_HEADERS } from './page.js';

/**
 * The web chat over HTTP: the page, the login its link opens, and /chat/api for the page's
 * script. A chat login (cookie: bridges/web-cookie.ts) sees its own sessions of its own project
 * and nothing else; the admin token is never involved. Runs go over the WebSocket
 * (bridges/web-socket.ts). Opening a link (GET) only asks "log in as …?"; the button (POST, from
 * this origin only) uses the link up: a link-preview fetcher that GETs it uses nothing. Every
 * other write (POST, PUT, DELETE under /chat/api) is taken from this origin only too.
 */
const CHAT_BODY_BYTES = 16 * 1024;
const LOGIN_BODY_BYTES = 4 * 1024;
const SessionParam = z.object({ id: SessionIdSchema });

export type ChatEnv = { Variables: { log: Logger } };

/** `sso`: the provider's sign-in link for the page's logged-out view (none without berth.yaml oidc). */
export function registerChatRoutes(app: Hono<ChatEnv>, chat: () => WebChat | undefined, sso: () => string = () => ''): void {
  const running = (): WebChat => {
    const web = chat();
    if (!web) throw new BerthError('NOT_FOUND', 'the web chat is not running in this process', { hint: 'it is served by "berth serve"' });
    return web;
  };
  const overHttps = (c: Context<ChatEnv>) =>
    reachedOverHttps({ tls: new URL(c.req.url).protocol === 'https:', forwardedProto: c.req.header('x-forwarded-proto') });
  const loginOf = (c: Context<ChatEnv>): WebLogin => {
    const credential = chatCredentialOf(c.req.header('cookie'), overHttps(c));
    if (!credential) throw new BerthError('UNAUTHORIZED', 'not logged in to the chat', { hint: 'open your chat link' });
    return running().loginOf(credential);
  };
  const sessionOf = (c: Context<ChatEnv>) => parseOrThrow(SessionParam, { id: c.req.param('id') }, 'session').id;
  /** JSON bodies only: a cross-site form cannot send one without the page's origin (and SameSite=Strict holds the cookie back). */
  const jsonBody = async (c: Context<ChatEnv>): Promise<unknown> => {
    if (!/^application\/json\s*(;|$)/i.test(c.req.header('content-type') ?? ''))
      throw new BerthError('UNSUPPORTED_MEDIA_TYPE', 'send JSON (content-type: application/json)');
    try {
      return await c.req.json();
    } catch {
      throw new BerthError('CONFIG_INVALID', 'the body is not JSON', { issues: [{ field: 'body', reason: 'must be a JSON object' }] });
    }
  };

  for (const asset of Object.values(chatAssets())) {
    app.get(asset.path, (c) => {
      for (const [name, value] of Object.entries(assetHeaders(asset))) c.header(name, value);
      return c.body(asset.body);
    });
  }

  app.get('/chat', (c) => {
    const page = chatPage(c.req.header('host'), sso());
    for (const [name, value] of Object.entries(page.headers)) c.header(name, value);
    return c.html(page.html);
  });

  /** A refused link: the same plain page whatever the reason (used, expired, revoked, never made). */
  const linkRefused = (c: Context<ChatEnv>, err: unknown) => {
    if (!(err instanceof BerthError) || err.code !== 'UNAUTHORIZED') throw err;
    c.get('log').warn({ code: err.code, reason: err.message }, 'chat link refused');
    return c.html(chatLoginFailedPage(), 401);
  };

  app.use('/chat/login', async (c, next) => {
    for (const [name, value] of Object.entries(LOGIN_PAGE_HEADERS)) c.header(name, value);
    await next();
  });

  app.get('/chat/login', (c) => {
    const token = c.req.query('token') ?? '';
    try {
      return c.html(chatLoginConfirmPage(token, running().peekLink(token)));
    } catch (err) {
      return linkRefused(c, err);
    }
  });

  app.post(
    '/chat/login',
    bodyLimit({
      maxSize: LOGIN_BODY_BYTES,
      onError: () => {
        throw new BerthError('PAYLOAD_TOO_LARGE', `request body is larger than ${LOGIN_BODY_BYTES} bytes`);
      },
    }),
    async (c) => {
      // Login CSRF: another site's form must not log this browser in as someone else.
      if (!fromOwnOrigin({ origin: c.req.header('origin'), host: c.req.header('host'), fetchSite: c.req.header('sec-fetch-site') })) {
        c.get('log').warn({ origin: c.req.header('origin')?.slice(0, 200) }, 'chat login from another site refused');
        return c.html(chatLoginFailedPage('This login did not start from the chat link itself.'), 403);
      }
      if (!/^application\/x-www-form-urlencoded\s*(;|$)/i.test(c.req.header('content-type') ?? ''))
        throw new BerthError('UNSUPPORTED_MEDIA_TYPE', "send the chat link's form (application/x-www-form-urlencoded)");
      const token = new URLSearchParams(await c.req.text()).get('token') ?? '';
      let login: { credential: string; expires_at: string };
      try {
        login = running().login(token);
      } catch (err) {
        return linkRefused(c, err);
      }
      c.header('set-cookie', chatLoginCookie(login.credential, (Date.parse(login.expires_at) - Date.now()) / 1000, overHttps(c)));
      return c.redirect('/chat', 303);
    },
  );

  app.use(
    '/chat/api/*',
    bodyLimit({
      maxSize: CHAT_BODY_BYTES,
      onError: () => {
        throw new BerthError('PAYLOAD_TOO_LARGE', `request body is larger than ${CHAT_BODY_BYTES} bytes`);
      },
    }),
  );
  app.use('/chat/api/*', async (c, next) => {
    c.header('cache-control', 'no-store');
    await next();
  });
  // SameSite=Strict still sends the cookie from a page on another port of this host (same site,
  // not same origin): every write must come from the chat page itself, or from no browser at all.
  app.use('/chat/api/*', async (c, next) => {
    const write = c.req.method !== 'GET' && c.req.method !== 'HEAD';
    if (
      write &&
      !fromOwnOrigin({ origin: c.req.header('origin'), host: c.req.header('host'), fetchSite: c.req.header('sec-fetch-site') })
    ) {
      c.get('log').warn({ origin: c.req.header('origin')?.slice(0, 200), method: c.req.method }, 'chat change from another site refused');
      throw new BerthError('PERMISSION_DENIED', 'the chat takes changes from its own page only', {
        rule: 'same_origin',
        hint: 'open the chat at its own address',
      });
    }
    await next();
  });

  app.get('/chat/api/me', (c) => {
    const login = loginOf(c);
    return c.json<ChatMe>({
      project: login.project,
      user: login.user,
      tenant: tenantOfChatUser(login.user),
      agent: running().agentOf(login),
    });
  });

  app.get('/chat/api/sessions', (c) => c.json({ sessions: running().sessions(loginOf(c)) }));

  app.post('/chat/api/sessions', (c) => c.json({ session: running().newSession(loginOf(c)) }, 201));

  app.delete('/chat/api/sessions/:id', (c) => {
    const login = loginOf(c);
    return c.json(running().deleteSession(login, sessionOf(c)));
  });

  app.get('/chat/api/sessions/:id/history', (c) => {
    const login = loginOf(c);
    return c.json({ entries: running().history(login, sessionOf(c)) });
  });

  app.put('/chat/api/sessions/:id', async (c) => {
    const login = loginOf(c);
    const id = sessionOf(c);
    const body = parseOrThrow(SessionTitleUpdateSchema, await jsonBody(c), 'session');
    return c.json({ session: running().rename(login, id, body.title) });
  });

  app.put('/chat/api/sessions/:id/settings', async (c) => {
    const login = loginOf(c);
    const id = sessionOf(c);
    const body = parseOrThrow(ChatSettingsBodySchema, await jsonBody(c), 'settings');
    return c.json({ session: await running().setLevel(login, id, body.permission_level) });
  });
}
