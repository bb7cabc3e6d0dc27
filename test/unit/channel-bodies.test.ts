import { describe, expect, it } from 'vitest';
import { readBodyBounded } from '../../src/base/http-body.js';

/** What a stranger's request to /hooks may hold: so many bytes, for so long. */
const trickle = (chunks: string[], thenHang: boolean) =>
  new Request('http://x/hooks/ci', {
    method: 'POST',
    body: new ReadableStream({
      async start(c) {
        for (const chunk of chunks) c.enqueue(new TextEncoder().encode(chunk));
        if (!thenHang) c.close();
      },
    }),
    duplex: 'half',
  } as RequestInit);

describe('readBodyBounded', () => {
  it('reads a body within its bounds', async () => {
    expect((await readBodyBounded(trickle(['{"a":', '1}'], false), 100)).toString()).toBe('{"a":1}');
  });

  it('stops at the byte bound, and refuses a declared length over it before reading', async () => {
    await expect(readBodyBounded(trickle(['x'.repeat(60), 'x'.repeat(60)], true), 100)).rejects.toMatchObject({
      code: 'PAYLOAD_TOO_LARGE',
    });
    const declared = new Request('http://x/', { method: 'POST', headers: { 'content-length': '5000' }, body: 'x' });
    await expect(readBodyBounded(declared, 100)).rejects.toMatchObject({ code: 'PAYLOAD_TOO_LARGE' });
  });

  it('a body that never ends is given up at the deadline (BUSY), not waited for', async () => {
    // The body never ends: an answer at all is the deadline's, and it names its 0.15 s (no wall-clock bound).
    await expect(readBodyBounded(trickle(['{"id":'], true), 100, 150)).rejects.toMatchObject({
      code: 'BUSY',
      message: 'the request body did not arrive within 0.15 s',
    });
  });
});
