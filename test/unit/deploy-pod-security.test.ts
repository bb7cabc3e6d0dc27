import fs from 'node:fs';
import { join } from 'node:path';
import type { V1PodSpec } from '@kubernetes/client-node';
import YAML from 'yaml';
import { afterAll, describe, expect, it } from 'vitest';
import { parseBerthConfig } from '../../src/config/berth-config.js';
import { KubernetesSchema } from '../../src/config/kubernetes.js';
import { renderKubeRun } from '../../src/launch/kubernetes/objects.js';
import { IPC_SYSCTLS } from '../../src/plan/run-plan.js';
import { contractHome } from '../contract/contract-plan.js';
import { REPO_ROOT } from '../helpers.js';
import { baselineViolations, restrictedViolations } from '../helpers/pod-security.js';

/**
 * deploy/namespace.yaml enforces Pod Security "restricted" on berth's namespace: berth's own pod
 * and every pod the agent-sandbox controller makes from berth's Sandboxes must meet it, or the
 * cluster refuses them. The levels' checks are test/helpers/pod-security.ts (the test API server
 * is 1.20, without PodSecurity admission).
 */

const DEPLOY = join(REPO_ROOT, 'deploy');
const home = contractHome({ image: 'berth/shell:latest', runtime: 'runc' });
afterAll(() => home.cleanup());

const yamlDocs = (file: string) =>
  YAML.parseAllDocuments(fs.readFileSync(join(DEPLOY, file), 'utf8')).map((d) => d.toJS() as Record<string, any>);

/** The tenant pod the launcher renders for an agent's run, with the IPC sysctls as kubernetes.ipc_sysctls says. */
function tenantPod(ipcSysctls: boolean): V1PodSpec {
  const plan = home.plan({ argv: ['true'] });
  expect(plan.sysctls).toEqual(IPC_SYSCTLS);
  const { sandbox } = renderKubeRun({
    plan: { ...plan, sysctls: ipcSysctls ? plan.sysctls : {} },
    name: 'berth-r1',
    namespace: 'berth',
    files: new Map(plan.mounts.flatMap((m) => (m.type === 'bind' && m.readOnly ? [[m.target, []]] : []))),
    pullPolicy: 'IfNotPresent',
    volumes: new Map(plan.mounts.flatMap((m) => (m.type === 'bind' && !m.readOnly ? [[m.target, 'v'.repeat(32)]] : []))),
  });
  return sandbox.spec.podTemplate.spec;
}

/** GA and served, unchanged, from Kubernetes 1.22 through 1.36 (no beta, nothing removed since). */
const CURRENT_API_VERSIONS = ['v1', 'apps/v1', 'rbac.authorization.k8s.io/v1', 'networking.k8s.io/v1', 'node.k8s.io/v1'];

describe('deploy/: current API versions', () => {
  it('every object of deploy/ is of an API version GA on 1.29 and later', () => {
    const files = fs.readdirSync(DEPLOY).filter((f) => f.endsWith('.yaml') && f !== 'kustomization.yaml' && f !== 'berth.yaml');
    expect(files).toContain('runtimeclass-gvisor.yaml');
    const versions = files.flatMap((f) => yamlDocs(f).map((d) => `${f}: ${d.apiVersion}`));
    expect(versions.filter((v) => !CURRENT_API_VERSIONS.includes(v.split(': ')[1]!))).toEqual([]);
    expect(yamlDocs('kustomization.yaml')[0]?.apiVersion).toBe('kustomize.config.k8s.io/v1beta1'); // kustomize's own, not the cluster's
  });
});

describe('deploy/: Pod Security', () => {
  it('labels the namespace to enforce, warn and audit "restricted"', () => {
    const [ns] = yamlDocs('namespace.yaml');
    expect(ns?.metadata.labels).toMatchObject({
      'pod-security.kubernetes.io/enforce': 'restricted',
      'pod-security.kubernetes.io/warn': 'restricted',
      'pod-security.kubernetes.io/audit': 'restricted',
    });
  });

  it("berth's own pod meets restricted", () => {
    const [deployment] = yamlDocs('deployment.yaml');
    expect(restrictedViolations(deployment?.spec.template.spec as V1PodSpec)).toEqual([]);
  });

  it("a tenant pod meets restricted with deploy/berth.yaml's settings (no IPC sysctls), and not even baseline with them", () => {
    const config = parseBerthConfig(fs.readFileSync(join(DEPLOY, 'berth.yaml'), 'utf8'), 'deploy/berth.yaml', home.home);
    expect((config.kubernetes ?? KubernetesSchema.parse({})).ipc_sysctls).toBe(false);
    expect(KubernetesSchema.parse({}).ipc_sysctls).toBe(false); // the default too

    const plain = tenantPod(false);
    expect(plain.securityContext?.sysctls).toBeUndefined();
    expect(restrictedViolations(plain)).toEqual([]);

    const withSysctls = tenantPod(true);
    expect(baselineViolations(withSysctls)).toEqual(Object.keys(IPC_SYSCTLS).map((k) => `sysctls: ${k}`));
  });

  it('the checks refuse what the levels refuse', () => {
    const pod = tenantPod(false);
    const c = pod.containers[0]!;
    const bad: V1PodSpec = {
      ...pod,
      hostPID: true,
      securityContext: { ...pod.securityContext, runAsNonRoot: false, runAsUser: 0 },
      containers: [{ ...c, securityContext: { ...c.securityContext, allowPrivilegeEscalation: true, privileged: true } }],
      volumes: [...(pod.volumes ?? []), { name: 'host', hostPath: { path: '/' } }],
    };
    expect(baselineViolations(bad)).toEqual(['hostNamespaces: a host namespace', 'privileged: agent', 'hostPathVolumes: host']);
    expect(restrictedViolations(bad)).toEqual(
      expect.arrayContaining(['restrictedVolumes: host (hostPath)', 'allowPrivilegeEscalation: agent', 'runAsUser: agent is 0']),
    );
  });
});
