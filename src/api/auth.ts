import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import fs from 'node:fs';
import { dirname } from 'node:path';
import type { MiddlewareHandler } from 'hono';
import { BerthError, errnoOf } from '../base/errors.js';

function digest(value: string): Buffer {
  return createHash('sha256').update(value).digest();
}

/** Whether an Authorization header carries the admin token (constant time: digests make the lengths equal too). */
export function isAdminBearer(header: string | undefined, token: string): boolean {
  const match = /^Bearer (.+)$/i.exec(header ?? '');
  return match !== null && timingSafeEqual(digest(match[1] as string), digest(token));
}

/** Compare a token someone typed with the admin token, in constant time. */
export function isAdminToken(given: string, token: string): boolean {
  return timingSafeEqual(digest(given), digest(token));
}

/** The admin token on every route but the open ones. */
export function bearerAuth(token: string, open: (path: string) => boolean): MiddlewareHandler {
  return async (c, next) => {
    if (open(c.req.path)) return next();
    if (!isAdminBearer(c.req.header('authorization'), token)) {
      throw new BerthError('UNAUTHORIZED', 'missing or wrong admin token', { hint: 'send "Authorization: Bearer <token>"' });
    }
    return next();
  };
}

export interface AdminToken {
  token: string;
  source: 'config' | 'env' | 'generated' | 'file';
  file?: string;
}

/**
 * The admin token: berth.yaml, else BERTH_ADMIN_TOKEN, else the one stored in the home, else a
 * new one (0600). Only "generated" is shown to the operator, once.
 */
export function resolveAdminToken(opts: { configToken?: string; envToken?: string; file: string }): AdminToken {
  if (opts.configToken) return { token: opts.configToken, source: 'config' };
  if (opts.envToken) return { token: opts.envToken, source: 'env' };
  try {
    const token = fs.readFileSync(opts.file, 'utf8').trim();
    if (token.length >= 16) return { token, source: 'file', file: opts.file };
  } catch (err) {
    if (errnoOf(err) !== 'ENOENT') throw err;
  }
  fs.mkdirSync(dirname(opts.file), { recursive: true, mode: 0o700 });
  const token = `berth_${randomBytes(24).toString('base64url')}`;
  try {
    fs.writeFileSync(opts.file, `${token}\n`, { mode: 0o600, flag: 'wx' });
  } catch (err) {
    if (errnoOf(err) === 'EEXIST') return resolveAdminToken(opts); // another process won
    throw err;
  }
  return { token, source: 'generated', file: opts.file };
}
