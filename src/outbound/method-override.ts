import type { IncomingHttpHeaders } from 'node:http';

/**
 * Ways a request asks a server to take it for another method or URL than its request line
 * says, as common frameworks read them: a grant limited by method or path must not hold for
 * such a request. Read generously: a false alarm only leaves a request without its secret.
 *
 * - headers: X-HTTP-Method-Override, X-HTTP-Method, X-Method-Override, X-Original-Method,
 *   and URL ones (X-Original-URL/-URI, X-Rewrite-URL, X-Forwarded-Prefix/-Path/-URI, …),
 *   with "_" read as "-" (CGI-style servers, Rack and PHP, make both the same variable);
 * - a `_method` key (or X-HTTP-Method-Override as a key) in the query, percent-decoded, split
 *   on "&" and ";" (Rack 2), with PHP's key rules (leading spaces dropped, "." and " " read as
 *   "_", `_method[]`);
 * - the same key in a POST body (Rack, Symfony/Laravel, Spring, ASP.NET, Express
 *   method-override all read it there): form-encoded (or untyped: Rack reads that as a form),
 *   a multipart part's name, or a JSON object's top-level key (Laravel, Express); a body sent
 *   compressed counts as one (a server may unpack it, berth does not).
 */

const METHOD_HEADER = /^x-((http-)?method(-override)?|(original|forwarded)-method)$/;
const URL_HEADER = /^x-(original|rewrite|forwarded|envoy-original)-(url|uri|path|prefix)$/;
const OVERRIDE_KEY = /^(_+method|_*(x_)?(http_)?method_override|_*x_http_method)$/;

/** Bytes of a POST body read before a grant limited by method is sent on it; a longer body is not covered. */
export const OVERRIDE_BODY_LIMIT = 256 * 1024;

/** The override header a request carries, if any. */
export function overrideHeader(headers: IncomingHttpHeaders): string | undefined {
  return Object.keys(headers).find((name) => {
    const n = name.toLowerCase().replace(/_/g, '-');
    return METHOD_HEADER.test(n) || URL_HEADER.test(n);
  });
}

/** A key as a framework would read it: percent-decoded (bad escapes kept), PHP's renames, lower case. */
function isOverrideKey(raw: string): boolean {
  const decoded = raw
    .slice(0, 512)
    .replace(/\+/g, ' ')
    .replace(/%([0-9a-f]{2})/gi, (_, h: string) => String.fromCharCode(parseInt(h, 16)));
  const key = decoded
    .toLowerCase()
    .replace(/^[\s\0]+/, '')
    .replace(/\[.*$/s, '')
    .replace(/[\s.-]/g, '_');
  return OVERRIDE_KEY.test(key);
}

/** The keys of a form-encoded text that may name an override (they say "method", or hold an escape). */
function formKeys(text: string): string[] {
  return [...text.matchAll(/(?:^|[&;])([^&;=]*(?:method|%)[^&;=]*)/gi)].map((m) => m[1] as string);
}

/** Does the target's query name a method override? */
export function queryOverrides(target: string): boolean {
  const q = target.indexOf('?');
  return q >= 0 && formKeys(target.slice(q + 1)).some(isOverrideKey);
}

/** A POST whose body frameworks read parameters from: it is read (up to OVERRIDE_BODY_LIMIT) before a grant limited by method holds. */
export function bodyMayOverride(method: string, headers: IncomingHttpHeaders): boolean {
  if (method !== 'POST') return false;
  if (headers['transfer-encoding'] === undefined && Number(headers['content-length'] ?? 0) === 0) return false;
  const type =
    String(headers['content-type'] ?? '')
      .split(';')[0]
      ?.trim()
      .toLowerCase() ?? '';
  return type === '' || type.includes('form') || type.startsWith('multipart/') || type.includes('json');
}

/** Names of multipart parts (name="…", name=…, or RFC 5987's name*=charset''…), wherever a Content-Disposition line is. */
function partNames(text: string): string[] {
  const names: string[] = [];
  for (const line of text.matchAll(/content-disposition[ \t]*:([^\r\n]*)/gi)) {
    for (const m of (line[1] as string).matchAll(/(?:^|;)\s*name(\*?)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^;\s]*))/gi)) {
      const value = m[2] !== undefined ? m[2].replace(/\\(.)/g, '$1') : (m[3] as string);
      names.push(m[1] ? value.replace(/^[^']*'[^']*'/, '') : value);
    }
  }
  return names;
}

function jsonKeys(body: Buffer): string[] {
  const text = body.toString('utf8').replace(/^\uFEFF/, '');
  if (!text.trimStart().startsWith('{')) return [];
  try {
    const parsed: unknown = JSON.parse(text);
    return parsed && typeof parsed === 'object' && !Array.isArray(parsed) ? Object.keys(parsed) : [];
  } catch {
    return [];
  }
}

/** Does a POST body (read whole) name a method override, whatever its declared type? A compressed one may: berth does not unpack it. */
export function bodyOverrides(body: Buffer, headers: IncomingHttpHeaders): boolean {
  if (!/^\s*(identity\s*)?$/i.test(String(headers['content-encoding'] ?? ''))) return true;
  const text = body.toString('latin1');
  return formKeys(text).some(isOverrideKey) || partNames(text).some(isOverrideKey) || jsonKeys(body).some(isOverrideKey);
}
