import type { SessionTokens } from '../store/session-tokens.js';
import { BerthError } from '../base/errors.js';
import type { SessionStore } from '../store/sessions.js';
import { identifyActor, tenantActor, type AuditTrail } from '../admin/audit-trail.js';
import { tenantOfChatUser } from '../store/chat-links.js';
import { surfaceOf } from './request-surface.js';
import type { Metrics } from '../base/metrics.js';
import type { WebChat } from '../bridges/web.js';
import type { MiddlewareHandler } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { API_BODY_BYTES, FILE_BOUNDS } from '../config/bounds.js';

// The HTTP app's refusals and caller checks: what createApp's middlewares call, outside its closure.

/**
 * Permission denials go to the audit log, a line each: the caller is known, so is who to ask.
 * Authentication failures are counted instead (countUnauthenticated): anyone can send them.
 */
export function auditRefusal(audit: AuditTrail | undefined, e: BerthError, action: string): void {
  if (!audit || (e.code !== 'PERMISSION_DENIED' && e.code !== 'AREA_NOT_GRANTED')) return;
  audit.record({
    kind: 'permission_denied',
    action,
    outcome: 'refused',
    code: e.code,
    target: typeof e.details.rule === 'string' ? e.details.rule : undefined,
  });
}

/** A request without a valid login: into the audit log's per-minute summary and the Prometheus counter, by surface (never the token). */
export function countUnauthenticated(deps: { audit?: AuditTrail; metrics: Metrics }, surface: string, request: string): void {
  deps.audit?.unauthenticated(surface, request);
  deps.metrics.authFailure(surface);
}

/** Permission denials, counted (by surface only: never the path or caller). */
export function countRefusal(metrics: Metrics, e: BerthError, surface: 'http' | 'mcp'): void {
  if (e.code === 'PERMISSION_DENIED' || e.code === 'AREA_NOT_GRANTED') metrics.permissionDenied(surface);
}

/**
 * The web chat as its routes see it: checking a chat login also names its user in the audit log
 * ("tenant:web:<user>") for the rest of the request, refusals included. Everything else is the chat itself.
 */
export function chatNamingItsUser(web: WebChat): WebChat {
  return Object.assign(Object.create(web) as WebChat, {
    loginOf(credential: string) {
      const login = web.loginOf(credential);
      identifyActor(tenantActor(tenantOfChatUser(login.user)));
      return login;
    },
  });
}

/** The session a token stands for, checked against the session as it is now (same tenant, same creation), with its workspace settings as they are now. */
export function sessionOfToken(
  deps: { tokens: SessionTokens; sessions: SessionStore },
  token: string,
): { project: string; session: string; tenantKey: string; workspace: { mode: 'tenant' | 'session'; id?: string } } {
  const bound = deps.tokens.verify(token);
  const gone = () =>
    new BerthError('UNAUTHORIZED', 'the session this token was minted for no longer exists', {
      hint: 'mint a new one: POST /api/projects/:name/sessions/:id/token',
    });
  let session;
  try {
    session = deps.sessions.get(bound.project, bound.session).session;
  } catch (err) {
    if (err instanceof BerthError && (err.code === 'PROJECT_NOT_FOUND' || err.code === 'SESSION_NOT_FOUND')) throw gone();
    throw err;
  }
  if (session.tenant_key !== bound.tenant_key || session.created_at !== bound.session_created_at) throw gone();
  return { project: bound.project, session: bound.session, tenantKey: session.tenant_key, workspace: session.settings.workspace };
}

/** Whether a path's credential is a bearer token: not /chat and /console (cookies), nor /hooks (each channel's own signature). */
export function asksForBearer(path: string): boolean {
  const surface = surfaceOf(path);
  return surface !== 'chat' && surface !== 'hooks' && path !== '/console' && !path.startsWith('/console/');
}

/** "." or ".." as a path segment, also percent-encoded ("%2e%2e"). */
/** A path as sent, before routing: no "." or ".." segments (also %2e), and percent-encoding that decodes (routers pass a bad one on as literal text). */
export function checkRawPath(raw: string): void {
  if (hasDotSegment(raw))
    throw new BerthError('CONFIG_INVALID', 'the URL path has "." or ".." segments', {
      issues: [{ field: 'path', reason: 'must not contain . or .. segments (also percent-encoded)' }],
    });
  try {
    decodeURIComponent(raw.split('?')[0] ?? '');
  } catch {
    throw new BerthError('CONFIG_INVALID', 'the URL path is not valid percent-encoding', {
      issues: [{ field: 'path', reason: 'a "%" must start a %XX escape of UTF-8 (write %25 for a "%")' }],
    });
  }
}

export function hasDotSegment(rawPath: string): boolean {
  const path = rawPath.split('?')[0] ?? '';
  return path.split('/').some((seg) => {
    const s = seg.replace(/%2e/gi, '.');
    return s === '.' || s === '..';
  });
}

/** The URL parser resolves "/a/../b" before routing, and passes a stray "%" on: such paths are refused (checkRawPath), not rerouted. */
export const rawPathCheck: MiddlewareHandler = async (c, next) => {
  checkRawPath((c.env as { incoming?: { url?: string } } | undefined)?.incoming?.url ?? new URL(c.req.url).pathname);
  await next();
};

/** POST /api/projects/:name/runs */
const RUNS_PATH = /^\/api\/projects\/[^/]+\/runs$/;

/** Every /api body is bounded; a run's may carry files (base64), so it has its own, larger bound (config/bounds.ts FILE_BOUNDS). */
export const apiBodyLimit: MiddlewareHandler = (c, next) => {
  const max = c.req.method === 'POST' && RUNS_PATH.test(c.req.path) ? FILE_BOUNDS.runBodyBytes : API_BODY_BYTES;
  return bodyLimit({
    maxSize: max,
    onError: () => {
      throw new BerthError('PAYLOAD_TOO_LARGE', `request body is larger than ${max} bytes`);
    },
  })(c, next);
};
