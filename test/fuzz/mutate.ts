import fc from 'fast-check';
import { arbitraryFor, DeepNest, PROTO_KEYS, setOwn, type JsonSchema } from './schema.js';

const MB = 1024 * 1024;

/** Strings that broke (or could break) something: sizes, NUL, lone surrogates, names of prototype members, paths. */
export const POISON_STRINGS: readonly string[] = [
  'x'.repeat(MB),
  'é'.repeat(MB / 2),
  'a'.repeat(10_000),
  'a'.repeat(256),
  '\u0000',
  'a\u0000b',
  '\ud800',
  'a\udc00b',
  '\udfff\ud800',
  '__proto__',
  'constructor',
  'toString',
  'prototype',
  'hasOwnProperty',
  '..',
  '.',
  '../../../../../etc/passwd',
  '%00',
  '%2e%2e',
  'fz/../fz',
  '/',
  '',
  ' ',
  '\n',
  '\u202e',
  '😀'.repeat(64),
  '{message}',
  '$(id)',
  '-1',
  'null',
];

/** Values of every JSON type, for "wrong type". */
const WRONG_VALUES = fc.oneof(
  fc.integer(),
  fc.constantFrom(0, -1, 1.5, -0, 1e300, Number.MAX_SAFE_INTEGER + 2, 2 ** 31),
  fc.boolean(),
  fc.constant(null),
  fc.string({ maxLength: 8 }),
  fc.array(fc.integer(), { maxLength: 3 }),
  fc.dictionary(fc.string({ maxLength: 5 }), fc.integer(), { maxKeys: 2, noNullPrototype: true }),
);

export type Mutation =
  | { kind: 'none' }
  | { kind: 'drop-required'; pick: number }
  | { kind: 'unknown-key'; pick: number; key: string; value: unknown }
  | { kind: 'wrong-type'; pick: number; value: unknown }
  | { kind: 'poison-string'; pick: number; poison: number; append: boolean }
  | { kind: 'deep'; pick: number; depth: number }
  | { kind: 'proto-key'; pick: number; key: string }
  | { kind: 'wide'; pick: number; width: number; asObject: boolean }
  | { kind: 'whole'; value: unknown };

const pick = fc.nat();

/** How a JSON value (a body, tool arguments) gets broken. Biased to invalid input: about 1 in 5 is left alone. */
export const mutationArb: fc.Arbitrary<Mutation> = fc.oneof(
  { weight: 20, arbitrary: fc.constant({ kind: 'none' } as const) },
  { weight: 8, arbitrary: fc.record({ kind: fc.constant('drop-required' as const), pick }) },
  {
    weight: 10,
    arbitrary: fc.record({
      kind: fc.constant('unknown-key' as const),
      pick,
      key: fc.oneof(fc.constant('zz_fuzz_unknown'), fc.constantFrom(...PROTO_KEYS), fc.string({ minLength: 1, maxLength: 10 })),
      value: fc.oneof(fc.jsonValue({ maxDepth: 1 }), fc.constant({ members: ['x'] })),
    }),
  },
  { weight: 15, arbitrary: fc.record({ kind: fc.constant('wrong-type' as const), pick, value: WRONG_VALUES }) },
  {
    weight: 20,
    arbitrary: fc.record({
      kind: fc.constant('poison-string' as const),
      pick,
      poison: fc.nat({ max: POISON_STRINGS.length - 1 }),
      append: fc.boolean(),
    }),
  },
  { weight: 4, arbitrary: fc.record({ kind: fc.constant('deep' as const), pick, depth: fc.constantFrom(10_000, 1_000, 100) }) },
  {
    weight: 12,
    arbitrary: fc.record({
      kind: fc.constant('proto-key' as const),
      pick,
      key: fc.oneof({ weight: 3, arbitrary: fc.constant('__proto__') }, { weight: 2, arbitrary: fc.constantFrom(...PROTO_KEYS) }),
    }),
  },
  {
    weight: 3,
    arbitrary: fc.record({ kind: fc.constant('wide' as const), pick, width: fc.constantFrom(10_000, 100_000), asObject: fc.boolean() }),
  },
  {
    weight: 6,
    arbitrary: fc.record({
      kind: fc.constant('whole' as const),
      value: fc.oneof(
        fc.constantFrom(null, true, 0, 'x', [], [{}], '__proto__'),
        fc.jsonValue({ maxDepth: 1 }).filter((v) => typeof v !== 'object' || Array.isArray(v) || v === null),
      ),
    }),
  },
);

interface Loc {
  parent?: Record<string, unknown> | unknown[];
  key?: string | number;
  value: unknown;
  schema?: JsonSchema;
}

/** Which alternative of an anyOf describes this value (for walking into it). */
function resolve(schema: JsonSchema | undefined, value: unknown): JsonSchema | undefined {
  const alts = schema?.anyOf ?? schema?.oneOf;
  if (!alts) return schema;
  const isArr = Array.isArray(value);
  const isObj = typeof value === 'object' && value !== null && !isArr;
  return (
    alts.find((a) =>
      isArr ? a.type === 'array' : isObj ? a.type === 'object' || !!a.properties : a.type !== 'array' && a.type !== 'object',
    ) ?? alts[0]
  );
}

function locations(value: unknown, schema: JsonSchema | undefined): Loc[] {
  const out: Loc[] = [];
  const walk = (loc: Loc) => {
    out.push(loc);
    const s = resolve(loc.schema, loc.value);
    if (Array.isArray(loc.value)) {
      loc.value.forEach((v, i) => walk({ parent: loc.value as unknown[], key: i, value: v, schema: s?.items }));
    } else if (typeof loc.value === 'object' && loc.value !== null) {
      const obj = loc.value as Record<string, unknown>;
      for (const k of Object.keys(obj)) {
        const prop = s?.properties?.[k] ?? (typeof s?.additionalProperties === 'object' ? s.additionalProperties : undefined);
        walk({ parent: obj, key: k, value: obj[k], schema: prop });
      }
    }
  };
  walk({ value, schema });
  return out;
}

const isPlainObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

const typeName = (v: unknown) => (v === null ? 'null' : Array.isArray(v) ? 'array' : typeof v);

/**
 * Apply one mutation to a copy of a valid value. Returns the value, a label (what exactly was
 * done, for the example) and a cause (the kind of breakage, to group failures by).
 */
export function applyMutation(valid: unknown, schema: JsonSchema, m: Mutation): { value: unknown; label: string; cause: string } {
  const r = applyOne(valid, schema, m);
  const cause =
    m.kind === 'poison-string'
      ? `string ${Array.from(describeString(POISON_STRINGS[m.poison] as string))
          .slice(0, 16)
          .join('')}`
      : m.kind === 'wrong-type'
        ? `wrong type (${typeName(m.value)})`
        : m.kind === 'proto-key'
          ? `key "${m.key}" in a record`
          : m.kind === 'unknown-key'
            ? PROTO_KEYS.includes(m.key)
              ? `unknown key "${m.key}"`
              : 'unknown key'
            : m.kind === 'whole'
              ? `whole value: ${typeName(m.value)}`
              : m.kind === 'deep'
                ? 'deep nesting'
                : m.kind === 'none'
                  ? 'valid'
                  : m.kind;
  return { ...r, cause };
}

function applyOne(valid: unknown, schema: JsonSchema, m: Mutation): { value: unknown; label: string } {
  if (m.kind === 'none') return { value: valid, label: 'valid' };
  if (m.kind === 'whole') return { value: m.value, label: `whole body ${JSON.stringify(m.value)?.slice(0, 40)}` };
  const root = structuredClone(valid);
  const locs = locations(root, schema);
  const set = (loc: Loc, v: unknown): unknown => {
    if (loc.parent === undefined) return v;
    if (Array.isArray(loc.parent)) loc.parent[loc.key as number] = v;
    else setOwn(loc.parent, loc.key as string, v);
    return root;
  };
  const at = <T>(list: T[], n: number): T | undefined => (list.length ? list[n % list.length] : undefined);
  const where = (loc: Loc) => (loc.key === undefined ? '(root)' : String(loc.key));

  switch (m.kind) {
    case 'drop-required': {
      const cands = locs.filter(
        (l) => isPlainObject(l.value) && (resolve(l.schema, l.value)?.required ?? []).some((k) => k in (l.value as object)),
      );
      const loc = at(cands, m.pick);
      if (!loc) break;
      const req = (resolve(loc.schema, loc.value)?.required ?? []).filter((k) => k in (loc.value as object));
      const key = at(req, m.pick >> 3) as string;
      delete (loc.value as Record<string, unknown>)[key];
      return { value: root, label: `drop required "${key}"` };
    }
    case 'unknown-key':
    case 'proto-key': {
      const objs = locs.filter((l) => isPlainObject(l.value));
      if (m.kind === 'proto-key') {
        // A record the schema allows but the value lacks (e.g. metadata "teams"): add it, empty.
        for (const l of objs) {
          const props = resolve(l.schema, l.value)?.properties ?? {};
          for (const [k, ps] of Object.entries(props)) {
            if (!(k in (l.value as object)) && typeof ps.additionalProperties === 'object' && !ps.properties) {
              const rec = {};
              setOwn(l.value as object, k, rec);
              locs.push({ parent: l.value as Record<string, unknown>, key: k, value: rec, schema: ps });
            }
          }
        }
      }
      const records = locs.filter((l) => isPlainObject(l.value) && typeof resolve(l.schema, l.value)?.additionalProperties === 'object');
      const loc = at(m.kind === 'proto-key' && records.length ? records : objs, m.pick);
      if (!loc) break;
      const s = resolve(loc.schema, loc.value);
      let value: unknown = m.kind === 'unknown-key' ? m.value : null;
      if (m.kind === 'proto-key') {
        const existing = Object.values(loc.value as object)[0];
        value =
          existing !== undefined
            ? structuredClone(existing)
            : typeof s?.additionalProperties === 'object'
              ? sampleOne(s.additionalProperties, m.pick)
              : {};
      }
      setOwn(loc.value as object, m.key, value);
      return { value: root, label: `${m.kind === 'proto-key' ? 'proto key' : 'unknown key'} "${m.key}" at ${where(loc)}` };
    }
    case 'wrong-type': {
      const loc = at(locs, m.pick) as Loc;
      return { value: set(loc, m.value), label: `wrong type ${JSON.stringify(m.value)} at ${where(loc)}` };
    }
    case 'poison-string': {
      const strings = locs.filter((l) => typeof l.value === 'string');
      const loc = at(strings.length ? strings : locs, m.pick) as Loc;
      const poison = POISON_STRINGS[m.poison] as string;
      const v = m.append && typeof loc.value === 'string' ? `${loc.value}${poison}` : poison;
      return { value: set(loc, v), label: `string ${describeString(poison)}${m.append ? ' appended' : ''} at ${where(loc)}` };
    }
    case 'deep': {
      const loc = at(locs, m.pick) as Loc;
      return { value: set(loc, new DeepNest(m.depth)), label: `${m.depth} nested arrays at ${where(loc)}` };
    }
    case 'wide': {
      const loc = at(locs, m.pick) as Loc;
      let v: unknown;
      if (m.asObject) {
        const o: Record<string, unknown> = {};
        for (let i = 0; i < m.width / 10; i++) o[`k${i}`] = i;
        v = o;
      } else v = new Array(m.width).fill(0);
      return { value: set(loc, v), label: `${m.asObject ? `object of ${m.width / 10} keys` : `array of ${m.width}`} at ${where(loc)}` };
    }
  }
  return { value: valid, label: 'valid (mutation had no target)' };
}

export function describeString(s: string): string {
  if (s.length > 200) return `${JSON.stringify(s.slice(0, 8))}×${s.length}`;
  return JSON.stringify(s);
}

function sampleOne(schema: JsonSchema, seed: number): unknown {
  return fc.sample(
    arbitraryFor(schema, () => undefined),
    { seed, numRuns: 1 },
  )[0];
}
