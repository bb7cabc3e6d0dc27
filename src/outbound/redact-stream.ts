import { Transform } from 'node:stream';

/**
 * A stream that masks every occurrence of some byte strings (a secret, the header value it was
 * sent in) with as many "*", so a response that echoes a request back never hands the value to
 * the container. Lengths stay the same (a Content-Length still holds). Each chunk is masked in
 * place (no copy of the body); an occurrence split across chunks is caught in a small window
 * made of the held-back tail (longest needle − 1 bytes) and the next chunk's head.
 */
export function redactStream(needles: readonly string[]): Transform {
  const patterns = [...new Set(needles)].filter((n) => n.length > 0).map((n) => Buffer.from(n, 'latin1'));
  const keep = Math.max(0, ...patterns.map((p) => p.length)) - 1;
  let carry = Buffer.alloc(0);
  return new Transform({
    transform(input: Buffer, _enc, done) {
      const chunk = input;
      if (carry.length) {
        // The seam: the tail held back and the chunk's head, masked together, written back to both.
        const head = chunk.subarray(0, Math.min(keep, chunk.length));
        const window = Buffer.concat([carry, head]);
        maskAll(window, patterns);
        window.copy(carry, 0, 0, carry.length);
        window.copy(head, 0, carry.length);
      }
      maskAll(chunk, patterns);
      // What may still begin a needle that ends in the next chunk is held back.
      const all = carry.length + chunk.length;
      const emit = Math.max(0, all - keep);
      if (emit >= carry.length) {
        if (carry.length) this.push(carry);
        const cut = emit - carry.length;
        if (cut) this.push(chunk.subarray(0, cut));
        carry = Buffer.from(chunk.subarray(cut));
      } else {
        // A chunk shorter than the hold: everything stays held but what must go.
        const joined = Buffer.concat([carry, chunk]);
        if (emit) this.push(joined.subarray(0, emit));
        carry = joined.subarray(emit);
      }
      done();
    },
    flush(done) {
      done(null, carry.length ? carry : undefined);
    },
  });
}

/** Mask every occurrence of each pattern in place. */
export function maskAll(buf: Buffer, patterns: readonly Buffer[]): void {
  for (const p of patterns) {
    for (let at = buf.indexOf(p); at !== -1; at = buf.indexOf(p, at + p.length)) buf.fill(0x2a, at, at + p.length);
  }
}

/** The same on a string (a response header's value). */
export function maskText(text: string, needles: readonly string[]): string {
  let out = text;
  for (const n of needles) if (n) out = out.split(n).join('*'.repeat(n.length));
  return out;
}
