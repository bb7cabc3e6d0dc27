import type { Context, Hono } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { FILE_BOUNDS } from '../../config/bounds.js';
import type { AdminService } from '../../admin/service.js';
import { BerthError, isBerthError } from '../../base/errors.js';
import { closeQuietly } from '../../fs/fd-path.js';
import type { WebChat } from '../../bridges/web.js';
import { chatCredentialOf, fromOwnOrigin, reachedOverHttps } from '../../bridges/web-cookie.js';
import { tenantOfChatUser } from '../../store/chat-links.js';
import { runFileKeyMatches, type OpenedRunFile } from '../../store/run-files.js';
import { fileResponse } from '../file-response.js';
import { FILE_REQUESTS_IN_FLIGHT, inFlight } from '../in-flight.js';

/**
 * A person's files: uploads with their web chat login (the cookie), and their runs' files with
 * that login or the run's link key, never the admin token.
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

  /**
   * A run's file: with the person's login (their own runs only), or with the run's link key
   * (`?project=&key=`, sent in the chat with the file's link: a person on Signal, Telegram, …
   * has no web chat login). Streamed, holding its in-flight slot until the last byte.
   */
  app.get('/chat/api/runs/:run/files/:file', (c) => {
    const { run, file } = c.req.param();
    const key = c.req.query('key');
    if (key !== undefined) {
      const project = c.req.query('project') ?? '';
      return download(`key\n${project}\n${run}`, () => openFor(project, run, file, (f) => runFileKeyMatches(f, key)));
    }
    const { login } = loggedIn(c);
    return download(keyOf(login), () => openFor(login.project, run, file, (f) => f.tenant_key === tenantOfChatUser(login.user)));
  });

  function download(slot: string, open: () => OpenedRunFile): Response {
    const release = downloads.acquire(slot);
    try {
      return fileResponse(open(), release);
    } catch (err) {
      release();
      throw err;
    }
  }

  /** Another tenant's run, a wrong key, no such file, run or project: all the same 404 (nothing says which exist). */
  function openFor(project: string, run: string, file: string, allowed: (f: OpenedRunFile) => boolean): OpenedRunFile {
    const notFound = () => new BerthError('NOT_FOUND', `no file "${file.slice(0, 200)}" of run ${run.slice(0, 64)} for you`);
    let found: OpenedRunFile;
    try {
      found = admin().runFile(project, run, file);
    } catch (err) {
      if (isBerthError(err, 'NOT_FOUND') || isBerthError(err, 'PROJECT_NOT_FOUND') || isBerthError(err, 'CONFIG_INVALID')) throw notFound();
      throw err;
    }
    if (!allowed(found)) {
      closeQuietly(found.fd);
      throw notFound();
    }
    return found;
  }
}
