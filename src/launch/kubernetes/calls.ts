import { CoreV1Api, CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import { BerthError } from '../../base/errors.js';
import type { ContainerGone } from '../launcher.js';
import { SANDBOX_API } from './objects.js';

const SANDBOX_API_PATH = { group: SANDBOX_API.group, version: SANDBOX_API.version, plural: SANDBOX_API.plural };

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
/**
 * An exec that failed, as a run sees it: its pod gone when it is not running (`why`), and lost as
 * well when the API server reads it as running but the exec got no answer at all: its node does
 * not answer (a stopped kubelet), so the session's next pod is placed anew. Else undefined.
 */
export function lostExec(err: unknown, why: string | undefined): ContainerGone | undefined {
  if (why) return { gone: true, reason: why };
  if (statusCode(err) === undefined) return { gone: true, reason: `its node did not answer (${String(err).slice(0, 200)})` };
  return undefined;
}

/** An object that may be gone: undefined for a 404, the error otherwise. */
export const unlessGone = <T>(p: Promise<T>): Promise<T | undefined> =>
  p.catch((err: unknown) => (statusCode(err) === 404 ? undefined : Promise.reject(err)));

/** The clients a launcher's parts share, and berth's namespace. */
export interface KubeApis {
  kubeConfig: KubeConfig;
  core: CoreV1Api;
  custom: CustomObjectsApi;
  ns: string;
}

export function kubeApis(kubeConfig: KubeConfig, ns: string): KubeApis {
  return { kubeConfig, core: kubeConfig.makeApiClient(CoreV1Api), custom: kubeConfig.makeApiClient(CustomObjectsApi), ns };
}

/**
 * agent-sandbox is installed: the API server serves its Sandboxes (v1beta1) in berth's namespace.
 * A list of at most one: 404 means no such resource (the CRDs are missing, or too old to serve
 * v1beta1), and berth can run nothing, so /healthz and `berth doctor` say so in these words.
 */
export async function assertAgentSandbox(custom: CustomObjectsApi, namespace: string): Promise<void> {
  try {
    await custom.listNamespacedCustomObject({ ...SANDBOX_API_PATH, namespace, limit: 1 });
  } catch (err) {
    if (statusCode(err) !== 404) throw clusterError('its Sandboxes', err);
    const { plural, group, version } = SANDBOX_API_PATH;
    throw new BerthError('ENGINE_UNAVAILABLE', `agent-sandbox is not installed: the cluster serves no ${plural}.${group}/${version}`, {
      hint: "install agent-sandbox v0.5.6 or later (its CRDs and its controller) before berth's first run: deploy/README.md",
    });
  }
}
