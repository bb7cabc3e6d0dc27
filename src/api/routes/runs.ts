import { createRoute, type OpenAPIHono } from '@hono/zod-openapi';
import { z } from 'zod';
import { decodeRunFiles, ErrorBodySchema, InterruptedRunSchema, RunRequestSchema, RunViewSchema } from '../../admin/views.js';
import { fileResponse } from '../file-response.js';
import type { Hono } from 'hono';
import { registerChatFileRoutes } from './chat-files.js';
import type { WebChat } from '../../bridges/web.js';
import { RunRecordSchema } from '../../store/run-log.js';
import type { AdminService } from '../../admin/service.js';
import { TenantKeySchema } from '../../store/workspaces.js';
import { json, NameParams } from './openapi.js';

/** The run routes, and (with the web chat) the chat login's way to a run's files (chat-files.ts). */
export function registerRunRoutes(app: OpenAPIHono, admin: () => AdminService, chat?: () => WebChat | undefined): void {
  if (chat) registerChatFileRoutes(app as unknown as Hono, chat, admin);
  app.openapi(
    createRoute({
      method: 'post',
      path: '/api/projects/{name}/runs',
      summary: "Run the project's agent for a tenant",
      description:
        'Creates the tenant workspace on first contact, runs the agent in its own container and returns its output. A run that times out or floods is still a 200: see timed_out and truncated.',
      request: { params: NameParams, body: { ...json(RunRequestSchema, 'who and what'), required: true } },
      responses: {
        200: json(RunViewSchema, 'the run'),
        400: json(ErrorBodySchema, 'CONFIG_INVALID'),
        404: json(ErrorBodySchema, 'PROJECT_NOT_FOUND'),
        424: json(ErrorBodySchema, 'IMAGE_MISSING'),
        503: json(ErrorBodySchema, 'ENGINE_UNAVAILABLE'),
      },
    }),
    async (c) => {
      const { files, ...request } = c.req.valid('json');
      return c.json(await admin().runMessage(c.req.valid('param').name, { ...request, files: decodeRunFiles(files) }), 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/projects/{name}/runs/{run}/files/{file}',
      summary: 'A file a run left in outbox/',
      description:
        "The bytes of a file the agent put in its workspace's outbox/ (or queued with send_file) during the run: a run's answer lists them with this URL. PNG, JPEG, GIF and WebP are served inline; any other type as a download (application/octet-stream). A person's chat login fetches its own runs' files at /chat/api/runs/{run}/files/{file}.",
      request: { params: NameParams.extend({ run: z.string().min(1).max(64), file: z.string().min(1).max(512) }) },
      responses: {
        200: { description: 'the file', content: { 'application/octet-stream': { schema: z.string().describe('Its bytes.') } } },
        404: json(ErrorBodySchema, 'PROJECT_NOT_FOUND, NOT_FOUND'),
      },
    }),
    (c) => {
      const { name, run, file } = c.req.valid('param');
      return fileResponse(admin().runFile(name, run, file)) as never;
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/projects/{name}/runs',
      summary: 'Recent run records, newest first',
      request: {
        params: NameParams,
        query: z.object({
          user: TenantKeySchema.optional().describe('Only this tenant’s runs.'),
          limit: z.coerce.number().int().min(1).max(500).default(50),
        }),
      },
      responses: {
        200: json(
          z.object({
            runs: z.array(RunRecordSchema),
            corrupt_lines: z.number().int().describe('Lines of the log that could not be read (skipped).'),
            interrupted: z
              .array(InterruptedRunSchema)
              .describe('Runs a berth that died left open, closed at the next start (from the run journal).'),
          }),
          'run records',
        ),
        404: json(ErrorBodySchema, 'PROJECT_NOT_FOUND'),
      },
    }),
    (c) => {
      const { user, limit } = c.req.valid('query');
      return c.json(admin().listRuns(c.req.valid('param').name, { user, limit }), 200);
    },
  );
}
