import { createRoute, type OpenAPIHono } from '@hono/zod-openapi';
import { z } from 'zod';
import type { AdminService } from '../../admin/service.js';
import type { AuditTrail } from '../../admin/audit-trail.js';
import { ProjectNameSchema } from '../../config/metadata.js';
import { ModelBudgetSchema } from '../../config/outbound.js';
import { PermissionLevelSchema, SessionIdSchema, SessionRecordSchema, SessionSettingsSchema } from '../../config/session.js';
import type { AuditEntry } from '../../store/audit.js';
import { AuditEntrySchema } from '../../store/audit.js';
import { PAUSE_REASON_MAX } from '../../store/project-pause.js';
import { RunRecordSchema } from '../../store/run-log.js';
import { TranscriptEntrySchema } from '../../store/chat-transcripts.js';
import { TenantKeySchema } from '../../store/workspaces.js';
import { errorResponses, json, NameParams } from './openapi.js';

/**
 * What the operator does from the console, for scripts too (each also a CLI command): pause and
 * resume a project, set a session's level, open a run, a session, a tenant. Stop a run, delete a
 * session and revoke a person's chat logins are their own routes (schedules.ts, sessions.ts,
 * chat-links.ts). Every action goes through the admin service, so it is audited and holds for
 * every launcher.
 */
const RunParams = NameParams.extend({ run: z.string().min(1).max(64) });
const SessionParams = z.object({ name: ProjectNameSchema, sessionId: SessionIdSchema });
/** Audit lines a run view shows at most. */
const RUN_AUDIT_SHOWN = 50;

const PauseViewSchema = z.object({
  project: z.string(),
  paused: z.boolean(),
  since: z.string().optional(),
  by: z.string().optional(),
  reason: z.string().optional(),
});
const LineSchema = z.object({
  run: z.string(),
  finished_at: z.string(),
  session: z.string(),
  session_title: z.string().nullable(),
  tenant: z.string().nullable(),
  channel: z.string().describe('web, telegram, signal, slack, matrix, webhook, … or "api" (a tenant key without a channel).'),
  message: z.string().nullable(),
  permission_level: z.string(),
  runtime: z.string().nullable(),
  start: z.enum(['cold', 'warm', 'pool']).nullable(),
  exit_code: z.number().int(),
  timed_out: z.boolean(),
  ms: z.number(),
  steps: z.number().int(),
  failed_steps: z.number().int(),
});
export const RunDetailSchema = z.object({
  project: z.string(),
  run: z.string(),
  state: z.string().describe('"ended", "going on (<phase>)" or "interrupted".'),
  since: z.string().nullable(),
  interrupted: z.object({ at: z.string(), reason: z.string() }).nullable(),
  tenant: z.string().nullable(),
  channel: z.string(),
  session: z.object({ id: z.string(), title: z.string().nullable(), level: z.string().nullable() }).nullable(),
  start: z.enum(['cold', 'warm', 'pool']).nullable(),
  record: RunRecordSchema.nullable().describe('Its run log line: message, steps, answer, stderr, timings, exit, receipt.'),
  egress: z.array(
    z.object({
      at: z.string(),
      host: z.string(),
      port: z.number(),
      method: z.string(),
      status: z.number(),
      reason: z.string().optional(),
      secret: z.string().optional(),
    }),
  ),
  model_calls: z.object({ count: z.number().int(), input_tokens: z.number().int(), output_tokens: z.number().int() }),
  secrets: z.object({ granted: z.array(z.string()), used: z.array(z.string()).describe('Names only, never a value.') }),
  files_out: z.array(z.object({ name: z.string(), size: z.number(), type: z.string() })),
  audit: z.array(AuditEntrySchema).describe('Audit lines of the run (its receipt, its stop, refusals of its session while it ran).'),
});
export const SessionDetailSchema = z.object({
  project: z.string(),
  session: SessionRecordSchema.extend({ channel: z.string() }),
  runs: z.array(LineSchema.extend({ answer: z.string().nullable(), stderr: z.string().nullable() })),
  transcript: z
    .array(TranscriptEntrySchema.omit({ output: true }))
    .describe('A web chat session: what the person saw (the last 100 entries, each text cut at 8000 characters).'),
});
export const TenantDetailSchema = z.object({
  project: z.string(),
  tenant: z.string(),
  channel: z.string(),
  pause: PauseViewSchema,
  sessions: z.array(
    z.object({ id: z.string(), title: z.string().nullable(), level: z.string(), runs: z.number().int(), updated_at: z.string() }),
  ),
  today: z.object({
    since: z.string(),
    runs: z.number().int(),
    run_ms: z.number(),
    model_requests: z.number().int(),
    tokens: z.number().int(),
    budget: ModelBudgetSchema,
  }),
  schedules: z.array(
    z.object({
      id: z.string(),
      task: z.string(),
      next_at: z.string().nullable(),
      runs: z.number().int(),
      session: z.string().nullable(),
      last_outcome: z.string().nullable(),
    }),
  ),
  recent_runs: z.array(LineSchema),
});

/** The audit lines of one run: its own (receipt, stop), and its session's refusals while it ran. */
export function runAudit(audit: AuditTrail | undefined, d: { project: string; run: string; session?: string; from?: string; to?: string }) {
  if (!audit) return [];
  const actor = d.session ? `session:${d.project}/${d.session}` : undefined;
  const during = (e: AuditEntry) => e.actor === actor && d.from !== undefined && e.at >= d.from && (d.to === undefined || e.at <= d.to);
  return audit
    .list({ project: d.project, limit: 1000, since: d.from })
    .filter((e) => e.target === d.run || during(e))
    .slice(0, RUN_AUDIT_SHOWN);
}

export function registerControlRoutes(app: OpenAPIHono, deps: { admin: () => AdminService; audit?: AuditTrail }): void {
  const { admin } = deps;
  app.openapi(
    createRoute({
      method: 'post',
      path: '/api/projects/{name}/pause',
      operationId: 'pauseProject',
      summary: 'Pause a project: no new run starts until it is resumed',
      description:
        "Every new run is refused with PROJECT_PAUSED (423): a chat message gets words saying the operator paused it, the API and the CLI the code. Runs going on finish (stop them with stopRun). Held in berth's state: every process of the home, every launcher, across restarts.",
      request: {
        params: NameParams,
        body: {
          ...json(z.object({ reason: z.string().max(PAUSE_REASON_MAX).optional() }).strict(), 'why (optional, shown in the refusal)'),
          required: false,
        },
      },
      responses: { 200: json(PauseViewSchema, 'paused'), ...errorResponses() },
    }),
    (c) => {
      const body = c.req.header('content-type')?.includes('json') ? c.req.valid('json') : {};
      return c.json(admin().pauseProject(c.req.valid('param').name, body?.reason), 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'post',
      path: '/api/projects/{name}/resume',
      operationId: 'resumeProject',
      summary: 'Resume a paused project: new runs start again',
      request: { params: NameParams },
      responses: { 200: json(PauseViewSchema.extend({ was_paused: z.boolean() }), 'resumed'), ...errorResponses() },
    }),
    (c) => c.json(admin().resumeProject(c.req.valid('param').name), 200),
  );

  app.openapi(
    createRoute({
      method: 'put',
      path: '/api/projects/{name}/sessions/{sessionId}/level',
      operationId: 'setSessionLevel',
      summary: "Raise or lower a session's permission level (from its next run)",
      request: {
        params: SessionParams,
        body: { ...json(z.object({ level: PermissionLevelSchema }).strict(), 'low, medium or high'), required: true },
      },
      responses: { 200: json(z.object({ settings: SessionSettingsSchema }), 'the new settings'), ...errorResponses('SESSION_NOT_FOUND') },
    }),
    (c) => {
      const { name, sessionId } = c.req.valid('param');
      const settings = admin().updateSession(name, sessionId, { permission_level: c.req.valid('json').level }).settings;
      return c.json({ settings }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'post',
      path: '/api/projects/{name}/sessions/{sessionId}/end',
      operationId: 'endSession',
      summary: 'End a session, keeping it: its runs going on stopped, its warm container let go, its session tokens revoked',
      description: 'Its history, settings and files stay; its next message starts a new container. Delete it (deleteSession) to forget it.',
      request: { params: SessionParams },
      responses: {
        200: json(z.object({ session: z.string(), runs_stopped: z.number().int(), revoked: z.number().int() }), 'ended'),
        ...errorResponses('SESSION_NOT_FOUND'),
      },
    }),
    async (c) => {
      const { name, sessionId } = c.req.valid('param');
      return c.json(await admin().endSession(name, sessionId), 200);
    },
  );
}

/** The views of one run, session or tenant (the console's drill-down, for scripts). */
export function registerViewRoutes(app: OpenAPIHono, deps: { admin: () => AdminService; audit?: AuditTrail }): void {
  const { admin } = deps;
  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/projects/{name}/runs/{run}',
      operationId: 'getRun',
      summary: 'One run: who, what, how, what it touched, its audit lines',
      description:
        'From the run log (message, steps, answer and stderr as kept: bounded), the outbound log (egress hosts asked and answered, model calls), its files out, its receipt and the audit log. A run going on or interrupted answers with what is known so far.',
      request: { params: RunParams },
      responses: { 200: json(RunDetailSchema, 'the run'), ...errorResponses('PROJECT_NOT_FOUND, NOT_FOUND') },
    }),
    (c) => {
      const { name, run } = c.req.valid('param');
      return c.json(runWithAudit(admin(), deps.audit, name, run), 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/projects/{name}/sessions/{sessionId}',
      operationId: 'getSession',
      summary: 'One session: its record and its runs (message, answer, stderr), newest first',
      request: { params: SessionParams },
      responses: { 200: json(SessionDetailSchema, 'the session'), ...errorResponses('SESSION_NOT_FOUND') },
    }),
    (c) => {
      const { name, sessionId } = c.req.valid('param');
      return c.json(admin().sessionDetail(name, sessionId), 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/projects/{name}/tenants/{tenant}',
      operationId: 'getTenant',
      summary: "One tenant: their sessions, today's runs and model use against the budget",
      request: { params: NameParams.extend({ tenant: TenantKeySchema }) },
      responses: { 200: json(TenantDetailSchema, 'the tenant'), ...errorResponses() },
    }),
    (c) => {
      const { name, tenant } = c.req.valid('param');
      return c.json(admin().tenantDetail(name, tenant), 200);
    },
  );
}

/** A run's view with its audit lines (the API's and the console's). */
export function runWithAudit(admin: AdminService, audit: AuditTrail | undefined, project: string, run: string) {
  const d = admin.runDetail(project, run);
  const to = d.record?.finished_at;
  const from = to && d.record ? new Date(Date.parse(to) - d.record.timings_ms.total - 1000).toISOString() : (d.since ?? undefined);
  return { ...d, audit: runAudit(audit, { project, run, session: d.session?.id, from, to }) };
}
