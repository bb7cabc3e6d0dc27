import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { parseOrThrow } from '../config/parse.js';
import { BerthError, errnoOf } from '../errors.js';
import { parsesAs } from '../fs/json-file.js';
import { atomicWriteFile } from '../fs/tree.js';

/**
 * Who is who in the web chat. An admin mints a link for (project, user); opening it trades the
 * link's token for a login credential the browser keeps in an HttpOnly cookie. Both are
 * unguessable (192 bits), stored only as a SHA-256 digest, and expire; a login never outlives
 * the link it came from. Deleting a project revokes both.
 */
export const ChatUserSchema = z
  .string()
  .regex(/^[A-Za-z0-9._-]{1,64}$/, 'must be 1-64 characters of A-Z, a-z, 0-9, ".", "_" and "-"')
  .describe('The web chat user; their tenant key is "web:<user>".');

export const DEFAULT_CHAT_LINK_TTL_SECONDS = 7 * 86400;

const BindingSchema = z.object({ project: z.string(), user: ChatUserSchema, created_at: z.string(), expires_at: z.string() }).strict();
type Binding = z.infer<typeof BindingSchema>;
export type ChatLogin = Pick<Binding, 'project' | 'user' | 'expires_at'>;

const KINDS = { link: { prefix: 'bcl_', dir: 'chat-links' }, login: { prefix: 'bcs_', dir: 'chat-logins' } } as const;
type Kind = keyof typeof KINDS;

const digest = (token: string) => createHash('sha256').update(token).digest('hex');
const shapeOf = (kind: Kind) => new RegExp(`^${KINDS[kind].prefix}[A-Za-z0-9_-]{32}$`);

export function tenantOfChatUser(user: string): string {
  return `web:${user}`;
}

export function createChatLinks(stateDir: string) {
  const dirOf = (kind: Kind) => join(stateDir, KINDS[kind].dir);

  function mint(kind: Kind, binding: Omit<Binding, 'created_at'>): string {
    fs.mkdirSync(dirOf(kind), { recursive: true, mode: 0o700 });
    const token = `${KINDS[kind].prefix}${randomBytes(24).toString('base64url')}`;
    const record: Binding = { ...binding, created_at: new Date().toISOString() };
    atomicWriteFile(join(dirOf(kind), `${digest(token)}.json`), JSON.stringify(record), 0o600, parsesAs(BindingSchema));
    return token;
  }

  function verify(kind: Kind, token: string, what: string): ChatLogin {
    const refused = (reason: string) => new BerthError('UNAUTHORIZED', `${what} ${reason}`, { hint: 'ask the admin for a new chat link' });
    if (!shapeOf(kind).test(token)) throw refused('is not valid');
    const file = join(dirOf(kind), `${digest(token)}.json`);
    let record: Binding;
    try {
      const parsed = BindingSchema.safeParse(JSON.parse(fs.readFileSync(file, 'utf8')));
      if (!parsed.success) throw refused('is unknown or revoked');
      record = parsed.data;
    } catch (err) {
      if (errnoOf(err) === 'ENOENT') throw refused('is unknown or revoked');
      throw err;
    }
    if (Date.parse(record.expires_at) <= Date.now()) {
      fs.rmSync(file, { force: true });
      throw refused('has expired');
    }
    return { project: record.project, user: record.user, expires_at: record.expires_at };
  }

  return {
    /** A link's token for (project, user); the caller builds the URL. */
    mintLink(project: string, user: string, ttlSeconds = DEFAULT_CHAT_LINK_TTL_SECONDS): { token: string; expires_at: string } {
      const expires_at = new Date(Date.now() + ttlSeconds * 1000).toISOString();
      return { token: mint('link', { project, user: parseOrThrow(z.object({ user: ChatUserSchema }), { user }, 'chat link').user, expires_at }), expires_at };
    },
    /** Opening a link: a fresh login credential, bound like the link and expiring with it (`check` may refuse first). */
    login(linkToken: string, check?: (link: ChatLogin) => void): ChatLogin & { credential: string } {
      const link = verify('link', linkToken, 'this chat link');
      check?.(link);
      return { ...link, credential: mint('login', link) };
    },
    /** Whom a cookie's credential logs in; UNAUTHORIZED when unknown or expired. */
    verifyLogin: (credential: string) => verify('login', credential, 'your chat login'),
    /** Every link and login of a project (it is being deleted): returns how many. */
    revokeProject(project: string): number {
      let revoked = 0;
      for (const kind of Object.keys(KINDS) as Kind[]) {
        let names: string[];
        try {
          names = fs.readdirSync(dirOf(kind));
        } catch (err) {
          if (errnoOf(err) === 'ENOENT') continue;
          throw err;
        }
        for (const name of names.filter((n) => n.endsWith('.json'))) {
          const file = join(dirOf(kind), name);
          let owner: string | undefined;
          try {
            owner = BindingSchema.safeParse(JSON.parse(fs.readFileSync(file, 'utf8'))).data?.project;
          } catch {
            owner = undefined; // a file being replaced
          }
          if (owner === project) {
            fs.rmSync(file, { force: true });
            revoked++;
          }
        }
      }
      return revoked;
    },
  };
}

export type ChatLinks = ReturnType<typeof createChatLinks>;
