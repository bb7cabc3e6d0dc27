import fs from 'node:fs';
import * as oidc from 'openid-client';
import { BerthError } from '../../base/errors.js';
import type { OidcConfig } from '../../config/oidc.js';
import type { OidcClaims } from '../../plan/oidc-roles.js';
import type { Flow } from './flows.js';

/** How long berth waits for the provider (discovery, the token and userinfo calls). */
const PROVIDER_TIMEOUT_SECONDS = 10;
/** The provider's metadata is read again after this long (keys rotate; a changed berth.yaml makes a new one at once). */
const DISCOVERY_MS = 3600_000;

const LOOPBACK = new Set(['127.0.0.1', 'localhost', '[::1]']);

/**
 * The relying party, through openid-client (certified): discovery, the authorization URL with
 * PKCE (S256), state and nonce, and the code's exchange, whose ID token the library checks
 * (signature, issuer, audience, nonce, expiry). Plain http is allowed only for a provider on
 * loopback (a test or a local provider): anywhere else it is CONFIG_INVALID.
 */
export function createProvider() {
  let cached: { key: string; at: number; config: Promise<oidc.Configuration> } | undefined;

  function configurationOf(settings: OidcConfig): Promise<oidc.Configuration> {
    const secret = settings.client_secret_file ? fs.readFileSync(settings.client_secret_file, 'utf8').trim() : undefined;
    const key = JSON.stringify([settings.issuer, settings.client_id, secret ?? null]);
    if (cached && cached.key === key && Date.now() - cached.at < DISCOVERY_MS) return cached.config;
    const issuer = new URL(settings.issuer);
    if (issuer.protocol === 'http:' && !LOOPBACK.has(issuer.hostname)) {
      throw new BerthError('CONFIG_INVALID', 'the OIDC issuer must be https (plain http only on loopback)', {
        issues: [{ field: 'oidc.issuer', reason: 'must be an https URL' }],
      });
    }
    const config = oidc
      .discovery(issuer, settings.client_id, secret, secret === undefined ? oidc.None() : undefined, {
        timeout: PROVIDER_TIMEOUT_SECONDS,
        ...(issuer.protocol === 'http:' ? { execute: [oidc.allowInsecureRequests] } : {}),
      })
      .catch((err: unknown) => {
        cached = undefined; // the next sign-in asks again
        throw new BerthError('SIGN_IN_FAILED', `the sign-in provider ${settings.issuer} did not answer: ${(err as Error).message}`);
      });
    cached = { key, at: Date.now(), config };
    return config;
  }

  return {
    /** Where to send the browser for this flow. */
    async authorizationUrl(settings: OidcConfig, flow: Flow): Promise<URL> {
      const config = await configurationOf(settings);
      return oidc.buildAuthorizationUrl(config, {
        redirect_uri: flow.redirectUri,
        scope: settings.scopes.join(' '),
        code_challenge: await oidc.calculatePKCECodeChallenge(flow.verifier),
        code_challenge_method: 'S256',
        state: flow.state,
        nonce: flow.nonce,
      });
    },
    /** The code exchanged, the ID token checked, and the person's claims (the ID token's, with userinfo's for what it leaves out). */
    async finish(settings: OidcConfig, flow: Flow, query: URLSearchParams): Promise<OidcClaims> {
      const config = await configurationOf(settings);
      const back = new URL(flow.redirectUri);
      for (const [name, value] of query) back.searchParams.append(name, value);
      const tokens = await oidc.authorizationCodeGrant(config, back, {
        pkceCodeVerifier: flow.verifier,
        expectedState: flow.state,
        expectedNonce: flow.nonce,
        idTokenExpected: true,
      });
      const claims = tokens.claims() as OidcClaims;
      const info = await oidc.fetchUserInfo(config, tokens.access_token, claims.sub).catch(() => ({}));
      return { ...info, ...claims };
    },
  };
}

export type Provider = ReturnType<typeof createProvider>;
