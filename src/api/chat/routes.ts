import type { Context, Hono } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import type { Logger } from 'pino';
import { z } from 'zod';
import { parseOrThrow } from '../../config/parse.js';
import { SessionIdSchema } from '../../config/session.js';
import { BerthError } from '../../errors.js';
import { tenantOfChatUser } from '../../store/chat-links.js';
import type { WebChat, WebLogin } from '../../bridges/web.js';
import { ChatSettingsBodySchema, cookieValue, WEB_CHAT_COOKIE } from '../../bridges/web-protocol.js';
import { chatLoginFailedPage, chatPage } from './page.js';

/**
 * The web chat over HTTP: the page, the login its link opens, and /chat/api for the page's
 * script. A chat login (cookie, Path=/chat) sees its own sessions of its own project and nothing
 * else; the admin token is never involved. Runs go over the WebSocket (bridges/web-socket.ts).
 */
const CHAT_BODY_BYTES = 16 * 1024;
const SessionParam = z.object({ id: SessionIdSchema });

export type ChatEnv = { Variables: { log: Logger } };

export function registerChatRoutes(app: Hono<ChatEnv>, chat: () => WebChat | undefined): void {
  const running = (): WebChat => {
    const web = chat();
    if (!web) throw new BerthError('NOT_FOUND', 'the web chat is not running in this process', { hint: 'it is served by "berth serve"' });
    return web;
  };
  const loginOf = (c: Context<ChatEnv>): WebLogin => {
    const credential = cookieValue(c.req.header('cookie'), WEB_CHAT_COOKIE);
    if (!credential) throw new BerthError('UNAUTHORIZED', 'not logged in to the chat', { hint: 'open your chat link' });
    return running().loginOf(credential);
  };
  const sessionOf = (c: Context<ChatEnv>) => parseOrThrow(SessionParam, { id: c.req.param('id') }, 'session').id;
  /** JSON bodies only: a cross-site form cannot send one without the page's origin (and SameSite=Strict holds the cookie back). */
  const jsonBody = async (c: Context<ChatEnv>): Promise<unknown> => {
    if (!/^application\/json\s*(;|$)/i.test(c.req.header('content-type') ?? '')) throw new BerthError('UNSUPPORTED_MEDIA_TYPE', 'send JSON (content-type: application/json)');
    try {
      return await c.req.json();
    } catch {
      throw new BerthError('CONFIG_INVALID', 'the body is not JSON', { issues: [{ field: 'body', reason: 'must be a JSON object' }] });
    }
  };

  app.get('/chat', (c) => {
    const page = chatPage(c.req.header('host'));
    for (const [name, value] of Object.entries(page.headers)) c.header(name, value);
    return c.html(page.html);
  });

  app.get('/chat/login', (c) => {
    c.header('referrer-policy', 'no-referrer');
    c.header('cache-control', 'no-store');
    let login: { credential: string; expires_at: string };
    try {
      login = running().login(c.req.query('token') ?? '');
    } catch (err) {
      if (!(err instanceof BerthError) || err.code !== 'UNAUTHORIZED') throw err;
      c.get('log').warn({ code: err.code }, 'chat link refused');
      return c.html(chatLoginFailedPage(`This chat link does not work: ${err.message}.`), 401);
    }
    const maxAge = Math.max(0, Math.floor((Date.parse(login.expires_at) - Date.now()) / 1000));
    const secure = new URL(c.req.url).protocol === 'https:' ? '; Secure' : '';
    c.header('set-cookie', `${WEB_CHAT_COOKIE}=${login.credential}; HttpOnly; SameSite=Strict; Path=/chat; Max-Age=${maxAge}${secure}`);
    return c.redirect('/chat', 303);
  });

  app.use('/chat/api/*', bodyLimit({ maxSize: CHAT_BODY_BYTES, onError: () => { throw new BerthError('PAYLOAD_TOO_LARGE', `request body is larger than ${CHAT_BODY_BYTES} bytes`); } }));
  app.use('/chat/api/*', async (c, next) => {
    c.header('cache-control', 'no-store');
    await next();
  });

  app.get('/chat/api/me', (c) => {
    const login = loginOf(c);
    return c.json({ project: login.project, user: login.user, tenant: tenantOfChatUser(login.user) });
  });

  app.get('/chat/api/sessions', (c) => c.json({ sessions: running().sessions(loginOf(c)) }));

  app.post('/chat/api/sessions', (c) => c.json({ session: running().newSession(loginOf(c)) }, 201));

  app.get('/chat/api/sessions/:id/history', (c) => {
    const login = loginOf(c);
    return c.json({ entries: running().history(login, sessionOf(c)) });
  });

  app.put('/chat/api/sessions/:id/settings', async (c) => {
    const login = loginOf(c);
    const id = sessionOf(c);
    const body = parseOrThrow(ChatSettingsBodySchema, await jsonBody(c), 'settings');
    return c.json({ session: await running().setLevel(login, id, body.permission_level) });
  });
}
