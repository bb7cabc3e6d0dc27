import { BerthError } from '../base/errors.js';

/**
 * The web chat's login cookie. Over https it is `__Host-berth_chat` (Secure, Path=/, no Domain):
 * a page on another port or a sibling host cannot set or shadow it. Over plain http it stays
 * `berth_chat` on Path=/chat. Only the one name of the request's scheme counts, and a request
 * carrying it twice (someone else's cookie beside the person's own) is refused, never "first wins".
 */
export const WEB_CHAT_COOKIE = 'berth_chat';
export const WEB_CHAT_HTTPS_COOKIE = '__Host-berth_chat';

/**
 * Whether the browser reached berth over https: a TLS socket, or the proxy in front says so
 * (X-Forwarded-Proto). The header only picks which cookie name the requester's own browser
 * uses; a page cannot add it to another person's requests.
 */
export function reachedOverHttps(opts: { tls: boolean; forwardedProto: string | string[] | undefined }): boolean {
  const forwarded = Array.isArray(opts.forwardedProto) ? opts.forwardedProto[0] : opts.forwardedProto;
  return opts.tls || forwarded?.split(',')[0]?.trim().toLowerCase() === 'https';
}

/** The login credential a request carries; undefined when none; UNAUTHORIZED when two. */
export function chatCredentialOf(cookieHeader: string | undefined, https: boolean): string | undefined {
  const name = https ? WEB_CHAT_HTTPS_COOKIE : WEB_CHAT_COOKIE;
  const values = (cookieHeader ?? '').split(';').flatMap((part) => {
    const eq = part.indexOf('=');
    return eq > 0 && part.slice(0, eq).trim() === name ? [part.slice(eq + 1).trim()] : [];
  });
  if (values.length > 1) {
    throw new BerthError(
      'UNAUTHORIZED',
      'your browser sent two chat logins for this site (another page on this host may have set one), so neither is used',
      {
        hint: "clear this site's cookies in the browser, then ask the admin for a new chat link",
      },
    );
  }
  return values[0];
}

/** The Set-Cookie value that logs a browser in. */
export function chatLoginCookie(credential: string, maxAgeSeconds: number, https: boolean): string {
  const maxAge = Math.max(0, Math.floor(maxAgeSeconds));
  return https
    ? `${WEB_CHAT_HTTPS_COOKIE}=${credential}; HttpOnly; Secure; SameSite=Strict; Path=/; Max-Age=${maxAge}`
    : `${WEB_CHAT_COOKIE}=${credential}; HttpOnly; SameSite=Strict; Path=/chat; Max-Age=${maxAge}`;
}

/**
 * A request a page of this origin sent (or no browser at all: neither Origin nor Sec-Fetch-Site).
 * What sets the login cookie must pass it: another site's form may not log a browser in as
 * whoever that site chose (login CSRF).
 */
export function fromOwnOrigin(h: { origin: string | undefined; host: string | undefined; fetchSite: string | undefined }): boolean {
  if (h.fetchSite !== undefined && h.fetchSite !== 'same-origin' && h.fetchSite !== 'none') return false;
  if (h.origin === undefined) return true;
  try {
    return new URL(h.origin).host === h.host;
  } catch {
    return false; // "null" (a sandboxed frame, a privacy redirect) or garbage
  }
}
