/**
 * Every common form a granted host may write a secret back in, and one scan that finds them.
 *
 * A value is looked for as itself, as its hex, and as its base64 (standard or URL-safe) at each
 * of the three alignments a prefix can give it (only the value's whole 3-byte groups: the two
 * edge characters also carry a neighbour's bits and change with it). Each character of those
 * forms is matched case-insensitively and in any of the escapes servers write: `%XX`, `+` for a
 * space, `\uXXXX`, `\xXX`, a backslash before punctuation (`\/`), and HTML entities (decimal,
 * hex, named). The escapes are decoded one level only: an escape of an escape is not a match.
 */

/** Forms per value: itself, hex, base64 at three alignments. */
const FORMS_PER_VALUE = 5;
/** Compiled value sets kept (a project's values toward a host change rarely). */
const CACHED_SETS = 32;
/** A form's characters with nothing but letters and digits left, shorter than this, is not looked for in header names. */
const MIN_BARE = 8;
/** Digits an HTML numeric entity may have (leading zeros included): bounds the longest form. */
const MAX_DEC_DIGITS = 7;
const MAX_HEX_DIGITS = 6;

/** HTML5's named references for printable ASCII (lowercase: matched without case). */
const NAMED: Record<string, number> = Object.fromEntries(
  Object.entries({
    '!': ['excl'],
    '"': ['quot'],
    '#': ['num'],
    $: ['dollar'],
    '%': ['percnt'],
    '&': ['amp'],
    "'": ['apos'],
    '(': ['lpar'],
    ')': ['rpar'],
    '*': ['ast', 'midast'],
    '+': ['plus'],
    ',': ['comma'],
    '.': ['period'],
    '/': ['sol'],
    ':': ['colon'],
    ';': ['semi'],
    '<': ['lt'],
    '=': ['equals'],
    '>': ['gt'],
    '?': ['quest'],
    '@': ['commat'],
    '[': ['lsqb', 'lbrack'],
    '\\': ['bsol'],
    ']': ['rsqb', 'rbrack'],
    '^': ['hat'],
    _: ['lowbar', 'underbar'],
    '`': ['grave', 'diacriticalgrave'],
    '{': ['lcub', 'lbrace'],
    '|': ['verbar', 'vert', 'verticalline'],
    '}': ['rcub', 'rbrace'],
  }).flatMap(([c, names]) => names.map((n) => [n, c.charCodeAt(0)] as const)),
);
/** The names as a trie over a-z: node n's child for letter l is NAME_NEXT[n * 26 + l] (0: none); NAME_CODE[n], the byte a name ending there stands for. */
const NAME_NEXT: number[] = new Array<number>(26).fill(0);
const NAME_CODE: number[] = [-1];
for (const [name, code] of Object.entries(NAMED)) {
  let node = 0;
  for (const ch of name) {
    const slot = node * 26 + ch.charCodeAt(0) - 0x61;
    if (!NAME_NEXT[slot]) {
      NAME_NEXT[slot] = NAME_CODE.length;
      NAME_CODE.push(-1);
      NAME_NEXT.push(...new Array<number>(26).fill(0));
    }
    node = NAME_NEXT[slot] as number;
  }
  NAME_CODE[node] = code;
}

/** ASCII lower case, byte for byte. */
const FOLD = new Uint8Array(256).map((_, b) => (b >= 0x41 && b <= 0x5a ? b + 32 : b));
/** Bytes that may begin an escape. */
const ESCAPES = new Uint8Array(256);
const ESCAPE_BYTES = [...'%\\&+'].map((c) => c.charCodeAt(0));
for (const b of ESCAPE_BYTES) ESCAPES[b] = 1;
const HEX = new Int8Array(256).fill(-1);
for (let d = 0; d < 16; d++) {
  HEX[d.toString(16).charCodeAt(0)] = d;
  HEX[d.toString(16).toUpperCase().charCodeAt(0)] = d;
}
const isAlnum = (b: number) => (b >= 0x30 && b <= 0x39) || (b >= 0x61 && b <= 0x7a) || (b >= 0x41 && b <= 0x5a);

/** The longest escape of each (folded) byte: a form's span is at most the sum over its characters. */
const WIDEST = new Uint16Array(256).fill(MAX_DEC_DIGITS + 3);
for (const [name, code] of Object.entries(NAMED))
  WIDEST[FOLD[code] as number] = Math.max(WIDEST[FOLD[code] as number] as number, name.length + 2);

interface Form {
  /** Two accepted (folded) bytes per position: equal, or a base64 character and its URL-safe twin. */
  a: Uint8Array;
  b: Uint8Array;
}

export interface SecretForms {
  /** The longest text any form can take: what a stream must hold back to find one cut in two. */
  longest: number;
  /** [start, end) of every form starting in [from, to) of `buf`, read up to its end, as flat pairs. */
  find(buf: Uint8Array, from: number, to: number): number[];
  /** Does a text with only letters and digits left (lower case) hold a form so reduced? (Header names: "x-sx-9-ab3…".) */
  inBare(text: string): boolean;
}

const byteAt = (buf: Uint8Array, i: number, end: number): number => (i < end ? (buf[i] as number) : -1);
const hexAt = (buf: Uint8Array, i: number, end: number): number => (i < end ? (HEX[buf[i] as number] as number) : -1);

/** An escape at `q` (read no further than `end`): its byte in the low 8 bits and its length above, or -1. */
function decodeAt(buf: Uint8Array, q: number, end: number): number {
  const c = buf[q] as number;
  if (c === 0x2b) return (1 << 8) | 0x20;
  if (c === 0x25) {
    const h = hexAt(buf, q + 1, end);
    const l = hexAt(buf, q + 2, end);
    return h >= 0 && l >= 0 ? (3 << 8) | (h * 16 + l) : -1;
  }
  if (c === 0x5c) {
    const n = byteAt(buf, q + 1, end);
    if (n === 0x75 || n === 0x55) {
      const h = hexAt(buf, q + 4, end);
      const l = hexAt(buf, q + 5, end);
      return hexAt(buf, q + 2, end) === 0 && hexAt(buf, q + 3, end) === 0 && h >= 0 && l >= 0 ? (6 << 8) | (h * 16 + l) : -1;
    }
    if (n === 0x78 || n === 0x58) {
      const h = hexAt(buf, q + 2, end);
      const l = hexAt(buf, q + 3, end);
      return h >= 0 && l >= 0 ? (4 << 8) | (h * 16 + l) : -1;
    }
    return n >= 0x20 && n < 0x7f && !isAlnum(n) ? (2 << 8) | n : -1;
  }
  if (c !== 0x26) return -1;
  if (byteAt(buf, q + 1, end) === 0x23) {
    const x = byteAt(buf, q + 2, end);
    const hex = x === 0x78 || x === 0x58;
    const first = q + (hex ? 3 : 2);
    const last = first + (hex ? MAX_HEX_DIGITS : MAX_DEC_DIGITS);
    let k = first;
    let value = 0;
    for (; k < last; k++) {
      const b = byteAt(buf, k, end);
      const d = hex ? hexAt(buf, k, end) : b >= 0x30 && b <= 0x39 ? b - 0x30 : -1;
      if (d < 0) break;
      value = value * (hex ? 16 : 10) + d;
    }
    return k > first && byteAt(buf, k, end) === 0x3b && value < 256 ? ((k + 1 - q) << 8) | value : -1;
  }
  let node = 0;
  let k = q + 1;
  for (; ; k++) {
    const b = FOLD[byteAt(buf, k, end) & 0xff] as number;
    if (b < 0x61 || b > 0x7a) break;
    node = NAME_NEXT[node * 26 + b - 0x61] as number;
    if (!node) return -1;
  }
  const code = NAME_CODE[node] as number;
  return code >= 0 && byteAt(buf, k, end) === 0x3b ? ((k + 1 - q) << 8) | code : -1;
}

/** Steps one match may take (escapes of "&", "%" and "\" can be read two ways); past it the span read so far is masked. */
const stepsFor = (f: Form) => 8 * f.a.length + 64;

/** Where `f` read from `p` ends, or -1. Backtracks only where a byte matches both as itself and as an escape. */
function matchAt(buf: Uint8Array, p: number, end: number, f: Form): number {
  const n = f.a.length;
  let q = p;
  let i = 0;
  let furthest = p;
  let steps = stepsFor(f);
  let alternatives: number[] | undefined;
  for (;;) {
    if (i === n) return q;
    if (--steps < 0) return furthest;
    let next = -1;
    if (q < end) {
      const byte = buf[q] as number;
      const want = f.a[i] as number;
      const twin = f.b[i] as number;
      const plain = FOLD[byte] === want || FOLD[byte] === twin;
      if (ESCAPES[byte]) {
        const d = decodeAt(buf, q, end);
        const c = d >= 0 ? (FOLD[d & 0xff] as number) : -1;
        if (c === want || c === twin) {
          if (plain) (alternatives ??= []).push(q + 1, i + 1);
          next = q + (d >> 8);
        }
      }
      if (next < 0 && plain) next = q + 1;
    }
    if (next >= 0) {
      q = next;
      i++;
      if (q > furthest) furthest = q;
    } else if (alternatives?.length) {
      i = alternatives.pop() as number;
      q = alternatives.pop() as number;
    } else return -1;
  }
}

function formOf(text: string, twins: Record<string, string> = {}): Form {
  const a = new Uint8Array(text.length);
  const b = new Uint8Array(text.length);
  for (let i = 0; i < text.length; i++) {
    a[i] = FOLD[text.charCodeAt(i) & 0xff] as number;
    b[i] = FOLD[(twins[text[i] as string] ?? (text[i] as string)).charCodeAt(0) & 0xff] as number;
  }
  return { a, b };
}

/** The forms of one value, as text: itself, hex, and base64 of each alignment's whole groups. */
function formTexts(value: string): Array<{ text: string; base64: boolean }> {
  const bytes = Buffer.from(value, 'latin1');
  const out = [
    { text: value, base64: false },
    { text: bytes.toString('hex'), base64: false },
  ];
  for (let skip = 0; skip < 3; skip++) {
    const whole = Math.floor((bytes.length - skip) / 3) * 3;
    if (whole >= 3) out.push({ text: bytes.subarray(skip, skip + whole).toString('base64'), base64: true });
  }
  return out.slice(0, FORMS_PER_VALUE);
}

const bare = (text: string) => text.toLowerCase().replace(/[^a-z0-9]/g, '');

function compile(values: readonly string[]): SecretForms {
  const texts = [
    ...new Map(
      values
        .filter((v) => v.length > 0)
        .flatMap(formTexts)
        .map((t) => [t.text, t]),
    ).values(),
  ];
  const forms = texts.map((t) => formOf(t.text, t.base64 ? { '+': '-', '/': '_' } : {}));
  const bares = [...new Set(texts.map((t) => bare(t.text)).filter((t) => t.length >= MIN_BARE))];
  // The forms whose first character is this (folded) byte; START: 1, a byte a form may begin with as itself; 2, an escape.
  const byFirst: Form[][] = Array.from({ length: 256 }, () => []);
  const start = new Uint8Array(256);
  for (const f of forms) {
    for (const c of new Set([f.a[0] as number, f.b[0] as number])) {
      byFirst[c]?.push(f);
      start[c] = 1;
      if (c >= 0x61 && c <= 0x7a) start[c - 32] = 1;
    }
  }
  for (let b = 0; b < 256; b++) if (ESCAPES[b] && (b !== 0x2b || byFirst[0x20]?.length)) start[b] = (start[b] as number) | 2;
  // Two bytes that may begin a form as themselves (the second may also begin an escape): most
  // bytes that could begin one begin nothing, and the next byte says so without a match.
  const pairs = new Uint8Array(65536);
  const cases = (c: number) => (c >= 0x61 && c <= 0x7a ? [c, c - 32] : [c]);
  for (const f of forms) {
    const seconds = f.a.length > 1 ? [...cases(f.a[1] as number), ...cases(f.b[1] as number), ...ESCAPE_BYTES] : [...Array(256).keys()];
    for (const first of [...cases(f.a[0] as number), ...cases(f.b[0] as number)])
      for (const second of seconds) pairs[(first << 8) | second] = 1;
  }
  const tryFrom = (buf: Uint8Array, p: number, first: number, end: number): number => {
    let reach = end;
    for (const f of byFirst[first] as Form[]) reach = Math.max(reach, matchAt(buf, p, buf.length, f));
    return reach;
  };
  let longest = 0;
  for (const f of forms) {
    let span = 0;
    for (let i = 0; i < f.a.length; i++) span += Math.max(WIDEST[f.a[i] as number] as number, WIDEST[f.b[i] as number] as number);
    longest = Math.max(longest, span);
  }
  return {
    longest,
    find(buf, from, to) {
      const spans: number[] = [];
      for (let p = from; p < to; p++) {
        const byte = buf[p] as number;
        const kind = start[byte] as number;
        if (kind === 0) continue;
        let end = -1;
        if (kind & 1 && (p + 1 >= buf.length || pairs[(byte << 8) | (buf[p + 1] as number)]))
          end = tryFrom(buf, p, FOLD[byte] as number, end);
        if (kind & 2) {
          const d = decodeAt(buf, p, buf.length);
          if (d >= 0) end = tryFrom(buf, p, FOLD[d & 0xff] as number, end);
        }
        if (end > p) spans.push(p, end);
      }
      return spans;
    },
    inBare(text) {
      const reduced = bare(text);
      return bares.some((b) => reduced.includes(b));
    },
  };
}

const cache = new Map<string, SecretForms>();

/** The forms of these values, compiled once for a while. */
export function formsOf(values: readonly string[]): SecretForms {
  const key = values.join('\0');
  const known = cache.get(key);
  if (known) {
    cache.delete(key);
    cache.set(key, known);
    return known;
  }
  const made = compile(values);
  if (cache.size >= CACHED_SETS) cache.delete(cache.keys().next().value as string);
  cache.set(key, made);
  return made;
}
