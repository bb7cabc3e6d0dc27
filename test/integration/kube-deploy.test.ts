import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import {
  AppsV1Api,
  AuthorizationV1Api,
  CoreV1Api,
  KubeConfig,
  RbacAuthorizationV1Api,
  type V1NetworkPolicy,
  type V1PolicyRule,
} from '@kubernetes/client-node';
import YAML from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseBerthConfig } from '../../src/config/berth-config.js';
import { KUBE_GATEWAY_PORT, KubernetesSchema } from '../../src/config/kubernetes.js';
import { BERTH_POD_LABELS } from '../../src/launch/kubernetes/network-policy.js';
import { createKubernetesLauncher } from '../../src/launch/kubernetes/launcher.js';
import { createRelayTokens } from '../../src/launch/kubernetes/relay.js';
import { LABELS } from '../../src/plan/labels.js';
import pino from 'pino';
import { appDepsFrom, createApp } from '../../src/api/app.js';
import { docCommands, REPO_ROOT, testHome } from '../helpers.js';
import { installAgentSandbox, kubeBinaries, startKubeCluster, type KubeCluster } from '../helpers/kube-cluster.js';
import { checkAgainstOpenApi, keptFields, type OpenApiDoc } from '../helpers/openapi-check.js';

/**
 * deploy/ (`kubectl apply -k deploy/`, deploy/README.md) against a real kube-apiserver (v1.20.2,
 * built from Debian's source) with agent-sandbox's CRDs: every object is validated by the server
 * (dry run) and by kubectl against the server's OpenAPI, the README's commands install it, and
 * what the server stored is what deploy/ says: berth's permissions exactly (asked of the server's
 * own authorizer as berth's service account), the hardened pod, the tenants' NetworkPolicy,
 * the Services berth's settings name. No image runs: berth/server is not built here.
 *
 * kubectl: $BERTH_KUBECTL, Debian's kubernetes-client kubectl beside the test API server (1.20.2,
 * the server's own version; its kustomize is v2), and the PATH's kubectl (a newer one, kustomize
 * v5, as an operator has): each that is there validates deploy/, the first installs it.
 */

const DEPLOY = join(REPO_ROOT, 'deploy');
const NS = 'berth';
const SA_USER = `system:serviceaccount:${NS}:berth`;

interface Kubectl {
  path: string;
  version: string;
}

interface KubeObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
  [key: string]: unknown;
}

let cluster: KubeCluster;
let kubectls: Kubectl[];
let cacheDir: string;
let healthWithoutAgentSandbox: { status: number; body: Record<string, unknown> };
let healthWithAgentSandbox: { version: string };

function clientVersion(path: string): string | undefined {
  const r = spawnSync(path, ['version', '--client', '-o', 'json'], { encoding: 'utf8', timeout: 30_000 });
  if (r.status !== 0) return undefined;
  return (JSON.parse(r.stdout) as { clientVersion: { gitVersion: string } }).clientVersion.gitVersion;
}

/** An executable file (the PATH's kubectl, as `command -v` finds it). */
function executable(path: string): boolean {
  try {
    fs.accessSync(path, fs.constants.X_OK);
    return fs.statSync(path).isFile();
  } catch {
    return false;
  }
}

function findKubectls(): Kubectl[] {
  const named = process.env.BERTH_KUBECTL;
  if (named && !executable(named)) throw new Error(`BERTH_KUBECTL=${named}: no executable there`);
  const candidates = [named, join(kubeBinaries(), 'kubectl')].filter((p): p is string => p !== undefined && executable(p));
  const onPath = (process.env.PATH ?? '')
    .split(':')
    .map((dir) => join(dir, 'kubectl'))
    .find((p) => executable(p));
  if (onPath) candidates.push(onPath);
  const found: Kubectl[] = [];
  for (const path of candidates) {
    const version = clientVersion(path);
    if (version && !found.some((k) => k.version === version)) found.push({ path, version });
  }
  return found;
}

/** kubectl with argv, against the test cluster, from the repository's root (deploy/ as the README says). */
function kubectl(k: Kubectl, args: string[], input?: string): { status: number; stdout: string; stderr: string } {
  const r = spawnSync(k.path, ['--kubeconfig', cluster.kubeConfigFile, '--cache-dir', cacheDir, ...args], {
    cwd: REPO_ROOT,
    encoding: 'utf8',
    input,
    env: { PATH: process.env.PATH ?? '', HOME: cacheDir },
    timeout: 120_000,
  });
  return { status: r.status ?? -1, stdout: r.stdout, stderr: r.stderr };
}

/** What `kubectl kustomize deploy/` renders (kubectl's own kustomize). */
function rendered(k: Kubectl): KubeObject[] {
  const r = kubectl(k, ['kustomize', DEPLOY]);
  expect(r.status, r.stderr).toBe(0);
  return YAML.parseAllDocuments(r.stdout)
    .map((d) => d.toJS() as KubeObject)
    .filter(Boolean);
}

/** The server's REST path of an object, from its discovery documents. */
async function pathOf(obj: KubeObject): Promise<string> {
  const base = obj.apiVersion.includes('/') ? `/apis/${obj.apiVersion}` : `/api/${obj.apiVersion}`;
  const discovery = (await cluster.get(base)) as { resources: Array<{ name: string; kind: string; namespaced: boolean }> };
  const res = discovery.resources.find((r) => r.kind === obj.kind && !r.name.includes('/'));
  if (!res) throw new Error(`the server serves no ${obj.kind} in ${obj.apiVersion}`);
  return `${base}${res.namespaced ? `/namespaces/${obj.metadata.namespace ?? NS}` : ''}/${res.name}/${obj.metadata.name}`;
}

/** The OpenAPI definition of a kind (by its x-kubernetes-group-version-kind). */
function definitionOf(doc: OpenApiDoc, obj: KubeObject): string {
  const [group, version] = obj.apiVersion.includes('/') ? obj.apiVersion.split('/') : ['', obj.apiVersion];
  const defs = doc.definitions as Record<
    string,
    { 'x-kubernetes-group-version-kind'?: Array<{ group: string; version: string; kind: string }> }
  >;
  const name = Object.keys(defs).find((n) =>
    defs[n]?.['x-kubernetes-group-version-kind']?.some((g) => g.group === group && g.version === version && g.kind === obj.kind),
  );
  if (!name) throw new Error(`no OpenAPI definition of ${obj.apiVersion} ${obj.kind}`);
  return name;
}

/** A rule as a comparable set of (group, resource, verb) lines. */
function grants(rules: V1PolicyRule[] | undefined): string[] {
  return (rules ?? [])
    .flatMap((r) => (r.apiGroups ?? []).flatMap((g) => (r.resources ?? []).flatMap((res) => r.verbs.map((v) => `${g}/${res}:${v}`))))
    .sort();
}

/** What berth's Role allows, exactly (docs/kubernetes.md, src/launch/kubernetes/launcher.ts). */
const ROLE: Array<[group: string, resources: string[], verbs: string[]]> = [
  ['agents.x-k8s.io', ['sandboxes'], ['get', 'list', 'create', 'delete']],
  ['', ['pods'], ['get']],
  ['', ['pods/exec'], ['create', 'get']],
  ['', ['pods/attach'], ['create', 'get']],
  ['', ['events'], ['list']],
  ['', ['persistentvolumeclaims'], ['get', 'list', 'create', 'delete']],
  ['', ['configmaps'], ['create', 'delete']],
  ['', ['secrets'], ['create', 'delete']],
  ['networking.k8s.io', ['networkpolicies'], ['create', 'get', 'update']],
  ['', ['services'], ['get']],
  ['snapshot.storage.k8s.io', ['volumesnapshots'], ['get', 'list', 'create', 'delete']],
];
const ROLE_GRANTS = ROLE.flatMap(([g, resources, verbs]) => resources.flatMap((res) => verbs.map((v) => `${g}/${res}:${v}`))).sort();

/** Whether the server's authorizer lets berth's service account do it. */
async function allowed(attrs: {
  verb: string;
  group?: string;
  resource: string;
  subresource?: string;
  namespace?: string;
  name?: string;
}): Promise<boolean> {
  const review = await cluster.kubeConfig.makeApiClient(AuthorizationV1Api).createSubjectAccessReview({
    body: {
      apiVersion: 'authorization.k8s.io/v1',
      kind: 'SubjectAccessReview',
      spec: {
        user: SA_USER,
        groups: ['system:serviceaccounts', `system:serviceaccounts:${NS}`, 'system:authenticated'],
        resourceAttributes: { group: '', ...attrs },
      },
    },
  });
  return review.status?.allowed === true;
}

beforeAll(async () => {
  cacheDir = fs.mkdtempSync(join(os.tmpdir(), 'berth-kubectl-'));
  kubectls = findKubectls();
  if (kubectls.length === 0) {
    throw new Error(
      "no kubectl: set BERTH_KUBECTL, or install one (apt-get install kubernetes-client; or unpack its .deb into the test API server's directory, scripts/ensure-kube.sh)",
    );
  }
  // The server's own version first: it installs; every other one validates.
  kubectls.sort((a, b) => Number(b.version.startsWith('v1.20.')) - Number(a.version.startsWith('v1.20.')));
  cluster = await startKubeCluster();
  // Before agent-sandbox is there: what berth's /healthz says of a cluster without it.
  const launcher = createKubernetesLauncher({ kubeConfig: cluster.kubeConfig, settings: KubernetesSchema.parse({ namespace: NS }) });
  await using home = testHome({ launcher, warm: false, pool: 'off', config: 'launcher: kubernetes\n' });
  const res = await createApp(appDepsFrom(home.berth, { token: 't', logger: pino({ level: 'silent' }) })).request('/healthz');
  healthWithoutAgentSandbox = { status: res.status, body: (await res.json()) as Record<string, unknown> };
  await installAgentSandbox(cluster.kubeConfig);
  healthWithAgentSandbox = await createKubernetesLauncher({
    kubeConfig: cluster.kubeConfig,
    settings: KubernetesSchema.parse({ namespace: NS }),
  }).info();
}, 600_000);

afterAll(async () => {
  await cluster?.stop();
  fs.rmSync(cacheDir, { recursive: true, force: true });
});

describe('deploy/: berth installed with kubectl apply -k', () => {
  it('renders with every kubectl here, the same objects (kustomize v2 and newer), berth.yaml a valid berth.yaml for the Kubernetes launcher', () => {
    console.log(`kubectl: ${kubectls.map((k) => `${k.version} (${k.path})`).join(', ')}`);
    // The Namespace first: one `apply -k` on an empty cluster makes it before what goes in it.
    for (const k of kubectls) expect(rendered(k)[0]?.kind, k.version).toBe('Namespace');
    const shapes = kubectls.map((k) =>
      rendered(k)
        .map((o) => `${o.kind} ${o.metadata.namespace ?? '-'}/${o.metadata.name.replace(/^(berth-config)-[a-z0-9]+$/, '$1-<hash>')}`)
        .sort(),
    );
    for (const s of shapes) expect(s).toEqual(shapes[0]);
    expect(shapes[0]).toEqual(
      [
        'Namespace -/berth',
        'ServiceAccount berth/berth',
        'Role berth/berth',
        'RoleBinding berth/berth',
        'ClusterRole -/berth-cluster-reads',
        'ClusterRoleBinding -/berth-cluster-reads',
        'ConfigMap berth/berth-config-<hash>',
        'PersistentVolumeClaim berth/berth-home',
        'Deployment berth/berth',
        'Service berth/berth',
        'Service berth/berth-gateway',
        'NetworkPolicy berth/berth',
        'NetworkPolicy berth/berth-tenants',
      ].sort(),
    );

    const home = fs.mkdtempSync(join(os.tmpdir(), 'berth-deploy-home-'));
    try {
      const text = fs.readFileSync(join(DEPLOY, 'berth.yaml'), 'utf8');
      const config = parseBerthConfig(text, 'deploy/berth.yaml', home);
      expect(config.launcher).toBe('kubernetes');
      const kube = config.kubernetes ?? KubernetesSchema.parse({});
      expect(kube.namespace).toBe(NS);
      expect(kube.kubeconfig).toBeUndefined(); // the pod's own service account
      expect(kube.gateway).toEqual({ listen: `0.0.0.0:${KUBE_GATEWAY_PORT}`, address: `berth-gateway:${KUBE_GATEWAY_PORT}` });
      // The ConfigMap carries the file as it is.
      const map = rendered(kubectls[0]!).find((o) => o.kind === 'ConfigMap') as KubeObject & { data: Record<string, string> };
      expect(map.data).toEqual({ 'berth.yaml': text });
    } finally {
      fs.rmSync(home, { recursive: true, force: true });
    }
  });

  it("passes the server's validation of every object (--dry-run=server, --validate=true), with every kubectl, storing nothing", async () => {
    // A dry run makes no namespace, and the server refuses objects in one that does not exist: the
    // Namespace, exactly as deploy/ renders it, goes first (`apply -k` then finds it unchanged).
    const ns = rendered(kubectls[0]!).filter((o) => o.kind === 'Namespace');
    const made = kubectl(kubectls[0]!, ['apply', '--validate=true', '-f', '-'], YAML.stringify(ns[0]));
    expect(made.status, made.stderr).toBe(0);

    for (const k of kubectls) {
      const r = kubectl(k, ['apply', '-k', DEPLOY, '--dry-run=server', '--validate=true']);
      expect(r.status, `${k.version}: ${r.stderr}`).toBe(0);
      expect(r.stderr, k.version).not.toMatch(/error|invalid|unknown field/i);
      const lines = r.stdout.trim().split('\n');
      expect(lines, k.version).toHaveLength(rendered(k).length);
      for (const line of lines) expect(line, k.version).toMatch(/\(server dry run\)$/);
      // gVisor's RuntimeClass, beside the kustomization (README.md): applied on its own.
      const rc = kubectl(k, ['apply', '-f', join(DEPLOY, 'runtimeclass-gvisor.yaml'), '--dry-run=server', '--validate=true']);
      expect(rc.status, `${k.version}: ${rc.stderr}`).toBe(0);
      expect(rc.stdout.trim(), k.version).toMatch(/^runtimeclass\.node\.k8s\.io\/runsc (created|configured) \(server dry run\)$/);
    }
    const apps = cluster.kubeConfig.makeApiClient(AppsV1Api);
    await expect(apps.readNamespacedDeployment({ name: 'berth', namespace: NS })).rejects.toMatchObject({ code: 404 });
  });

  it("installs with the README's commands; the server keeps every field as deploy/ wrote it; a second apply changes nothing", async () => {
    const k = kubectls[0]!;
    const lines = docCommands('deploy/README.md', 'kubectl ');
    const install = lines.find((l) => l.includes(' apply -k '));
    expect(install).toBe('kubectl apply -k deploy/');
    const applied = kubectl(k, [...install!.split(' ').slice(1), '--validate=true']);
    expect(applied.status, applied.stderr).toBe(0);

    // The admin token: the operator's Secret, with a token of 256 random bits.
    const secretLine = lines.find((l) => l.includes(' create secret '));
    expect(secretLine).toBe('kubectl -n berth create secret generic berth-admin --from-literal=token="$(openssl rand -hex 32)"');
    const token = randomBytes(32).toString('hex');
    const secret = kubectl(k, secretLine!.replace('"$(openssl rand -hex 32)"', token).split(' ').slice(1));
    expect(secret.status, secret.stderr).toBe(0);
    const stored = await cluster.kubeConfig.makeApiClient(CoreV1Api).readNamespacedSecret({ name: 'berth-admin', namespace: NS });
    expect(Buffer.from(stored.data?.token ?? '', 'base64').toString()).toBe(token);

    // No field dropped or changed: the server only added its defaults.
    const doc = (await cluster.get('/openapi/v2')) as OpenApiDoc;
    for (const obj of rendered(k)) {
      expect(checkAgainstOpenApi(doc, definitionOf(doc, obj), obj), `${obj.kind} ${obj.metadata.name}`).toEqual([]);
      const got = await cluster.get(await pathOf(obj));
      expect(keptFields(obj, got), `${obj.kind} ${obj.metadata.name}`).toEqual([]);
    }

    const again = kubectl(k, ['apply', '-k', DEPLOY, '--validate=true']);
    expect(again.status, again.stderr).toBe(0);
    for (const line of again.stdout.trim().split('\n')) expect(line).toMatch(/ unchanged$/);
  });

  it('gives berth exactly its Role in its namespace, no wildcard, and outside it only reads of RuntimeClasses, StorageClasses and VolumeSnapshotClasses', async () => {
    const rbac = cluster.kubeConfig.makeApiClient(RbacAuthorizationV1Api);
    const role = await rbac.readNamespacedRole({ name: 'berth', namespace: NS });
    expect(grants(role.rules)).toEqual(ROLE_GRANTS);
    for (const r of role.rules ?? []) {
      expect(r.resourceNames ?? [], 'no rule limited by name').toEqual([]);
      expect(r.nonResourceURLs ?? []).toEqual([]);
      expect([...(r.verbs ?? []), ...(r.resources ?? []), ...(r.apiGroups ?? [])]).not.toContain('*');
    }

    // Every binding in the cluster that names berth's service account: its Role here, and the one ClusterRole.
    const names = (s: { kind: string; name: string; namespace?: string }) =>
      s.kind === 'ServiceAccount' && s.name === 'berth' && s.namespace === NS;
    const roleBindings = (await rbac.listRoleBindingForAllNamespaces()).items.filter((b) => b.subjects?.some(names));
    expect(roleBindings.map((b) => `${b.metadata?.namespace}/${b.metadata?.name} -> ${b.roleRef.kind}/${b.roleRef.name}`)).toEqual([
      `${NS}/berth -> Role/berth`,
    ]);
    const clusterBindings = (await rbac.listClusterRoleBinding()).items.filter((b) => b.subjects?.some(names));
    expect(clusterBindings.map((b) => `${b.metadata?.name} -> ${b.roleRef.kind}/${b.roleRef.name}`)).toEqual([
      'berth-cluster-reads -> ClusterRole/berth-cluster-reads',
    ]);
    const clusterRole = await rbac.readClusterRole({ name: 'berth-cluster-reads' });
    expect(grants(clusterRole.rules)).toEqual([
      'node.k8s.io/runtimeclasses:get',
      'node.k8s.io/runtimeclasses:list',
      'snapshot.storage.k8s.io/volumesnapshotclasses:list',
      'storage.k8s.io/storageclasses:get',
    ]);
    expect(clusterRole.aggregationRule).toBeUndefined();

    // The server's authorizer, asked as berth's service account: each grant in its namespace, none elsewhere.
    for (const [group, resources, verbs] of ROLE) {
      for (const res of resources) {
        const [resource, subresource] = res.split('/') as [string, string | undefined];
        for (const verb of verbs) {
          expect(await allowed({ verb, group, resource, subresource, namespace: NS }), `${verb} ${res} in ${NS}`).toBe(true);
          expect(await allowed({ verb, group, resource, subresource, namespace: 'default' }), `${verb} ${res} in default`).toBe(false);
        }
      }
    }
    const refused: Array<Parameters<typeof allowed>[0]> = [
      { verb: 'get', resource: 'secrets', namespace: NS }, // berth-admin's token and the namespace's other Secrets
      { verb: 'list', resource: 'secrets', namespace: NS },
      { verb: 'watch', resource: 'secrets', namespace: NS },
      { verb: 'delete', resource: 'pods', namespace: NS }, // the garbage collector's, after the Sandbox
      { verb: 'update', resource: 'secrets', namespace: NS },
      { verb: 'create', resource: 'pods', namespace: NS },
      { verb: 'list', resource: 'pods', namespace: NS },
      { verb: 'get', resource: 'pods', subresource: 'log', namespace: NS },
      { verb: 'watch', group: 'agents.x-k8s.io', resource: 'sandboxes', namespace: NS },
      { verb: 'patch', group: 'agents.x-k8s.io', resource: 'sandboxes', namespace: NS },
      { verb: 'get', resource: 'configmaps', namespace: NS },
      { verb: 'patch', group: 'networking.k8s.io', resource: 'networkpolicies', namespace: NS },
      { verb: 'update', resource: 'pods', namespace: NS },
      // Warm pools and claims are not how berth keeps a session warm (docs/kubernetes.md): no grant.
      { verb: 'create', group: 'extensions.agents.x-k8s.io', resource: 'sandboxclaims', namespace: NS },
      { verb: 'create', group: 'extensions.agents.x-k8s.io', resource: 'sandboxwarmpools', namespace: NS },
      { verb: 'create', resource: 'pods', subresource: 'portforward', namespace: NS },
      { verb: 'create', resource: 'pods', subresource: 'ephemeralcontainers', namespace: NS },
      { verb: 'update', group: 'agents.x-k8s.io', resource: 'sandboxes', namespace: NS },
      { verb: 'deletecollection', group: 'agents.x-k8s.io', resource: 'sandboxes', namespace: NS },
      { verb: 'delete', group: 'networking.k8s.io', resource: 'networkpolicies', namespace: NS },
      { verb: 'update', resource: 'persistentvolumeclaims', namespace: NS },
      { verb: 'update', resource: 'configmaps', namespace: NS },
      { verb: 'list', resource: 'services', namespace: NS },
      { verb: 'create', resource: 'services', namespace: NS },
      { verb: 'create', resource: 'serviceaccounts', subresource: 'token', namespace: NS, name: 'berth' },
      { verb: 'create', group: 'rbac.authorization.k8s.io', resource: 'roles', namespace: NS },
      { verb: 'bind', group: 'rbac.authorization.k8s.io', resource: 'clusterroles' },
      { verb: 'escalate', group: 'rbac.authorization.k8s.io', resource: 'roles', namespace: NS },
      { verb: 'create', group: 'node.k8s.io', resource: 'runtimeclasses' },
      { verb: 'list', resource: 'nodes' },
      { verb: 'list', resource: 'namespaces' },
      { verb: 'list', resource: 'pods' }, // across namespaces
      { verb: 'list', group: 'agents.x-k8s.io', resource: 'sandboxes' },
      { verb: 'update', group: 'apps', resource: 'deployments', namespace: NS, name: 'berth' },
    ];
    for (const attrs of refused) expect(await allowed(attrs), JSON.stringify(attrs)).toBe(false);
    for (const verb of ['get', 'list'])
      expect(await allowed({ verb, group: 'node.k8s.io', resource: 'runtimeclasses' }), `${verb} runtimeclasses`).toBe(true);
  });

  it('names agent-sandbox as missing in /healthz (503) until its CRDs are installed', () => {
    expect(healthWithoutAgentSandbox.status).toBe(503);
    expect(healthWithoutAgentSandbox.body).toMatchObject({
      ok: false,
      engine: {
        reachable: false,
        version: null,
        reason: 'ENGINE_UNAVAILABLE: agent-sandbox is not installed: the cluster serves no sandboxes.agents.x-k8s.io/v1beta1',
      },
    });
    expect(healthWithAgentSandbox.version).toMatch(/^v1\.20\./);
  });

  it("lets berth, as its service account, ask what /healthz asks: the server's version, its RuntimeClasses, its Sandboxes", async () => {
    // A token the server issues for the account (TokenRequest), as the kubelet mounts into berth's pod.
    const core = cluster.kubeConfig.makeApiClient(CoreV1Api);
    const issued = await core.createNamespacedServiceAccountToken({
      name: 'berth',
      namespace: NS,
      body: { spec: { audiences: ['https://kubernetes.default.svc'], expirationSeconds: 600 } },
    });
    const kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [{ name: 'test', server: cluster.server, skipTLSVerify: true }],
      users: [{ name: 'berth', token: issued.status?.token }],
      contexts: [{ name: 'berth', cluster: 'test', user: 'berth', namespace: NS }],
      currentContext: 'berth',
    });
    const settings = KubernetesSchema.parse({ namespace: NS });
    const launcher = createKubernetesLauncher({
      kubeConfig: kc,
      settings,
      relay: { address: settings.gateway.address, tokens: createRelayTokens() },
    });
    const info = await launcher.info();
    expect(info.version).toMatch(/^v1\.20\./);
    expect(info.runtimes.map((r) => r.name)).toEqual(['runc']);
    // And nothing berth's Role leaves out: the Secrets beside it.
    await expect(kc.makeApiClient(CoreV1Api).listNamespacedSecret({ namespace: NS })).rejects.toMatchObject({ code: 403 });
  });

  it('runs berth as the Deployment says: one replica, Recreate, its account, a hardened pod, its home, berth.yaml copied in, /healthz', async () => {
    const apps = cluster.kubeConfig.makeApiClient(AppsV1Api);
    const d = await apps.readNamespacedDeployment({ name: 'berth', namespace: NS });
    expect(d.spec?.replicas).toBe(1);
    expect(d.spec?.strategy?.type).toBe('Recreate');
    expect(d.spec?.selector.matchLabels).toEqual(BERTH_POD_LABELS);
    const pod = d.spec!.template;
    expect(pod.metadata?.labels).toEqual(BERTH_POD_LABELS);
    const spec = pod.spec!;
    expect(spec.serviceAccountName).toBe('berth');
    expect(spec.automountServiceAccountToken).toBe(true);
    expect(spec.hostNetwork ?? false).toBe(false);
    expect(spec.hostPID ?? false).toBe(false);
    expect(spec.hostIPC ?? false).toBe(false);
    expect(spec.securityContext).toMatchObject({
      runAsNonRoot: true,
      runAsUser: 10002,
      runAsGroup: 10002,
      fsGroup: 10002,
      seccompProfile: { type: 'RuntimeDefault' },
    });

    for (const c of [...(spec.initContainers ?? []), ...spec.containers]) {
      expect(c.securityContext, c.name).toMatchObject({
        runAsNonRoot: true,
        allowPrivilegeEscalation: false,
        readOnlyRootFilesystem: true,
        capabilities: { drop: ['ALL'] },
      });
      expect(c.securityContext?.privileged ?? false, c.name).toBe(false);
      expect(c.securityContext?.capabilities?.add ?? [], c.name).toEqual([]);
      expect(c.image, c.name).toBe('berth/server:latest');
      expect(c.imagePullPolicy, c.name).toBe('IfNotPresent');
    }
    expect(spec.containers).toHaveLength(1);
    const berth = spec.containers[0]!;
    expect(berth.args).toEqual(['serve', '--host', '0.0.0.0', '--port', '8080']);
    expect(berth.env).toEqual([
      { name: 'BERTH_HOME', value: '/var/lib/berth' },
      { name: 'BERTH_ADMIN_TOKEN', valueFrom: { secretKeyRef: { name: 'berth-admin', key: 'token' } } },
    ]);
    expect(berth.ports?.map((p) => [p.name, p.containerPort, p.protocol])).toEqual([
      ['http', 8080, 'TCP'],
      ['gateway', KUBE_GATEWAY_PORT, 'TCP'],
    ]);
    for (const probe of [berth.startupProbe, berth.readinessProbe])
      expect(probe?.httpGet).toMatchObject({ path: '/healthz', port: 'http' });
    expect(berth.livenessProbe?.tcpSocket?.port).toBe('http');

    const volumes = Object.fromEntries((spec.volumes ?? []).map((v) => [v.name, v]));
    const mounts = (c: { volumeMounts?: Array<{ name: string; mountPath: string; readOnly?: boolean }> }) =>
      Object.fromEntries((c.volumeMounts ?? []).map((m) => [m.mountPath, m]));
    expect(mounts(berth)['/var/lib/berth']?.name).toBe('home');
    expect(volumes.home?.persistentVolumeClaim?.claimName).toBe('berth-home');
    expect(mounts(berth)['/tmp']?.name).toBe('tmp');
    expect(volumes.tmp?.emptyDir).toBeDefined();

    // berth reads only $BERTH_HOME/berth.yaml: the init container copies the ConfigMap's there.
    const init = spec.initContainers ?? [];
    expect(init).toHaveLength(1);
    expect(init[0]!.command).toEqual(['cp', '/etc/berth/berth.yaml', '/var/lib/berth/berth.yaml']);
    expect(mounts(init[0]!)['/etc/berth']).toMatchObject({ name: 'config', readOnly: true });
    expect(mounts(init[0]!)['/var/lib/berth']?.name).toBe('home');
    const mapName = volumes.config?.configMap?.name ?? '';
    expect(mapName).toMatch(/^berth-config-[a-z0-9]+$/);
    const map = await cluster.kubeConfig.makeApiClient(CoreV1Api).readNamespacedConfigMap({ name: mapName, namespace: NS });
    expect(map.data?.['berth.yaml']).toBe(fs.readFileSync(join(DEPLOY, 'berth.yaml'), 'utf8'));

    const claim = await cluster.kubeConfig
      .makeApiClient(CoreV1Api)
      .readNamespacedPersistentVolumeClaim({ name: 'berth-home', namespace: NS });
    expect(claim.spec?.accessModes).toEqual(['ReadWriteOnce']);
    expect(claim.spec?.resources?.requests?.storage).toBe('10Gi');
  });

  it('serves the API on berth:8080 and the relay on berth-gateway:41500, which berth.yaml names and berth resolves to a cluster IP', async () => {
    const core = cluster.kubeConfig.makeApiClient(CoreV1Api);
    const api = await core.readNamespacedService({ name: 'berth', namespace: NS });
    expect(api.spec?.selector).toEqual(BERTH_POD_LABELS);
    expect(api.spec?.ports?.map((p) => [p.port, p.targetPort, p.protocol])).toEqual([[8080, 'http', 'TCP']]);
    const gw = await core.readNamespacedService({ name: 'berth-gateway', namespace: NS });
    expect(gw.spec?.selector).toEqual(BERTH_POD_LABELS);
    // Port and targetPort the same: the NetworkPolicies allow the pod's port, berth takes the Service's.
    expect(gw.spec?.ports?.map((p) => [p.port, p.targetPort, p.protocol])).toEqual([[KUBE_GATEWAY_PORT, KUBE_GATEWAY_PORT, 'TCP']]);
    expect(gw.spec?.publishNotReadyAddresses).toBe(true);
    expect(gw.spec?.clusterIP).toMatch(/^\d{1,3}(\.\d{1,3}){3}$/);
    expect(`${gw.metadata?.name}:${gw.spec?.ports?.[0]?.port}`).toBe(KubernetesSchema.parse({}).gateway.address);
  });

  it("closes tenant pods: no ingress, egress only TCP 41500 to berth's pod; berth's pod takes 41500 only from them", async () => {
    // As the server stores them (the typed client renames `from`).
    const policy = async (name: string) =>
      (await cluster.get(`/apis/networking.k8s.io/v1/namespaces/${NS}/networkpolicies/${name}`)) as V1NetworkPolicy;
    const tenants = await policy('berth-tenants');
    // The label every object berth makes carries (src/plan/labels.ts).
    expect(tenants.spec?.podSelector?.matchLabels).toEqual({ [LABELS.managed]: 'true' });
    expect(tenants.spec?.podSelector?.matchExpressions).toBeUndefined();
    expect([...(tenants.spec?.policyTypes ?? [])].sort()).toEqual(['Egress', 'Ingress']);
    expect(tenants.spec?.ingress ?? []).toEqual([]);
    expect(tenants.spec?.egress).toEqual([
      { to: [{ podSelector: { matchLabels: BERTH_POD_LABELS } }], ports: [{ protocol: 'TCP', port: KUBE_GATEWAY_PORT }] },
    ]);

    const own = await policy('berth');
    expect(own.spec?.podSelector?.matchLabels).toEqual(BERTH_POD_LABELS);
    expect([...(own.spec?.policyTypes ?? [])].sort()).toEqual(['Egress', 'Ingress']);
    expect(own.spec?.ingress).toEqual([
      { ports: [{ protocol: 'TCP', port: 8080 }] },
      { from: [{ podSelector: { matchLabels: { [LABELS.managed]: 'true' } } }], ports: [{ protocol: 'TCP', port: KUBE_GATEWAY_PORT }] },
    ]);
    expect(own.spec?.egress).toEqual([{}]); // open: the API server, model APIs, egress upstreams
  });
});
