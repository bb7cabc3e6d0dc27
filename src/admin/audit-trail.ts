import { AsyncLocalStorage } from 'node:async_hooks';
import type { Logger } from 'pino';
import { asBerthError } from '../base/errors.js';
import { createGroupCommit } from '../fs/group-commit.js';
import {
  AUDIT_ROTATION,
  advanceHead,
  advanceHeadAsync,
  appendAudit,
  appendAuditGrouped,
  readAudit,
  verifyAudit,
  type AuditEntry,
  type AuditEvent,
  type AuditFilter,
  type AuditRotation,
  type AuditVerdict,
} from '../store/audit.js';
import type { ChainPoint } from '../store/audit-files.js';
import { createUnauthenticatedSummary } from './unauthenticated-summary.js';

/**
 * Who is acting, for the audit log: set once per HTTP request (the admin token, a session
 * token, nobody) and read wherever an event is recorded. Outside any request it is the
 * operator at this host's CLI.
 */
const context = new AsyncLocalStorage<{ actor: string; requestId?: string }>();

export function withActor<T>(actor: string, requestId: string | undefined, fn: () => T): T {
  return context.run({ actor, requestId }, fn);
}

/**
 * The request's caller turned out to be someone (a chat login checked inside the route): what
 * the rest of this request records names them. Outside a request it changes nothing.
 */
export function identifyActor(actor: string): void {
  const ctx = context.getStore();
  if (ctx) ctx.actor = actor;
}

/** How a tenant acting for themselves (a chat user, a Signal sender) is named in the log. */
export const tenantActor = (tenantKey: string) => `tenant:${tenantKey}`;

export interface AuditTrail {
  record(event: Omit<AuditEvent, 'actor' | 'request_id'> & { actor?: string }): void;
  /**
   * The same, its fsync shared with the lines written meanwhile (a run's receipt, off the event
   * loop): settles once the line is on disk, its head record on a later turn. Never rejects.
   */
  commit(event: Omit<AuditEvent, 'actor' | 'request_id'> & { actor?: string }): Promise<void>;
  /** A request refused for want of a valid login: counted, and written once per surface and minute (unauthenticated-summary.ts). */
  unauthenticated(surface: string, request: string): void;
  /** Write the counted refusals now (shutdown, tests). */
  /** Shutdown: the summary and the head written now, after any head write still in flight. */
  flush(): Promise<void>;
  list(filter: AuditFilter): AuditEntry[];
  verify(): AuditVerdict;
}

export function createAuditTrail(file: string, logger: Logger, opts: { rotation?: AuditRotation; now?: () => number } = {}): AuditTrail {
  const rotation = opts.rotation ?? AUDIT_ROTATION;
  const append = (event: AuditEvent) => {
    try {
      appendAudit(file, event, rotation);
    } catch (err) {
      // The action already happened: say loudly that its audit line is missing.
      logger.error({ err: String(err), action: event.action }, 'could not write the audit log');
    }
  };
  const lines = createGroupCommit();
  // The newest grouped line on disk whose head is not written yet: one head write for a group.
  let pendingHead: ChainPoint | undefined;
  // The head write off the event loop still running: a flush waits for it (its temp file is in the home).
  let headWriting: Promise<void> = Promise.resolve();
  const headFailed = (err: unknown) => logger.error({ err: String(err) }, "could not write the audit log's head record");
  /** Now (shutdown: flush) or off the event loop (after a group's sync). */
  const writeHead = (now = true) => {
    const point = pendingHead;
    pendingHead = undefined;
    if (!point) return;
    try {
      if (now) advanceHead(file, point);
      else headWriting = headWriting.then(() => advanceHeadAsync(file, point)).catch(headFailed);
    } catch (err) {
      headFailed(err);
    }
  };
  const commit = (event: AuditEvent): Promise<void> => {
    let written: ReturnType<typeof appendAuditGrouped>;
    try {
      written = appendAuditGrouped(file, event, lines, rotation);
    } catch (err) {
      logger.error({ err: String(err), action: event.action }, 'could not write the audit log');
      return Promise.resolve();
    }
    const { seq, hash } = written.entry;
    return written.synced.then(
      () => {
        if (!pendingHead) setImmediate(() => writeHead(false));
        if (!pendingHead || seq > pendingHead.seq) pendingHead = { seq, hash };
      },
      (err: unknown) => logger.error({ err: String(err), action: event.action }, 'could not sync the audit log'),
    );
  };
  // A summary belongs to no one request: written outside whichever request ended its window.
  const summary = createUnauthenticatedSummary({ write: (event) => context.exit(() => append(event)), now: opts.now });
  // Names a stranger chose (a URL path) are cut to the schema's bounds, never a reason to write nothing.
  const cut = (v: string | undefined, n: number) => (v === undefined ? undefined : v.slice(0, n));
  const bounded = (event: Omit<AuditEvent, 'actor' | 'request_id'> & { actor?: string }): AuditEvent => {
    const ctx = context.getStore();
    return {
      ...event,
      action: event.action.slice(0, 128),
      target: cut(event.target, 512),
      project: cut(event.project, 128),
      actor: (event.actor ?? ctx?.actor ?? 'operator').slice(0, 512),
      request_id: cut(ctx?.requestId, 128),
    };
  };
  return {
    unauthenticated: (surface, request) => summary.note(surface, request),
    flush: async () => {
      summary.flush();
      for (let writing = headWriting; ; writing = headWriting) {
        await writing;
        if (writing === headWriting) break;
      }
      writeHead();
    },
    record: (event) => append(bounded(event)),
    commit: (event) => commit(bounded(event)),
    list: (filter) => readAudit(file, filter),
    verify: () => verifyAudit(file),
  };
}

/** How a call's arguments name what it acted on: [project, target]. */
type Describe = (args: unknown[]) => { project?: string; target?: string };
const projectAnd =
  (i?: number): Describe =>
  (args) => ({
    project: typeof args[0] === 'string' ? args[0] : undefined,
    target: i === undefined ? undefined : String(args[i] ?? '') || undefined,
  });

/**
 * Wrap a service so each listed method leaves one audit line: what, on what, by whom, and how
 * it ended (ok, or refused/error with berth's code). Arguments beyond names (patches, bodies,
 * tokens) are never written.
 */
export function audited<S extends object>(
  service: S,
  trail: AuditTrail,
  actions: Partial<Record<keyof S & string, [action: string, describe: Describe]>>,
): S {
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
