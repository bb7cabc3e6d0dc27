import { BerthError } from '../base/errors.js';
import { ChannelApiError } from './contract.js';

/**
 * What every channel does with a file's bytes: read a download no further than its bound (a
 * service may declare any length and send any amount), decode base64 only once its size is known
 * to fit, and refuse a ref it did not hand out. TOO_LARGE names the bound, never the ref.
 */

/** TOO_LARGE for a file over `maxBytes` (`service`: whose limit it is, when the service's own is the lower). */
export const tooLarge = (maxBytes: number, service?: string) =>
  new BerthError('TOO_LARGE', `the file is larger than ${formatBytes(maxBytes)}${service ? ` (${service}'s limit)` : ''}`);

/** A ref this channel did not hand out (another channel's, or made up): refused before any call. */
export const foreignRef = (channel: string) =>
  new BerthError('NOT_FOUND', `not a ${channel} attachment: this channel did not hand out that ref`);

export const formatBytes = (n: number) =>
  n >= 1024 * 1024 && n % (1024 * 1024) === 0 ? `${n / (1024 * 1024)} MiB` : n >= 1024 && n % 1024 === 0 ? `${n / 1024} KiB` : `${n} bytes`;

/**
 * A download's body, at most `maxBytes`: refused at once when its Content-Length says more, else
 * read until it ends or passes the bound (then cancelled: nothing past the bound is buffered).
 * A non-2xx answer is a ChannelApiError (its body is not read).
 */
export async function readCapped(res: Response, maxBytes: number, what: string, service?: string): Promise<Uint8Array> {
  if (!res.ok) {
    await res.body?.cancel().catch(() => undefined);
    throw new ChannelApiError(`${what}: HTTP ${res.status}`, res.status);
  }
  const declared = Number(res.headers.get('content-length') ?? NaN);
  if (Number.isFinite(declared) && declared > maxBytes) {
    await res.body?.cancel().catch(() => undefined);
    throw tooLarge(maxBytes, service);
  }
  if (!res.body) return new Uint8Array(0);
  const reader = res.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > maxBytes) {
      await reader.cancel().catch(() => undefined);
      throw tooLarge(maxBytes, service);
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks, size);
}

/** The most base64 text that can decode to `maxBytes` (padding and line breaks aside). */
export const base64Length = (maxBytes: number) => Math.ceil(maxBytes / 3) * 4;

/** Base64 decoded only when what it holds fits `maxBytes` (its length says so before any byte is made). */
export function decodeBase64Capped(text: string, maxBytes: number, service?: string): Uint8Array {
  const clean = text.replace(/[\r\n]/g, '');
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(clean) || clean.length % 4 === 1)
    throw new BerthError('CONFIG_INVALID', 'the file is not valid base64', { issues: [{ field: 'content_base64', reason: 'not base64' }] });
  const padding = clean.endsWith('==') ? 2 : clean.endsWith('=') ? 1 : 0;
  const bytes = Math.floor((clean.length * 3) / 4) - padding;
  if (bytes > maxBytes) throw tooLarge(maxBytes, service);
  return Buffer.from(clean, 'base64');
}

/** The smaller of the caller's bound and the service's own; `service` is named when the service's is the one that binds. */
export const boundOf = (maxBytes: number, serviceLimit: number, service: string) =>
  serviceLimit < maxBytes ? { max: serviceLimit, service } : { max: maxBytes, service: undefined };
