import { createRoute, type OpenAPIHono } from '@hono/zod-openapi';
import { z } from 'zod';
import type { AuditTrail } from '../../admin/audit-trail.js';
import { BerthError } from '../../errors.js';
import { AuditEntrySchema, AuditFilterSchema } from '../../store/audit.js';
import { json } from './openapi.js';

export function registerAuditRoutes(app: OpenAPIHono, audit: () => AuditTrail | undefined): void {
  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/audit',
      summary: 'The audit log, newest first, and whether its hash chain is whole',
      description: 'Admin actions, authentication failures, permission denials and sandbox violations; never a token or a secret.',
      request: { query: AuditFilterSchema },
      responses: {
        200: json(
          z.object({
            entries: z.array(AuditEntrySchema),
            chain: z.object({ ok: z.boolean(), lines: z.number().int(), broken: z.object({ line: z.number().int(), reason: z.string() }).optional() }),
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
