import type { z } from 'zod';
import { BerthError, type FieldIssue } from '../base/errors.js';
import { didYouMean } from '../base/did-you-mean.js';
import { inputProblem } from '../base/own.js';
import { knownKeysAt } from './schema-keys.js';

/**
 * zod issues → berth's field list, one entry per field at fault. Given the schema, an unknown
 * key names the closest one the schema has ("unknown field; did you mean "warm_idle_seconds"?").
 */
export function toFieldIssues(error: z.ZodError, prefix = '', schema?: z.ZodType): FieldIssue[] {
  return error.issues.flatMap((issue): FieldIssue[] => {
    const base = [prefix, ...issue.path.map(String)].filter(Boolean).join('.');
    if (issue.code === 'unrecognized_keys') {
      const known = schema ? knownKeysAt(schema, issue.path) : [];
      return issue.keys.map((key) => ({
        field: base ? `${base}.${key}` : key,
        reason: `unknown field${didYouMean(key, known)}`,
      }));
    }
    return [{ field: base || '(root)', reason: issue.message }];
  });
}

/** Input that no schema may see: a "__proto__" key (parsers drop it silently) or nesting past the bound. */
export function assertPlainInput(input: unknown, what: string): void {
  const problem = inputProblem(input);
  if (problem) throw new BerthError('CONFIG_INVALID', `${what} is invalid`, { issues: [{ field: problem.path, reason: problem.reason }] });
}

/** Parse or throw CONFIG_INVALID naming every field at fault. */
export function parseOrThrow<S extends z.ZodType>(schema: S, input: unknown, what: string): z.output<S> {
  assertPlainInput(input, what);
  const result = schema.safeParse(input);
  if (result.success) return result.data;
  throw new BerthError('CONFIG_INVALID', `${what} is invalid`, { issues: toFieldIssues(result.error, '', schema) });
}
