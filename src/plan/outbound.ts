import type { BerthConfig } from '../config/berth-config.js';
import type { ProjectMetadata } from '../config/metadata.js';
import { placeholderOf, secretsGrantedTo } from '../config/secrets.js';
import { own } from '../base/own.js';

/**
 * A container's ways out, all through Unix sockets in its run directory (/run/berth): berth's
 * file tools, its model gateway and its egress proxy. Containers have no network at any level;
 * the image's berth-bridge listens on the container's own loopback and relays to the sockets,
 * so an agent sees ordinary local URLs and berth sees which run is calling by the socket alone.
 */
export const SOCKET_NAMES = { gateway: 'gateway.sock', model: 'model.sock', egress: 'egress.sock' } as const;
export type RunSocket = keyof typeof SOCKET_NAMES;

/** Loopback ports inside the container (its own network namespace: nothing else listens there). */
export const MODEL_PORT = 41400;
export const EGRESS_PORT = 41401;
/** What agents find where they look for a key: the real one is added by berth, outside. */
export const KEY_PLACEHOLDER = 'berth-model-gateway-holds-the-key';
export const RELAY_BIN = 'berth-bridge';
/**
 * Where a run whose project holds secret grants finds berth's CA (public; the egress proxy
 * terminates TLS with it for granted hosts): mounted read-only over the image's system store
 * (Debian's path, which OpenSSL, Go, Python and Rust read through SSL_CERT_FILE too) as the
 * public roots plus berth's CA, and alone where update-ca-certificates looks.
 */
export const TRUST_MOUNTS = {
  bundle: '/etc/ssl/certs/ca-certificates.crt',
  ca: '/usr/local/share/ca-certificates/berth-egress-ca.crt',
} as const;

export interface OutboundInput {
  config: BerthConfig;
  metadata: ProjectMetadata;
  /** Agent runs (not the shell tool) reach berth's tools and the model. */
  agentRun: boolean;
  /** The level may reach the project's allowlisted hosts. */
  egress: boolean;
  /** berth's CA files are mounted (TRUST_MOUNTS): the project holds secret grants. */
  trust?: boolean;
}

export interface OutboundPlan {
  sockets: RunSocket[];
  env: Record<string, string>;
  warnings: string[];
}

/** Which sockets a run gets and what its environment says about them. Pure. */
export function planOutbound(input: OutboundInput, mount: string): OutboundPlan {
  const { config, metadata } = input;
  const warnings: string[] = [];
  const sockets: RunSocket[] = [];
  const env: Record<string, string> = {};
  const upstreams = metadata.models.upstreams.filter((name) => {
    if (own(config.models, name)) return true;
    warnings.push(`model upstream "${name}" is allowed but berth.yaml's models has no such entry`);
    return false;
  });
  if (input.agentRun) {
    sockets.push('gateway');
    env.BERTH_GATEWAY = `${mount}/${SOCKET_NAMES.gateway}`;
  }
  if (input.agentRun && upstreams.length > 0) {
    sockets.push('model');
    // The first upstream of each API is the one the CLIs' variables point at; others by path.
    for (const name of [...upstreams].reverse()) {
      const upstream = own(config.models, name)!;
      const base = `http://127.0.0.1:${MODEL_PORT}/${name}`;
      if (upstream.api === 'anthropic') Object.assign(env, { ANTHROPIC_BASE_URL: base, ANTHROPIC_API_KEY: KEY_PLACEHOLDER });
      else Object.assign(env, { OPENAI_BASE_URL: `${base}/v1`, OPENAI_API_KEY: KEY_PLACEHOLDER });
    }
    // Claude Code: no telemetry, update checks or other calls that only a network would answer.
    env.CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC = '1';
  }
  if (input.egress) {
    sockets.push('egress');
    const proxy = `http://127.0.0.1:${EGRESS_PORT}`;
    Object.assign(env, {
      HTTP_PROXY: proxy,
      HTTPS_PROXY: proxy,
      http_proxy: proxy,
      https_proxy: proxy,
      NO_PROXY: '127.0.0.1,localhost',
      no_proxy: '127.0.0.1,localhost',
    });
    // Node's own fetch and http follow the variables above only when asked (Node 24+).
    env.NODE_USE_ENV_PROXY = '1';
    for (const name of secretsGrantedTo(config.secrets, metadata.name)) env[name] = placeholderOf(name);
    if (input.trust) {
      const bundle = TRUST_MOUNTS.bundle;
      Object.assign(env, {
        NODE_EXTRA_CA_CERTS: TRUST_MOUNTS.ca,
        SSL_CERT_FILE: bundle,
        REQUESTS_CA_BUNDLE: bundle,
        CURL_CA_BUNDLE: bundle,
        GIT_SSL_CAINFO: bundle,
      });
    }
  }
  return { sockets, env, warnings };
}

/** The argv that starts berth-bridge's relays first, when the run has a model or egress socket. */
export function withRelays(argv: string[], sockets: readonly RunSocket[], mount: string): string[] {
  const relays: string[] = [];
  if (sockets.includes('model')) relays.push(`${MODEL_PORT}=${mount}/${SOCKET_NAMES.model}`);
  if (sockets.includes('egress')) relays.push(`${EGRESS_PORT}=${mount}/${SOCKET_NAMES.egress}`);
  return relays.length ? [RELAY_BIN, 'relay', ...relays, '--', ...argv] : argv;
}
