import { Readable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { maskText, redactStream } from '../../src/outbound/redact-stream.js';

/** The masked body, fed to the stream in `chunks`. */
async function through(values: string[], chunks: Buffer[]): Promise<string> {
  const out: Buffer[] = [];
  await new Promise<void>((resolve, reject) =>
    Readable.from(chunks)
      .pipe(redactStream(values))
      .on('data', (c: Buffer) => out.push(c))
      .on('end', resolve)
      .on('error', reject),
  );
  return Buffer.concat(out).toString('latin1');
}

const rand = (n: number) => Math.floor(Math.random() * n);

/** `text` cut into random chunks: many of one to four bytes, some longer. */
function randomChunks(text: string): Buffer[] {
  const bytes = Buffer.from(text, 'latin1');
  const chunks: Buffer[] = [];
  for (let at = 0; at < bytes.length;) {
    const n = 1 + rand(Math.random() < 0.5 ? 4 : 40);
    chunks.push(Buffer.from(bytes.subarray(at, at + n)));
    at += n;
  }
  return chunks;
}

// The outside report's value (a base64 token: "+", "/", "=") and one holding every other kind of punctuation.
const VALUE = 'Sx+9/aB3cD7eF1gH2iJ4kL6mN8oP0qR=';
const PUNCT = 'k9&<z>"Q\'u`o|t\\e 1/2+3=4%5;6#7?8@Zx';
const USER = 'x-access-token';

const hex2 = (c: string) => c.charCodeAt(0).toString(16).padStart(2, '0');
const isAlnum = (c: string) => /^[A-Za-z0-9]$/.test(c);
const each = (s: string, f: (c: string) => string) => [...s].map(f).join('');
const NAMED: Record<string, string> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&apos;',
  '/': '&sol;',
  '+': '&plus;',
  '=': '&equals;',
  '`': '&grave;',
  '|': '&verbar;',
  '\\': '&bsol;',
  '%': '&percnt;',
  ';': '&semi;',
  '#': '&num;',
  '?': '&quest;',
  '@': '&commat;',
};

/** How ordinary servers write a string back: every form the masker must catch, whole. */
function encodings(s: string): Array<[string, string]> {
  return [
    ['exact', s],
    ['upper case', s.toUpperCase()],
    ['lower case', s.toLowerCase()],
    ['encodeURIComponent', encodeURIComponent(s)],
    ['percent, lower-case hex', encodeURIComponent(s).replace(/%[0-9A-F]{2}/g, (m) => m.toLowerCase())],
    ['percent, every byte', each(s, (c) => `%${hex2(c).toUpperCase()}`)],
    ['form encoding', new URLSearchParams({ t: s }).toString().slice(2)],
    ['PHP json_encode (\\/)', JSON.stringify(s).slice(1, -1).replace(/\//g, '\\/')],
    [
      'Go JSON (\\u00XX for <>&)',
      JSON.stringify(s)
        .slice(1, -1)
        .replace(/[<>&]/g, (c) => `\\u00${hex2(c)}`),
    ],
    ['JSON \\u00XX, every non-alphanumeric', each(s, (c) => (isAlnum(c) ? c : `\\u00${hex2(c).toUpperCase()}`))],
    ['JSON \\u00xx, every character', each(s, (c) => `\\u00${hex2(c)}`)],
    ['\\xXX escapes', each(s, (c) => (isAlnum(c) ? c : `\\x${hex2(c)}`))],
    ['backslash before punctuation', each(s, (c) => (isAlnum(c) ? c : `\\${c}`))],
    ['HTML decimal entities', each(s, (c) => (isAlnum(c) ? c : `&#${c.charCodeAt(0)};`))],
    ['HTML decimal entities, leading zeros', each(s, (c) => (isAlnum(c) ? c : `&#00${c.charCodeAt(0)};`))],
    ['HTML hex entities', each(s, (c) => (isAlnum(c) ? c : `&#x${hex2(c).toUpperCase()};`))],
    ['HTML hex entities, lower case, zeros', each(s, (c) => (isAlnum(c) ? c : `&#x00${hex2(c)};`))],
    ['HTML named entities', each(s, (c) => NAMED[c] ?? c)],
    ['HTML named entities, upper case', each(s, (c) => NAMED[c]?.toUpperCase() ?? c)],
    ['HTML entities, every character', each(s, (c) => `&#${c.charCodeAt(0)};`)],
    ['hex', Buffer.from(s).toString('hex')],
    ['HEX', Buffer.from(s).toString('hex').toUpperCase()],
    ['mixed: upper-cased, then percent-encoded', encodeURIComponent(s.toUpperCase())],
  ];
}

/**
 * The bytes of `value` a masked copy of `encoded` still shows, in the encoding `kind`: for a
 * direct encoding, every character of it left unmasked; for base64 (`prefix` bytes before the
 * value), the characters whose six bits are all the value's.
 */
function shown(masked: string, encoded: string, kind: 'direct' | { prefix: number; length: number }): number {
  if (kind === 'direct') return [...masked].filter((c) => c !== '*').length;
  let count = 0;
  for (let k = 0; k < masked.length; k++) {
    const from = 6 * k;
    if (from >= 8 * kind.prefix && from + 6 <= 8 * (kind.prefix + kind.length) && masked[k] !== '*') count++;
  }
  expect(masked.length).toBe(encoded.length);
  return count;
}

/** The characters of a percent-encoded text, "*" where any byte of a character's form was masked. */
function unpercent(encoded: string, masked: string): string {
  let out = '';
  for (let at = 0; at < encoded.length;) {
    const width = encoded[at] === '%' ? 3 : 1;
    const piece = masked.slice(at, at + width);
    out += piece.includes('*') ? '*' : decodeURIComponent(encoded.slice(at, at + width));
    at += width;
  }
  return out;
}

describe('redactStream', () => {
  it('masks a value in every common encoding, whole, in a body cut anywhere and in a header value', async () => {
    for (const value of [VALUE, PUNCT]) {
      for (const [name, encoded] of encodings(value)) {
        const body = `{"before":"~~", "echo":"${encoded}", "after":"~~"}`;
        const expected = body.replace(encoded, '*'.repeat(encoded.length));
        expect(maskText(body, [value]), `${name}: ${encoded}`).toBe(expected);
        for (let round = 0; round < 5; round++) expect(await through([value], randomChunks(body)), `${name}, in chunks`).toBe(expected);
      }
    }
  });

  it('masks base64 of the value at every alignment (standard and URL-safe), and of the Basic credential, leaving at most two characters at each edge', async () => {
    const credential = Buffer.from(`${USER}:${VALUE}`).toString('base64');
    const cases: Array<[string, string, number, number, boolean]> = [];
    for (const [secret, of] of [
      [VALUE, 'value'],
      [credential, 'credential'],
    ] as const) {
      for (const prefix of ['', 'a', 'ab', 'Bearer ', 'Basic ', `${USER}:`]) {
        const std = Buffer.from(`${prefix}${secret}!!`).toString('base64');
        cases.push([`base64 of ${of} after ${JSON.stringify(prefix)}`, std, prefix.length, secret.length, false]);
        cases.push([
          `base64url of ${of} after ${JSON.stringify(prefix)}`,
          std.replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, ''),
          prefix.length,
          secret.length,
          false,
        ]);
        cases.push([
          `base64 of ${of}, percent-encoded, after ${JSON.stringify(prefix)}`,
          encodeURIComponent(std),
          prefix.length,
          secret.length,
          true,
        ]);
      }
    }
    for (const [name, encoded, prefix, length, percent] of cases) {
      const body = `<p>${encoded}</p>`;
      const out = maskText(body, [VALUE, credential]);
      const streamed = await through([VALUE, credential], randomChunks(body));
      expect(streamed, name).toBe(out);
      const masked = out.slice(3, -4);
      // Percent-encoded: a base64 character is shown when none of its (one or three) bytes is masked.
      const logical = percent ? unpercent(encoded, masked) : masked;
      expect(shown(logical, percent ? decodeURIComponent(encoded) : encoded, { prefix, length }), `${name}: ${masked}`).toBeLessThanOrEqual(
        4,
      );
    }
    // The bare credential, as a host that echoes what follows "Basic " writes it back.
    expect(maskText(`credential: ${credential}`, [VALUE, credential])).toBe(`credential: ${'*'.repeat(credential.length)}`);
  });

  it('masks the same wherever a stream is cut, with encoded forms planted among near misses (300 random bodies)', async () => {
    const values = [VALUE, 'ghp_SECRET123abc', PUNCT];
    const forms = values.flatMap((v) => encodings(v).map(([, e]) => e));
    for (let round = 0; round < 300; round++) {
      let body = '';
      for (let i = 0; i < 12; i++) {
        const form = forms[rand(forms.length)] as string;
        // A form, or a form cut short (what must not be masked, nor swallow what follows).
        body += Math.random() < 0.4 ? form : `${form.slice(0, rand(form.length))}~`;
      }
      expect(await through(values, randomChunks(body))).toBe(maskText(body, values));
    }
  });

  it('keeps the length, so a Content-Length still holds, and masks nothing else', async () => {
    const body = `{"echo":"Bearer ghp_SECRET123", "other":"ghp_SECRET12 and %67hp_SECRET1 stay"}`;
    const out = await through(['ghp_SECRET123'], [Buffer.from(body.slice(0, 20)), Buffer.from(body.slice(20))]);
    expect(out).toBe(`{"echo":"Bearer *************", "other":"ghp_SECRET12 and %67hp_SECRET1 stay"}`);
    expect(out.length).toBe(body.length);
  });
});
