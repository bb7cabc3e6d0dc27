import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http';
import { Transform } from 'node:stream';
import { formsOf, type SecretForms } from './secret-forms.js';

/**
 * Masking of answers from a granted host: every form of each secret value (secret-forms.ts)
 * becomes as many "*" as it took, so lengths stay (a Content-Length still holds). Forms are
 * looked for in the bytes as they came; masks are applied afterwards, so one form masked
 * never hides another that overlaps it.
 */

const STAR = 0x2a;

function fill(buf: Uint8Array, spans: readonly number[], upTo: number): void {
  for (let k = 0; k < spans.length; k += 2) buf.fill(STAR, spans[k] as number, Math.min(spans[k + 1] as number, upTo));
}

/**
 * A stream that masks the values' forms. A form cut across chunks is found because the last
 * `longest - 1` bytes are held back, unmasked, until the next chunk (or the end) comes: every
 * form is looked for once, from where it starts, with all its bytes at hand. Each chunk is
 * masked in place; only the held bytes are copied.
 */
export function redactStream(values: readonly string[]): Transform {
  const forms = formsOf(values);
  const hold = Math.max(0, forms.longest - 1);
  let held = Buffer.alloc(0);
  // Bytes at the head of `held` that a form begun before them covers.
  let covered = 0;
  const pass = (data: Buffer, upTo: number): void => {
    const spans = forms.find(data, 0, upTo);
    fill(data, [0, covered], upTo);
    fill(data, spans, upTo);
    let reach = 0;
    for (let k = 1; k < spans.length; k += 2) reach = Math.max(reach, spans[k] as number);
    covered = Math.max(0, reach - upTo, covered - upTo);
  };
  return new Transform({
    transform(chunk: Buffer, _enc, done) {
      const data = held.length ? Buffer.concat([held, chunk]) : chunk;
      const upTo = Math.max(0, data.length - hold);
      pass(data, upTo);
      if (upTo) this.push(data.subarray(0, upTo));
      held = Buffer.from(data.subarray(upTo));
      done();
    },
    flush(done) {
      pass(held, held.length);
      done(null, held.length ? held : undefined);
    },
  });
}

/** Mask the values' forms in a whole buffer, in place. */
export function maskBuffer(buf: Buffer, values: readonly string[] | SecretForms): void {
  const forms = Array.isArray(values) ? formsOf(values) : (values as SecretForms);
  fill(buf, forms.find(buf, 0, buf.length), buf.length);
}

/** The same on a string (a header's value: Node reads header bytes as latin1). */
export function maskText(text: string, values: readonly string[] | SecretForms): string {
  const buf = Buffer.from(text, 'latin1');
  maskBuffer(buf, values);
  return buf.toString('latin1');
}

/**
 * An answer's headers, fit to hand back: a header whose name holds a form (even with its
 * punctuation changed, as a name cannot hold "/" or "=") is dropped; each value has its forms
 * masked, and a value that still holds one once punctuation is ignored is masked whole.
 */
export function maskHeaders(headers: IncomingHttpHeaders, values: readonly string[], skip: (name: string) => boolean): OutgoingHttpHeaders {
  const forms = formsOf(values);
  const out: OutgoingHttpHeaders = {};
  const one = (v: string): string => {
    const masked = maskText(v, forms);
    return forms.inBare(masked) ? '*'.repeat(masked.length) : masked;
  };
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined || skip(name)) continue;
    if (values.length === 0) {
      out[name] = value;
      continue;
    }
    if (maskText(name, forms) !== name || forms.inBare(name)) continue;
    out[name] = Array.isArray(value) ? value.map(one) : one(String(value));
  }
  return out;
}
