import { timingSafeEqual } from 'node:crypto';
import { BerthError } from '../errors.js';

/** What a channel that is sent its messages by HTTP reads from a request: bounded, and compared in constant time. */
const BODY_DEADLINE_MS = 10_000;

/** A request body up to max bytes (PAYLOAD_TOO_LARGE past it, read no further), within a deadline (a body sent a byte at a time holds nothing long). */
export async function readBodyBounded(req: Request, max: number, deadlineMs = BODY_DEADLINE_MS): Promise<Buffer> {
  const tooLarge = () => new BerthError('PAYLOAD_TOO_LARGE', `the request body is larger than ${max} bytes`);
  if (Number(req.headers.get('content-length') ?? 0) > max) throw tooLarge();
  const chunks: Uint8Array[] = [];
  let size = 0;
  if (!req.body) return Buffer.alloc(0);
  const reader = req.body.getReader();
  let late = false;
  const timer = setTimeout(() => {
    late = true;
    void reader.cancel().catch(() => undefined);
  }, deadlineMs);
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      size += value.byteLength;
      if (size > max) {
        void reader.cancel().catch(() => undefined);
        throw tooLarge();
      }
      chunks.push(value);
    }
  } finally {
    clearTimeout(timer);
  }
  if (late) throw new BerthError('BUSY', `the request body did not arrive within ${deadlineMs / 1000} s`, { retry_after: 1 });
  return Buffer.concat(chunks);
}

/** Two secrets (or signatures) compared in constant time. */
export function sameSecret(given: string | Buffer, expected: string | Buffer): boolean {
  const a = Buffer.from(given);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}
