/**
 * Lookups by a name someone else chose (an area, a channel, a team, a command): only the
 * table's own entries count, never what Object.prototype carries ("constructor", "toString").
 */
export function own<V>(table: Readonly<Record<string, V>>, key: string): V | undefined {
  return Object.hasOwn(table, key) ? table[key] : undefined;
}

/** "__proto__" would set a prototype instead of a key: every record schema refuses it. */
export const FORBIDDEN_KEY = '__proto__';

export const MAX_NESTING = 64;

/**
 * Where input someone sent carries a "__proto__" key (which every parser here would silently
 * drop, value unvalidated), nests deeper than MAX_NESTING, or holds a string that is not valid
 * Unicode (a lone surrogate: no file, engine or peer can carry it): the first such place.
 */
export function inputProblem(value: unknown, path: string[] = []): { path: string; reason: string } | undefined {
  if (typeof value === 'string')
    return value.isWellFormed() ? undefined : { path: path.join('.') || '(root)', reason: 'is not valid Unicode (a lone surrogate)' };
  if (typeof value !== 'object' || value === null) return undefined;
  if (path.length >= MAX_NESTING) return { path: path.join('.') || '(root)', reason: `nests deeper than ${MAX_NESTING} levels` };
  if (!Array.isArray(value) && Object.hasOwn(value, FORBIDDEN_KEY))
    return { path: [...path, FORBIDDEN_KEY].join('.'), reason: `"${FORBIDDEN_KEY}" is not allowed as a key` };
  for (const [key, child] of Object.entries(value)) {
    if (!key.isWellFormed()) return { path: [...path, key].join('.'), reason: 'is not valid Unicode (a lone surrogate)' };
    const found = inputProblem(child, [...path, key]);
    if (found) return found;
  }
  return undefined;
}
