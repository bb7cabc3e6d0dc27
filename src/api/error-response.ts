import { HTTPException } from 'hono/http-exception';
import type { z } from 'zod';
import { toFieldIssues } from '../config/parse.js';
import { BerthError } from '../errors.js';

/** Any failure → berth's error, so the one table decides the HTTP status. */
export function toBerthError(err: unknown): BerthError {
  if (err instanceof BerthError) return err;
  if (err instanceof HTTPException) {
    if (err.status === 400) return new BerthError('CONFIG_INVALID', `request is invalid: ${err.message || 'malformed body'}`);
    if (err.status === 401) return new BerthError('UNAUTHORIZED', err.message || 'missing or wrong admin token');
    return new BerthError('INTERNAL', err.message);
  }
  return new BerthError('INTERNAL', 'internal error', {}, { cause: err });
}

export function validationError(error: z.ZodError, where: string): BerthError {
  return new BerthError('CONFIG_INVALID', `${where} is invalid`, { issues: toFieldIssues(error) });
}

export function errorBody(err: BerthError) {
  return { error: err.toJSON() };
}
