import { createRoute, type OpenAPIHono } from '@hono/zod-openapi';
import { z } from 'zod';
import type { AdminService } from '../../admin/service.js';
import { ChatUserSchema, MAX_CHAT_LINK_TTL_SECONDS, MAX_CHAT_LOGINS_PER_USER } from '../../store/chat-links.js';
import { errorResponses, json, NameParams } from './openapi.js';

const ChatLinkRequestSchema = z
  .object({
    user: ChatUserSchema,
    ttl_seconds: z
      .number()
      .int()
      .min(60)
      .max(MAX_CHAT_LINK_TTL_SECONDS)
      .optional()
      .describe(
        "How long the person's access lasts: the login the link opens ends then (default 7 days, at most 30). The link itself works once, within a day (or ttl, when shorter).",
      ),
  })
  .strict();

const ChatLinkSchema = z.object({
  project: z.string(),
  user: z.string(),
  tenant: z.string().describe('The tenant the person chats as: "web:<user>".'),
  url: z.string().describe('The link to hand to the person (shown once): opening it logs them in to /chat, once.'),
  expires_at: z.string().describe('The link works once, until then.'),
  login_expires_at: z.string().describe('The login it opens ends then.'),
});

const AccessEntrySchema = z.object({ user: z.string(), created_at: z.string(), expires_at: z.string() });
const ChatAccessSchema = z.object({
  project: z.string(),
  links: z.array(AccessEntrySchema).describe('Links not used yet.'),
  logins: z.array(AccessEntrySchema).describe('Browsers logged in.'),
});
const UserQuery = z.object({ user: ChatUserSchema.optional() });

export function registerChatLinkRoutes(app: OpenAPIHono, admin: () => AdminService): void {
  app.openapi(
    createRoute({
      method: 'post',
      path: '/api/projects/{name}/chat-links',
      summary: 'Mint a web chat link for one person',
      description:
        'The link logs its holder in to the web chat (/chat) as tenant "web:<user>" of this project, and nothing else: an HttpOnly cookie, never the admin token. Its token is random (192 bits) and stored only as a digest. It works once (the first login uses it up) and within a day; the login lasts ttl_seconds from now (default 7 days). Revoke with DELETE ?user=; deleting the project revokes everything.',
      request: { params: NameParams, body: { ...json(ChatLinkRequestSchema, 'who'), required: true } },
      responses: { 201: json(ChatLinkSchema, 'the link'), ...errorResponses() },
    }),
    (c) => {
      const { user, ttl_seconds } = c.req.valid('json');
      const { path, ...link } = admin().mintChatLink(c.req.valid('param').name, user, ttl_seconds);
      return c.json({ ...link, url: new URL(path, c.req.url).href }, 201);
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/projects/{name}/chat-links',
      summary: "A project's unused chat links and active chat logins",
      description: `Who can get in: links not used yet and browsers logged in (at most ${MAX_CHAT_LOGINS_PER_USER} per person), of one user (?user=) or everyone, oldest first. Never a token.`,
      request: { params: NameParams, query: UserQuery },
      responses: { 200: json(ChatAccessSchema, 'links and logins'), ...errorResponses() },
    }),
    (c) => c.json(admin().listChatAccess(c.req.valid('param').name, c.req.valid('query').user), 200),
  );

  app.openapi(
    createRoute({
      method: 'delete',
      path: '/api/projects/{name}/chat-links',
      operationId: 'revokeChatLogins',
      summary: "Revoke a person's chat links and log them out everywhere",
      description:
        "Removes the user's unused links and every login of theirs in this project: their open chat sockets are closed at once, their open pages are refused from their next request on, and a message of theirs still waiting is not run. Their sessions and files stay.",
      request: { params: NameParams, query: z.object({ user: ChatUserSchema }) },
      responses: {
        200: json(
          z.object({
            project: z.string(),
            user: z.string(),
            tenant: z.string(),
            links_revoked: z.number().int(),
            logins_revoked: z.number().int(),
          }),
          'revoked',
        ),
        ...errorResponses(),
      },
    }),
    (c) => c.json(admin().revokeChatUser(c.req.valid('param').name, c.req.valid('query').user), 200),
  );
}
