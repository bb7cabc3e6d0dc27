import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { OpenAPIHono, createRoute } from '@hono/zod-openapi';
import type { Logger } from 'pino';
import type { AdminService } from '../admin/service.js';
import type { Launcher } from '../launch/launcher.js';
import { createToolServer } from '../mcp/server.js';
import { SESSION_TOOLS } from '../mcp/session-tools.js';
import { ADMIN_TOOLS } from '../mcp/admin-tools.js';
import type { SessionTools } from '../admin/session-tools.js';
import type { SessionTokens } from '../store/session-tokens.js';
import { BerthError } from '../base/errors.js';
import { registerOperatorRoutes } from './routes/operator.js';
import type { OperatorService } from '../admin/operator.js';
import type { FileTools } from '../file-tools/service.js';
import type { SessionStore } from '../store/sessions.js';
import { VERSION } from '../base/version.js';
import { bearerAuth } from './auth.js';
import { decoyTripwire } from './decoy-tripwire.js';
import type { Honeytokens } from '../outbound/honeytokens.js';
import type { SignInFor } from './oidc/flows.js';
import { ssoLinkFor } from './oidc/pages.js';
import type { LogEnv, OidcDeps } from './oidc/routes.js';
import type { TenantData } from '../admin/tenant-data.js';
import { registerSignInRoutes } from './sign-in-routes.js';
import { createConsoleLogins, type ConsoleLogins } from '../store/console-logins.js';
import { homePaths } from '../config/home.js';
import { registerConsoleRoutes } from './console/routes.js';
import type { ConsoleSources } from './console/state.js';
import type { MetricsHistory } from '../admin/metrics-history.js';
import { createGate, serveMcp } from './mcp-http.js';
import { MCP_HTTP_BOUNDS } from '../config/bounds.js';
import { assertPlainInput } from '../config/parse.js';
import { renderDocsPage } from './docs-page.js';
import { errorBody } from '../base/errors.js';
import { toBerthError, validationError } from './error-response.js';
import { withActor, type AuditTrail } from '../admin/audit-trail.js';
import { isBrowserProbe, surfaceOf } from './request-surface.js';
import { finishOpenApiDoc } from './openapi-doc.js';
import { errorResponses } from './routes/openapi.js';
import { engineProber, HealthSchema } from './engine-health.js';
import { registerRunRoutes } from './routes/runs.js';
import { registerAdminRoutes } from './routes/admin-routes.js';
import { registerScheduleRoutes } from './routes/schedules.js';
import type { ScheduleService } from '../admin/schedules.js';
import { METRICS_PATH, registerMetricsRoutes } from './routes/metrics.js';
import type { Metrics } from '../base/metrics.js';
import { registerChatRoutes, type ChatEnv } from './chat/routes.js';
import type { WebChat } from '../bridges/web.js';
import type { Hono } from 'hono';
import {
  auditRefusal,
  countUnauthenticated,
  countRefusal,
  apiBodyLimit,
  chatNamingItsUser,
  sessionOfToken,
  asksForBearer,
  rawPathCheck,
} from './request-checks.js';

export interface AppDeps {
  admin: () => AdminService;
  sessionTools: () => SessionTools;
  tokens: SessionTokens;
  operator: () => OperatorService;
  sessions: SessionStore;
  fileTools: FileTools;
  launcher: Launcher;
  token: string;
  logger: Logger;
  startedAt?: number;
  /** The web chat (/chat), when this process runs it (berth serve). */
  webChat?: WebChat;
  /** Where refusals and admin actions are recorded. */
  audit?: AuditTrail;
  /** Served at /metrics. */
  metrics: Metrics;
  /** A second token that may read /metrics only (BERTH_METRICS_TOKEN). */
  metricsToken?: string;
  /** What waits for an answer (the console answers it). */
  approvals?: ConsoleSources['approvals'];
  /** The chat bots' strangers, when this process runs a bridge with pairing (the console approves or turns them away). */
  senders?: ConsoleSources['senders'];
  /** The last hour of this process's metrics (the console's charts; berth serve samples them). */
  history?: MetricsHistory;
  /** The console's live view: containers with their figures, warm and pool counts, bridges' health (berth serve). */
  live?: ConsoleSources['live'];
  /** /hooks/<path>: the chat channels that are sent their messages by HTTP (each checks its own signature or secret). */
  hooks?: (req: Request, path: string, source?: string) => Promise<Response>;
  /** The browser logins of /docs and /console (in memory when not given: they end with the process). */
  consoleLogins?: ConsoleLogins;
  /** Schedules (/api/…/schedules); without it those routes are not served. */
  schedules?: () => ScheduleService;
  /** A person's data: export, forget, frozen (/api/…/tenants/…); without it those routes are not served. */
  tenants?: () => TenantData;
  /** berth.yaml's sign-in provider and public URL, read at each sign-in (api/oidc). */
  oidc?: OidcDeps['settings'];
  /** Decoy credentials: a request carrying one is refused and trips its tenant's wire (decoy-tripwire.ts). */
  honeytokens?: Pick<Honeytokens, 'checkAny'>;
}

type Env = { Variables: { requestId: string; log: Logger } };

/** What the app takes from a composed berth (main.ts builds one; the app never imports it). */
export interface AppSources {
  readonly admin: AdminService;
  readonly sessionTools: SessionTools;
  readonly tokens: SessionTokens;
  readonly operator: OperatorService;
  readonly launcher: Launcher;
  readonly sessions: SessionStore;
  readonly fileTools: FileTools;
  readonly audit?: AuditTrail;
  readonly schedules?: ScheduleService;
  readonly tenants?: TenantData;
  readonly honeytokens?: Pick<Honeytokens, 'checkAny'>;
  readonly metrics: Metrics;
  /** A token that may read /metrics only; whoever builds the sources reads it (BERTH_METRICS_TOKEN). */
  readonly metricsToken?: string;
  /** berth's home: the console's logins are kept in its state, so they outlive a restart. */
  readonly home?: string;
}

/** The app's dependencies, from a composed berth; services stay lazy (made on first use). */
export function appDepsFrom(berth: AppSources, opts: { token: string; logger: Logger; webChat?: WebChat }): AppDeps {
  return {
    admin: () => berth.admin,
    audit: berth.audit,
    sessionTools: () => berth.sessionTools,
    tokens: berth.tokens,
    operator: () => berth.operator,
    sessions: berth.sessions,
    fileTools: berth.fileTools,
    launcher: berth.launcher,
    metrics: berth.metrics,
    metricsToken: berth.metricsToken,
    ...(berth.schedules ? { schedules: () => berth.schedules as ScheduleService } : {}),
    ...(berth.tenants ? { tenants: () => berth.tenants as TenantData } : {}),
    ...(berth.honeytokens ? { honeytokens: berth.honeytokens } : {}),
    consoleLogins: createConsoleLogins(berth.home === undefined ? undefined : join(homePaths(berth.home).stateDir, 'console-logins')),
    ...opts,
  };
}

// /mcp/session authenticates with a session token instead of the admin token.
const OPEN_PATHS = new Set(['/healthz', '/mcp/session']);

/** The whole HTTP surface, without listening: tests call app.request(). */
export function createApp(deps: AppDeps): OpenAPIHono<Env> {
  const startedAt = deps.startedAt ?? Date.now();
  const logins = deps.consoleLogins ?? createConsoleLogins();
  const engineProbe = engineProber(deps.launcher);
  const app = new OpenAPIHono<Env>({
    defaultHook: (result) => {
      if (!result.success) throw validationError(result.error, result.target === 'json' ? 'body' : result.target);
    },
  });

  app.use('*', async (c, next) => {
    const given = c.req.header('x-request-id');
    const requestId = given && /^[\w.-]{1,64}$/.test(given) ? given : randomUUID();
    const log = deps.logger.child({ req: requestId });
    c.set('requestId', requestId);
    c.set('log', log);
    const t0 = performance.now();
    // Whoever holds the admin token is "admin" in the audit log; /mcp/session narrows it to its
    // session, and a chat login names its user once checked (chatNamingItsUser below). /hooks are
    // strangers' requests, checked by their channel's own signature: never the admin.
    const anonymous =
      c.req.path === '/mcp/session' ||
      c.req.path.startsWith('/chat') ||
      c.req.path.startsWith('/hooks/') ||
      c.req.path.startsWith('/oidc/');
    await withActor(anonymous ? 'anonymous' : 'admin', requestId, next);
    // Every 401, however it was answered (an error, the docs' or a chat link's login page), is counted, not written one by one.
    if (c.res.status === 401) countUnauthenticated(deps, surfaceOf(c.req.path), `${c.req.method} ${c.req.path}`);
    c.header('x-request-id', requestId);
    log.info({ method: c.req.method, path: c.req.path, status: c.res.status, ms: Math.round(performance.now() - t0) }, 'request');
  });
  // Paths with dot segments or a stray "%" are refused (not rerouted); a decoy credential in one trips its tenant's wire.
  app.use('*', rawPathCheck, decoyTripwire(deps.honeytokens, 'head'));
  // /docs checks the token itself: a browser signs in with a form, not a header. /chat is the
  // people's side: its own login (a chat link's cookie), never the admin token. /metrics takes
  // the admin token or the metrics token (routes/metrics.ts).
  app.use(
    '*',
    bearerAuth(
      deps.token,
      (path) =>
        OPEN_PATHS.has(path) ||
        isBrowserProbe(path) ||
        path === '/docs' ||
        path === '/docs/login' ||
        path === '/docs/logout' ||
        path === '/console' ||
        path.startsWith('/console/') ||
        path === '/chat' ||
        path.startsWith('/chat/') ||
        path.startsWith('/hooks/') ||
        path.startsWith('/oidc/') ||
        path === METRICS_PATH,
    ),
  );
  app.use('/api/*', apiBodyLimit, decoyTripwire(deps.honeytokens, 'body'));
  // What the route validators would silently drop ("__proto__" keys) or recurse into without end is refused first.
  app.use('/api/*', async (c, next) => {
    if (c.req.method !== 'GET' && /^application\/json\s*(;|$)/i.test(c.req.header('content-type') ?? '')) {
      // An empty body is an empty object: optional bodies may be left out, required ones name their fields.
      if ((await c.req.text()).trim() === '') (c.req.bodyCache as Record<string, unknown>).text = Promise.resolve('{}');
      const body: unknown = await c.req.json().catch(() => undefined);
      assertPlainInput(body, 'body');
    }
    await next();
  });

  app.onError((err, c) => {
    const e = toBerthError(err);
    const log = c.get('log') ?? deps.logger;
    if (e.status >= 500) log.error({ err, code: e.code }, e.message);
    else log.warn({ code: e.code }, e.message);
    auditRefusal(deps.audit, e, `${c.req.method} ${c.req.path}`);
    countRefusal(deps.metrics, e, 'http');
    if (e.details.retry_after !== undefined) c.header('retry-after', String(e.details.retry_after));
    // RFC 6750 §3: a 401 names the scheme it wants (MCP clients look for it), where that is a bearer token.
    if (e.code === 'UNAUTHORIZED' && asksForBearer(c.req.path)) c.header('www-authenticate', 'Bearer realm="berth"');
    // The rest of an over-size body was never read: end the connection rather than misread it as the next request.
    if (e.code === 'PAYLOAD_TOO_LARGE') c.header('connection', 'close');
    return c.json(errorBody(e), e.status as 400);
  });
  app.notFound((c) => {
    const allowed = allowedMethods(c.req.path);
    if (allowed.length > 0) {
      c.header('allow', allowed.join(', '));
      throw new BerthError('METHOD_NOT_ALLOWED', `${c.req.method} is not served at ${c.req.path} (allowed: ${allowed.join(', ')})`);
    }
    throw new BerthError('NOT_FOUND', `no route ${c.req.method} ${c.req.path}`, {
      hint: 'the routes are listed at /docs and /openapi.json',
    });
  });
  // Which methods a path is served with (for 405 and Allow): from the registered routes, once.
  let routeTable: Array<{ method: string; pattern: RegExp }> | undefined;
  const allowedMethods = (path: string) => {
    routeTable ??= app.routes
      .filter((r) => r.path !== '/*' && r.method !== 'ALL')
      .map((r) => ({
        method: r.method,
        pattern: new RegExp(`^${r.path.replace(/[.+?^${}()|[\]\\]/g, '\\$&').replace(/\\\{[^/]+?\\\}|:[^/]+/g, '[^/]+')}$`),
      }));
    return [...new Set(routeTable.filter((r) => r.pattern.test(path)).map((r) => r.method))].sort();
  };

  app.openapi(
    createRoute({
      method: 'get',
      path: '/healthz',
      summary: 'Liveness: engine reachable, version, uptime (no token needed)',
      responses: {
        200: { description: 'healthy', content: { 'application/json': { schema: HealthSchema } } },
        400: errorResponses()[400],
        503: {
          description: 'the engine does not answer, or cannot run anything (engine.reason says why)',
          content: { 'application/json': { schema: HealthSchema } },
        },
      },
    }),
    async (c) => {
      const base = { version: VERSION, uptime_s: Math.round((Date.now() - startedAt) / 1000) };
      const health = await engineProbe();
      if ('version' in health) return c.json({ ok: true, engine: { reachable: true, version: health.version }, ...base }, 200);
      return c.json({ ok: false, engine: { reachable: false, version: null, reason: health.reason }, ...base }, 503);
    },
  );

  // berth's pages have no icon: the browser's own request for one is answered with nothing, not an error.
  app.get('/favicon.ico', (c) => c.body(null, 204));
  const chat = deps.webChat && chatNamingItsUser(deps.webChat);
  const sso = (to: SignInFor) => ssoLinkFor(deps.oidc?.().oidc, to);
  registerRunRoutes(app as unknown as OpenAPIHono, deps.admin, () => chat);
  if (deps.schedules) registerScheduleRoutes(app as unknown as OpenAPIHono, deps.schedules, deps.admin);
  registerOperatorRoutes(app as unknown as OpenAPIHono, deps);
  registerAdminRoutes(app as unknown as OpenAPIHono, deps);
  registerChatRoutes(
    app as unknown as Hono<ChatEnv>,
    () => chat,
    () => sso('chat'),
  );
  registerMetricsRoutes(app as unknown as OpenAPIHono, deps);
  // Signed by their senders, not by berth's token: each channel checks its own.
  app.all('/hooks/*', (c) => {
    if (!deps.hooks) throw new BerthError('NOT_FOUND', 'this berth serves no webhooks (berth.yaml bridges)');
    // The caller's address: unsigned bodies are budgeted per source (channels/hook-admission.ts).
    const source = (c.env as { incoming?: { socket?: { remoteAddress?: string } } } | undefined)?.incoming?.socket?.remoteAddress;
    return deps.hooks(c.req.raw, c.req.path.slice('/hooks/'.length), source);
  });
  const t = deps.tenants ? { tenants: deps.tenants } : {};
  registerConsoleRoutes(app as unknown as Hono, {
    token: deps.token,
    logins,
    sso: () => sso('console'),
    audit: deps.audit,
    sources: { admin: deps.admin, approvals: deps.approvals, senders: deps.senders, history: deps.history, live: deps.live, ...t },
  });

  app.openAPIRegistry.registerComponent('securitySchemes', 'bearerAuth', { type: 'http', scheme: 'bearer' });
  const docConfig = {
    openapi: '3.0.0',
    info: {
      title: 'berth',
      version: VERSION,
      description: 'Admin API of berth, a multi-tenant runner for AI coding agents.',
      license: { name: 'MIT', url: 'https://opensource.org/licenses/MIT' },
    },
    security: [{ bearerAuth: [] }],
  };
  const document = () => finishOpenApiDoc(app.getOpenAPIDocument(docConfig) as never, (path) => OPEN_PATHS.has(path));
  app.get('/openapi.json', (c) => c.json(document()));
  registerSignInRoutes(app as unknown as Hono<LogEnv>, {
    token: deps.token,
    logins,
    settings: () => deps.oidc?.() ?? {},
    admin: deps.admin,
    chatServed: () => deps.webChat !== undefined,
    audit: deps.audit,
    docsHtml: () => renderDocsPage(document() as unknown as Parameters<typeof renderDocsPage>[0]),
  });

  // MCP over Streamable HTTP, stateless: a fresh server and transport per request, bounded (mcp-http.ts).
  const adminGate = createGate(MCP_HTTP_BOUNDS.concurrent);
  const sessionGate = createGate(MCP_HTTP_BOUNDS.concurrent);
  const adminContext = () => ({ admin: deps.admin(), operator: deps.operator() });
  const onToolError = (tool: string, e: BerthError) => {
    // Inside a 200 answer: the status check above does not see it.
    if (e.code === 'UNAUTHORIZED') countUnauthenticated(deps, 'mcp', `tool ${tool}`);
    auditRefusal(deps.audit, e, `tool ${tool}`);
    countRefusal(deps.metrics, e, 'mcp');
  };
  app.all('/mcp', (c) => serveMcp(c, () => createToolServer('berth', ADMIN_TOOLS, adminContext, { onError: onToolError }), adminGate));
  // The agent's own tools: the session is whoever the token says, nothing in the request can change it.
  app.all('/mcp/session', (c) => {
    const match = /^Bearer (.+)$/i.exec(c.req.header('authorization') ?? '');
    if (!match)
      throw new BerthError('UNAUTHORIZED', 'missing session token', { hint: 'mint one: POST /api/projects/:name/sessions/:id/token' });
    const { workspace, ...ref } = sessionOfToken(deps, match[1] as string);
    c.get('log').info({ project: ref.project, session: ref.session }, 'session tool call');
    // The file tools act on the workspace the session's runs mount: its own one in workspace mode "session".
    const files = deps.fileTools.forCaller({
      project: ref.project,
      tenantKey: ref.tenantKey,
      ...(workspace.mode === 'session' ? { session: ref.session, workspaceId: workspace.id } : {}),
    });
    return withActor(`session:${ref.project}/${ref.session}`, c.get('requestId'), () =>
      serveMcp(
        c,
        () =>
          createToolServer('berth-session', SESSION_TOOLS, () => ({ tools: deps.sessionTools(), session: ref, files }), {
            onError: onToolError,
          }),
        sessionGate,
      ),
    );
  });

  return app;
}
