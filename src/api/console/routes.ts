import type { Context, Hono } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { z } from 'zod';
import { parseOrThrow } from '../../config/parse.js';
import { BerthError } from '../../base/errors.js';
import { fromOwnOrigin } from '../../bridges/web-cookie.js';
import { identifyActor, type AuditTrail } from '../../admin/audit-trail.js';
import { APPROVAL_DECISIONS } from '../../store/approvals.js';
import { AuditFilterSchema } from '../../store/audit.js';
import { isAdminBearer } from '../auth.js';
import { docsLoginIds, loginPage } from '../docs-login.js';
import type { ConsoleLogins } from '../../store/console-logins.js';
import { assetHeaders } from '../package-assets.js';
import { consoleAssets, consolePage } from './page.js';
import { answerStranger } from '../routes/strangers.js';
import { registerConsoleActions } from './actions.js';
import { canAct, callerKey, youOf, type ConsoleCaller } from './can-act.js';
import { createConsoleEvents, EVENT_EVERY_MS } from './events.js';
import { consoleState, type ConsoleSources } from './state.js';

/**
 * The operator's console at /console, behind the same sign-in as /docs (a form posts the admin
 * token once; the HttpOnly, SameSite=Strict cookie it gets holds a random login that expires and
 * signs out (docs-login.ts), never the token, and never in a URL). Its page polls /console/api/state; its answers (a request to go
 * past a grant, a stranger of a chat bot) are JSON POSTs from this origin only.
 */
const ApproveBodySchema = z.object({ decision: z.enum(APPROVAL_DECISIONS) }).strict();
const SenderBodySchema = z.object({ decision: z.enum(['approve', 'deny']) }).strict();
const CONSOLE_BODY_BYTES = 4 * 1024;

export function registerConsoleRoutes(
  app: Hono,
  deps: { token: string; logins: ConsoleLogins; sources: ConsoleSources; audit?: AuditTrail; sso?: () => string },
): void {
  const events = createConsoleEvents();
  // One state for every open console at a time (each reads every project's run log): made at most once per EVENT_EVERY_MS.
  let made: { at: number; state: Promise<unknown> } | undefined;
  const pushed = () => {
    if (!made || Date.now() - made.at >= EVENT_EVERY_MS) {
      const live = deps.sources.live;
      made = { at: Date.now(), state: (async () => ({ ...consoleState(deps.sources), live: live ? await live() : null }))() };
    }
    return made.state;
  };
  /** Who calls: the admin token in a header, or one of the console's logins (docs-login.ts; an operator's before a viewer's); undefined when neither. */
  const callerOf = (c: Context): ConsoleCaller | undefined => {
    if (isAdminBearer(c.req.header('authorization'), deps.token)) return { via: 'token' };
    const live = docsLoginIds(c).flatMap((login) => {
      const who = deps.logins.verify(login, deps.token);
      return who ? [{ via: 'login' as const, login, ...who }] : [];
    });
    const caller = live.find((l) => l.role === 'operator') ?? live[0];
    // A person signed in with the provider is named in the audit log as themselves, not as "admin".
    if (caller?.who) identifyActor(`oidc:${caller.who}`);
    return caller;
  };
  const signedIn = (c: Context) => callerOf(c) !== undefined;
  const operatorOnly = (c: Context): ConsoleCaller => {
    const caller = callerOf(c);
    if (!caller) throw new BerthError('UNAUTHORIZED', 'sign in to the console first', { hint: 'open /console and give the admin token' });
    return caller;
  };
  /** An answer or action: JSON from this origin only (a cross-site form cannot send JSON, and SameSite=Strict holds the cookie back), by a caller who may act. */
  const answerBody = async <S extends z.ZodType>(c: Context, schema: S): Promise<z.output<S>> => {
    if (!canAct(operatorOnly(c)))
      throw new BerthError('PERMISSION_DENIED', 'you may look at the console, not act in it (a viewer)', { rule: 'console_viewer' });
    if (!fromOwnOrigin({ origin: c.req.header('origin'), host: c.req.header('host'), fetchSite: c.req.header('sec-fetch-site') })) {
      throw new BerthError('PERMISSION_DENIED', 'answers come from the console page itself', { rule: 'same_origin' });
    }
    if (!/^application\/json\s*(;|$)/i.test(c.req.header('content-type') ?? ''))
      throw new BerthError('UNSUPPORTED_MEDIA_TYPE', 'send JSON (content-type: application/json)');
    const body: unknown = await c.req.json().catch(() => {
      throw new BerthError('CONFIG_INVALID', 'the body is not JSON', { issues: [{ field: 'body', reason: 'must be a JSON object' }] });
    });
    return parseOrThrow(schema, body, 'body');
  };

  for (const asset of Object.values(consoleAssets())) {
    app.get(asset.path, (c) => {
      for (const [name, value] of Object.entries(assetHeaders(asset))) c.header(name, value);
      return c.body(asset.body);
    });
  }

  app.get('/console', (c) => {
    if (!signedIn(c)) return c.html(loginPage(undefined, '/console', deps.sso?.()), 401);
    const page = consolePage();
    for (const [name, value] of Object.entries(page.headers)) c.header(name, value);
    return c.html(page.html);
  });

  app.get('/console/api/state', (c) => {
    const caller = operatorOnly(c);
    c.header('cache-control', 'no-store');
    return c.json({ ...consoleState(deps.sources), you: youOf(caller) });
  });

  // Live: the state and the live view as server-sent events (events.ts bounds them per login and in all).
  app.get('/console/api/events', (c) => {
    const caller = operatorOnly(c);
    return events.serve(c, callerKey(caller), pushed, () => callerOf(c) !== undefined);
  });

  app.get('/console/api/live', async (c) => {
    operatorOnly(c);
    c.header('cache-control', 'no-store');
    return c.json(deps.sources.live ? await deps.sources.live() : null);
  });

  app.get('/console/api/audit', (c) => {
    operatorOnly(c);
    if (!deps.audit) throw new BerthError('NOT_FOUND', 'this berth keeps no audit log');
    const q = c.req.query();
    const filter = parseOrThrow(
      AuditFilterSchema,
      {
        since: q.since || undefined,
        project: q.project || undefined,
        actor: q.actor || undefined,
        kind: q.kind || undefined,
        limit: q.limit || undefined,
      },
      'audit filter',
    );
    c.header('cache-control', 'no-store');
    return c.json({ entries: deps.audit.list(filter) });
  });

  const limit = bodyLimit({
    maxSize: CONSOLE_BODY_BYTES,
    onError: () => {
      throw new BerthError('PAYLOAD_TOO_LARGE', `request body is larger than ${CONSOLE_BODY_BYTES} bytes`);
    },
  });

  registerConsoleActions(app, { sources: deps.sources, audit: deps.audit, viewer: operatorOnly, act: answerBody, limit });

  app.post('/console/api/approvals/:id', limit, async (c) => {
    const { decision } = await answerBody(c, ApproveBodySchema);
    if (!deps.sources.approvals) throw new BerthError('APPROVAL_NOT_FOUND', 'nothing waits for an answer here');
    const approval = deps.sources.approvals.answer(c.req.param('id'), decision, { operator: true, actor: 'operator' });
    return c.json({ approval, decision });
  });

  app.post('/console/api/senders/:sender', limit, async (c) => {
    const { decision } = await answerBody(c, SenderBodySchema);
    return c.json(await answerStranger(deps.sources.senders?.(), deps.audit, c.req.param('sender'), decision));
  });
}
