import type { MiddlewareHandler } from 'hono';
import { BerthError } from '../base/errors.js';
import type { Honeytokens } from '../outbound/honeytokens.js';

/** The headers a credential rides in (a bearer token, an API key, a cookie); the rest of a request's headers are not looked at. */
const CREDENTIAL_HEADERS = ['authorization', 'x-api-key', 'cookie', 'proxy-authorization'] as const;

const refuse = () => {
  throw new BerthError('PERMISSION_DENIED', 'this request was refused, and the operator has been told', { rule: 'honeytoken' });
};

/**
 * berth's own API as a tripwire (docs/security.md, honeytokens): a request carrying any tenant's
 * decoy credential — in its path or query, a credential header, or (`body`: the /api routes,
 * after their size bound) its body — is refused and trips that tenant's wire (frozen, alert,
 * audit). The header check runs before the token check: a decoy tried as a bearer token is
 * caught, not only counted as a wrong token.
 */
export function decoyTripwire(honeytokens: Pick<Honeytokens, 'checkAny'> | undefined, part: 'head' | 'body'): MiddlewareHandler {
  return async (c, next) => {
    if (!honeytokens) return next();
    const where = `api ${c.req.method} ${c.req.path.slice(0, 120)}`;
    if (part === 'head') {
      const url = new URL(c.req.url);
      const heads = CREDENTIAL_HEADERS.map((h) => c.req.header(h));
      if (honeytokens.checkAny(where, url.pathname + url.search, ...heads)) refuse();
    } else if (c.req.method !== 'GET' && c.req.method !== 'HEAD') {
      // The /api bodies are bounded (app.ts apiBodyLimit) and read once; the routes read the same cached text.
      if (honeytokens.checkAny(where, await c.req.text())) refuse();
    }
    return next();
  };
}
