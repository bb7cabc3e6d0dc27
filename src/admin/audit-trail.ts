import { AsyncLocalStorage } from 'node:async_hooks';
import type { Logger } from 'pino';
import { asBerthError } from '../errors.js';
import { appendAudit, readAudit, verifyAudit, type AuditEntry, type AuditEvent, type AuditFilter } from '../store/audit.js';

/**
 * Who is acting, for the audit log: set once per HTTP request (the admin token, a session
 * token, nobody) and read wherever an event is recorded. Outside any request it is the
 * operator at this host's CLI.
 */
const context = new AsyncLocalStorage<{ actor: string; requestId?: string }>();

export function withActor<T>(actor: string, requestId: string | undefined, fn: () => T): T {
  return context.run({ actor, requestId }, fn);
}

export interface AuditTrail {
  record(event: Omit<AuditEvent, 'actor' | 'request_id'> & { actor?: string }): void;
  list(filter: AuditFilter): AuditEntry[];
  verify(): ReturnType<typeof verifyAudit>;
}

export function createAuditTrail(file: string, logger: Logger): AuditTrail {
  return {
    record(event) {
      const ctx = context.getStore();
      try {
        // Names a stranger chose (a URL path) are cut to the schema's bounds, never a reason to write nothing.
        const cut = (v: string | undefined, n: number) => (v === undefined ? undefined : v.slice(0, n));
        appendAudit(file, { ...event, action: event.action.slice(0, 128), target: cut(event.target, 512), project: cut(event.project, 128), actor: (event.actor ?? ctx?.actor ?? 'operator').slice(0, 512), request_id: cut(ctx?.requestId, 128) });
      } catch (err) {
        // The action already happened: say loudly that its audit line is missing.
        logger.error({ err: String(err), action: event.action }, 'could not write the audit log');
      }
    },
    list: (filter) => readAudit(file, filter),
    verify: () => verifyAudit(file),
  };
}

/** How a call's arguments name what it acted on: [project, target]. */
type Describe = (args: unknown[]) => { project?: string; target?: string };
const projectAnd = (i?: number): Describe => (args) => ({ project: typeof args[0] === 'string' ? args[0] : undefined, target: i === undefined ? undefined : String(args[i] ?? '') || undefined });

/**
 * Wrap a service so each listed method leaves one audit line: what, on what, by whom, and how
 * it ended (ok, or refused/error with berth's code). Arguments beyond names (patches, bodies,
 * tokens) are never written.
 */
export function audited<S extends object>(service: S, trail: AuditTrail, actions: Partial<Record<keyof S & string, [action: string, describe: Describe]>>): S {
  const wrapped = { ...service } as Record<string, unknown>;
  for (const [method, spec] of Object.entries(actions) as Array<[string, [string, Describe]]>) {
    const original = (service as Record<string, unknown>)[method];
    if (typeof original !== 'function') continue;
    const [action, describe] = spec;
    wrapped[method] = (...args: unknown[]) => {
      const what = { kind: 'admin' as const, action, ...describe(args) };
      const fail = (err: unknown) => {
        const e = asBerthError(err);
        trail.record({ ...what, outcome: e.status < 500 ? 'refused' : 'error', code: e.code });
        throw err;
      };
      let result: unknown;
      try {
        result = (original as (...a: unknown[]) => unknown).apply(service, args);
      } catch (err) {
        fail(err);
      }
      if (result instanceof Promise) return result.then((r) => (trail.record({ ...what, outcome: 'ok' }), r), fail);
      trail.record({ ...what, outcome: 'ok' });
      return result;
    };
  }
  return wrapped as S;
}

export { projectAnd };
