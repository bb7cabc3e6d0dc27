import type { BerthConfig } from '../config/berth-config.js';
import { hostAllowed } from '../config/outbound.js';
import { presetOwnHost } from '../plan/agent-command.js';
import { isPrivateAddress } from './addresses.js';
import type { Approvals } from './approvals.js';
import type { RunIdentity } from './run-identity.js';
import type { SecretBroker } from './secret-broker.js';

/** A DNS name (or an IPv4 address) as a person can read it in a question: never an IPv6 literal or odd bytes. */
const HOST_NAME = /^(?=.{1,253}$)[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*$/;

export type Resolve = (host: string) => Promise<Array<{ address: string }>>;

/**
 * `granted`: the project holds a secret grant toward the host (its CONNECTs are terminated).
 * `asked`: the host is off the allowlist and someone allowed it (now, or for the conversation):
 * if it still cannot be reached, the person is told why. `quiet`: a routine refusal nobody needs
 * to hear of (a preset's own calls): one outbound-log line, no warning.
 */
export type EgressDecision =
  { ok: true; address: string; granted: boolean; asked: boolean } | { ok: false; reason: string; quiet?: boolean; asked?: boolean };

/** Whether a run may reach host:port, and at which address: allowlist, grants, approvals, then the lookup. */
export function createEgressDecision(deps: { config: () => BerthConfig; approvals?: Approvals; broker?: SecretBroker; lookup: Resolve }) {
  return async function decide(run: RunIdentity, rawHost: string, port: number): Promise<EgressDecision> {
    const allow = run.metadata.egress.allow;
    const host = rawHost.replace(/\.$/, '');
    if (!host || !Number.isInteger(port) || port < 1 || port > 65535) return { ok: false, reason: 'not a host:port berth can check' };
    // The operator's grant of a secret toward a host lets the project reach it.
    const granted = deps.broker?.terminates(run.project, host, port) ?? false;
    const asked = !hostAllowed(allow, host, port) && !granted;
    if (asked) {
      const notListed = `${host}:${port} is not in project "${run.project}"'s egress allowlist (${allow.join(', ') || 'empty'})`;
      // Telemetry and plugins of the agent's CLI: no task of the person's, so no question to them.
      if (presetOwnHost(run.metadata.agent, `${host}:${port}`))
        return {
          ok: false,
          reason: `${notListed}; the ${String(run.metadata.agent)} CLI calls it for itself, so nobody is asked`,
          quiet: true,
        };
      // Only a plain host name is worth a question (and nothing is looked up before the answer:
      // a lookup of a name the agent made up would be a way out on its own).
      if (!deps.approvals || !HOST_NAME.test(host)) return { ok: false, reason: notListed };
      const verdict = await deps.approvals.request(run, `${host}:${port}`);
      if (!verdict.allowed) return { ok: false, reason: verdict.reason, ...(verdict.quiet ? { quiet: true } : {}) };
    }
    let addresses: Array<{ address: string }>;
    try {
      addresses = await deps.lookup(host);
    } catch {
      return { ok: false, reason: `${host} does not resolve`, asked };
    }
    const privateOk = hostAllowed(deps.config().egress.private_hosts, host, port);
    if (!privateOk && (addresses.length === 0 || addresses.some((a) => isPrivateAddress(a.address)))) {
      return {
        ok: false,
        reason: `${host} resolves to a private or loopback address (the operator may allow it in berth.yaml egress.private_hosts)`,
        asked,
      };
    }
    return { ok: true, address: (addresses[0] as { address: string }).address, granted, asked };
  };
}

const WHY: Record<string, string> = {
  ECONNREFUSED: 'it refused the connection',
  ECONNRESET: 'it closed the connection',
  ETIMEDOUT: 'it did not answer in time',
  EHOSTUNREACH: 'there is no route to it',
  ENETUNREACH: 'there is no route to it',
};

/** Why a connection to an allowed host failed, in a chat person's words (the code kept for the operator). */
export function unreachableWhy(err: NodeJS.ErrnoException): string {
  const why = err.code ? WHY[err.code] : undefined;
  return why ? `${why} (${err.code})` : err.message === 'idle' ? 'it did not answer in time' : err.message;
}
