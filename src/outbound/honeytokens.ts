import type { Logger } from 'pino';
import { BerthError } from '../base/errors.js';
import type { BerthConfig } from '../config/berth-config.js';
import type { Metrics } from '../base/metrics.js';
import { decoyNeedles, decoysOf } from '../plan/honeytokens.js';
import type { FrozenTenants } from '../store/frozen-tenants.js';
import type { AuditEvent } from '../store/audit.js';
import { formsOf } from './secret-forms.js';
import type { Alert } from './alert-webhook.js';

/** What the person reads when their run is stopped for it. */
export const DECOY_STOP = "something in your agent's container used a credential it should not have; the operator has been told.";

/** A request that names no tenant (berth's own API) is looked at for every tenant with decoys: at most this many (the rest are not looked for), the list made again after INDEX_MS. */
export const WIRE_INDEX = { tenants: 5_000, ms: 30_000, bytes: 4 * 1024 * 1024 } as const;

/** Who a request is from, as a run's socket knows it. */
export interface WireCaller {
  project: string;
  tenantKey: string;
  runId?: string;
}

/** The decoy owner a text names: its letter-and-digit runs looked up whole, then the same inside each base64-looking run, decoded. */
function ownerIn(owners: Map<string, WireCaller>, text: string, depth = 0): WireCaller | undefined {
  for (const m of text.matchAll(/[A-Za-z0-9]{20,40}(?![A-Za-z0-9])/g)) {
    const hit = owners.get(m[0]) ?? owners.get(m[0].slice(-20));
    if (hit) return hit;
  }
  if (depth > 0) return undefined;
  for (const m of text.matchAll(/[A-Za-z0-9+/_-]{28,}={0,2}/g)) {
    const hit = ownerIn(owners, Buffer.from(m[0], m[0].includes('-') || m[0].includes('_') ? 'base64url' : 'base64').toString('latin1'), 1);
    if (hit) return hit;
  }
  return undefined;
}

/**
 * The tripwire: a project's tenants carry decoy credentials (plan/honeytokens.ts) when berth.yaml
 * says `projects.<p>.honeytokens: true`; any of them seen where berth looks (a model call's body,
 * a request through the egress proxy: its line, headers and the body berth reads) in any of the
 * forms secrets are looked for in (itself, hex, base64, escaped: secret-forms.ts) freezes that
 * tenant's runs, stops the run that sent it, and tells the operator: an error log line, the
 * metric berth_honeytoken_hits_total, an audit line (sandbox_violation, honeytoken.hit) and, when
 * berth.yaml names one, the alert webhook. Also watched: berth's own API (api/decoy-tripwire.ts,
 * whose requests name no tenant: checkAny) and files sent out of a chat (runs/run-files.ts).
 */
export function createHoneytokens(deps: {
  config: () => BerthConfig;
  secret: () => Buffer;
  frozen: FrozenTenants;
  logger: Logger;
  metrics?: Metrics;
  audit?: (event: Omit<AuditEvent, 'actor' | 'request_id'> & { actor?: string }) => void;
  /** The operator's alert webhook (berth.yaml alerts.webhook): told of each first hit, never waited for. */
  alert?: (alert: Alert) => void;
  /** The tenants of a project (those with a session): whose decoys a request naming no tenant is looked at for. */
  tenantsOf?: (project: string) => string[];
  now?: () => number;
}) {
  const enabled = (project: string) =>
    Object.hasOwn(deps.config().projects, project) && deps.config().projects[project]?.honeytokens === true;
  const needlesOf = (c: WireCaller) => decoyNeedles(decoysOf(deps.secret(), c.project, c.tenantKey));
  const now = deps.now ?? Date.now;
  let index: { at: number; owners: Map<string, WireCaller> } | undefined;
  /** Every AWS decoy of every tenant with decoys, by value (made again after WIRE_INDEX.ms: a new tenant's are looked for then). */
  const indexNow = () => {
    if (index && now() - index.at < WIRE_INDEX.ms) return index;
    const owners = new Map<string, WireCaller>();
    const callers = Object.keys(deps.config().projects)
      .filter(enabled)
      .flatMap((project) => [...new Set(deps.tenantsOf?.(project) ?? [])].map((tenantKey) => ({ project, tenantKey })))
      .slice(0, WIRE_INDEX.tenants);
    for (const c of callers) {
      const d = decoysOf(deps.secret(), c.project, c.tenantKey);
      owners.set(d.awsAccessKeyId, c);
      owners.set(d.awsSecretAccessKey, c);
    }
    index = { at: now(), owners };
    return index;
  };
  return {
    /** The decoys this tenant's containers carry; undefined when the project has none. */
    decoysFor: (project: string, tenant: string) => (enabled(project) ? decoysOf(deps.secret(), project, tenant) : undefined),
    enabled,
    /** Does this text carry one of the caller's decoys? Then the wire trips (once per caller, however many requests follow). */
    check(caller: WireCaller, where: string, ...texts: Array<string | Uint8Array | undefined>): boolean {
      if (!enabled(caller.project)) return false;
      const forms = formsOf(needlesOf(caller));
      const hit = texts.some((t) => {
        if (t === undefined) return false;
        const buf = typeof t === 'string' ? Buffer.from(t) : t;
        return forms.find(buf, 0, buf.length).length > 0;
      });
      if (hit) this.trip(caller, where);
      return hit;
    },
    /**
     * A request that names no tenant (berth's own API: a bearer token, a body): whose decoy does it
     * carry? Its AWS decoys, as written or inside base64, looked up by value in one pass (the
     * forms matcher of `check` is per tenant: thousands of tenants' values in it cost seconds per
     * MiB); the first WIRE_INDEX.bytes of each text. The owner's wire trips. Undefined when none.
     */
    checkAny(where: string, ...texts: Array<string | Uint8Array | undefined>): WireCaller | undefined {
      if (!Object.keys(deps.config().projects).some(enabled)) return undefined;
      const { owners } = indexNow();
      if (!owners.size) return undefined;
      for (const t of texts) {
        if (t === undefined) continue;
        const text = typeof t === 'string' ? t : Buffer.from(t.buffer, t.byteOffset, t.byteLength).toString('latin1');
        const owner = ownerIn(owners, text.slice(0, WIRE_INDEX.bytes));
        if (owner) {
          this.trip(owner, where);
          return owner;
        }
      }
      return undefined;
    },
    trip(caller: WireCaller, where: string): void {
      const already = deps.frozen.frozen(caller.project, caller.tenantKey);
      deps.frozen.freeze({ project: caller.project, tenant: caller.tenantKey, where, ...(caller.runId ? { run: caller.runId } : {}) });
      deps.metrics?.honeytokenHit(caller.project, where.split(' ')[0] ?? where);
      deps.logger.error(
        { project: caller.project, tenant: caller.tenantKey, run: caller.runId, where },
        "a decoy credential was used: the tenant's runs are frozen until the operator lifts it (berth tenant unfreeze)",
      );
      if (!already) {
        deps.audit?.({
          kind: 'sandbox_violation',
          action: 'honeytoken.hit',
          actor: `tenant:${caller.tenantKey}`,
          project: caller.project,
          target: where.slice(0, 200),
          outcome: 'refused',
          code: 'PERMISSION_DENIED',
        });
        deps.alert?.({
          type: 'honeytoken.hit',
          project: caller.project,
          tenant: caller.tenantKey,
          where: where.slice(0, 200),
          ...(caller.runId ? { run: caller.runId } : {}),
          at: new Date(now()).toISOString(),
        });
      }
    },
    /** A frozen tenant's run is refused before anything starts, in words the person reads. */
    assertNotFrozen(project: string, tenant: string): void {
      const f = deps.frozen.frozen(project, tenant);
      if (!f) return;
      throw new BerthError(
        'PERMISSION_DENIED',
        'your agent is stopped: something in its container used a credential it should not have, and the operator has been told',
        { rule: 'honeytoken', hint: `the operator can look, then lift it: berth tenant unfreeze ${project} ${tenant}` },
      );
    },
  };
}

export type Honeytokens = ReturnType<typeof createHoneytokens>;
