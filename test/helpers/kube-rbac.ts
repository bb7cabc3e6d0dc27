import fs from 'node:fs';
import { join } from 'node:path';
import { CoreV1Api, KubeConfig, KubernetesObjectApi, type KubernetesObject } from '@kubernetes/client-node';
import YAML from 'yaml';
import type { KubeCluster } from './kube-cluster.js';

/**
 * berth's client as deploy/ makes it: deploy/rbac.yaml applied with its namespace turned into the
 * test's, and a token the API server issues for that ServiceAccount (TokenRequest, as the kubelet
 * mounts into berth's pod). A launcher on this kubeconfig can do exactly what deploy/ grants: a
 * call it lacks is a 403 in the test, as it would be on a cluster.
 */
export interface BerthClient {
  kubeConfig: KubeConfig;
  /** The same as a kubeconfig file (berth.yaml's kubernetes.kubeconfig). */
  kubeConfigFile: string;
}

const RBAC_YAML = join(import.meta.dirname, '..', '..', 'deploy', 'rbac.yaml');

export async function bindDeployRbac(cluster: KubeCluster, namespace: string, dir: string): Promise<BerthClient> {
  const objects = YAML.parseAllDocuments(fs.readFileSync(RBAC_YAML, 'utf8')).map((d) => d.toJS() as KubernetesObject);
  const api = KubernetesObjectApi.makeApiClient(cluster.kubeConfig);
  for (const o of objects) {
    const text = JSON.stringify(o).replaceAll('"namespace":"berth"', `"namespace":${JSON.stringify(namespace)}`);
    await api.create(JSON.parse(text) as KubernetesObject);
  }
  const issued = await cluster.kubeConfig.makeApiClient(CoreV1Api).createNamespacedServiceAccountToken({
    name: 'berth',
    namespace,
    body: { spec: { audiences: ['https://kubernetes.default.svc'], expirationSeconds: 24 * 3600 } },
  });
  const token = issued.status?.token;
  if (!token) throw new Error('the API server issued no token for berth');
  const text = YAML.stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'test', cluster: { server: cluster.server, 'insecure-skip-tls-verify': true } }],
    users: [{ name: 'berth', user: { token } }],
    contexts: [{ name: 'berth', context: { cluster: 'test', user: 'berth', namespace } }],
    'current-context': 'berth',
  });
  const kubeConfigFile = join(dir, 'berth.kubeconfig');
  fs.writeFileSync(kubeConfigFile, text, { mode: 0o600 });
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromString(text);
  return { kubeConfig, kubeConfigFile };
}
