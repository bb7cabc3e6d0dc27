import fs from 'node:fs';
import type { BerthConfig } from '../config/berth-config.js';
import type { ChannelCheck } from '../channels/contract.js';

const LOOPBACK = new Set(['127.0.0.1', 'localhost', '[::1]']);

/**
 * What doctor says of sign-in with a provider (berth.yaml oidc): whether anyone can sign in at
 * all, whether the chat's projects exist and the client secret is kept private, and whether the
 * issuer answers its discovery document with authorization code and PKCE (S256).
 */
export async function checkOidc(config: BerthConfig, projects: readonly string[], timeoutMs = 5000): Promise<ChannelCheck[]> {
  const oidc = config.oidc;
  if (!oidc) return [];
  const name = 'oidc';
  const checks: ChannelCheck[] = [];
  const rules = [oidc.operators, oidc.viewers, oidc.chat.people];
  if (rules.every((r) => r.emails.length + r.domains.length + r.groups.length === 0))
    checks.push({ name, status: 'warn', detail: 'no operators, viewers or chat people are named: nobody can sign in with the provider' });
  const missing = oidc.chat.projects.filter((p) => !projects.includes(p));
  if (missing.length) checks.push({ name, status: 'fail', detail: `oidc.chat.projects names ${missing.join(', ')}, which do not exist` });
  if (oidc.client_secret_file) {
    try {
      const mode = fs.statSync(oidc.client_secret_file).mode;
      if (mode & 0o077) checks.push({ name, status: 'fail', detail: `${oidc.client_secret_file} is readable by others: chmod 600 it` });
    } catch {
      checks.push({ name, status: 'fail', detail: `oidc.client_secret_file ${oidc.client_secret_file} cannot be read` });
    }
  }
  const issuer = new URL(oidc.issuer);
  if (issuer.protocol === 'http:' && !LOOPBACK.has(issuer.hostname)) {
    checks.push({ name, status: 'fail', detail: `${oidc.issuer} is plain http: a provider must be https (http only on loopback)` });
    return checks;
  }
  const url = `${oidc.issuer.replace(/\/+$/, '')}/.well-known/openid-configuration`;
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
    if (!res.ok) throw new Error(`HTTP ${res.status}`);
    const doc = (await res.json()) as { issuer?: unknown; code_challenge_methods_supported?: unknown };
    if (doc.issuer !== oidc.issuer) {
      checks.push({
        name,
        status: 'fail',
        detail: `${url} names issuer ${String(doc.issuer)}, not ${oidc.issuer} (berth.yaml must name it exactly)`,
      });
    } else if (!Array.isArray(doc.code_challenge_methods_supported) || !doc.code_challenge_methods_supported.includes('S256')) {
      checks.push({
        name,
        status: 'warn',
        detail: `${oidc.issuer} does not list PKCE S256 (code_challenge_methods_supported); berth sends it anyway`,
      });
    } else {
      checks.push({
        name,
        status: 'ok',
        detail: `${oidc.issuer} answers; sign-in with authorization code + PKCE as client ${oidc.client_id}`,
      });
    }
  } catch (err) {
    checks.push({
      name,
      status: 'fail',
      detail: `${url} does not answer (${(err as Error).message}): nobody can sign in with the provider`,
    });
  }
  return checks;
}
