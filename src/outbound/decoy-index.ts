/**
 * Every tenant's decoy values at once, for a text that names no tenant (berth's own API): whose
 * decoy does it carry, as written or inside base64? The per-tenant forms matcher (secret-forms.ts)
 * with thousands of tenants' values in it costs seconds per MiB; this looks each value up by its
 * first ANCHOR characters, with a rolling hash over the text (one multiply-add a character, a bit
 * table before any map lookup), and confirms a candidate against the whole value. Adding or
 * removing a tenant changes only its own entries: nothing is rebuilt while a request waits.
 */

/** Characters a value is found by: the shortest decoy value (an AWS key id) is this long. */
export const ANCHOR = 20;
const BASE = 0x01000193;
/** BASE^(ANCHOR-1) mod 2^32: what the character leaving the window weighed. */
const OUT = Array.from({ length: ANCHOR - 1 }).reduce<number>((p) => Math.imul(p, BASE), 1);
const FILTER_LOG2 = 20;

const hashOf = (s: string): number => {
  let h = 0;
  for (let i = 0; i < ANCHOR; i++) h = (Math.imul(h, BASE) + s.charCodeAt(i)) | 0;
  return h;
};
/** The bit a hash sets in the table (its high bits after a multiply: the low ones mix least). */
const slotOf = (h: number) => Math.imul(h, 0x85ebca6b) >>> (32 - FILTER_LOG2);

/** A base64 run long enough to carry the shortest value, decoded whole (standard or URL-safe). */
const BASE64_RUN = /[A-Za-z0-9+/_-]{28,}={0,2}/g;

export function createDecoyIndex<Owner>() {
  const owners = new Map<string, { owner: Owner; values: string[] }>();
  const byHash = new Map<number, Array<{ value: string; id: string }>>();
  let filter = new Uint32Array(1 << (FILTER_LOG2 - 5));
  const mark = (h: number) => {
    const slot = slotOf(h);
    filter[slot >>> 5] = (filter[slot >>> 5] ?? 0) | (1 << (slot & 31));
  };

  /** The first owner `accept` takes of a value that starts at some place in `text`, as written. */
  function scan(text: string, accept: (owner: Owner) => boolean): Owner | undefined {
    if (text.length < ANCHOR) return undefined;
    let h = hashOf(text);
    for (let at = 0; ; at++) {
      const slot = slotOf(h);
      if (filter[slot >>> 5]! & (1 << (slot & 31))) {
        for (const c of byHash.get(h) ?? []) {
          const owner = text.startsWith(c.value, at) ? owners.get(c.id)?.owner : undefined;
          if (owner !== undefined && accept(owner)) return owner;
        }
      }
      if (at + ANCHOR >= text.length) return undefined;
      h = (Math.imul((h - Math.imul(text.charCodeAt(at), OUT)) | 0, BASE) + text.charCodeAt(at + ANCHOR)) | 0;
    }
  }

  return {
    size: () => owners.size,
    has: (id: string) => owners.has(id),
    /** An owner's values (each at least ANCHOR characters; shorter ones are not looked for), replacing what it had. */
    add(id: string, owner: Owner, values: readonly string[]): void {
      this.remove(id);
      const kept = values.filter((v) => v.length >= ANCHOR);
      owners.set(id, { owner, values: kept });
      for (const value of kept) {
        const h = hashOf(value);
        byHash.set(h, [...(byHash.get(h) ?? []), { value, id }]);
        mark(h);
      }
    },
    remove(id: string): void {
      const had = owners.get(id);
      if (!had) return;
      owners.delete(id);
      for (const value of had.values) {
        const h = hashOf(value);
        const left = (byHash.get(h) ?? []).filter((c) => c.id !== id);
        if (left.length) byHash.set(h, left);
        else byHash.delete(h);
      }
      // A bit may be another value's too: the table is made again from what is left (a removal is rare).
      filter = new Uint32Array(filter.length);
      for (const h of byHash.keys()) mark(h);
    },
    /** Whose value `text` carries (the first `accept` takes): as written, then inside each base64 run of it, decoded (one level). */
    find(text: string, accept: (owner: Owner) => boolean = () => true): Owner | undefined {
      if (!owners.size) return undefined;
      const plain = scan(text, accept);
      if (plain !== undefined) return plain;
      for (const m of text.matchAll(BASE64_RUN)) {
        const run = m[0];
        const hit = scan(Buffer.from(run, run.includes('-') || run.includes('_') ? 'base64url' : 'base64').toString('latin1'), accept);
        if (hit !== undefined) return hit;
      }
      return undefined;
    },
  };
}

export type DecoyIndex<Owner> = ReturnType<typeof createDecoyIndex<Owner>>;
