import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import fs from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { errnoOf } from '../base/errors.js';
import { parsesAs } from '../fs/json-file.js';
import { atomicWriteFile } from '../fs/tree.js';
import { readdirIfExists } from '../fs/dir.js';

/**
 * The operator's browser logins to /console and /docs (a browser cannot send the admin token as
 * a header). Each sign-in gets its own random id (192 bits), kept on disk only as a SHA-256 digest
 * (the file's name), so a copy of berth's state signs nobody in; it ends CONSOLE_LOGIN_SECONDS
 * after the sign-in (absolute, not renewed by use: the console polls every few seconds, so an idle
 * timer would never run out while a tab is open), at sign-out, or when the admin token changes
 * (each record holds an HMAC of its id keyed by the token it was made under). At most
 * MAX_CONSOLE_LOGINS are kept: a new one drops the oldest. Files outlive a restart of berth serve.
 */
export const CONSOLE_LOGIN_SECONDS = 12 * 3600;
export const MAX_CONSOLE_LOGINS = 20;

const LoginRecordSchema = z
  .object({
    created_at: z.string(),
    expires_at: z.string(),
    /** HMAC-SHA256(admin token, id): the login holds only under the token it was made with. */
    token_mac: z.string().regex(/^[0-9a-f]{64}$/),
    /** A provider sign-in's role (plan/oidc-roles.ts); one with the admin token is an operator. */
    role: z.enum(['operator', 'viewer']).default('operator'),
    /** Who signed in with the provider (their verified email or subject), for the console and the audit log. */
    who: z.string().max(300).optional(),
  })
  .strict();
type LoginRecord = z.output<typeof LoginRecordSchema>;
/** Who a live login is: an operator or a viewer, and (a provider sign-in) their name. */
export type ConsoleLogin = Pick<LoginRecord, 'role' | 'who'>;

const ID_SHAPE = /^bcn_[A-Za-z0-9_-]{32}$/;
const digest = (id: string) => createHash('sha256').update(id).digest('hex');
const macOf = (adminToken: string, id: string) => createHmac('sha256', adminToken).update(`berth console login\0${id}`).digest('hex');
const expired = (r: LoginRecord, now: number) => Date.parse(r.expires_at) <= now;

/** Where the records live: a directory in berth's state, or (an app built without a home, in tests) memory. */
interface Shelf {
  read(key: string): LoginRecord | undefined;
  write(key: string, record: LoginRecord): void;
  remove(key: string): void;
  keys(): string[];
}

function dirShelf(dir: string): Shelf {
  const file = (key: string) => join(dir, `${key}.json`);
  return {
    read(key) {
      try {
        return LoginRecordSchema.safeParse(JSON.parse(fs.readFileSync(file(key), 'utf8'))).data;
      } catch (err) {
        if (errnoOf(err) === 'ENOENT' || err instanceof SyntaxError) return undefined; // gone, or being replaced
        throw err;
      }
    },
    write(key, record) {
      fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
      atomicWriteFile(file(key), JSON.stringify(record), 0o600, parsesAs(LoginRecordSchema));
    },
    remove: (key) => fs.rmSync(file(key), { force: true }),
    keys: () => readdirIfExists(dir).flatMap((n) => (/^[0-9a-f]{64}\.json$/.test(n) ? [n.slice(0, -5)] : [])),
  };
}

function memoryShelf(): Shelf {
  const records = new Map<string, LoginRecord>();
  return {
    read: (k) => records.get(k),
    write: (k, r) => void records.set(k, r),
    remove: (k) => void records.delete(k),
    keys: () => [...records.keys()],
  };
}

export function createConsoleLogins(dir?: string) {
  const shelf = dir === undefined ? memoryShelf() : dirShelf(dir);

  return {
    /** A new login under this admin token: its id (the cookie's value) and when it ends. Without `as`: the admin token's own (an operator). */
    open(adminToken: string, as: ConsoleLogin = { role: 'operator' }): { id: string; expires_at: string; max_age_seconds: number } {
      const now = Date.now();
      const live = shelf.keys().flatMap((key) => {
        const record = shelf.read(key);
        if (record && !expired(record, now)) return [{ key, record }];
        shelf.remove(key);
        return [];
      });
      live.sort((a, b) => a.record.created_at.localeCompare(b.record.created_at));
      for (const old of live.slice(0, Math.max(0, live.length - (MAX_CONSOLE_LOGINS - 1)))) shelf.remove(old.key);
      const id = `bcn_${randomBytes(24).toString('base64url')}`;
      const record: LoginRecord = {
        created_at: new Date(now).toISOString(),
        expires_at: new Date(now + CONSOLE_LOGIN_SECONDS * 1000).toISOString(),
        token_mac: macOf(adminToken, id),
        role: as.role,
        ...(as.who === undefined ? {} : { who: as.who.slice(0, 300) }),
      };
      shelf.write(digest(id), record);
      return { id, expires_at: record.expires_at, max_age_seconds: CONSOLE_LOGIN_SECONDS };
    },
    /** Who a live login under this admin token is; undefined for none (an expired one, or one of another token, is removed). */
    verify(id: string, adminToken: string): ConsoleLogin | undefined {
      if (!ID_SHAPE.test(id)) return undefined;
      const key = digest(id);
      const record = shelf.read(key);
      if (!record) return undefined;
      if (expired(record, Date.now()) || !timingSafeEqual(Buffer.from(record.token_mac), Buffer.from(macOf(adminToken, id)))) {
        shelf.remove(key);
        return undefined;
      }
      return { role: record.role, ...(record.who === undefined ? {} : { who: record.who }) };
    },
    /** Sign-out: the login ends now (an unknown id is nothing to end). */
    close(id: string): void {
      if (ID_SHAPE.test(id)) shelf.remove(digest(id));
    },
  };
}

export type ConsoleLogins = ReturnType<typeof createConsoleLogins>;
