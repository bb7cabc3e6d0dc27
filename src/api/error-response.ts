import { HTTPException } from 'hono/http-exception';
import type { z } from 'zod';
import { toFieldIssues } from '../config/parse.js';
import { asBerthError, BerthError } from '../base/errors.js';

/** hono's own refusals (validators, middleware) → berth's codes: a client's mistake is never a 500. */
function fromHttpException(err: HTTPException): BerthError {
  const reason = err.message || 'malformed request';
  switch (err.status) {
    case 401:
      return new BerthError('UNAUTHORIZED', err.message || 'missing or wrong admin token');
    case 413:
      return new BerthError('PAYLOAD_TOO_LARGE', `request body is too large (${reason})`);
    case 415:
      return new BerthError('UNSUPPORTED_MEDIA_TYPE', 'send the body as JSON with "Content-Type: application/json"', {
        issues: [{ field: 'content-type', reason: 'must be application/json' }],
      });
    default:
      if (err.status >= 400 && err.status < 500) return new BerthError('CONFIG_INVALID', `request is invalid: ${reason}`);
      return new BerthError('INTERNAL', reason);
  }
}

/** Any failure → berth's error, so the one table decides the HTTP status. */
export function toBerthError(err: unknown): BerthError {
  return err instanceof HTTPException ? fromHttpException(err) : asBerthError(err);
}

export function validationError(error: z.ZodError, where: string): BerthError {
  return new BerthError('CONFIG_INVALID', `${where} is invalid`, { issues: toFieldIssues(error) });
}
