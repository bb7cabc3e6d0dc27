import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import { join } from 'node:path';
import YAML from 'yaml';
import type { KubePki } from './real-kube-pki.js';
import { startProc, waitFor, type Proc } from './real-kube-proc.js';

/**
 * One real node of the test cluster on this machine: a kubelet v1.20.2 (dockershim) with its own
 * root, cgroup root, ports and CNI range on the cluster's host-only bridge. The first node runs
 * pods on the machine's Docker engine; a second one gets a Docker engine of its own (own data and
 * exec roots, no bridge, no iptables), because a kubelet kills every dockershim pod it finds on
 * its engine that is not its own. Host side effects are these, each undone by `stop`: the cgroup
 * directory named after the node (berth-real-a, -b) in each hierarchy, /var/log/pods and /var/log/containers (the
 * cluster removes those), the second engine's directories under the run directory.
 */
export interface RealNode {
  name: string;
  /** The Docker socket its pods run on. */
  dockerSocket: string;
  port: number;
  /** Kill the kubelet (and its own engine's containers keep running, as on a node that lost its kubelet). */
  stopKubelet(): Promise<void>;
  stop(namespaces: (ns: string) => boolean): Promise<void>;
}

export interface NodeOptions {
  name: string;
  dir: string;
  bin: string;
  pki: KubePki;
  server: string;
  token: string;
  ports: { kubelet: number; healthz: number };
  /** undefined: the machine's engine; else the second engine's directory. */
  ownEngine: boolean;
  bridge: string;
  subnet: string;
  range: { start: string; end: string };
  pauseImage: string;
  images: string[];
}

const CGROUP = '/sys/fs/cgroup';
const HIERARCHIES = ['blkio', 'cpu', 'cpuacct', 'cpuset', 'devices', 'freezer', 'memory', 'pids', 'hugetlb', 'systemd', 'unified'];

function cgroupDirs(name: string): string[] {
  return HIERARCHIES.map((h) => join(CGROUP, h))
    .filter((d) => fs.existsSync(d) && !fs.lstatSync(d).isSymbolicLink())
    .map((d) => join(d, name));
}

function makeCgroupRoot(name: string): void {
  for (const d of cgroupDirs(name)) {
    fs.mkdirSync(d, { recursive: true });
    if (d.includes('/cpuset/'))
      for (const f of ['cpuset.cpus', 'cpuset.mems']) fs.writeFileSync(join(d, f), fs.readFileSync(join(d, '..', f), 'utf8'));
  }
}

/** rmdir deepest first: a cgroup directory is removed only empty of tasks; a busy one is left (and said). */
export function removeCgroupRoot(name: string): string[] {
  const left: string[] = [];
  for (const d of cgroupDirs(name)) {
    if (!fs.existsSync(d)) continue;
    const out = execFileSync('find', [d, '-depth', '-type', 'd'], { encoding: 'utf8' }).trim().split('\n').filter(Boolean);
    for (const sub of out) {
      try {
        fs.rmdirSync(sub);
      } catch {
        left.push(sub);
      }
    }
  }
  return left;
}

function docker(socket: string, args: string[], input?: Buffer): string {
  return execFileSync('docker', ['-H', `unix://${socket}`, ...args], { encoding: 'utf8', input, maxBuffer: 1 << 30 });
}

/** Remove the dockershim containers (pods and their sandboxes) of the namespaces `mine` says are this cluster's. */
export function removePodContainers(socket: string, mine: (ns: string) => boolean): void {
  const lines = docker(socket, [
    'ps',
    '-a',
    '--filter',
    'label=io.kubernetes.docker.type',
    '--format',
    '{{.ID}} {{.Label "io.kubernetes.pod.namespace"}}',
  ]).trim();
  const ids = lines
    .split('\n')
    .filter(Boolean)
    .map((l) => l.split(' '))
    .filter(([, ns]) => ns && mine(ns))
    .map(([id]) => id!);
  if (ids.length) docker(socket, ['rm', '-f', '-v', ...ids]);
}

async function healthz(port: number): Promise<boolean> {
  return (await fetch(`http://127.0.0.1:${port}/healthz`, { signal: AbortSignal.timeout(2000) })).ok;
}

/**
 * A bridge of the second engine's own. Never `--bridge=none`: a dockerd started so removes the
 * host's default bridge interface (docker0) on its way up, and the machine's engine loses its
 * default network (measured: every later `docker run` failed "could not find bridge docker0").
 */
const ENGINE_BRIDGE = 'berthrk-eng';

async function startEngine(dir: string): Promise<{ socket: string; proc: Proc }> {
  const socket = join(dir, 'docker.sock');
  fs.writeFileSync(join(dir, 'daemon.json'), '{}\n');
  try {
    execFileSync('ip', ['link', 'add', ENGINE_BRIDGE, 'type', 'bridge'], { stdio: 'ignore' });
  } catch {
    // left by a run that crashed: used as it is
  }
  const proc = startProc(dir, 'dockerd', 'dockerd', [
    `--host=unix://${socket}`,
    `--data-root=${join(dir, 'docker-data')}`,
    `--exec-root=${join(dir, 'de')}`,
    `--pidfile=${join(dir, 'docker.pid')}`,
    `--config-file=${join(dir, 'daemon.json')}`,
    `--bridge=${ENGINE_BRIDGE}`,
    '--iptables=false',
    '--ip-masq=false',
    '--ip-forward=false',
  ]);
  await waitFor(
    'the second Docker engine answers',
    60_000,
    async () => fs.existsSync(socket) && docker(socket, ['info', '-f', '{{.ID}}']).length > 0,
    proc,
  );
  return { socket, proc };
}

export async function startRealNode(o: NodeOptions): Promise<RealNode> {
  const dir = join(o.dir, o.name);
  fs.mkdirSync(join(dir, 'cni-conf'), { recursive: true });
  const cgroupRoot = o.name; // berth-real-<x>
  let engine: { socket: string; proc: Proc } | undefined;
  let kubelet: Proc | undefined;
  const stop = async (mine: (ns: string) => boolean) => {
    await kubelet?.stop('SIGTERM', 10_000);
    if (engine || fs.existsSync('/var/run/docker.sock')) {
      const socket = engine?.socket ?? '/var/run/docker.sock';
      try {
        removePodContainers(socket, mine);
      } catch {
        // the engine is gone with its containers
      }
    }
    await engine?.proc.stop('SIGTERM', 20_000);
    if (engine) spawnSync('ip', ['link', 'del', ENGINE_BRIDGE], { stdio: 'ignore' });
    removeCgroupRoot(cgroupRoot);
  };
  try {
    makeCgroupRoot(cgroupRoot);
    if (o.ownEngine) {
      engine = await startEngine(dir);
      // The tests' images: saved from the machine's engine, loaded into this node's (no registry).
      for (const image of [o.pauseImage, ...o.images]) {
        const tar = execFileSync('docker', ['save', image], { maxBuffer: 1 << 30 });
        docker(engine.socket, ['load', '-q'], tar);
      }
    }
    const socket = engine?.socket ?? '/var/run/docker.sock';
    fs.writeFileSync(
      join(dir, 'cni-conf', '10-berth.conf'),
      JSON.stringify({
        cniVersion: '0.4.0',
        name: 'berth-test',
        type: 'bridge',
        bridge: o.bridge,
        // The bridge and its address are the cluster's: no gateway, no masquerade, no ip_forward
        // written; pods reach the subnet (berth's relay on the bridge address) and nothing else.
        isGateway: false,
        ipMasq: false,
        ipam: {
          type: 'host-local',
          dataDir: join(dir, 'cni-ipam'),
          ranges: [[{ subnet: o.subnet, rangeStart: o.range.start, rangeEnd: o.range.end }]],
        },
      }),
    );
    const serving = o.pki.kubeletServing(o.name);
    const kubeconfig = join(dir, 'kubelet.kubeconfig');
    fs.writeFileSync(
      kubeconfig,
      YAML.stringify({
        apiVersion: 'v1',
        kind: 'Config',
        clusters: [{ name: 'c', cluster: { server: o.server, 'certificate-authority': o.pki.ca } }],
        users: [{ name: 'u', user: { token: o.token } }],
        contexts: [{ name: 'c', context: { cluster: 'c', user: 'u' } }],
        'current-context': 'c',
      }),
      { mode: 0o600 },
    );
    kubelet = startProc(
      dir,
      'kubelet',
      join(o.bin, 'kubelet'),
      [
        `--kubeconfig=${kubeconfig}`,
        `--hostname-override=${o.name}`,
        '--node-ip=127.0.0.1',
        '--address=127.0.0.1',
        `--port=${o.ports.kubelet}`,
        '--read-only-port=0',
        '--healthz-bind-address=127.0.0.1',
        `--healthz-port=${o.ports.healthz}`,
        `--tls-cert-file=${serving.cert}`,
        `--tls-private-key-file=${serving.key}`,
        '--anonymous-auth=false',
        `--client-ca-file=${o.pki.ca}`,
        '--authorization-mode=Webhook',
        `--root-dir=${join(dir, 'kubelet')}`,
        `--cert-dir=${join(dir, 'kubelet-pki')}`,
        `--experimental-dockershim-root-directory=${join(dir, 'dockershim')}`,
        `--volume-plugin-dir=${join(dir, 'flexvolume')}`,
        '--container-runtime=docker',
        `--docker-endpoint=unix://${socket}`,
        `--pod-infra-container-image=${o.pauseImage}`,
        '--cgroup-driver=cgroupfs',
        '--cgroups-per-qos=true',
        `--cgroup-root=/${cgroupRoot}`,
        '--fail-swap-on=false',
        '--make-iptables-util-chains=false',
        '--network-plugin=cni',
        `--cni-bin-dir=${join(o.bin, 'cni')}`,
        `--cni-conf-dir=${join(dir, 'cni-conf')}`,
        `--cni-cache-dir=${join(dir, 'cni-cache')}`,
        '--allowed-unsafe-sysctls=kernel.shm*,kernel.msg*,kernel.sem',
        '--pod-max-pids=256',
        // Never an image of the machine's removed to free disk.
        '--image-gc-high-threshold=100',
        '--image-gc-low-threshold=99',
        '--serialize-image-pulls=false',
        '--node-status-update-frequency=4s',
        '--v=1',
      ],
      { BERTH_TEST_KUBELET_LOOPBACK: '1' },
    );
    await waitFor(`kubelet ${o.name} healthy`, 60_000, () => healthz(o.ports.healthz), kubelet);
    const k = kubelet;
    return {
      name: o.name,
      dockerSocket: socket,
      port: o.ports.kubelet,
      async stopKubelet() {
        await k.stop('SIGKILL', 1000);
      },
      stop,
    };
  } catch (err) {
    await stop(() => false).catch(() => undefined);
    throw err;
  }
}
