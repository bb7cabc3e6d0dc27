import { randomBytes } from 'node:crypto';
import type { AdminService } from '../admin/service.js';
import { BerthError } from '../base/errors.js';
import type { SessionRecord } from '../config/session.js';
import { tenantOfChatUser } from '../store/chat-links.js';

/**
 * How a web chat person starts a session: at most max_sessions_per_user held, at most
 * new_sessions_per_minute started (this process counts them; checked and taken with no await
 * between, so one process decides).
 */
export function createSessionStarter(
  admin: Pick<AdminService, 'listSessions' | 'openSession'>,
  bounds: () => { max_sessions_per_user: number; new_sessions_per_minute: number },
): (login: { project: string; user: string }) => SessionRecord {
  // When each person started their recent sessions (keyed "<project>/<user>").
  const started = new Map<string, number[]>();
  return (login) => {
    const { max_sessions_per_user: cap, new_sessions_per_minute: perMinute } = bounds();
    const tenant = tenantOfChatUser(login.user);
    const held = admin.listSessions(login.project, tenant).length;
    if (held >= cap) throw new BerthError('LIMIT_REACHED', `you have ${held} conversations; delete one to start another`);
    const key = `${login.project}/${login.user}`;
    const now = Date.now();
    const recent = (started.get(key) ?? []).filter((at) => at > now - 60_000);
    if (recent.length >= perMinute) {
      started.set(key, recent);
      const retryAfter = Math.max(1, Math.ceil(((recent[0] as number) + 60_000 - now) / 1000));
      throw new BerthError(
        'LIMIT_REACHED',
        `you started ${recent.length} conversations in the last minute; wait a minute before starting another`,
        { retry_after: retryAfter },
      );
    }
    const session = admin.openSession(login.project, `web-${randomBytes(9).toString('base64url')}`, tenant);
    started.set(key, [...recent, now]);
    for (const [k, times] of started) if (!times.some((at) => at > now - 60_000)) started.delete(k); // bounded by who started one this minute
    return session;
  };
}
