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
  // No regular expression over the whole text: for a 20 MiB file it cost more than the rest of the file's way.
  const clean = text.includes('\n') || text.includes('\r') ? text.replace(/[\r\n]/g, '') : text;
  const invalid = () =>
    new BerthError('CONFIG_INVALID', 'the file is not valid base64', { issues: [{ field: 'content_base64', reason: 'not base64' }] });
  if (clean.length % 4 === 1) throw invalid();
  const padding = clean.endsWith('==') ? 2 : clean.endsWith('=') ? 1 : 0;
  const bytes = Math.floor((clean.length * 3) / 4) - padding;
  if (bytes > maxBytes) throw tooLarge(maxBytes, service);
  const data = Buffer.from(clean, 'base64');
  // Node skips what is not base64: the bytes, encoded again, must be the text (its padding aside).
  if (unpadded(data.toString('base64')) !== unpadded(clean)) throw invalid();
  return data;
}

const unpadded = (b64: string) => (b64.endsWith('==') ? b64.slice(0, -2) : b64.endsWith('=') ? b64.slice(0, -1) : b64);

/** The smaller of the caller's bound and the service's own; `service` is named when the service's is the one that binds. */
export const boundOf = (maxBytes: number, serviceLimit: number, service: string) =>
  serviceLimit < maxBytes ? { max: serviceLimit, service } : { max: maxBytes, service: undefined };
