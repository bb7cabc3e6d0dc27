import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { BerthError, errnoOf } from '../base/errors.js';
import { atomicWriteFile } from '../fs/tree.js';
import { readdirIfExists } from '../fs/dir.js';

/**
 * Per-session tokens for agent loops that run outside containers: unguessable (192 bits),
 * stored only as a SHA-256 digest, expiring, revocable. The token *is* the session — bound to
 * its project, tenant and the session's creation time, so a token never follows a reused
 * session id (a deleted and recreated project, another tenant) to data it was not minted for.
 */
const TokenRecordSchema = z.object({
  project: z.string(),
  session: z.string(),
  tenant_key: z.string(),
  session_created_at: z.string(),
  created_at: z.string(),
  expires_at: z.string(),
});
export type TokenBinding = Pick<z.infer<typeof TokenRecordSchema>, 'project' | 'session' | 'tenant_key' | 'session_created_at'>;

export const DEFAULT_TOKEN_TTL_SECONDS = 3600;

const digest = (token: string) => createHash('sha256').update(token).digest('hex');

export function createSessionTokens(dir: string) {
  const file = (hash: string) => join(dir, `${hash}.json`);

  /** Remove every token whose binding matches; returns how many. */
  function revokeWhere(match: (record: z.infer<typeof TokenRecordSchema>) => boolean): number {
    let revoked = 0;
    for (const name of readdirIfExists(dir).filter((n) => n.endsWith('.json'))) {
      const parsed = (() => {
        try {
          return TokenRecordSchema.safeParse(JSON.parse(fs.readFileSync(join(dir, name), 'utf8')));
        } catch {
          return undefined; // a file being replaced
        }
      })();
      // A record of an older format binds nothing berth can check: it goes too.
      if (!parsed?.success || match(parsed.data)) {
        fs.rmSync(join(dir, name), { force: true });
        if (parsed?.success) revoked++;
      }
    }
    return revoked;
  }

  return {
    mint(binding: TokenBinding, ttlSeconds = DEFAULT_TOKEN_TTL_SECONDS): { token: string; expires_at: string } {
      fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
      const token = `bst_${randomBytes(24).toString('base64url')}`;
      const now = Date.now();
      const record = { ...binding, created_at: new Date(now).toISOString(), expires_at: new Date(now + ttlSeconds * 1000).toISOString() };
      atomicWriteFile(file(digest(token)), JSON.stringify(record), 0o600);
      return { token, expires_at: record.expires_at };
    },

    /** What a token is bound to; UNAUTHORIZED when unknown, expired or revoked. The caller checks the binding still holds. */
    verify(token: string): TokenBinding {
      if (!/^bst_[A-Za-z0-9_-]{32}$/.test(token)) throw new BerthError('UNAUTHORIZED', 'not a session token');
      let record: z.infer<typeof TokenRecordSchema>;
      try {
        const parsed = TokenRecordSchema.safeParse(JSON.parse(fs.readFileSync(file(digest(token)), 'utf8')));
        if (!parsed.success) throw new BerthError('UNAUTHORIZED', 'unknown or revoked session token');
        record = parsed.data;
      } catch (err) {
        if (errnoOf(err) === 'ENOENT') throw new BerthError('UNAUTHORIZED', 'unknown or revoked session token');
        throw err;
      }
      if (Date.parse(record.expires_at) <= Date.now()) {
        fs.rmSync(file(digest(token)), { force: true });
        throw new BerthError('UNAUTHORIZED', 'session token expired', {
          hint: 'mint a new one: POST /api/projects/:name/sessions/:id/token',
        });
      }
      return record;
    },

    /** Revoke every token of one session. */
    revokeSession: (project: string, session: string) => revokeWhere((r) => r.project === project && r.session === session),
    /** Revoke every token of a project (it is being deleted). */
    revokeProject: (project: string) => revokeWhere((r) => r.project === project),
  };
}

export type SessionTokens = ReturnType<typeof createSessionTokens>;
