import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { createHash, generateKeyPairSync, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import https from 'node:https';
import os from 'node:os';
import { join } from 'node:path';
import { ApiextensionsV1Api, KubeConfig, type V1CustomResourceDefinition } from '@kubernetes/client-node';
import YAML from 'yaml';
import { freePort } from './chaos-rigs.js';

/**
 * A real Kubernetes API server (kube-apiserver v1.20.2 and etcd, built once from Debian's packages
 * by scripts/ensure-kube.sh) on loopback, one per test file. No controller manager, scheduler or
 * kubelet runs: the tests play them (test/fakes/kubelet.ts), as they play signal-cli.
 *
 * Two admission plugins are off because their controllers are not here: ServiceAccount (it wants
 * the token controller) and StorageObjectInUseProtection (its finalizer would keep a deleted PVC
 * "Terminating" without the PVC protection controller). Everything else is the server's default.
 */

export interface KubeCluster {
  server: string;
  token: string;
  kubeConfig: KubeConfig;
  /** kubeconfig YAML, as berth.yaml's launcher settings point at it. */
  kubeConfigFile: string;
  /** GET a path as the admin (JSON). */
  get(path: string): Promise<unknown>;
  stop(): Promise<void>;
}

const ROOT = join(import.meta.dirname, '..', '..');

/** The cached binaries' directory (building them the first time, a few minutes). */
export function kubeBinaries(): string {
  return (
    execFileSync(join(ROOT, 'scripts', 'ensure-kube.sh'), { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'], timeout: 30 * 60_000 })
      .trim()
      .split('\n')
      .pop() ?? ''
  );
}

function waitExit(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => (child.exitCode !== null || child.signalCode !== null ? resolve() : child.once('exit', () => resolve())));
}

function insecureGet(url: string, token: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = https.get(url, { rejectUnauthorized: false, headers: { authorization: `Bearer ${token}` }, timeout: 5000 }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.on('timeout', () => req.destroy(new Error('timeout')));
  });
}

async function until(what: string, deadlineMs: number, probe: () => Promise<boolean>, child: ChildProcess, log: string): Promise<void> {
  const end = Date.now() + deadlineMs;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`${what} exited (${child.exitCode}): ${fs.readFileSync(log, 'utf8').slice(-2000)}`);
    if (await probe().catch(() => false)) return;
    if (Date.now() > end) throw new Error(`${what} did not come up in ${deadlineMs} ms: ${fs.readFileSync(log, 'utf8').slice(-2000)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

export async function startKubeCluster(): Promise<KubeCluster> {
  const bin = kubeBinaries();
  const dir = fs.mkdtempSync(join(os.tmpdir(), 'berth-kube-'));
  const [etcdPort, peerPort, apiPort] = [await freePort(), await freePort(), await freePort()];
  const token = randomBytes(24).toString('hex');
  fs.writeFileSync(join(dir, 'tokens.csv'), `${token},berth-test-admin,1,"system:masters"\n`, { mode: 0o600 });
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  fs.writeFileSync(join(dir, 'sa.key'), privateKey.export({ type: 'pkcs8', format: 'pem' }), { mode: 0o600 });

  const children: ChildProcess[] = [];
  const start = (name: string, args: string[]) => {
    const log = join(dir, `${name}.log`);
    const out = fs.openSync(log, 'a');
    const child = spawn(join(bin, name), args, { stdio: ['ignore', out, out] });
    fs.closeSync(out);
    children.push(child);
    return { child, log };
  };
  const stop = async () => {
    for (const child of children.reverse()) {
      child.kill('SIGKILL');
      await waitExit(child);
    }
    fs.rmSync(dir, { recursive: true, force: true });
  };

  try {
    const etcdUrl = `http://127.0.0.1:${etcdPort}`;
    const etcd = start('etcd', [
      `--data-dir=${join(dir, 'etcd')}`,
      `--listen-client-urls=${etcdUrl}`,
      `--advertise-client-urls=${etcdUrl}`,
      `--listen-peer-urls=http://127.0.0.1:${peerPort}`,
      `--initial-advertise-peer-urls=http://127.0.0.1:${peerPort}`,
      `--initial-cluster=default=http://127.0.0.1:${peerPort}`,
      '--log-level=warn',
    ]);
    await until('etcd', 20_000, async () => (await fetch(`${etcdUrl}/health`)).ok, etcd.child, etcd.log);
    const api = start('kube-apiserver', [
      `--etcd-servers=${etcdUrl}`,
      '--bind-address=127.0.0.1',
      `--secure-port=${apiPort}`,
      '--insecure-port=0',
      `--cert-dir=${join(dir, 'certs')}`,
      `--token-auth-file=${join(dir, 'tokens.csv')}`,
      '--authorization-mode=RBAC',
      `--service-account-key-file=${join(dir, 'sa.key')}`,
      `--service-account-signing-key-file=${join(dir, 'sa.key')}`,
      '--service-account-issuer=https://kubernetes.default.svc',
      '--service-cluster-ip-range=10.96.0.0/16',
      '--disable-admission-plugins=ServiceAccount,StorageObjectInUseProtection',
      // The test kubelet serves on loopback with a certificate of its own (not the cluster's CA).
      '--kubelet-preferred-address-types=InternalIP',
      '--allow-privileged=false',
      '--v=0',
    ]);
    const server = `https://127.0.0.1:${apiPort}`;
    await until('kube-apiserver', 60_000, async () => (await insecureGet(`${server}/readyz`, token)).status === 200, api.child, api.log);

    const kubeConfigText = YAML.stringify({
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [{ name: 'test', cluster: { server, 'insecure-skip-tls-verify': true } }],
      users: [{ name: 'admin', user: { token } }],
      contexts: [{ name: 'test', context: { cluster: 'test', user: 'admin' } }],
      'current-context': 'test',
    });
    const kubeConfigFile = join(dir, 'kubeconfig');
    fs.writeFileSync(kubeConfigFile, kubeConfigText, { mode: 0o600 });
    const kubeConfig = new KubeConfig();
    kubeConfig.loadFromString(kubeConfigText);
    const get = async (path: string) => {
      const r = await insecureGet(`${server}${path}`, token);
      if (r.status !== 200) throw new Error(`GET ${path}: ${r.status} ${r.body.slice(0, 300)}`);
      return JSON.parse(r.body) as unknown;
    };
    return { server, token, kubeConfig, kubeConfigFile, get, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

/** agent-sandbox's CRDs as vendored (test/fixtures/agent-sandbox-v0.5.6, with SOURCE and SHA256SUMS). */
export const AGENT_SANDBOX_DIR = join(ROOT, 'test', 'fixtures', 'agent-sandbox-v0.5.6');

/**
 * The vendored CRD documents, each checked against SHA256SUMS, and, for a 1.20 server, with
 * exactly the `default: ''` lines stripped that it refuses (66 each in Sandbox and
 * SandboxTemplate, on fields of pod types newer than 1.20): a server from 1.25 on takes them as
 * released.
 */
export function agentSandboxCrds(): unknown[] {
  const sums = fs.readFileSync(join(AGENT_SANDBOX_DIR, 'SHA256SUMS'), 'utf8').trim().split('\n');
  return sums.map((line) => {
    const [sum, name] = line.split(/\s+/) as [string, string];
    const text = fs.readFileSync(join(AGENT_SANDBOX_DIR, name), 'utf8');
    const actual = createHash('sha256').update(text).digest('hex');
    if (actual !== sum) throw new Error(`${name}: sha256 ${actual}, SHA256SUMS says ${sum}`);
    const stripped = text.replace(/^\s+default: ''\n/gm, '');
    const removed = text.length - stripped.length > 0 ? text.split('\n').length - stripped.split('\n').length : 0;
    if (removed !== 0 && removed !== 66)
      throw new Error(`${name}: ${removed} empty defaults stripped, 66 expected: look at the new release`);
    return YAML.parse(stripped) as unknown;
  });
}

/** Install agent-sandbox's CRDs and wait until the server serves them. */
export async function installAgentSandbox(kc: KubeConfig): Promise<void> {
  const api = kc.makeApiClient(ApiextensionsV1Api);
  const crds = agentSandboxCrds() as V1CustomResourceDefinition[];
  for (const body of crds) await api.createCustomResourceDefinition({ body });
  const end = Date.now() + 30_000;
  for (const crd of crds) {
    const name = crd.metadata?.name ?? '';
    for (;;) {
      const got = await api.readCustomResourceDefinition({ name });
      if (got.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True')) break;
      if (Date.now() > end) throw new Error(`CRD ${name} not established: ${JSON.stringify(got.status?.conditions)}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}
