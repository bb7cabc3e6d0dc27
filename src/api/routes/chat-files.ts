import type { Context, Hono } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { FILE_BOUNDS } from '../../config/bounds.js';
import type { AdminService } from '../../admin/service.js';
import { BerthError } from '../../base/errors.js';
import type { WebChat } from '../../bridges/web.js';
import { chatCredentialOf, fromOwnOrigin, reachedOverHttps } from '../../bridges/web-cookie.js';
import { tenantOfChatUser } from '../../store/chat-links.js';
import { fileResponse } from '../file-response.js';
import { FILE_REQUESTS_IN_FLIGHT, inFlight } from '../in-flight.js';

/**
 * A run's file for a person, with their web chat login (the cookie), never the admin token: only
 * the files of their own runs in their login's project. Another tenant's run, a run with no such
 * file and no such run all answer the same 404 (nothing says which runs exist).
 */
export function registerChatFileRoutes(app: Hono, chat: () => WebChat | undefined, admin: () => AdminService): void {
  const uploads = inFlight(FILE_REQUESTS_IN_FLIGHT, 'uploads');
  const downloads = inFlight(FILE_REQUESTS_IN_FLIGHT, 'downloads');
  const keyOf = (login: { project: string; user: string }) => `${login.project}\n${login.user}`;
  const loggedIn = (c: Context) => {
    const web = chat();
    if (!web) throw new BerthError('NOT_FOUND', 'the web chat is not running in this process', { hint: 'it is served by "berth serve"' });
    const https = reachedOverHttps({ tls: new URL(c.req.url).protocol === 'https:', forwardedProto: c.req.header('x-forwarded-proto') });
    const credential = chatCredentialOf(c.req.header('cookie'), https);
    if (!credential) throw new BerthError('UNAUTHORIZED', 'not logged in to the chat', { hint: 'open your chat link' });
    return { web, login: web.loginOf(credential) };
  };

  /**
   * An upload for the person's next message: the file's bytes as the body, its name in ?name=, its
   * type as content-type. From the chat page's own origin only (as every chat write), bounded by
   * FILE_BOUNDS here and the project's max_file_mb in the chat.
   */
  app.post(
    '/chat/uploads',
    bodyLimit({
      maxSize: FILE_BOUNDS.maxFileMb * 1024 * 1024,
      onError: () => {
        throw new BerthError('PAYLOAD_TOO_LARGE', `a file is at most ${FILE_BOUNDS.maxFileMb} MiB`);
      },
    }),
    async (c) => {
      if (!fromOwnOrigin({ origin: c.req.header('origin'), host: c.req.header('host'), fetchSite: c.req.header('sec-fetch-site') })) {
        throw new BerthError('PERMISSION_DENIED', 'the chat takes changes from its own page only', {
          rule: 'same_origin',
          hint: 'open the chat at its own address',
        });
      }
      const { web, login } = loggedIn(c);
      const name = c.req.query('name') ?? '';
      if (name.length > 1024)
        throw new BerthError('CONFIG_INVALID', 'the file name is too long', {
          issues: [{ field: 'name', reason: 'at most 1024 characters' }],
        });
      // The project's own limit before a byte is read (the route's bound is berth's ceiling).
      const maxBytes = admin().getProjectMetadata(login.project).files.max_file_mb * 1024 * 1024;
      const declared = Number(c.req.header('content-length') ?? NaN);
      if (declared > maxBytes) throw new BerthError('PAYLOAD_TOO_LARGE', `a file is at most ${maxBytes / 1048576} MB here`);
      return uploads(keyOf(login), async () => {
        const data = new Uint8Array(await c.req.arrayBuffer());
        c.header('cache-control', 'no-store');
        return c.json({ upload: web.upload(login, name, c.req.header('content-type'), data) }, 201);
      });
    },
  );

  app.get('/chat/api/runs/:run/files/:file', async (c) => {
    const { login } = loggedIn(c);
    return downloads(keyOf(login), () => chatFile(login, c.req.param()));
  });

  function chatFile(login: { project: string; user: string }, { run, file }: { run: string; file: string }): Response {
    const notFound = () => new BerthError('NOT_FOUND', `no file "${file.slice(0, 200)}" of run ${run.slice(0, 64)} for you`);
    let found;
    try {
      found = admin().runFile(login.project, run, file);
    } catch (err) {
      if (err instanceof BerthError && err.code === 'NOT_FOUND') throw notFound();
      throw err;
    }
    if (found.tenant_key !== tenantOfChatUser(login.user)) throw notFound();
    return fileResponse(found);
  }
}
