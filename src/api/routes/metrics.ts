import { createRoute, type OpenAPIHono } from '@hono/zod-openapi';
import { z } from 'zod';
import { ErrorBodySchema } from '../../admin/views.js';
import { BerthError } from '../../base/errors.js';
import type { Metrics } from '../../base/metrics.js';
import { isAdminBearer } from '../auth.js';
import { json } from './openapi.js';

export const METRICS_PATH = '/metrics';

/**
 * GET /metrics in Prometheus text format. The app-wide admin check skips this path: a scraper may
 * hold only the metrics token, so this route accepts either token itself (both compared in constant time).
 */
export function registerMetricsRoutes(app: OpenAPIHono, deps: { token: string; metricsToken?: string; metrics: Metrics }): void {
  app.openapi(
    createRoute({
      method: 'get',
      path: METRICS_PATH,
      summary: 'Prometheus metrics (the admin token or the metrics token)',
      description:
        'Runs by project, level, kind and outcome; queue wait, container start and run latency; queue depth, runs in flight, warm containers; sandbox violations, permission denials, gateway calls, auth failures; process metrics. Labels never carry tenant keys, session ids or paths.',
      responses: {
        200: { description: 'Prometheus text exposition format 0.0.4', content: { 'text/plain': { schema: z.string() } } },
        401: json(ErrorBodySchema, 'UNAUTHORIZED: neither the admin token nor the metrics token'),
      },
    }),
    async (c) => {
      const header = c.req.header('authorization');
      const allowed =
        isAdminBearer(header, deps.token) ||
        (deps.metricsToken !== undefined && deps.metricsToken !== '' && isAdminBearer(header, deps.metricsToken));
      if (!allowed)
        throw new BerthError('UNAUTHORIZED', 'missing or wrong admin or metrics token', { hint: 'send "Authorization: Bearer <token>"' });
      const { contentType, body } = await deps.metrics.render();
      return c.text(body, 200, { 'Content-Type': contentType });
    },
  );
}
