import type { z } from 'zod';

/** The parts of a zod schema's definition that lead to the object at a path. */
interface Def {
  type: string;
  shape?: Record<string, z.ZodType>;
  innerType?: z.ZodType;
  in?: z.ZodType;
  valueType?: z.ZodType;
  element?: z.ZodType;
  options?: z.ZodType[];
  left?: z.ZodType;
  right?: z.ZodType;
  getter?: () => z.ZodType;
}

const defOf = (schema: z.ZodType): Def => (schema as unknown as { _zod: { def: Def } })._zod.def;

/** Bounds the walk: a lazy (recursive) schema or a deep path ends it with what was found. */
const MAX_STEPS = 64;

/**
 * The keys the object at `path` of `schema` may hold (for "did you mean" on an unknown one):
 * wrappers (optional, default, pipe, ...) are seen through, a record's or array's key steps to
 * its values, a union offers every option's keys. Empty where the path leads to no object.
 */
export function knownKeysAt(schema: z.ZodType, path: ReadonlyArray<PropertyKey>): string[] {
  const keys = new Set<string>();
  let steps = 0;
  const walk = (s: z.ZodType | undefined, at: number): void => {
    if (!s || ++steps > MAX_STEPS) return;
    const def = defOf(s);
    switch (def.type) {
      case 'object':
        if (at === path.length) Object.keys(def.shape ?? {}).forEach((k) => keys.add(k));
        else if (def.shape && Object.hasOwn(def.shape, String(path[at]))) walk(def.shape[String(path[at])], at + 1);
        return;
      case 'record':
        return at < path.length ? walk(def.valueType, at + 1) : undefined;
      case 'array':
        return at < path.length ? walk(def.element, at + 1) : undefined;
      case 'union':
        return def.options?.forEach((o) => walk(o, at));
      case 'intersection':
        walk(def.left, at);
        return walk(def.right, at);
      case 'lazy':
        return walk(def.getter?.(), at);
      case 'pipe':
        return walk(def.in, at);
      default:
        return walk(def.innerType, at); // optional, nullable, default, prefault, readonly, catch, ...
    }
  };
  walk(schema, 0);
  return [...keys];
}
