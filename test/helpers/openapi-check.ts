/**
 * Checks an object against the API server's published OpenAPI (v2, /openapi/v2): every field must
 * be one the schema names (a 1.20 server silently drops unknown fields, so a typo would pass a
 * create), of its type, with the required ones present. Returns the faults ("spec.containers[0].foo:
 * unknown field"), none when it holds.
 */

interface Schema {
  $ref?: string;
  type?: string;
  format?: string;
  properties?: Record<string, Schema>;
  additionalProperties?: Schema | boolean;
  items?: Schema;
  required?: string[];
}

export interface OpenApiDoc {
  definitions: Record<string, Schema>;
}

export function checkAgainstOpenApi(doc: OpenApiDoc, definition: string, value: unknown): string[] {
  const faults: string[] = [];
  const resolve = (s: Schema): Schema => {
    let cur = s;
    for (let i = 0; cur.$ref && i < 32; i++) {
      const name = cur.$ref.replace('#/definitions/', '');
      const next = doc.definitions[name];
      if (!next) {
        faults.push(`schema: no definition ${name}`);
        return {};
      }
      cur = next;
    }
    return cur;
  };
  const walk = (schema: Schema, v: unknown, at: string) => {
    const s = resolve(schema);
    if (s.format === 'int-or-string') {
      if (typeof v !== 'string' && !Number.isInteger(v)) faults.push(`${at}: int or string wanted, got ${typeof v}`);
      return;
    }
    switch (s.type) {
      case 'string':
        if (typeof v !== 'string') faults.push(`${at}: string wanted, got ${JSON.stringify(v)}`);
        return;
      case 'integer':
        if (!Number.isInteger(v)) faults.push(`${at}: integer wanted, got ${JSON.stringify(v)}`);
        return;
      case 'number':
        if (typeof v !== 'number') faults.push(`${at}: number wanted, got ${JSON.stringify(v)}`);
        return;
      case 'boolean':
        if (typeof v !== 'boolean') faults.push(`${at}: boolean wanted, got ${JSON.stringify(v)}`);
        return;
      case 'array':
        if (!Array.isArray(v)) faults.push(`${at}: array wanted`);
        else v.forEach((item, i) => s.items && walk(s.items, item, `${at}[${i}]`));
        return;
      default:
        break;
    }
    if (s.properties || s.additionalProperties || s.type === 'object') {
      if (typeof v !== 'object' || v === null || Array.isArray(v)) {
        faults.push(`${at}: object wanted, got ${JSON.stringify(v)}`);
        return;
      }
      const rec = v as Record<string, unknown>;
      for (const r of s.required ?? []) if (!(r in rec)) faults.push(`${at}.${r}: required`);
      for (const [k, child] of Object.entries(rec)) {
        const prop = s.properties?.[k];
        if (prop) walk(prop, child, `${at}.${k}`);
        else if (typeof s.additionalProperties === 'object') walk(s.additionalProperties, child, `${at}.${k}`);
        else if (!s.additionalProperties) faults.push(`${at}.${k}: unknown field`);
      }
    }
    // A schema with no type (e.g. Quantity's string format, RawExtension) takes what it is given.
  };
  walk({ $ref: `#/definitions/${definition}` }, value, definition.split('.').pop() ?? definition);
  return faults;
}

/** Whether every field of `sent` is in `stored` with the same value (what a server kept; it may add defaults). */
export function keptFields(sent: unknown, stored: unknown, at = ''): string[] {
  if (sent === null || typeof sent !== 'object')
    return Object.is(sent, stored) || String(sent) === String(stored)
      ? []
      : [`${at}: sent ${JSON.stringify(sent)}, stored ${JSON.stringify(stored)}`];
  if (typeof stored !== 'object' || stored === null) return [`${at}: dropped`];
  if (Array.isArray(sent)) {
    if (!Array.isArray(stored)) return [`${at}: not an array`];
    return sent.flatMap((item, i) => keptFields(item, stored[i], `${at}[${i}]`));
  }
  return Object.entries(sent as Record<string, unknown>).flatMap(([k, v]) =>
    keptFields(v, (stored as Record<string, unknown>)[k], `${at}.${k}`),
  );
}
