import type { Readable, Writable } from 'node:stream';

/**
 * A request body read ahead before it goes on (to see whether it asks to be taken for another
 * method), then sent as it came: what was read first, then the rest as it streams.
 */
export interface PeekedBody {
  chunks: Buffer[];
  /** The whole body was read (else at least `limit` + 1 bytes, or the client went away). */
  complete: boolean;
}

/** Read up to `limit` bytes past which the answer is "not complete"; the stream is left paused. */
export function peekBody(body: Readable, limit: number): Promise<PeekedBody> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let settled = false;
    const settle = (complete: boolean) => {
      if (settled) return;
      settled = true;
      body.off('data', onData);
      body.off('end', onEnd);
      body.off('error', onGone);
      body.off('close', onGone);
      if (!complete) body.pause();
      resolve({ chunks, complete });
    };
    const onData = (chunk: Buffer) => {
      chunks.push(chunk);
      size += chunk.length;
      if (size > limit) settle(false);
    };
    const onEnd = () => settle(true);
    const onGone = () => settle(false);
    body.on('data', onData);
    body.once('end', onEnd);
    body.once('error', onGone);
    body.once('close', onGone);
  });
}

/** Send on a body: the peeked part first (if any), then what is still to come. */
export function sendBody(body: Readable, peeked: PeekedBody | undefined, to: Writable): void {
  if (!peeked) {
    body.pipe(to);
    return;
  }
  for (const chunk of peeked.chunks) to.write(chunk);
  if (peeked.complete) to.end();
  else body.pipe(to);
}
