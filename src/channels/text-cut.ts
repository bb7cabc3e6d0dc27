/**
 * Cutting a reply into parts a chat service takes, never through a character: half a surrogate
 * pair makes Synapse answer 500 and tdlib refuse the text (the whole reply was lost), and an emoji
 * of several code points (skin tones, ZWJ families, flags) cut in two shows as two broken ones.
 */
const graphemes = new Intl.Segmenter(undefined, { granularity: 'grapheme' });
/** How far back a cut looks for a grapheme boundary: a longer cluster (zalgo) is cut between code points. */
const LOOK_BACK = 128;
/** Right context the segmenter sees past the cut (a cluster's rules look a few characters ahead). */
const LOOK_AHEAD = 32;

const isHigh = (c: number) => c >= 0xd800 && c <= 0xdbff;
const isLow = (c: number) => c >= 0xdc00 && c <= 0xdfff;

/** The longest prefix length, at most `max` UTF-16 units, that ends between two graphemes (at least one code point). */
export function graphemeCut(text: string, max: number): number {
  if (text.length <= max) return text.length;
  if (max <= 0) return 0;
  const from = Math.max(0, max - LOOK_BACK);
  let cut = 0;
  for (const { index } of graphemes.segment(text.slice(from, max + LOOK_AHEAD))) {
    if (index > max - from) break;
    if (index > 0 || from === 0) cut = from + index;
  }
  if (cut > 0) return cut;
  // One cluster longer than the look-back: cut between code points instead.
  const back = isLow(text.charCodeAt(max)) && isHigh(text.charCodeAt(max - 1)) ? max - 1 : max;
  return back > 0 ? back : Math.min(text.length, 2);
}

/** Bytes a character takes in the JSON a Matrix homeserver hashes (control characters are \u00XX escapes). */
function jsonBytes(code: number): number {
  if (code < 0x20) return code === 0x08 || code === 0x09 || code === 0x0a || code === 0x0c || code === 0x0d ? 2 : 6;
  if (code === 0x22 || code === 0x5c) return 2;
  if (code < 0x80) return 1;
  if (code < 0x800) return 2;
  return code < 0x10000 ? 3 : 4;
}

/** UTF-16 units of the longest prefix whose JSON string body stays within `maxBytes`, at code point boundaries. */
function jsonFit(text: string, maxUnits: number, maxBytes: number): number {
  let bytes = 0;
  let i = 0;
  while (i < text.length && i < maxUnits) {
    const code = text.codePointAt(i)!;
    const width = code > 0xffff ? 2 : 1;
    if (i + width > maxUnits) break;
    bytes += jsonBytes(code);
    if (bytes > maxBytes) break;
    i += width;
  }
  return i;
}

export interface PartLimits {
  /** UTF-16 units per part (the service's character count). */
  units: number;
  /** Bytes of a part as a JSON string (Matrix: an event's size is counted in its JSON). */
  jsonBytes?: number;
  /** Parts at most; what is left is cut, and the last part says so. */
  parts: number;
}

const CUT_NOTE = '\n[… the reply was cut here]';

/** A reply as parts within the limits, cut between graphemes; empty text is one "(empty)" part. */
export function splitParts(text: string, limits: PartLimits): string[] {
  if (text.length === 0) return ['(empty)'];
  const parts: string[] = [];
  let rest = text;
  while (rest.length > 0 && parts.length < limits.parts) {
    const units = limits.jsonBytes === undefined ? Math.min(rest.length, limits.units) : jsonFit(rest, limits.units, limits.jsonBytes);
    const cut = units >= rest.length ? rest.length : graphemeCut(rest, units);
    parts.push(rest.slice(0, cut));
    rest = rest.slice(cut);
  }
  if (rest.length > 0) {
    const last = parts.length - 1;
    parts[last] = `${parts[last]!.slice(0, graphemeCut(parts[last]!, parts[last]!.length - CUT_NOTE.length))}${CUT_NOTE}`;
  }
  return parts;
}
