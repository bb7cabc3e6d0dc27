import { BerthError } from './errors.js';

/**
 * A request body up to max bytes (PAYLOAD_TOO_LARGE past it, whatever Content-Length claims; read
 * no further), and, given a deadline, within it (BUSY: a body sent a byte at a time holds nothing long).
 */
export async function readBodyBounded(req: Request, max: number, deadlineMs?: number): Promise<Buffer> {
  const tooLarge = () => new BerthError('PAYLOAD_TOO_LARGE', `request body is larger than ${max} bytes`);
  if (Number(req.headers.get('content-length') ?? 0) > max) throw tooLarge();
  const chunks: Uint8Array[] = [];
  let size = 0;
  if (!req.body) return Buffer.alloc(0);
  const reader = req.body.getReader();
  let late = false;
  const timer =
    deadlineMs === undefined
      ? undefined
      : setTimeout(() => {
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
  if (late) throw new BerthError('BUSY', `the request body did not arrive within ${(deadlineMs ?? 0) / 1000} s`, { retry_after: 1 });
  return Buffer.concat(chunks);
}
