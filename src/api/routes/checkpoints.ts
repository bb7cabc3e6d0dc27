import { createRoute, type OpenAPIHono } from '@hono/zod-openapi';
import { z } from 'zod';
import type { AdminService } from '../../admin/service.js';
import { ProjectNameSchema } from '../../config/metadata.js';
import { SessionIdSchema, SessionRecordSchema } from '../../config/session.js';
import { CheckpointIdSchema } from '../../plan/checkpoints.js';
import { ErrorBodySchema } from '../../admin/views.js';
import { errorResponses, json } from './openapi.js';

/** A session's checkpoints (docs/checkpoints.md): keep one now, list, restore, fork. Audited as session.snapshot/restore/fork. */
const SessionParams = z.object({ name: ProjectNameSchema, sessionId: SessionIdSchema });
const CheckpointSchema = z.object({
  id: CheckpointIdSchema,
  session: z.string(),
  created_at: z.string(),
  run: z.string().optional().describe('The run it was kept before.'),
  message: z.string().optional().describe('The first words of that message.'),
  bytes: z
    .number()
    .int()
    .describe(
      'Bytes on disk this checkpoint alone holds (files unchanged since the one before are shared); on Kubernetes its copy, 0 for VolumeSnapshots (the driver keeps them).',
    ),
  files: z.number().int(),
});
const errors = {
  ...errorResponses('SESSION_NOT_FOUND or CHECKPOINT_NOT_FOUND'),
  429: json(ErrorBodySchema, 'BUSY (a run of the workspace is going on) or LIMIT_REACHED (over berth.yaml checkpoints)'),
  501: json(
    ErrorBodySchema,
    'LAUNCHER_UNSUPPORTED: a checkpoint kept under the other launcher (docker/kubernetes), or VolumeSnapshots demanded where the cluster has none',
  ),
};

export function registerCheckpointRoutes(app: OpenAPIHono, admin: () => AdminService): void {
  const base = '/api/projects/{name}/sessions/{sessionId}';
  app.openapi(
    createRoute({
      method: 'get',
      path: `${base}/checkpoints`,
      summary: "A session's checkpoints, oldest first",
      request: { params: SessionParams },
      responses: { 200: json(z.object({ checkpoints: z.array(CheckpointSchema) }), 'oldest first'), ...errors },
    }),
    (c) => {
      const { name, sessionId } = c.req.valid('param');
      return c.json({ checkpoints: admin().sessionCheckpoints(name, sessionId) }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'post',
      path: `${base}/checkpoints`,
      summary: 'Keep a checkpoint of the session now (its workspace and agent home)',
      request: { params: SessionParams },
      responses: { 201: json(z.object({ checkpoint: CheckpointSchema }), 'kept'), ...errors },
    }),
    async (c) => {
      const { name, sessionId } = c.req.valid('param');
      return c.json({ checkpoint: await admin().snapshotSession(name, sessionId) }, 201);
    },
  );

  app.openapi(
    createRoute({
      method: 'post',
      path: `${base}/restore`,
      summary: 'Put the workspace and the conversation back as a checkpoint kept them (/undo)',
      description:
        'Body {"checkpoint": "<id>"} or {} for the newest. That checkpoint and the session\'s newer ones are used up; the session\'s warm container is retired.',
      request: {
        params: SessionParams,
        body: { ...json(z.object({ checkpoint: CheckpointIdSchema.optional() }).strict(), 'which checkpoint'), required: false },
      },
      responses: { 200: json(z.object({ restored: CheckpointSchema }), 'restored'), ...errors },
    }),
    async (c) => {
      const { name, sessionId } = c.req.valid('param');
      return c.json({ restored: await admin().restoreSession(name, sessionId, c.req.valid('json')?.checkpoint) }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'post',
      path: `${base}/fork`,
      summary: "A new session with this one's files (in a workspace of its own) and conversation (/fork)",
      request: {
        params: SessionParams,
        body: { ...json(z.object({ session: SessionIdSchema }).strict(), 'the new session id (must not exist)'), required: true },
      },
      responses: { 201: json(z.object({ session: SessionRecordSchema }), 'the new session'), ...errors },
    }),
    async (c) => {
      const { name, sessionId } = c.req.valid('param');
      return c.json({ session: await admin().forkSession(name, sessionId, c.req.valid('json').session) }, 201);
    },
  );
}
