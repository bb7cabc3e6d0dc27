import fs from 'node:fs';
import { join } from 'node:path';
import YAML from 'yaml';
import { describe, expect, it } from 'vitest';
import { SANDBOX_API } from '../../src/launch/kubernetes/objects.js';
import { SNAPSHOT_API, SNAPSHOT_CLASS_API } from '../../src/launch/kubernetes/snapshot-plan.js';
import { REPO_ROOT } from '../helpers.js';

/**
 * deploy/rbac.yaml grants exactly what berth's code calls (issue 44). The calls are read from the
 * source of every file that holds a Kubernetes client (src/**: @kubernetes/client-node's typed
 * methods, Exec, Attach, Watch paths); the grants from rbac.yaml. A call without a grant fails here
 * (berth would get a 403 on a real cluster); so does a grant nothing calls. The same Role runs
 * every test of the Kubernetes rig (test/helpers/kube-rig.ts binds it to berth's client), which
 * catches what this reading cannot (a call assembled at run time).
 */

type Grant = `${string}/${string}:${string}`;

/** A client method's kind → its API group and resource (a kind not here fails the test: add it). */
const KINDS: Record<string, [group: string, resource: string]> = {
  Pod: ['', 'pods'],
  PodLog: ['', 'pods/log'],
  PersistentVolumeClaim: ['', 'persistentvolumeclaims'],
  ConfigMap: ['', 'configmaps'],
  Secret: ['', 'secrets'],
  Event: ['', 'events'],
  Service: ['', 'services'],
  NetworkPolicy: ['networking.k8s.io', 'networkpolicies'],
  RuntimeClass: ['node.k8s.io', 'runtimeclasses'],
  StorageClass: ['storage.k8s.io', 'storageclasses'],
  CustomObject: [SANDBOX_API.group, SANDBOX_API.plural],
};
/** A file that names the snapshot API calls custom objects of that API (VolumeSnapshots; their classes cluster-wide). */
const SNAPSHOT_KINDS: Record<string, [group: string, resource: string]> = {
  CustomObject: [SNAPSHOT_API.group, SNAPSHOT_API.plural],
  ClusterCustomObject: [SNAPSHOT_CLASS_API.group, SNAPSHOT_CLASS_API.plural],
};
const CLUSTER_KINDS =
  /^(Namespace|Node|PersistentVolume|StorageClass|CustomResourceDefinition|ClusterRole\w*|ClusterCustomObject|PriorityClass)$/;
const VERBS: Record<string, string> = { read: 'get', get: 'get', list: 'list', create: 'create', delete: 'delete', patch: 'patch' };
VERBS.replace = 'update';

function sourcesWithClients(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = join(dir, e.name);
    if (e.isDirectory()) return sourcesWithClients(p);
    // The launcher's parts share one set of clients (calls.ts KubeApis): each of its files is read.
    const launcherPart = p.includes(`${join('launch', 'kubernetes')}/`);
    return e.name.endsWith('.ts') && (launcherPart || fs.readFileSync(p, 'utf8').includes('@kubernetes/client-node')) ? [p] : [];
  });
}

/** Every (group/resource:verb) the code calls, with where. */
function calledGrants(text: string): Map<Grant, string> {
  const out = new Map<Grant, string>();
  const kinds = /\bSNAPSHOT_(CLASS_)?API\b/.test(text) ? { ...KINDS, ...SNAPSHOT_KINDS } : KINDS;
  const add = (group: string, resource: string, verb: string, at: string) => out.set(`${group}/${resource}:${verb}`, at);
  for (const m of text.matchAll(/\.(read|get|list|create|delete|patch|replace)(Namespaced)?([A-Z]\w*?)(Status)?\(/g)) {
    const [call, verb, , kind] = m as unknown as [string, string, string | undefined, string];
    const target = kinds[kind];
    // Without "Namespaced" most names are not the API's (readFileSync, replaceAll, getCode: /version, open
    // to every authenticated user); the cluster-scoped kinds a client could still name must be known.
    if (!m[2] && !target && !CLUSTER_KINDS.test(kind)) continue;
    if (!target) throw new Error(`a call of a kind this test does not know: ${call}`);
    add(target[0], `${target[1]}${m[4] ? '/status' : ''}`, VERBS[verb]!, call);
  }
  // Exec and Attach open a websocket (GET) or POST: both verbs, as the API server asks either.
  if (/\bexec\.exec\(|new Exec\(kubeConfig\)\.exec\(/.test(text)) for (const v of ['create', 'get']) add('', 'pods/exec', v, 'exec');
  if (/new Attach\(/.test(text)) for (const v of ['create', 'get']) add('', 'pods/attach', v, 'attach');
  for (const m of text.matchAll(/\.watch\(\s*`\/api(?:s\/([\w.]+))?\/v\w+\/namespaces\/\$\{\w+\}\/(\w+)/g))
    add(m[1] ?? '', m[2]!, 'watch', m[0]);
  return out;
}

interface Rule {
  apiGroups: string[];
  resources: string[];
  verbs: string[];
  resourceNames?: string[];
}

function granted(kind: 'Role' | 'ClusterRole'): Grant[] {
  const docs = YAML.parseAllDocuments(fs.readFileSync(join(REPO_ROOT, 'deploy', 'rbac.yaml'), 'utf8')).map(
    (d) => d.toJS() as { kind: string; rules?: Rule[] },
  );
  return docs
    .filter((d) => d.kind === kind)
    .flatMap((d) => d.rules ?? [])
    .flatMap((r) => r.apiGroups.flatMap((g) => r.resources.flatMap((res) => r.verbs.map((v): Grant => `${g}/${res}:${v}`))));
}

describe('deploy/rbac.yaml: exactly what the code calls', () => {
  const files = sourcesWithClients(join(REPO_ROOT, 'src'));
  const called = new Map<Grant, string>();
  for (const f of files)
    for (const [g, at] of calledGrants(fs.readFileSync(f, 'utf8'))) called.set(g, `${f.slice(REPO_ROOT.length + 1)}: ${at}`);
  const role = granted('Role');
  const clusterRole = granted('ClusterRole');
  const all = new Set([...role, ...clusterRole]);

  it('reads the calls of every file that holds a client', () => {
    expect(files.map((f) => f.slice(REPO_ROOT.length + 1)).sort()).toEqual(
      expect.arrayContaining(['src/launch/kubernetes/launcher.ts', 'src/launch/kubernetes/reports.ts', 'src/launch/kubernetes/retire.ts']),
    );
    expect(called.size).toBeGreaterThan(10);
  });

  it('grants every call', () => {
    const missing = [...called].filter(([g]) => !all.has(g)).map(([g, at]) => `${g} (${at})`);
    expect(missing, 'called but not granted by deploy/rbac.yaml').toEqual([]);
  });

  it('grants nothing uncalled', () => {
    const unused = [...all].filter((g) => !called.has(g));
    expect(unused, 'granted by deploy/rbac.yaml but never called').toEqual([]);
  });

  it('no wildcard, no name-limited rule, and the cluster-wide part only reads RuntimeClasses, StorageClasses and snapshot classes', () => {
    expect([...all].filter((g) => g.includes('*'))).toEqual([]);
    expect(clusterRole.sort()).toEqual([
      'node.k8s.io/runtimeclasses:get',
      'node.k8s.io/runtimeclasses:list',
      'snapshot.storage.k8s.io/volumesnapshotclasses:list',
      'storage.k8s.io/storageclasses:get',
    ]);
    expect(role.every((g) => !g.startsWith('node.k8s.io/') && !g.startsWith('storage.k8s.io/'))).toBe(true);
  });

  it('reads a call from source as the API server authorizes it', () => {
    const text = [
      'core.readNamespacedPod({ name })',
      'custom.deleteNamespacedCustomObject({})',
      'net.replaceNamespacedNetworkPolicy({})',
      'core.patchNamespacedPodStatus({})',
      'new Attach(kubeConfig).attach(ns)',
      'watch.watch(`/api/v1/namespaces/${ns}/events`, {})',
      'kubeConfig.makeApiClient(VersionApi).getCode()',
    ].join('\n');
    expect([...calledGrants(text).keys()].sort()).toEqual(
      [
        '/pods:get',
        `${SANDBOX_API.group}/sandboxes:delete`,
        'networking.k8s.io/networkpolicies:update',
        '/pods/status:patch',
        '/pods/attach:create',
        '/pods/attach:get',
        '/events:watch',
      ].sort(),
    );
    expect(
      [...calledGrants('custom.listClusterCustomObject({ ...SNAPSHOT_CLASS_API })\ncustom.deleteNamespacedCustomObject({})').keys()].sort(),
    ).toEqual(['snapshot.storage.k8s.io/volumesnapshotclasses:list', 'snapshot.storage.k8s.io/volumesnapshots:delete']);
    expect(() => calledGrants('core.createNamespacedPodBinding({})')).toThrow(/does not know/);
    expect(() => calledGrants('core.listNode({})')).toThrow(/does not know/);
    expect(calledGrants('fs.readFileSync(p); s.replaceAll("a", "b")').size).toBe(0);
  });
});
