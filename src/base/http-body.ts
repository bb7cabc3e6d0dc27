import { BerthError } from './errors.js';

const tooLarge = (max: number) => new BerthError('PAYLOAD_TOO_LARGE', `request body is larger than ${max} bytes`);

/** PAYLOAD_TOO_LARGE when the request's Content-Length already says it is over max (nothing read). */
export function refuseDeclaredOver(req: Request, max: number): void {
  if (Number(req.headers.get('content-length') ?? 0) > max) throw tooLarge(max);
}

/**
 * A request body up to max bytes (PAYLOAD_TOO_LARGE past it, whatever Content-Length claims; read
 * no further), and, given a deadline, within it (BUSY: a body sent a byte at a time holds nothing long).
 */
export async function readBodyBounded(req: Request, max: number, deadlineMs?: number): Promise<Buffer> {
  if (deadlineMs === undefined) return readBodyWatched(req, max, {});
  const stop = new AbortController();
  const timer = setTimeout(
    () => stop.abort(new BerthError('BUSY', `the request body did not arrive within ${deadlineMs / 1000} s`, { retry_after: 1 })),
    deadlineMs,
  );
  try {
    return await readBodyWatched(req, max, { signal: stop.signal });
  } finally {
    clearTimeout(timer);
  }
}

/** Who watches a body as it arrives. */
export interface BodyWatch {
  /** Aborted: the read stops (the connection is let go) and throws the signal's reason. */
  signal?: AbortSignal;
  /** The bytes received so far, after each chunk. */
  progress?(received: number): void;
}

/**
 * A request body up to max bytes, read until it ends or `watch.signal` stops it. A connection
 * that closes before the body is whole is the caller's mistake (CONFIG_INVALID), never berth's.
 */
export async function readBodyWatched(req: Request, max: number, watch: BodyWatch): Promise<Buffer> {
  refuseDeclaredOver(req, max);
  watch.signal?.throwIfAborted();
  if (!req.body) return Buffer.alloc(0);
  const chunks: Uint8Array[] = [];
  let size = 0;
  const reader = req.body.getReader();
  const stop = () => void reader.cancel().catch(() => undefined);
  watch.signal?.addEventListener('abort', stop, { once: true });
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      size += value.byteLength;
      if (size > max) {
        stop();
        throw tooLarge(max);
      }
      chunks.push(value);
      watch.progress?.(size);
    }
  } catch (err) {
    if (watch.signal?.aborted) throw watch.signal.reason;
    if (err instanceof BerthError) throw err;
    throw new BerthError('CONFIG_INVALID', 'the connection closed before the request body was whole', {
      issues: [{ field: 'body', reason: 'cut short' }],
    });
  } finally {
    watch.signal?.removeEventListener('abort', stop);
  }
  if (watch.signal?.aborted) throw watch.signal.reason;
  return Buffer.concat(chunks);
}
