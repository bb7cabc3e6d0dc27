import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { parseOrThrow } from '../config/parse.js';
import { BerthError, errnoOf } from '../base/errors.js';
import { parsesAs } from '../fs/json-file.js';
import { atomicWriteFile } from '../fs/tree.js';
import { readdirIfExists } from '../fs/dir.js';

/**
 * Who is who in the web chat. An admin mints a link for (project, user); the first login through
 * it consumes it and gives the browser a login credential (an HttpOnly cookie). Both are
 * unguessable (192 bits), stored only as a SHA-256 digest, and expire. A link works once and for
 * at most CHAT_LINK_OPEN_SECONDS; the login it opens lasts until the access the admin chose
 * ends. A person holds at most MAX_CHAT_LOGINS_PER_USER logins (the oldest goes). Revoking a
 * user removes their unused links and logs them out everywhere; deleting a project revokes all.
 */
export const ChatUserSchema = z
  .string()
  .regex(
    /^(?:[A-Za-z0-9._-]{1,64}|oidc:(?:[A-Za-z0-9._@-]{1,64}|sha256\.[A-Za-z0-9_-]{32}))$/,
    'must be 1-64 characters of A-Z, a-z, 0-9, ".", "_" and "-" (or a signed-in "oidc:<subject>")',
  )
  .describe('The web chat user; their tenant key is "web:<user>" ("oidc:<subject>" for one signed in with the provider).');

/** How long a person's access lasts by default (the login ends then): a week. */
export const DEFAULT_CHAT_LINK_TTL_SECONDS = 7 * 86400;
/** The longest access an admin may give in one link: a month. */
export const MAX_CHAT_LINK_TTL_SECONDS = 30 * 86400;
/** An unused link works for a day at most: it sits in chat histories and mailboxes, so its window is short. */
export const CHAT_LINK_OPEN_SECONDS = 86400;
/** Logins per person and project (laptop, phone, a few more): a new one drops the oldest. */
export const MAX_CHAT_LOGINS_PER_USER = 5;

const BindingSchema = z
  .object({
    project: z.string(),
    user: ChatUserSchema,
    created_at: z.string(),
    expires_at: z.string(),
    login_expires_at: z.string().optional().describe('A link: when the login it opens ends (older links: their own expiry).'),
  })
  .strict();
type Binding = z.infer<typeof BindingSchema>;
export type ChatLogin = Pick<Binding, 'project' | 'user' | 'expires_at'>;
/** A link or login as an admin sees it: never its token. */
export type ChatAccessEntry = Pick<Binding, 'user' | 'created_at' | 'expires_at'>;

const KINDS = { link: { prefix: 'bcl_', dir: 'chat-links' }, login: { prefix: 'bcs_', dir: 'chat-logins' } } as const;
type Kind = keyof typeof KINDS;

const digest = (token: string) => createHash('sha256').update(token).digest('hex');
const shapeOf = (kind: Kind) => new RegExp(`^${KINDS[kind].prefix}[A-Za-z0-9_-]{32}$`);
const expired = (record: Binding, now = Date.now()) => Date.parse(record.expires_at) <= now;

/** A chat user name from outside (an admin's request): CONFIG_INVALID naming the field "user". */
export function checkChatUser(user: string): string {
  return parseOrThrow(z.object({ user: ChatUserSchema }), { user }, 'chat user').user;
}

/** A chat link's user is "web:<user>"; a person signed in with the provider (plan/oidc-roles.ts) is their own "oidc:<subject>". */
export function tenantOfChatUser(user: string): string {
  return user.startsWith('oidc:') ? user : `web:${user}`;
}

export function createChatLinks(stateDir: string) {
  const dirOf = (kind: Kind) => join(stateDir, KINDS[kind].dir);
  const fileOf = (kind: Kind, token: string) => join(dirOf(kind), `${digest(token)}.json`);
  const refused = (what: string, reason: string) =>
    new BerthError('UNAUTHORIZED', `${what} ${reason}`, { hint: 'ask the admin for a new chat link' });

  function mint(kind: Kind, binding: Omit<Binding, 'created_at'>): string {
    fs.mkdirSync(dirOf(kind), { recursive: true, mode: 0o700 });
    const token = `${KINDS[kind].prefix}${randomBytes(24).toString('base64url')}`;
    const record: Binding = { ...binding, created_at: new Date().toISOString() };
    atomicWriteFile(fileOf(kind, token), JSON.stringify(record), 0o600, parsesAs(BindingSchema));
    return token;
  }

  function readRecord(file: string): Binding | undefined {
    try {
      return BindingSchema.safeParse(JSON.parse(fs.readFileSync(file, 'utf8'))).data;
    } catch (err) {
      if (errnoOf(err) === 'ENOENT' || err instanceof SyntaxError) return undefined; // gone, or being replaced
      throw err;
    }
  }

  function verify(kind: Kind, token: string, what: string): { record: Binding; file: string } {
    if (!shapeOf(kind).test(token)) throw refused(what, 'is not valid');
    const file = fileOf(kind, token);
    const record = readRecord(file);
    if (!record) throw refused(what, 'is unknown, used or revoked');
    if (expired(record)) {
      fs.rmSync(file, { force: true });
      throw refused(what, 'has expired');
    }
    return { record, file };
  }

  /** Every stored link or login (expired ones are removed on the way). */
  function all(kind: Kind): Array<{ file: string; record: Binding }> {
    const now = Date.now();
    return readdirIfExists(dirOf(kind))
      .filter((n) => n.endsWith('.json'))
      .flatMap((name) => {
        const file = join(dirOf(kind), name);
        const record = readRecord(file);
        if (!record) return [];
        if (expired(record, now)) {
          fs.rmSync(file, { force: true });
          return [];
        }
        return [{ file, record }];
      });
  }

  const ofUser = (kind: Kind, project: string, user?: string) =>
    all(kind)
      .filter(({ record }) => record.project === project && (user === undefined || record.user === user))
      .sort((a, b) => a.record.created_at.localeCompare(b.record.created_at));

  const entryOf = ({ record }: { record: Binding }): ChatAccessEntry => ({
    user: record.user,
    created_at: record.created_at,
    expires_at: record.expires_at,
  });

  function remove(kinds: Kind[], keep: (record: Binding) => boolean): number {
    let removed = 0;
    for (const kind of kinds) {
      for (const { file, record } of all(kind)) {
        if (keep(record)) continue;
        fs.rmSync(file, { force: true });
        removed++;
      }
    }
    return removed;
  }

  return {
    /** A link's token for (project, user); the caller builds the URL. It works once, within a day (or ttl, when shorter). */
    mintLink(
      project: string,
      user: string,
      ttlSeconds = DEFAULT_CHAT_LINK_TTL_SECONDS,
    ): { token: string; expires_at: string; login_expires_at: string } {
      const now = Date.now();
      const login_expires_at = new Date(now + ttlSeconds * 1000).toISOString();
      const expires_at = new Date(now + Math.min(ttlSeconds, CHAT_LINK_OPEN_SECONDS) * 1000).toISOString();
      return { token: mint('link', { project, user: checkChatUser(user), expires_at, login_expires_at }), expires_at, login_expires_at };
    },
    /** Whom a link would log in, without using it (the page that asks "log in as …?"). */
    peekLink(linkToken: string): ChatLogin {
      const { record } = verify('link', linkToken, 'this chat link');
      return { project: record.project, user: record.user, expires_at: record.expires_at };
    },
    /**
     * Opening a link (`check` may refuse first): the link is used up, and a fresh login credential
     * comes back. Whoever removes the link's file first gets the login; a second opener, even at
     * the same moment, gets UNAUTHORIZED and nothing is minted.
     */
    login(linkToken: string, check?: (link: ChatLogin) => void): ChatLogin & { credential: string } {
      const { record, file } = verify('link', linkToken, 'this chat link');
      const login = { project: record.project, user: record.user, expires_at: record.login_expires_at ?? record.expires_at };
      check?.(login);
      try {
        fs.unlinkSync(file);
      } catch (err) {
        if (errnoOf(err) === 'ENOENT') throw refused('this chat link', 'is unknown, used or revoked');
        throw err;
      }
      const credential = mint('login', login);
      for (const old of ofUser('login', login.project, login.user).slice(0, -MAX_CHAT_LOGINS_PER_USER))
        fs.rmSync(old.file, { force: true });
      return { ...login, credential };
    },
    /** Whom a cookie's credential logs in; UNAUTHORIZED when unknown, revoked or expired. */
    verifyLogin(credential: string): ChatLogin {
      const { record } = verify('login', credential, 'your chat login');
      return { project: record.project, user: record.user, expires_at: record.expires_at };
    },
    /** A project's unused links and active logins (of one user, or all), oldest first: never a token. */
    listActive(project: string, user?: string): { links: ChatAccessEntry[]; logins: ChatAccessEntry[] } {
      return { links: ofUser('link', project, user).map(entryOf), logins: ofUser('login', project, user).map(entryOf) };
    },
    /** A person's unused links and every login (logged out everywhere): how many of each went. */
    revokeUser(project: string, user: string): { links: number; logins: number } {
      const theirs = (r: Binding) => r.project === project && r.user === user;
      return { links: remove(['link'], (r) => !theirs(r)), logins: remove(['login'], (r) => !theirs(r)) };
    },
    /** Every link and login of a project (it is being deleted): returns how many. */
    revokeProject: (project: string): number => remove(['link', 'login'], (r) => r.project !== project),
  };
}

export type ChatLinks = ReturnType<typeof createChatLinks>;
