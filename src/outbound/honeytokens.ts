import type { Logger } from 'pino';
import { BerthError } from '../base/errors.js';
import type { BerthConfig } from '../config/berth-config.js';
import type { Metrics } from '../base/metrics.js';
import { decoyNeedles, decoysOf } from '../plan/honeytokens.js';
import type { DecoyHolders } from '../store/decoy-holders.js';
import type { FrozenTenants } from '../store/frozen-tenants.js';
import { createHeldDecoys } from './held-decoys.js';
import type { AuditEvent } from '../store/audit.js';
import { formsOf } from './secret-forms.js';
import type { Alert } from './alert-webhook.js';

/** What the person reads when their run is stopped for it. */
export const DECOY_STOP = "something in your agent's container used a credential it should not have; the operator has been told.";

/** Who a request is from, as a run's socket knows it. */
export interface WireCaller {
  project: string;
  tenantKey: string;
  runId?: string;
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
  /** The tenants given decoys (store/decoy-holders.ts): whose decoys a request naming no tenant is looked at for. */
  holders: DecoyHolders;
  logger: Logger;
  metrics?: Metrics;
  audit?: (event: Omit<AuditEvent, 'actor' | 'request_id'> & { actor?: string }) => void;
  /** The operator's alert webhook (berth.yaml alerts.webhook): told of each first hit, never waited for. */
  alert?: (alert: Alert) => void;
  /** The tenants of a project (those with a session): holders from before berth kept the list, added to it once at start. */
  tenantsOf?: (project: string) => string[];
  now?: () => number;
}) {
  const enabled = (project: string) =>
    Object.hasOwn(deps.config().projects, project) && deps.config().projects[project]?.honeytokens === true;
  const needlesOf = (c: WireCaller) => decoyNeedles(decoysOf(deps.secret(), c.project, c.tenantKey));
  const now = deps.now ?? Date.now;
  const projects = () => Object.keys(deps.config().projects).filter(enabled);
  const held = createHeldDecoys({ projects, secret: deps.secret, holders: deps.holders, logger: deps.logger, tenantsOf: deps.tenantsOf });
  return {
    /** The decoys this tenant's containers carry, asked as they are planted (from then on berth's API looks for them too); undefined when the project has none. */
    decoysFor(project: string, tenant: string) {
      if (!enabled(project)) return undefined;
      const decoys = decoysOf(deps.secret(), project, tenant);
      held.planted(project, tenant, decoys);
      return decoys;
    },
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
     * carry? Every holder's decoys (AWS key id and secret, the SSH key's lines), as written or
     * inside base64, in one pass (held-decoys.ts; the forms matcher of `check` is per tenant:
     * thousands of tenants' values in it cost seconds per MiB). The owner's wire trips (a project
     * whose decoys were switched off is not looked for). Undefined when none.
     */
    checkAny(where: string, ...texts: Array<string | Uint8Array | undefined>): WireCaller | undefined {
      if (!projects().length) return undefined;
      for (const t of texts) {
        if (t === undefined) continue;
        const text = typeof t === 'string' ? t : Buffer.from(t.buffer, t.byteOffset, t.byteLength).toString('latin1');
        const owner = held.find(text, (o) => enabled(o.project));
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
