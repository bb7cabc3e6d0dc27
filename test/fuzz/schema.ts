import fc from 'fast-check';

/**
 * The part of JSON Schema that berth's /openapi.json (OpenAPI 3.0) and the MCP tools' inputSchema
 * (draft-7, from z.toJSONSchema) use. Everything else is treated as "any value".
 */
export interface JsonSchema {
  type?: string | string[];
  properties?: Record<string, JsonSchema>;
  required?: string[];
  additionalProperties?: boolean | JsonSchema;
  propertyNames?: JsonSchema;
  items?: JsonSchema;
  minItems?: number;
  maxItems?: number;
  minLength?: number;
  maxLength?: number;
  pattern?: string;
  enum?: unknown[];
  const?: unknown;
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: number | boolean;
  exclusiveMaximum?: number | boolean;
  anyOf?: JsonSchema[];
  oneOf?: JsonSchema[];
  allOf?: JsonSchema[];
  nullable?: boolean;
  default?: unknown;
}

/** Keys that are dangerous as own properties of plain objects. */
export const PROTO_KEYS = ['__proto__', 'constructor', 'toString', 'prototype', 'hasOwnProperty', 'valueOf'];

/** A placeholder serialised as 10,000 nested arrays (JSON.stringify would do it too, but slowly and recursively). */
export class DeepNest {
  constructor(readonly depth: number) {}
}

/** An own enumerable property, also for "__proto__" (plain assignment would set the prototype). */
export function setOwn(obj: object, key: string, value: unknown): void {
  Object.defineProperty(obj, key, { value, enumerable: true, writable: true, configurable: true });
}

const DEEP_MARK = '\u0001fuzz-deep\u0001';

/** JSON text of a generated value; DeepNest placeholders become real nesting. */
export function toJsonText(value: unknown): string {
  const depths: number[] = [];
  const text = JSON.stringify(value, (_k, v: unknown) => {
    if (v instanceof DeepNest) {
      depths.push(v.depth);
      return `${DEEP_MARK}${depths.length - 1}`;
    }
    return v;
  });
  if (text === undefined) return '';
  if (!depths.length) return text;
  return text.replace(/"\\u0001fuzz-deep\\u0001(\d+)"/g, (_m, i: string) => {
    const d = depths[Number(i)] ?? 1;
    return '['.repeat(d) + ']'.repeat(d);
  });
}

/** Per-field overrides: fixture names for "name", "session", ... (return undefined for none). */
export type Hints = (field: string, schema: JsonSchema, base: () => fc.Arbitrary<unknown>) => fc.Arbitrary<unknown> | undefined;

const types = (s: JsonSchema): string[] => (s.type === undefined ? [] : Array.isArray(s.type) ? s.type : [s.type]);

const clampInt = (n: number) => Math.max(-0x7fffffff, Math.min(0x7fffffff, n));

function stringArb(s: JsonSchema): fc.Arbitrary<string> {
  if (s.pattern) {
    const re = new RegExp(s.pattern);
    return fc.stringMatching(re).filter((v) => (s.maxLength === undefined || v.length <= s.maxLength) && v.length >= (s.minLength ?? 0));
  }
  const minLength = s.minLength ?? 0;
  const maxLength = Math.min(s.maxLength ?? 24, Math.max(minLength, 24));
  return fc
    .oneof(
      { arbitrary: fc.string({ minLength, maxLength, unit: 'grapheme-ascii' }), weight: 4 },
      { arbitrary: fc.string({ minLength, maxLength, unit: 'grapheme' }), weight: 1 },
    )
    .filter((v) => v.length >= minLength && (s.maxLength === undefined || v.length <= s.maxLength));
}

/** A fast-check arbitrary of values that (mostly) satisfy the schema. */
export function arbitraryFor(schema: JsonSchema, hints: Hints, field = '', depth = 0): fc.Arbitrary<unknown> {
  const base = () => baseArbitrary(schema, hints, field, depth);
  return hints(field, schema, base) ?? base();
}

function baseArbitrary(schema: JsonSchema, hints: Hints, field: string, depth: number): fc.Arbitrary<unknown> {
  if (depth > 8) return fc.constant(null);
  const inner = (() => {
    if (schema.const !== undefined) return fc.constant(schema.const);
    if (schema.enum?.length) return fc.constantFrom(...schema.enum);
    const alts = schema.anyOf ?? schema.oneOf;
    if (alts?.length) return fc.oneof(...alts.map((a) => arbitraryFor(a, hints, field, depth + 1)));
    if (schema.allOf?.length === 1) return arbitraryFor(schema.allOf[0] as JsonSchema, hints, field, depth + 1);
    const t = types(schema).filter((x) => x !== 'null');
    switch (t[0]) {
      case 'string':
        return stringArb(schema);
      case 'integer': {
        const min = clampInt(
          Math.ceil(typeof schema.exclusiveMinimum === 'number' ? schema.exclusiveMinimum + 1 : (schema.minimum ?? -1000)),
        );
        const max = clampInt(
          Math.floor(typeof schema.exclusiveMaximum === 'number' ? schema.exclusiveMaximum - 1 : (schema.maximum ?? 100000)),
        );
        return fc.integer({ min, max: Math.max(min, max) });
      }
      case 'number': {
        const min = schema.minimum ?? (typeof schema.exclusiveMinimum === 'number' ? schema.exclusiveMinimum : -1000);
        const max = schema.maximum ?? (typeof schema.exclusiveMaximum === 'number' ? schema.exclusiveMaximum : 100000);
        return fc.double({ min, max, noNaN: true, noDefaultInfinity: true }).filter((n) => !Object.is(n, -0));
      }
      case 'boolean':
        return fc.boolean();
      case 'array': {
        const items = schema.items ? arbitraryFor(schema.items, hints, `${field}[]`, depth + 1) : fc.jsonValue({ maxDepth: 1 });
        const minLength = schema.minItems ?? 0;
        return fc.array(items, { minLength, maxLength: Math.min(schema.maxItems ?? 4, Math.max(minLength, 4)) });
      }
      case 'object':
        return objectArb(schema, hints, depth);
      default:
        if (schema.properties) return objectArb(schema, hints, depth);
        return fc.jsonValue({ maxDepth: 2 });
    }
  })();
  return schema.nullable || types(schema).includes('null')
    ? fc.oneof({ arbitrary: inner, weight: 4 }, { arbitrary: fc.constant(null), weight: 1 })
    : inner;
}

function objectArb(schema: JsonSchema, hints: Hints, depth: number): fc.Arbitrary<unknown> {
  const props = schema.properties ?? {};
  const required = (schema.required ?? []).filter((k) => k in props);
  const model: Record<string, fc.Arbitrary<unknown>> = {};
  for (const [k, s] of Object.entries(props)) model[k] = arbitraryFor(s, hints, k, depth + 1);
  const fixed = fc.record(model, { requiredKeys: required });
  const extra = schema.additionalProperties;
  if (typeof extra !== 'object' || Object.keys(props).length) return fixed;
  const names = schema.propertyNames ?? { type: 'string', minLength: 1, maxLength: 16 };
  const keyArb = stringArb({ ...names, maxLength: Math.min(names.maxLength ?? 16, 16) }).filter((k) => !PROTO_KEYS.includes(k));
  return fc.dictionary(keyArb, arbitraryFor(extra, hints, '', depth + 1), { maxKeys: 3, noNullPrototype: true });
}

/** The JSON type names a value has ("integer" values are also "number"). */
function typeNames(v: unknown): string[] {
  if (v === null) return ['null'];
  if (v instanceof DeepNest || Array.isArray(v)) return ['array'];
  if (typeof v === 'number') return Number.isInteger(v) ? ['integer', 'number'] : ['number'];
  return [typeof v];
}

/**
 * Whether the value satisfies the schema (the subset above). Used only to decide that a request
 * is certainly invalid — the zod schemas behind berth's JSON schemas are at least as strict.
 */
export function matches(schema: JsonSchema, v: unknown): boolean {
  if (v === undefined) return false;
  if (v === null && schema.nullable) return true;
  if (schema.const !== undefined && v !== schema.const) return false;
  if (schema.enum && !schema.enum.some((e) => e === v)) return false;
  const alts = schema.anyOf ?? schema.oneOf;
  if (alts && !alts.some((a) => matches(a, v))) return false;
  if (schema.allOf && !schema.allOf.every((a) => matches(a, v))) return false;
  const t = types(schema);
  if (t.length && !t.some((x) => typeNames(v).includes(x))) return false;
  if (v instanceof DeepNest) {
    // Nested arrays: only an array of anything (or of arrays) takes them.
    return !schema.items || Object.keys(schema.items).length === 0 || (types(schema.items).includes('array') && v.depth < 3);
  }
  if (typeof v === 'string') {
    if (schema.minLength !== undefined && v.length < schema.minLength) return false;
    if (schema.maxLength !== undefined && v.length > schema.maxLength) return false;
    if (schema.pattern && !new RegExp(schema.pattern).test(v)) return false;
  }
  if (typeof v === 'number') {
    if (!Number.isFinite(v)) return false;
    if (schema.minimum !== undefined && v < schema.minimum) return false;
    if (schema.maximum !== undefined && v > schema.maximum) return false;
    if (typeof schema.exclusiveMinimum === 'number' && v <= schema.exclusiveMinimum) return false;
    if (typeof schema.exclusiveMaximum === 'number' && v >= schema.exclusiveMaximum) return false;
    if (schema.exclusiveMinimum === true && schema.minimum !== undefined && v <= schema.minimum) return false;
    if (schema.exclusiveMaximum === true && schema.maximum !== undefined && v >= schema.maximum) return false;
  }
  if (Array.isArray(v)) {
    if (schema.minItems !== undefined && v.length < schema.minItems) return false;
    if (schema.maxItems !== undefined && v.length > schema.maxItems) return false;
    if (schema.items && !v.every((x) => matches(schema.items as JsonSchema, x))) return false;
  }
  if (typeof v === 'object' && v !== null && !Array.isArray(v) && !(v instanceof DeepNest)) {
    const obj = v as Record<string, unknown>;
    const keys = Object.keys(obj);
    for (const r of schema.required ?? []) if (!Object.prototype.hasOwnProperty.call(obj, r)) return false;
    for (const k of keys) {
      const val = obj[k];
      const prop = schema.properties && Object.prototype.hasOwnProperty.call(schema.properties, k) ? schema.properties[k] : undefined;
      if (prop) {
        if (!matches(prop, val)) return false;
      } else if (schema.additionalProperties === false) {
        return false;
      } else if (typeof schema.additionalProperties === 'object') {
        if (schema.propertyNames && !matches(schema.propertyNames, k)) return false;
        if (!matches(schema.additionalProperties, val)) return false;
      }
    }
  }
  return true;
}

/** True when a proto-ish key appears anywhere (such requests are never called "certainly invalid"). */
export function hasProtoKey(v: unknown): boolean {
  if (typeof v !== 'object' || v === null || v instanceof DeepNest) return false;
  if (Array.isArray(v)) return v.some(hasProtoKey);
  return Object.keys(v).some((k) => PROTO_KEYS.includes(k) || hasProtoKey((v as Record<string, unknown>)[k]));
}
