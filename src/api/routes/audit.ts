import { createRoute, type OpenAPIHono } from '@hono/zod-openapi';
import { z } from 'zod';
import type { AuditTrail } from '../../admin/audit-trail.js';
import { BerthError } from '../../base/errors.js';
import { AuditEntrySchema, AuditFilterSchema } from '../../store/audit.js';
import { json } from './openapi.js';

export function registerAuditRoutes(app: OpenAPIHono, audit: () => AuditTrail | undefined): void {
  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/audit',
      summary: 'The audit log, newest first, and whether its hash chain is whole',
      description:
        'Admin actions, permission denials, sandbox violations, and per surface and minute a count of unauthenticated requests; never a token or a secret. Reads across the rotated files; the chain is checked up to the head berth records beside the log.',
      request: { query: AuditFilterSchema },
      responses: {
        200: json(
          z.object({
            entries: z.array(AuditEntrySchema),
            chain: z.object({
              ok: z.boolean(),
              lines: z.number().int(),
              files: z.number().int().describe('The current file and the rotated ones still kept.'),
              broken: z
                .object({
                  file: z.string(),
                  line: z
                    .number()
                    .int()
                    .describe('1-based; 0 when the break is at the end of the log (lines cut off it) or in the head record.'),
                  reason: z.string(),
                })
                .optional(),
            }),
          }),
          'events',
        ),
      },
    }),
    (c) => {
      const trail = audit();
      if (!trail) throw new BerthError('NOT_FOUND', 'this server keeps no audit log');
      return c.json({ entries: trail.list(c.req.valid('query')), chain: trail.verify() }, 200);
    },
  );
}
