import { createRoute, type OpenAPIHono } from '@hono/zod-openapi';
import { z } from 'zod';
import { ScheduleAddSchema, ScheduleViewSchema, type ScheduleService } from '../../admin/schedules.js';
import type { AdminService } from '../../admin/service.js';
import { ErrorBodySchema } from '../../admin/views.js';
import { TenantKeySchema } from '../../store/workspaces.js';
import { errorResponses, json, NameParams } from './openapi.js';

/** Schedules (docs/schedules.md) and stopping a run (a background job): the schedule service and the admin service's stop path. */
export function registerScheduleRoutes(app: OpenAPIHono, schedules: () => ScheduleService, admin: () => AdminService): void {
  const List = z.object({ schedules: z.array(ScheduleViewSchema) });

  app.openapi(
    createRoute({
      method: 'post',
      path: '/api/projects/{name}/schedules',
      summary: "Schedule the project's agent for a tenant, on a repeat or once",
      description:
        "Each run is an ordinary run of the tenant's session, recorded with the schedule's id; with `chat`, its answer is posted there by the running bridge. Bounded by berth.yaml `schedules` (min_interval_seconds, per_tenant: LIMIT_REACHED).",
      request: { params: NameParams, body: { ...json(ScheduleAddSchema, 'who, when and what'), required: true } },
      responses: {
        201: json(ScheduleViewSchema, 'the schedule, with its next run'),
        ...errorResponses(),
        429: json(ErrorBodySchema, 'LIMIT_REACHED: the tenant has schedules.per_tenant already'),
      },
    }),
    (c) => c.json(schedules().addFor(c.req.valid('param').name, c.req.valid('json')), 201),
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/projects/{name}/schedules',
      summary: "A project's schedules (one tenant's, with user)",
      request: { params: NameParams, query: z.object({ user: TenantKeySchema.optional().describe('Only this tenant’s.') }) },
      responses: { 200: json(List, 'schedules'), ...errorResponses() },
    }),
    (c) => {
      const { name } = c.req.valid('param');
      admin().getProjectMetadata(name); // PROJECT_NOT_FOUND, not an empty list
      const { user } = c.req.valid('query');
      return c.json({ schedules: schedules().list({ project: name, ...(user !== undefined ? { tenant: user } : {}) }) }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/schedules',
      summary: 'Every schedule of this berth',
      responses: { 200: json(List, 'schedules'), 401: json(ErrorBodySchema, 'UNAUTHORIZED') },
    }),
    (c) => c.json({ schedules: schedules().list() }, 200),
  );

  app.openapi(
    createRoute({
      method: 'delete',
      path: '/api/schedules/{id}',
      summary: 'Cancel a schedule (a run of it going on now finishes)',
      request: {
        params: z.object({
          id: z
            .string()
            .regex(/^s[0-9a-f]{8}$/)
            .describe('The schedule id ("s" and 8 hex digits).'),
        }),
      },
      responses: { 200: json(ScheduleViewSchema, 'the schedule as it was'), ...errorResponses('NOT_FOUND') },
    }),
    (c) => c.json(schedules().cancel(c.req.valid('param').id), 200),
  );

  app.openapi(
    createRoute({
      method: 'post',
      path: '/api/projects/{name}/runs/{run}/stop',
      operationId: 'stopRun',
      summary: 'Stop a run going on (its record and its answer say it was stopped)',
      description:
        'At once when this process runs it; a run another process of this home runs (berth bridge, another serve) is asked of it and stops within a second (here: false).',
      request: { params: NameParams.extend({ run: z.string().min(1).max(64) }) },
      responses: {
        200: json(z.object({ run: z.string(), stopped: z.literal(true), here: z.boolean() }), 'stopping'),
        ...errorResponses('NOT_FOUND: no such run going on here'),
      },
    }),
    (c) => {
      const { name, run } = c.req.valid('param');
      return c.json(admin().stopRun(name, run, 'the operator stopped it'), 200);
    },
  );
}
