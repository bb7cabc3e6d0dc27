import type { IncomingMessage } from 'node:http';

/**
 * Request bodies the model gateway holds while they arrive: their bytes share one budget per
 * tenant and one per process, so memory stays bounded whatever many runs send at once. A body
 * takes its bytes before berth reads them (its Content-Length, or chunk by chunk) and gives them
 * back once it has gone upstream or was refused.
 */
export interface BodyBudget {
  lease(key: string): BodyLease;
  /** Bytes held across the process now. */
  held(): number;
}

export interface BodyLease {
  /** Take `bytes` more, or nothing when the tenant's or the process's share would be passed. */
  grow(bytes: number): boolean;
  /** Give back all it took (idempotent). */
  release(): void;
}

export function createBodyBudget(limits: { perTenant: number; total: number }): BodyBudget {
  const byTenant = new Map<string, number>();
  let total = 0;
  return {
    lease(key) {
      let mine = 0;
      let released = false;
      return {
        grow(bytes) {
          const tenant = byTenant.get(key) ?? 0;
          if (released || tenant + bytes > limits.perTenant || total + bytes > limits.total) return false;
          byTenant.set(key, tenant + bytes);
          total += bytes;
          mine += bytes;
          return true;
        },
        release() {
          if (released) return;
          released = true;
          const left = (byTenant.get(key) ?? 0) - mine;
          if (left > 0) byTenant.set(key, left);
          else byTenant.delete(key);
          total -= mine;
        },
      };
    },
    held: () => total,
  };
}

export type BodyRead = { ok: true; body: Buffer } | { ok: false; status: 408 | 413 | 429; reason: string };

/**
 * The whole body, within the lease, `max` bytes and `timeoutMs`; otherwise why not (nothing more
 * is kept). A body with a Content-Length is refused before a byte of it is read.
 */
export function readBody(req: IncomingMessage, lease: BodyLease, bounds: { max: number; timeoutMs: number }): Promise<BodyRead> {
  return new Promise((resolve, reject) => {
    const length = req.headers['content-length'];
    const declared = length === undefined ? undefined : Number(length);
    let done = false;
    let whole: Buffer | undefined;
    let chunks: Buffer[] = [];
    // The request outlives its body (an answer streams for minutes): let go of the bytes at once.
    const settle = (r: BodyRead | Error) => {
      done = true;
      clearTimeout(timer);
      whole = undefined;
      chunks = [];
      if (r instanceof Error) reject(r);
      else resolve(r);
    };
    const tooLarge: BodyRead = { ok: false, status: 413, reason: `a model request may be at most ${bounds.max} bytes` };
    const noRoom: BodyRead = {
      ok: false,
      status: 429,
      reason: 'too many bytes of request bodies are being received at once (for this tenant, or across berth)',
    };
    const timer = setTimeout(
      () => settle({ ok: false, status: 408, reason: `a request body must arrive whole within ${bounds.timeoutMs / 1000} s` }),
      bounds.timeoutMs,
    );
    if (declared !== undefined && declared > bounds.max) return settle(tooLarge);
    if (declared !== undefined && !lease.grow(declared)) return settle(noRoom);
    // A declared length is filled in place (no second copy); chunked bodies are kept as they come.
    if (declared !== undefined) whole = Buffer.allocUnsafe(declared);
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      if (done) return;
      if (whole) {
        chunk.copy(whole, size); // Node's parser never passes the declared length
        size += chunk.length;
        return;
      }
      if (size + chunk.length > bounds.max) return settle(tooLarge);
      if (!lease.grow(chunk.length)) return settle(noRoom);
      chunks.push(chunk);
      size += chunk.length;
    });
    req.on('end', () => {
      if (!done) settle({ ok: true, body: whole ? whole.subarray(0, size) : Buffer.concat(chunks) });
    });
    const gone = (err: Error) => {
      if (!done) settle(err);
    };
    req.on('error', gone);
    req.on('close', () => gone(new Error('the connection closed before the body was whole')));
  });
}
