import { createRoute, type OpenAPIHono } from '@hono/zod-openapi';
import { z } from 'zod';
import type { AuditTrail } from '../../admin/audit-trail.js';
import { BerthError } from '../../base/errors.js';
import { channelOfSender } from '../../channels/registry.js';
import { parseOrThrow } from '../../config/parse.js';
import type { ConsoleSenders } from '../console/state.js';
import { errorResponses, json } from './openapi.js';

/**
 * The chat bots' strangers (a channel with pairing: Signal, Telegram, …): who waits, with their
 * kept first message, and the operator's answer. The console and these routes answer through
 * answerStranger, so both are audited the same (bridge.approve / bridge.deny).
 */
export const SenderKeySchema = z
  .string()
  .max(300)
  .refine((s) => channelOfSender(s)?.pairing === true, 'must be a sender key, e.g. signal:<uuid> or telegram:<id>');

const StrangerSchema = z.object({
  sender: z.string(),
  name: z.string().optional(),
  first_seen: z.string(),
  first_message: z.string().optional().describe('The first message they sent, kept unrun until an answer (500 characters at most).'),
});

export async function answerStranger(
  senders: ConsoleSenders | undefined,
  audit: AuditTrail | undefined,
  given: string,
  decision: 'approve' | 'deny',
  actor = 'operator',
): Promise<{ sender: string; decision: 'approve' | 'deny' }> {
  const { sender } = parseOrThrow(z.object({ sender: SenderKeySchema }), { sender: given }, 'sender');
  if (!senders) throw new BerthError('NOT_FOUND', 'no chat bridge with pairing is configured (berth.yaml bridges)');
  if (!senders.pending().some((p) => p.sender === sender)) throw new BerthError('NOT_FOUND', `${sender} is not waiting for approval`);
  if (decision === 'approve') await senders.approve(sender);
  else senders.deny(sender);
  audit?.record({ kind: 'admin', action: decision === 'approve' ? 'bridge.approve' : 'bridge.deny', actor, target: sender, outcome: 'ok' });
  return { sender, decision };
}

export function registerStrangerRoutes(app: OpenAPIHono, deps: { senders?: () => ConsoleSenders | undefined; audit?: AuditTrail }): void {
  const errors = errorResponses('NOT_FOUND: not waiting, or no chat bridge with pairing here');
  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/strangers',
      operationId: 'listStrangers',
      summary: 'Senders of the chat bots waiting for approval, with their first message',
      responses: { 200: json(z.object({ strangers: z.array(StrangerSchema) }), 'oldest first'), 401: errors[401] },
    }),
    (c) => c.json({ strangers: deps.senders?.()?.pending() ?? [] }, 200),
  );
  for (const decision of ['approve', 'deny'] as const) {
    app.openapi(
      createRoute({
        method: 'post',
        path: `/api/strangers/{sender}/${decision}`,
        operationId: decision === 'approve' ? 'approveStranger' : 'denyStranger',
        summary:
          decision === 'approve'
            ? 'Approve a stranger: they may talk, are told so, and their kept first message is answered'
            : 'Turn a stranger away: never asked about again, their kept first message dropped unrun',
        request: { params: z.object({ sender: z.string().max(300) }) },
        responses: { 200: json(z.object({ sender: z.string(), decision: z.enum(['approve', 'deny']) }), 'answered'), ...errors },
      }),
      async (c) => c.json(await answerStranger(deps.senders?.(), deps.audit, c.req.valid('param').sender, decision), 200),
    );
  }
}
