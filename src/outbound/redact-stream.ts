import { Transform } from 'node:stream';

/**
 * A stream that masks every occurrence of some byte strings (a secret, the header value it was
 * sent in) with as many "*", so a response that echoes a request back never hands the value to
 * the container. Lengths stay the same (a Content-Length still holds); an occurrence split
 * across chunks is caught by holding back the last (longest needle − 1) bytes.
 */
export function redactStream(needles: readonly string[]): Transform {
  const patterns = [...new Set(needles)].filter((n) => n.length > 0).map((n) => Buffer.from(n, 'latin1'));
  const keep = Math.max(0, ...patterns.map((p) => p.length)) - 1;
  let carry = Buffer.alloc(0);
  return new Transform({
    transform(chunk: Buffer, _enc, done) {
      const buf = carry.length ? Buffer.concat([carry, chunk]) : Buffer.from(chunk);
      maskAll(buf, patterns);
      const cut = Math.max(0, buf.length - keep);
      carry = buf.subarray(cut);
      done(null, cut > 0 ? buf.subarray(0, cut) : undefined);
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
