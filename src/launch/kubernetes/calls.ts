import { BerthError } from '../../base/errors.js';

/** What the Kubernetes API's answers mean to berth: its error codes, and a 404 as "gone". */

export const statusCode = (err: unknown) => (err as { code?: number }).code;
/** What a refused or failed API call means to berth, in its error codes. */
export function clusterError(what: string, err: unknown): BerthError {
  if (err instanceof BerthError) return err;
  const code = statusCode(err);
  const body = (err as { body?: unknown }).body;
  const message =
    typeof body === 'string' ? body.slice(0, 400) : ((body as { message?: string } | undefined)?.message ?? (err as Error).message);
  if (code === undefined)
    return new BerthError('ENGINE_UNAVAILABLE', `the Kubernetes API server did not answer (${what}): ${message}`, {
      hint: 'check kubernetes.kubeconfig in berth.yaml; "berth doctor" says what answers',
    });
  return new BerthError('RUN_FAILED', `the cluster refused ${what} (${code}): ${message}`);
}
/** An object that may be gone: undefined for a 404, the error otherwise. */
export const unlessGone = <T>(p: Promise<T>): Promise<T | undefined> =>
  p.catch((err: unknown) => (statusCode(err) === 404 ? undefined : Promise.reject(err)));
