import { createRoute, type OpenAPIHono } from '@hono/zod-openapi';
import { z } from 'zod';
import type { AdminService } from '../../admin/service.js';
import { ProjectNameSchema } from '../../config/metadata.js';
import { SessionIdSchema, SessionRecordSchema, SessionSettingsSchema, SessionSettingsUpdateSchema } from '../../config/session.js';
import { errorResponses, json } from './openapi.js';
import { registerCheckpointRoutes } from './checkpoints.js';

const SessionParams = z.object({ name: ProjectNameSchema, sessionId: SessionIdSchema });
const errors = errorResponses('SESSION_NOT_FOUND');

export function registerSessionRoutes(app: OpenAPIHono, admin: () => AdminService): void {
  registerCheckpointRoutes(app, admin);
  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/projects/{name}/sessions',
      summary: "A project's sessions",
      request: { params: z.object({ name: ProjectNameSchema }) },
      responses: { 200: json(z.object({ sessions: z.array(SessionRecordSchema) }), 'oldest first'), ...errors },
    }),
    (c) => c.json({ sessions: admin().listSessions(c.req.valid('param').name) }, 200),
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/projects/{name}/sessions/{sessionId}/settings',
      summary: "A session's settings",
      request: { params: SessionParams },
      responses: { 200: json(z.object({ settings: SessionSettingsSchema }), 'permission_level and workspace'), ...errors },
    }),
    (c) => {
      const { name, sessionId } = c.req.valid('param');
      return c.json({ settings: admin().getSession(name, sessionId).settings }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'put',
      path: '/api/projects/{name}/sessions/{sessionId}/settings',
      summary: "Change a session's settings",
      description:
        'Body {"settings": {"permission_level": "low|medium|high", "workspace": {"mode": "tenant|session"}}}; applies from the next run.',
      request: { params: SessionParams, body: { ...json(SessionSettingsUpdateSchema, 'settings to change'), required: true } },
      responses: { 200: json(z.object({ settings: SessionSettingsSchema }), 'the new settings'), ...errors },
    }),
    (c) => {
      const { name, sessionId } = c.req.valid('param');
      return c.json({ settings: admin().updateSession(name, sessionId, c.req.valid('json').settings).settings }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'post',
      path: '/api/projects/{name}/sessions/{sessionId}/token',
      summary: 'Mint a session token for /mcp/session',
      description:
        'Unguessable, stored only as a digest, expires (default 1 h), revocable. The token is the session (bound to its project, tenant and creation; deleting the project revokes it): its tools take no session or level parameter.',
      request: {
        params: SessionParams,
        body: {
          ...json(
            z
              .object({
                ttl_seconds: z
                  .number()
                  .int()
                  .min(60)
                  .max(7 * 86400)
                  .optional(),
              })
              .strict(),
            'optional lifetime',
          ),
          required: false,
        },
      },
      responses: {
        201: json(z.object({ session: z.string(), token: z.string(), expires_at: z.string() }), 'the token (shown once)'),
        ...errors,
      },
    }),
    async (c) => {
      const { name, sessionId } = c.req.valid('param');
      return c.json(admin().mintSessionToken(name, sessionId, c.req.valid('json')?.ttl_seconds), 201);
    },
  );

  app.openapi(
    createRoute({
      method: 'delete',
      path: '/api/projects/{name}/sessions/{sessionId}/token',
      summary: "Revoke all of a session's tokens",
      request: { params: SessionParams },
      responses: { 200: json(z.object({ session: z.string(), revoked: z.number().int() }), 'revoked'), ...errors },
    }),
    (c) => {
      const { name, sessionId } = c.req.valid('param');
      return c.json(admin().revokeSessionTokens(name, sessionId), 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'delete',
      path: '/api/projects/{name}/sessions/{sessionId}',
      operationId: 'deleteSession',
      summary: 'Delete a session: its settings, its agent home (the conversation) and its tokens',
      description: "The tenant's workspace stays. The next message of that tenant starts a new conversation.",
      request: { params: SessionParams },
      responses: {
        200: json(z.object({ session: z.string(), deleted: z.literal(true), revoked: z.number().int() }), 'deleted'),
        ...errors,
      },
    }),
    (c) => {
      const { name, sessionId } = c.req.valid('param');
      return c.json(admin().deleteSession(name, sessionId), 200);
    },
  );
}
