import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { CoreV1Api, KubeConfig, StorageV1Api, type V1PersistentVolume } from '@kubernetes/client-node';
import { freePort } from './chaos-rigs.js';
import { installAgentSandbox, kubeBinaries } from './kube-cluster.js';
import { startControlPlane } from './real-kube-control.js';
import { makeKubePki } from './real-kube-pki.js';
import { startRealNode, type RealNode } from './real-kube-node.js';
import { waitFor, type Proc } from './real-kube-proc.js';

/**
 * A whole Kubernetes v1.20.2 on this machine, every part real and built from Debian's source
 * (scripts/ensure-kube.sh, scripts/ensure-kube-node.sh): etcd, kube-apiserver (Node,RBAC
 * authorisation, NodeRestriction, x509 both ways to the kubelets), kube-scheduler,
 * kube-controller-manager (PV binder, the in-tree hostPath provisioner, GC, namespaces, node
 * lifecycle) and a kubelet running pods on the local Docker engine through dockershim. Pods sit on
 * a host-only bridge (no masquerade, no route out); berth's relay listens on its address. Two
 * storage classes: `local` (static local PVs, the default: the kubelet applies fsGroup on a first
 * mount) and `hostpath` (the provisioner's directories under /tmp/hostpath_pv: fsGroup never applied).
 * One per vitest run (test/real-kube-setup.ts); each test file takes a namespace of its own.
 */

/** What a test file gets of the cluster (vitest's provide/inject: plain data). */
export interface RealKubeInfo {
  server: string;
  token: string;
  ca: string;
  /** The admin's kubeconfig (system:masters), verifying the server's certificate. */
  kubeConfigFile: string;
  runDir: string;
  pkiDir: string;
  nodeBin: string;
  /** Every namespace a file makes starts so: teardown removes their pods' containers, no one else's. */
  nsPrefix: string;
  bridge: string;
  subnet: string;
  gatewayIp: string;
  pauseImage: string;
  /** Static tokens of nodes a test may start (`system:node:<name>`). */
  nodeTokens: Record<string, string>;
  nodes: Array<{ name: string; dockerSocket: string }>;
}

export const LOCAL_CLASS = 'local';
export const HOSTPATH_CLASS = 'hostpath';
export const PAUSE_IMAGE = 'berth-test/pause:v3.4.1-berth';
const BRIDGE = 'berthrk0';
const SUBNET = '10.244.250.0/24';
const GATEWAY = '10.244.250.1';
/** What the kubelet and the hostPath provisioner make on the host, removed at the end when absent before. */
const HOST_DIRS = ['/var/log/pods', '/var/log/containers', '/tmp/hostpath_pv'];
export const NODE_NAMES = ['berth-real-a', 'berth-real-b'] as const;

/** The cached node binaries, or a clear error: the build takes 30-50 minutes and make test does not start it. */
export function realNodeBinaries(): string {
  const cache =
    process.env.BERTH_KUBE_CACHE ??
    join(process.env.XDG_DATA_HOME ?? join(os.homedir(), '.local', 'share'), 'berth', '.berth', 'cache', 'kube');
  const bin = join(cache, 'v1.20.2-node-r1');
  if (!fs.existsSync(join(bin, 'kubelet')))
    throw new Error(`No real-node binaries in ${bin}: run scripts/ensure-kube-node.sh once (30-50 minutes), then the real tier.`);
  return bin;
}

/** `count` local PVs of `node`, each a directory under `dir` (local volumes are never provisioned: an operator makes them). */
export async function makeLocalVolumes(kc: KubeConfig, node: string, dir: string, count: number, from = 0): Promise<void> {
  const core = kc.makeApiClient(CoreV1Api);
  const bodies: V1PersistentVolume[] = [];
  for (let i = from; i < from + count; i++) {
    const path = join(dir, String(i));
    fs.mkdirSync(path, { recursive: true, mode: 0o755 });
    bodies.push({
      metadata: { name: `${node}-pv-${i}`, labels: { 'berth-test/node': node } },
      spec: {
        capacity: { storage: '100Gi' },
        accessModes: ['ReadWriteOnce', 'ReadOnlyMany', 'ReadWriteMany'],
        persistentVolumeReclaimPolicy: 'Retain',
        storageClassName: LOCAL_CLASS,
        volumeMode: 'Filesystem',
        local: { path },
        nodeAffinity: {
          required: { nodeSelectorTerms: [{ matchExpressions: [{ key: 'kubernetes.io/hostname', operator: 'In', values: [node] }] }] },
        },
      },
    });
  }
  for (let i = 0; i < bodies.length; i += 25)
    await Promise.all(bodies.slice(i, i + 25).map((body) => core.createPersistentVolume({ body })));
}

/**
 * Take a stopped node out of the cluster: its Node object (else the scheduler places the next
 * file's pods there until the node's grace period ends) and its local volumes (else a claim binds
 * to a disk on a node that is gone).
 */
export async function forgetNode(kc: KubeConfig, node: string): Promise<void> {
  const core = kc.makeApiClient(CoreV1Api);
  await core.deleteNode({ name: node }).catch(() => undefined);
  await core.deleteCollectionPersistentVolume({ labelSelector: `berth-test/node=${node}` }).catch(() => undefined);
}

/** Ready, and the not-ready taint gone (the node lifecycle controller's work): the scheduler places pods there. */
export async function waitNodeReady(kc: KubeConfig, name: string, proc?: Proc): Promise<void> {
  const core = kc.makeApiClient(CoreV1Api);
  await waitFor(
    `node ${name} Ready and untainted`,
    90_000,
    async () => {
      const n = await core.readNode({ name });
      const ready = n.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True');
      return Boolean(ready) && !(n.spec?.taints ?? []).some((t) => t.key.startsWith('node.kubernetes.io/'));
    },
    proc,
  );
}

function mountsUnder(dir: string): string[] {
  return fs
    .readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .map((l) => l.split(' ')[4] ?? '')
    .filter((m) => m.startsWith(`${dir}/`))
    .sort((a, b) => b.length - a.length);
}

function importPause(bin: string): void {
  try {
    execFileSync('docker', ['image', 'inspect', PAUSE_IMAGE], { stdio: 'ignore' });
    return;
  } catch {
    // import it
  }
  const dir = fs.mkdtempSync(join(os.tmpdir(), 'berth-pause-'));
  try {
    fs.copyFileSync(join(bin, 'pause'), join(dir, 'pause'));
    fs.chmodSync(join(dir, 'pause'), 0o755);
    execFileSync('tar', ['-C', dir, '-cf', join(dir, 'pause.tar'), 'pause']);
    execFileSync('docker', ['import', '-c', 'ENTRYPOINT ["/pause"]', '-c', 'USER 65535:65535', join(dir, 'pause.tar'), PAUSE_IMAGE], {
      stdio: 'ignore',
    });
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

export async function startRealKubeCluster(): Promise<{ info: RealKubeInfo; stop(): Promise<void> }> {
  const apiBin = kubeBinaries();
  const nodeBin = realNodeBinaries();
  const dir = fs.realpathSync(fs.mkdtempSync(join(os.tmpdir(), 'berth-rk-')));
  const absent = HOST_DIRS.filter((d) => !fs.existsSync(d));
  const procs: Proc[] = [];
  const nodes: RealNode[] = [];
  const nsPrefix = `rk${randomBytes(3).toString('hex')}`;
  let bridgeMade = false;
  const stop = async () => {
    for (const n of nodes.reverse()) await n.stop((ns) => ns.startsWith(nsPrefix)).catch(() => undefined);
    for (const p of procs.reverse()) await p.stop('SIGTERM', 5000);
    for (const m of mountsUnder(dir)) execFileSync('umount', ['-l', m], { stdio: 'ignore' });
    if (bridgeMade) execFileSync('ip', ['link', 'del', BRIDGE], { stdio: 'ignore' });
    for (const d of absent) fs.rmSync(d, { recursive: true, force: true });
    fs.rmSync(dir, { recursive: true, force: true });
  };
  try {
    const pki = makeKubePki(join(dir, 'pki'));
    const token = randomBytes(24).toString('hex');
    const nodeTokens = Object.fromEntries(NODE_NAMES.map((n) => [n, randomBytes(24).toString('hex')]));
    fs.writeFileSync(
      join(dir, 'tokens.csv'),
      [
        `${token},berth-test-admin,1,"system:masters"`,
        ...NODE_NAMES.map((n, i) => `${nodeTokens[n]},system:node:${n},${10 + i},"system:nodes"`),
      ].join('\n') + '\n',
      { mode: 0o600 },
    );
    const { server, kubeConfigFile, kc } = await startControlPlane({ dir, apiBin, nodeBin, pki, token, procs });
    const storage = kc.makeApiClient(StorageV1Api);
    await storage.createStorageClass({
      body: {
        metadata: { name: LOCAL_CLASS, annotations: { 'storageclass.kubernetes.io/is-default-class': 'true' } },
        provisioner: 'kubernetes.io/no-provisioner',
        volumeBindingMode: 'WaitForFirstConsumer',
      },
    });
    await storage.createStorageClass({ body: { metadata: { name: HOSTPATH_CLASS }, provisioner: 'kubernetes.io/host-path' } });
    await installAgentSandbox(kc);

    importPause(nodeBin);
    if (fs.existsSync(`/sys/class/net/${BRIDGE}`)) throw new Error(`the bridge ${BRIDGE} exists: another real-node cluster runs here`);
    execFileSync('ip', ['link', 'add', BRIDGE, 'type', 'bridge']);
    bridgeMade = true;
    execFileSync('ip', ['addr', 'add', `${GATEWAY}/24`, 'dev', BRIDGE]);
    execFileSync('ip', ['link', 'set', BRIDGE, 'up']);

    const name = NODE_NAMES[0];
    const node = await startRealNode({
      name,
      dir,
      bin: nodeBin,
      pki,
      server,
      token: nodeTokens[name]!,
      ports: { kubelet: await freePort(), healthz: await freePort() },
      ownEngine: false,
      bridge: BRIDGE,
      subnet: SUBNET,
      range: { start: '10.244.250.10', end: '10.244.250.127' },
      pauseImage: PAUSE_IMAGE,
      images: [],
    });
    nodes.push(node);
    await waitNodeReady(kc, name);
    await makeLocalVolumes(kc, name, join(dir, 'pv', name), 300);
    const info: RealKubeInfo = {
      server,
      token,
      ca: pki.ca,
      kubeConfigFile,
      runDir: dir,
      pkiDir: pki.dir,
      nodeBin,
      nsPrefix,
      bridge: BRIDGE,
      subnet: SUBNET,
      gatewayIp: GATEWAY,
      pauseImage: PAUSE_IMAGE,
      nodeTokens,
      nodes: [{ name, dockerSocket: node.dockerSocket }],
    };
    return { info, stop };
  } catch (err) {
    await stop().catch(() => undefined);
    throw err;
  }
}
