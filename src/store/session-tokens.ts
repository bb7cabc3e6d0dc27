import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { BerthError, errnoOf } from '../errors.js';
import { atomicWriteFile } from '../fs/tree.js';

/**
 * Per-session tokens for agent loops that run outside containers: unguessable (192 bits),
 * stored only as a SHA-256 digest, expiring, revocable. The token *is* the session: tools
 * behind it take no session or level parameter.
 */
const TokenRecordSchema = z.object({ session: z.string(), created_at: z.string(), expires_at: z.string() });

export const DEFAULT_TOKEN_TTL_SECONDS = 3600;

const digest = (token: string) => createHash('sha256').update(token).digest('hex');

export function createSessionTokens(dir: string) {
  const file = (hash: string) => join(dir, `${hash}.json`);
  return {
    mint(session: string, ttlSeconds = DEFAULT_TOKEN_TTL_SECONDS): { token: string; expires_at: string } {
      fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
      const token = `bst_${randomBytes(24).toString('base64url')}`;
      const now = Date.now();
      const record = { session, created_at: new Date(now).toISOString(), expires_at: new Date(now + ttlSeconds * 1000).toISOString() };
      atomicWriteFile(file(digest(token)), JSON.stringify(record), 0o600);
      return { token, expires_at: record.expires_at };
    },

    /** The session a token stands for; UNAUTHORIZED when unknown, expired or revoked. */
    verify(token: string): string {
      if (!/^bst_[A-Za-z0-9_-]{32}$/.test(token)) throw new BerthError('UNAUTHORIZED', 'not a session token');
      let record: z.infer<typeof TokenRecordSchema>;
      try {
        record = TokenRecordSchema.parse(JSON.parse(fs.readFileSync(file(digest(token)), 'utf8')));
      } catch (err) {
        if (errnoOf(err) === 'ENOENT') throw new BerthError('UNAUTHORIZED', 'unknown or revoked session token');
        throw err;
      }
      if (Date.parse(record.expires_at) <= Date.now()) {
        fs.rmSync(file(digest(token)), { force: true });
        throw new BerthError('UNAUTHORIZED', 'session token expired', { hint: 'mint a new one: POST /api/sessions/:id/token' });
      }
      return record.session;
    },

    /** Revoke every token of a session; returns how many. */
    revokeAll(session: string): number {
      let names: string[];
      try {
        names = fs.readdirSync(dir);
      } catch (err) {
        if (errnoOf(err) === 'ENOENT') return 0;
        throw err;
      }
      let revoked = 0;
      for (const name of names.filter((n) => n.endsWith('.json'))) {
        try {
          if (TokenRecordSchema.parse(JSON.parse(fs.readFileSync(join(dir, name), 'utf8'))).session === session) {
            fs.rmSync(join(dir, name), { force: true });
            revoked++;
          }
        } catch {
          // a file being replaced: skip it
        }
      }
      return revoked;
    },
  };
}

export type SessionTokens = ReturnType<typeof createSessionTokens>;
