import { createRoute, type OpenAPIHono } from '@hono/zod-openapi';
import { z } from 'zod';
import type { AdminService } from '../../admin/service.js';
import { ChatUserSchema } from '../../store/chat-links.js';
import { errorResponses, json, NameParams } from './openapi.js';

const ChatLinkRequestSchema = z
  .object({
    user: ChatUserSchema,
    ttl_seconds: z.number().int().min(60).max(90 * 86400).optional().describe('How long the link (and the logins it opens) lasts; default 7 days.'),
  })
  .strict();

const ChatLinkSchema = z.object({
  project: z.string(),
  user: z.string(),
  tenant: z.string().describe('The tenant the person chats as: "web:<user>".'),
  url: z.string().describe('The link to hand to the person (shown once): opening it logs them in to /chat.'),
  expires_at: z.string(),
});

export function registerChatLinkRoutes(app: OpenAPIHono, admin: () => AdminService): void {
  app.openapi(
    createRoute({
      method: 'post',
      path: '/api/projects/{name}/chat-links',
      summary: 'Mint a web chat link for one person',
      description:
        'The link logs its holder in to the web chat (/chat) as tenant "web:<user>" of this project, and nothing else: an HttpOnly cookie, never the admin token. Its token is random (192 bits), stored only as a digest, and expires (default 7 days). Deleting the project revokes it.',
      request: { params: NameParams, body: { ...json(ChatLinkRequestSchema, 'who'), required: true } },
      responses: { 201: json(ChatLinkSchema, 'the link'), ...errorResponses() },
    }),
    (c) => {
      const { user, ttl_seconds } = c.req.valid('json');
      const { path, ...link } = admin().mintChatLink(c.req.valid('param').name, user, ttl_seconds);
      return c.json({ ...link, url: new URL(path, c.req.url).href }, 201);
    },
  );
}
