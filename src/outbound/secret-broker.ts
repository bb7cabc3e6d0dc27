import type { IncomingHttpHeaders } from 'node:http';
import net from 'node:net';
import type { BerthConfig } from '../config/berth-config.js';
import { grantCovers, grantsToward, headerValueOf, PLACEHOLDER_PATTERN, secretEntry, type GrantedUse } from '../config/secrets.js';
import { isBerthError } from '../base/errors.js';
import type { AuditEvent } from '../store/audit.js';
import type { SecretValues } from '../store/secret-values.js';
import type { Metrics, SecretUseOutcome } from '../base/metrics.js';
import { printable } from '../base/printable.js';
import { bodyMayOverride, bodyOverrides, OVERRIDE_BODY_LIMIT, overrideHeader, queryOverrides } from './method-override.js';
import type { RunIdentity } from './run-identity.js';
import type { Approvals, Verdict } from './approvals.js';

/**
 * What the egress proxy does with brokered secrets on one request it can read (a TLS
 * connection it terminated, or plain HTTP): the grants of the run's project toward the host
 * that cover the method and path put their value in their header, over HTTPS only; a
 * placeholder the request carries toward anything its secret is not granted for refuses the
 * request (403, audited once per run), so a prompt-injected agent learns nothing it can send
 * elsewhere. Grants are read from berth.yaml on every request: a revoked one holds at once.
 *
 * `needles` are the values whose every form is masked in answers from the host: each secret
 * the project may send there, and for a Basic grant its credential (base64 of user:value, a
 * secret of its own: a host that echoes it without its scheme would hand the value back).
 */
export type Prepared =
  | { ok: true; set: Record<string, string>; needles: string[]; secrets: string[] }
  | {
      ok: false;
      status: 403 | 429 | 502;
      code: 'secret_not_granted' | 'secret_not_allowed' | 'secret_rate_limited' | 'secret_unavailable';
      reason: string;
      secret: string;
    };

export interface RequestView {
  https: boolean;
  host: string;
  port: number;
  method: string;
  /** The path with its query, as sent. */
  target: string;
  headers: IncomingHttpHeaders;
  /** The body's first bytes (up to `limit`), read and kept for the proxy to send on; `complete` when that was all of it. */
  body?: (limit: number) => Promise<{ bytes: Buffer; complete: boolean }>;
}

export interface SecretBroker {
  /** Does this project hold a grant toward host:port (then CONNECTs there are terminated)? */
  terminates(project: string, host: string, port: number): boolean;
  /** The name berth's certificate for host is made for: `*.parent` under a wildcard grant (one for all its names), else host. */
  certificateName(project: string, host: string, port: number): string;
  prepare(run: RunIdentity, req: RequestView): Promise<Prepared>;
  /** A run ended: forget what it was audited for. */
  endRun(runId: string): void;
}

const WINDOW_MS = 60_000;
/** Rate windows kept (secret × tenant); past it the idlest are dropped. */
const MAX_WINDOWS = 10_000;
/** Refusals audited per run: one line per secret and host, at most this many. */
const AUDITS_PER_RUN = 32;

/** Every placeholder a request carries: in any header (Basic credentials decoded) or its target. */
export function placeholdersIn(req: Pick<RequestView, 'target' | 'headers'>): Set<string> {
  const texts = [req.target];
  for (const value of Object.values(req.headers)) {
    for (const v of Array.isArray(value) ? value : value === undefined ? [] : [value]) {
      texts.push(v);
      const basic = /^\s*basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(v);
      if (basic) texts.push(Buffer.from(basic[1] as string, 'base64').toString('latin1'));
    }
  }
  const names = new Set<string>();
  for (const text of texts) for (const m of text.matchAll(PLACEHOLDER_PATTERN)) names.add(m[1] as string);
  return names;
}

/** The values masked for one grant: the secret, and a Basic grant's credential. */
function maskedFor(use: GrantedUse, value: string): string[] {
  return use.grant.basic_user === undefined ? [value] : [value, Buffer.from(`${use.grant.basic_user}:${value}`).toString('base64')];
}

type Refusal = Extract<Prepared, { ok: false }>['code'];
const OUTCOMES: Record<Refusal, SecretUseOutcome> = {
  secret_not_granted: 'not_granted',
  secret_not_allowed: 'not_allowed',
  secret_rate_limited: 'rate_limited',
  secret_unavailable: 'unavailable',
};

/** A grant that asks first (ask: first_use): its person (or the operator) says yes, once for this run or for the conversation. */
async function allowedFirst(
  approvals: Pick<Approvals, 'request'> | undefined,
  run: RunIdentity,
  use: GrantedUse,
  req: RequestView,
): Promise<Verdict> {
  if (use.grant.ask !== 'first_use') return { allowed: true };
  if (!approvals) return { allowed: false, reason: `secret ${use.name} asks before its first use, and this berth cannot ask` };
  return approvals.request(run, `${use.name} for ${req.host}:${req.port}`, 'secret');
}

export function createSecretBroker(deps: {
  config: () => BerthConfig;
  values: SecretValues;
  metrics: Metrics;
  audit?: (event: AuditEvent) => void;
  /** Grants that ask first (ask: first_use): the run's approver is asked, once per conversation when they say so. */
  approvals?: Pick<Approvals, 'request'>;
}): SecretBroker {
  const windows = new Map<string, number[]>();
  const audited = new Map<string, Set<string>>();

  function underRate(use: GrantedUse, tenant: string): boolean {
    const limit = use.grant.per_tenant_per_minute;
    if (limit === undefined) return true;
    const key = `${use.name}\0${tenant}`;
    const now = Date.now();
    const recent = (windows.get(key) ?? []).filter((t) => t > now - WINDOW_MS);
    windows.delete(key);
    if (windows.size >= MAX_WINDOWS) windows.delete(windows.keys().next().value as string);
    const ok = recent.length < limit;
    if (ok) recent.push(now);
    windows.set(key, recent);
    return ok;
  }

  function refuse(run: RunIdentity, req: RequestView, secret: string, code: Refusal, status: 403 | 429 | 502, reason: string): Prepared {
    const known = secretEntry(deps.config().secrets, secret) !== undefined;
    deps.metrics.secretUse({
      secret: known ? secret : '(unknown)',
      outcome: OUTCOMES[code],
    });
    if (code === 'secret_not_granted' && deps.audit) {
      const seen = audited.get(run.runId) ?? new Set<string>();
      const key = `${secret} ${req.host}:${req.port}`;
      if (!seen.has(key) && seen.size < AUDITS_PER_RUN) {
        seen.add(key);
        audited.set(run.runId, seen);
        deps.audit({
          kind: 'permission_denied',
          action: 'secret.use',
          actor: `tenant:${run.tenantKey}`.slice(0, 512),
          project: run.project,
          target: printable(`${secret} → ${req.method} ${req.host}:${req.port}${req.target.split('?')[0]}`).slice(0, 512),
          outcome: 'refused',
          code: 'SECRET_NOT_GRANTED',
        });
      }
    }
    return { ok: false, status, code, reason, secret };
  }

  return {
    terminates(project, host, port) {
      return grantsToward(deps.config().secrets, project, host, port).length > 0;
    },

    certificateName(project, host, port) {
      const name = host.toLowerCase().replace(/\.$/, '');
      const parent = name.slice(name.indexOf('.') + 1);
      // A wildcard certificate covers one label, and clients take none for a top-level "*.tld".
      const shared =
        !net.isIP(name) &&
        name.includes('.') &&
        parent.includes('.') &&
        grantsToward(deps.config().secrets, project, name, port).some((u) => u.grant.host.startsWith('*.'));
      return shared ? `*.${parent}` : host;
    },

    async prepare(run, req) {
      const secrets = deps.config().secrets;
      const path = req.target.split('?')[0] as string;
      const toward = req.https ? grantsToward(secrets, run.project, req.host, req.port) : [];
      // A grant scoped by method or path cannot hold if the request asks to be read as another one.
      const overridden = overrideHeader(req.headers) !== undefined || queryOverrides(req.target);
      let covering = toward.filter(
        (u) =>
          grantCovers(u.grant, req.method, path) && !(overridden && (u.grant.methods !== undefined || u.grant.path_prefix !== undefined)),
      );
      // Nor a grant scoped by method on a POST whose body names another method (or is too long to tell).
      if (covering.some((u) => u.grant.methods !== undefined) && bodyMayOverride(req.method, req.headers)) {
        const body = req.body ? await req.body(OVERRIDE_BODY_LIMIT) : undefined;
        if (!body?.complete || bodyOverrides(body.bytes, req.headers)) covering = covering.filter((u) => u.grant.methods === undefined);
      }
      for (const name of placeholdersIn(req)) {
        if (covering.some((u) => u.name === name)) continue;
        const where = `${req.method} ${req.https ? 'https' : 'http'}://${req.host}:${req.port}${path}`;
        const reason = secretEntry(secrets, name)
          ? `the request carries the placeholder of secret ${name}, which project "${run.project}" is not granted for ${printable(where).slice(0, 300)}${req.https ? '' : ' (secrets go over HTTPS only)'}`
          : `the request carries the placeholder of a secret berth does not keep (${name})`;
        return refuse(run, req, name, 'secret_not_granted', 403, reason);
      }
      const set: Record<string, string> = {};
      const needles: string[] = [];
      const used: string[] = [];
      for (const use of covering) {
        const header = use.grant.header.toLowerCase();
        if (Object.hasOwn(set, header)) continue; // the first grant for a header wins
        const verdict = await allowedFirst(deps.approvals, run, use, req);
        if (!verdict.allowed) return refuse(run, req, use.name, 'secret_not_allowed', 403, verdict.reason);
        if (!underRate(use, run.tenantKey)) {
          return refuse(
            run,
            req,
            use.name,
            'secret_rate_limited',
            429,
            `secret ${use.name} may be used ${use.grant.per_tenant_per_minute} times a minute per person; try again in a minute`,
          );
        }
        const entry = secretEntry(secrets, use.name);
        let value: string;
        try {
          if (!entry) throw new Error('gone');
          value = await deps.values.get(use.name, entry);
        } catch (err) {
          return refuse(
            run,
            req,
            use.name,
            'secret_unavailable',
            502,
            isBerthError(err) ? err.message : `secret ${use.name} cannot be read`,
          );
        }
        set[header] = headerValueOf(use.grant, value);
        needles.push(...maskedFor(use, value));
        used.push(use.name);
        deps.metrics.secretUse({ secret: use.name, outcome: 'injected' });
      }
      // Every answer from this host is masked with every value the project may send it, not only
      // answers to requests that carried one: another request's value must not come back here.
      for (const use of toward) {
        if (used.includes(use.name)) continue;
        const entry = secretEntry(secrets, use.name);
        const value = entry ? await deps.values.get(use.name, entry).catch(() => undefined) : undefined;
        if (value !== undefined) needles.push(...maskedFor(use, value));
      }
      return { ok: true, set, needles: [...new Set(needles)], secrets: used };
    },

    endRun(runId) {
      audited.delete(runId);
    },
  };
}
