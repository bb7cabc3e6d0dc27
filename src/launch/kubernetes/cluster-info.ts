import { NodeV1Api, VersionApi } from '@kubernetes/client-node';
import { BerthError } from '../../base/errors.js';
import { LABELS, type ContainerQuery } from '../../plan/labels.js';
import { managedContainer, type EngineInfo, type ManagedContainer } from '../launcher.js';
import { assertAgentSandbox, clusterError, statusCode, type KubeApis } from './calls.js';
import { berthLabelsOf, kubeSelector, SANDBOX_API } from './objects.js';

/** What berth reads of the cluster itself: its version and RuntimeClasses, and the runs (Sandboxes) berth's labels select. */

const call = async <T>(what: string, fn: () => Promise<T>): Promise<T> => {
  try {
    return await fn();
  } catch (err) {
    throw clusterError(what, err);
  }
};

export async function clusterInfo({ kubeConfig, custom, ns }: KubeApis): Promise<EngineInfo> {
  const version = await call('its version', () => kubeConfig.makeApiClient(VersionApi).getCode());
  const classes = await call('its RuntimeClasses', () => kubeConfig.makeApiClient(NodeV1Api).listRuntimeClass());
  await assertAgentSandbox(custom, ns); // without it berth can run nothing: /healthz fails, saying so
  return {
    name: `Kubernetes ${version.gitVersion}`,
    version: version.gitVersion,
    apiVersion: `${version.major}.${version.minor}`,
    securityOptions: ['seccomp=RuntimeDefault'],
    rootDir: '',
    runtimes: [{ name: 'runc' }, ...classes.items.map((c) => ({ name: c.metadata?.name ?? '', path: c.handler }))],
    defaultRuntime: 'runc',
  };
}

/** A runtime other than runc is a RuntimeClass the cluster must have: refused before anything is made. */
export async function assertRuntime({ kubeConfig }: KubeApis, runtime: string): Promise<void> {
  if (runtime === 'runc') return;
  try {
    await kubeConfig.makeApiClient(NodeV1Api).readRuntimeClass({ name: runtime });
  } catch (err) {
    if (statusCode(err) !== 404) throw clusterError(`RuntimeClass ${runtime}`, err);
    throw new BerthError('RUNTIME_MISSING', `the cluster has no RuntimeClass "${runtime}"`, {
      hint: 'create it (its handler is the runtime on the nodes, e.g. runsc), or choose another runtime for the project',
    });
  }
}

/** The runs berth's labels select: one per Sandbox, running once its Ready condition is. */
export async function listRuns({ custom, ns }: KubeApis, query: ContainerQuery): Promise<ManagedContainer[]> {
  const labelSelector = kubeSelector({
    [LABELS.managed]: 'true',
    [LABELS.installation]: query.installation,
    [LABELS.project]: query.project,
    [LABELS.run]: query.run,
  });
  const list = (await call('listing sandboxes', () =>
    custom.listNamespacedCustomObject({
      group: SANDBOX_API.group,
      version: SANDBOX_API.version,
      namespace: ns,
      plural: SANDBOX_API.plural,
      labelSelector,
    }),
  )) as {
    items: Array<{
      metadata: { name: string; annotations?: Record<string, string>; deletionTimestamp?: string };
      status?: { conditions?: Array<{ type: string; status: string }> };
    }>;
  };
  return list.items.map((s) => {
    const ready = s.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True');
    return managedContainer(
      s.metadata.name,
      s.metadata.deletionTimestamp ? 'removing' : ready ? 'running' : 'created',
      berthLabelsOf(s.metadata.annotations),
    );
  });
}
