import type { AdminService } from '../admin/service.js';
import { withActor } from '../admin/audit-trail.js';
import { isBerthError } from '../base/errors.js';

/**
 * Background jobs in a chat: /jobs lists the person's runs going on now, /stop ends one (the
 * admin service's stop path: run-halt.ts, so its answer says it was stopped and arrives as any
 * answer does). Answered at once, never queued behind the run they are about.
 */
export type JobsAdmin = Pick<AdminService, 'openRuns' | 'listSessions' | 'stopRun'>;

/** The words of a /jobs or /stop, or undefined for any other message. */
export function jobsCommandOf(text: string): { command: 'jobs' | 'stop'; arg?: string } | undefined {
  const m = /^\/(jobs|stop)(?:\s+(\S+))?\s*$/.exec(text.trim());
  return m ? { command: m[1] as 'jobs' | 'stop', ...(m[2] ? { arg: m[2] } : {}) } : undefined;
}

function minutesSince(iso: string, now: number): string {
  const min = Math.max(0, Math.round((now - Date.parse(iso)) / 60_000));
  return min < 1 ? 'just started' : `${min} min`;
}

export function answerJobs(
  admin: JobsAdmin,
  ask: { project: string; tenant: string; sender: string; command: 'jobs' | 'stop'; arg?: string; now: number },
): string {
  const mine = new Set(admin.listSessions(ask.project, ask.tenant).map((s) => s.id));
  const running = admin.openRuns(ask.project).filter((r) => r.session !== null && mine.has(r.session));
  if (ask.command === 'jobs') {
    if (!running.length) return 'berth: nothing of yours is running.';
    const lines = running.map(
      (r) => `${r.run} — ${r.phase === 'started' ? 'running' : 'waiting'}, ${minutesSince(r.since, ask.now)} (session ${r.session})`,
    );
    return `berth: running now:\n${lines.join('\n')}\n/stop <run> ends one; its answer comes here when it ends.`;
  }
  const target = ask.arg ?? (running.length === 1 ? running[0]?.run : undefined);
  if (target === undefined)
    return running.length
      ? `berth: which one? ${running.map((r) => r.run).join(', ')} (/stop <run>)`
      : 'berth: nothing of yours is running.';
  if (!running.some((r) => r.run === target))
    return `berth: ${target.slice(0, 40)} is not one of your runs going on now (/jobs lists them).`;
  try {
    admin.stopRun(ask.project, target, `${ask.sender} asked it to stop (/stop)`);
    return `berth: stopping ${target}; its answer follows.`;
  } catch (err) {
    return `berth: ${isBerthError(err) ? err.message : 'it could not be stopped'}.`;
  }
}

/** A chat message's answer when it is /jobs or /stop (as its sender, in the audit log too); undefined for any other. */
export function jobsReply(
  admin: JobsAdmin,
  message: { id: string; text: string; tenant: string; sender: string },
  projectOf: () => string | undefined,
): string | undefined {
  const jobs = jobsCommandOf(message.text);
  if (!jobs) return undefined;
  const project = projectOf();
  if (!project) return 'berth: this bot is not set up to answer here yet.';
  try {
    return withActor(`tenant:${message.sender}`, message.id, () =>
      answerJobs(admin, { project, tenant: message.tenant, sender: message.sender, ...jobs, now: Date.now() }),
    );
  } catch (err) {
    return `berth: ${isBerthError(err) ? err.message : 'that command failed'}`;
  }
}
