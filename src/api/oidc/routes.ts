import type { Context, Hono } from 'hono';
import type { Logger } from 'pino';
import type { AdminService } from '../../admin/service.js';
import type { AuditTrail } from '../../admin/audit-trail.js';
import { BerthError } from '../../base/errors.js';
import { toBerthError } from '../error-response.js';
import type { OidcConfig } from '../../config/oidc.js';
import { chatLoginCookie } from '../../bridges/web-cookie.js';
import { decideOidcAccess } from '../../plan/oidc-roles.js';
import type { ConsoleLogins } from '../../store/console-logins.js';
import { docsCookies, overHttps } from '../docs-login.js';
import { createFlows, FLOW_SECONDS, type SignInFor } from './flows.js';
import { createProvider } from './provider.js';
import { signInOnward, signInRefused, SIGN_IN_PAGE_HEADERS } from './pages.js';

/** What the sign-in routes need: berth.yaml's oidc (read at each sign-in, so a change holds at once) and where logins go. */
export interface OidcDeps {
  settings: () => { oidc?: OidcConfig; publicUrl?: string };
  token: string;
  logins: ConsoleLogins;
  admin: () => AdminService;
  /** Whether this process serves the web chat (a chat sign-in is refused without it). */
  chatServed: () => boolean;
  audit?: AuditTrail;
}

/** The app's request context as these routes use it: its request logger. */
export type LogEnv = { Variables: { log: Logger } };

const FLOW_COOKIE = 'berth_oidc';
const FLOW_HTTPS_COOKIE = '__Host-berth_oidc';
const PROJECT = /^[a-z0-9][a-z0-9_-]{0,62}$/;

/**
 * /oidc/start and /oidc/callback: authorization code with PKCE against berth.yaml's provider,
 * for the console (operators and viewers) and the web chat (tenant "oidc:<subject>"). The flow
 * is bound to the browser that started it by a cookie holding its state (SameSite=Lax: the
 * provider's redirect back is a cross-site navigation), so a callback URL sent to someone else
 * signs nobody in. The login itself is the console's or the chat's own cookie (SameSite=Strict),
 * which is why the callback answers with a page that moves on from this origin rather than a
 * redirect (a redirect chain that began at the provider would not carry a Strict cookie).
 */
export function registerOidcRoutes(app: Hono<LogEnv>, deps: OidcDeps): void {
  const flows = createFlows();
  const provider = createProvider();
  const configured = (): OidcConfig => {
    const { oidc } = deps.settings();
    if (!oidc) throw new BerthError('NOT_FOUND', 'sign-in with a provider is not set up here (berth.yaml oidc)');
    return oidc;
  };
  const flowCookie = (c: Context<LogEnv>, state: string, maxAge: number) =>
    overHttps(c)
      ? `${FLOW_HTTPS_COOKIE}=${state}; HttpOnly; Secure; SameSite=Lax; Path=/; Max-Age=${maxAge}`
      : `${FLOW_COOKIE}=${state}; HttpOnly; SameSite=Lax; Path=/oidc; Max-Age=${maxAge}`;
  const flowCookieOf = (c: Context<LogEnv>) => {
    const name = overHttps(c) ? FLOW_HTTPS_COOKIE : FLOW_COOKIE;
    return (c.req.header('cookie') ?? '').split(';').flatMap((part) => {
      const eq = part.indexOf('=');
      return eq > 0 && part.slice(0, eq).trim() === name ? [part.slice(eq + 1).trim()] : [];
    });
  };
  const redirectUri = (c: Context<LogEnv>, settings: OidcConfig) => {
    if (settings.redirect_uri) return settings.redirect_uri;
    const base = deps.settings().publicUrl ?? new URL(c.req.url).origin;
    return `${base.replace(/\/+$/, '')}/oidc/callback`;
  };
  const refused = (c: Context<LogEnv>, status: 400 | 401 | 403 | 502, message: string, to: SignInFor) => {
    for (const [name, value] of Object.entries(SIGN_IN_PAGE_HEADERS)) c.header(name, value);
    c.header('set-cookie', flowCookie(c, '', 0), { append: true });
    return c.html(signInRefused(message, to), status);
  };

  app.get('/oidc/start', async (c) => {
    const settings = configured();
    const to: SignInFor = c.req.query('to') === 'chat' ? 'chat' : 'console';
    const project = c.req.query('project');
    if (project !== undefined && !PROJECT.test(project))
      throw new BerthError('CONFIG_INVALID', 'not a project name', { issues: [{ field: 'project', reason: 'must be a project name' }] });
    if (to === 'chat' && !deps.chatServed()) throw new BerthError('NOT_FOUND', 'the web chat is not running in this process');
    const flow = flows.start(to, redirectUri(c, settings), project);
    const url = await provider.authorizationUrl(settings, flow);
    c.header('set-cookie', flowCookie(c, flow.state, FLOW_SECONDS), { append: true });
    c.header('cache-control', 'no-store');
    c.header('referrer-policy', 'no-referrer');
    return c.redirect(url.href, 302);
  });

  app.get('/oidc/callback', async (c) => {
    const settings = configured();
    const state = c.req.query('state') ?? '';
    const flow = flowCookieOf(c).includes(state) ? flows.take(state) : undefined;
    const to = flow?.to ?? 'console';
    if (!flow) return refused(c, 400, 'This sign-in did not start in this browser, was used already, or took too long.', to);
    const error = c.req.query('error');
    if (error !== undefined) {
      const why = (c.req.query('error_description') ?? error).slice(0, 200);
      deps.audit?.record({ kind: 'auth_failure', action: 'oidc.sign_in', actor: 'anonymous', target: to, outcome: 'refused' });
      return refused(c, 401, `The provider did not sign you in: ${why}.`, to);
    }
    let claims;
    try {
      claims = await provider.finish(settings, flow, new URL(c.req.url).searchParams);
    } catch (err) {
      const e = toBerthError(err);
      c.get('log').warn({ code: e.code, err: (err as Error).message }, 'oidc sign-in failed');
      deps.audit?.record({
        kind: 'auth_failure',
        action: 'oidc.sign_in',
        actor: 'anonymous',
        target: to,
        outcome: 'error',
        code: 'SIGN_IN_FAILED',
      });
      return refused(c, 502, 'The sign-in could not be completed with the provider.', to);
    }
    const decision = decideOidcAccess(settings, claims);
    const record = (outcome: 'ok' | 'refused', target: string, project?: string) =>
      deps.audit?.record({
        kind: outcome === 'ok' ? 'admin' : 'auth_failure',
        action: 'oidc.sign_in',
        actor: decision.who,
        target,
        outcome,
        ...(project === undefined ? {} : { project }),
      });

    if (flow.to === 'console') {
      if (!decision.console) {
        record('refused', 'console');
        return refused(c, 403, `${decision.who} may not use this berth's console. Ask its operator to add you.`, 'console');
      }
      const login = deps.logins.open(deps.token, { role: decision.console, who: decision.who });
      for (const cookie of docsCookies(c, login.id, login.max_age_seconds)) c.header('set-cookie', cookie, { append: true });
      record('ok', `console:${decision.console}`);
    } else {
      const project = flow.project ?? decision.chatProjects[0] ?? settings.chat.projects[0];
      if (project === undefined || !decision.chatProjects.includes(project)) {
        record('refused', 'chat', project);
        return refused(
          c,
          403,
          `${decision.who} may not use ${project === undefined ? 'this chat' : `project ${project}'s chat`}. Ask its operator to add you.`,
          'chat',
        );
      }
      const login = deps.admin().openChatLogin(project, decision.chatUser, settings.chat.login_hours * 3600);
      c.header('set-cookie', chatLoginCookie(login.credential, settings.chat.login_hours * 3600, overHttps(c)), { append: true });
      record('ok', `chat:${decision.chatUser}`, project);
    }
    for (const [name, value] of Object.entries(SIGN_IN_PAGE_HEADERS)) c.header(name, value);
    c.header('set-cookie', flowCookie(c, '', 0), { append: true });
    return c.html(signInOnward(flow.to));
  });
}
