import fs from 'node:fs';
import { join } from 'node:path';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { freePort } from './chaos-rigs.js';
import type { KubePki } from './real-kube-pki.js';
import { startProc, waitFor, type Proc } from './real-kube-proc.js';
import YAML from 'yaml';

export function adminKubeConfig(info: { server: string; token: string; ca: string }): string {
  return YAML.stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'real', cluster: { server: info.server, 'certificate-authority': info.ca } }],
    users: [{ name: 'admin', user: { token: info.token } }],
    contexts: [{ name: 'real', context: { cluster: 'real', user: 'admin' } }],
    'current-context': 'real',
  });
}

/**
 * The real-node cluster's control plane on loopback: etcd, kube-apiserver (Node,RBAC
 * authorisation, NodeRestriction, its client cert to the kubelets and their serving certs
 * verified), kube-scheduler, kube-controller-manager (PV binder, in-tree hostPath provisioner,
 * GC, namespaces, node lifecycle, service-account tokens). Each process goes into `procs`, which
 * the cluster stops in reverse.
 */
export async function startControlPlane(o: {
  dir: string;
  apiBin: string;
  nodeBin: string;
  pki: KubePki;
  token: string;
  procs: Proc[];
}): Promise<{ server: string; kubeConfigFile: string; kc: KubeConfig }> {
  const { dir, apiBin, nodeBin, pki, token, procs } = o;
  const [etcdPort, peerPort, apiPort, schedPort, cmPort] = [
    await freePort(),
    await freePort(),
    await freePort(),
    await freePort(),
    await freePort(),
  ];
  const etcdUrl = `http://127.0.0.1:${etcdPort}`;
  const etcd = startProc(dir, 'etcd', join(apiBin, 'etcd'), [
    `--data-dir=${join(dir, 'etcd')}`,
    `--listen-client-urls=${etcdUrl}`,
    `--advertise-client-urls=${etcdUrl}`,
    `--listen-peer-urls=http://127.0.0.1:${peerPort}`,
    `--initial-advertise-peer-urls=http://127.0.0.1:${peerPort}`,
    `--initial-cluster=default=http://127.0.0.1:${peerPort}`,
    '--log-level=warn',
  ]);
  procs.push(etcd);
  await waitFor('etcd healthy', 20_000, async () => (await fetch(`${etcdUrl}/health`)).ok, etcd);
  const api = startProc(dir, 'kube-apiserver', join(apiBin, 'kube-apiserver'), [
    `--etcd-servers=${etcdUrl}`,
    '--bind-address=127.0.0.1',
    `--secure-port=${apiPort}`,
    '--insecure-port=0',
    `--tls-cert-file=${pki.apiserverCert}`,
    `--tls-private-key-file=${pki.apiserverKey}`,
    `--client-ca-file=${pki.ca}`,
    `--token-auth-file=${join(dir, 'tokens.csv')}`,
    '--authorization-mode=Node,RBAC',
    '--enable-admission-plugins=NodeRestriction',
    '--service-cluster-ip-range=10.96.0.0/16',
    `--service-account-key-file=${pki.saKey}`,
    `--service-account-signing-key-file=${pki.saKey}`,
    '--service-account-issuer=https://kubernetes.default.svc',
    `--kubelet-client-certificate=${pki.kubeletClientCert}`,
    `--kubelet-client-key=${pki.kubeletClientKey}`,
    `--kubelet-certificate-authority=${pki.ca}`,
    '--kubelet-preferred-address-types=InternalIP',
    '--allow-privileged=false',
    '--v=0',
  ]);
  procs.push(api);
  const server = `https://127.0.0.1:${apiPort}`;
  const kubeConfigFile = join(dir, 'admin.kubeconfig');
  fs.writeFileSync(kubeConfigFile, adminKubeConfig({ server, token, ca: pki.ca }), { mode: 0o600 });
  const kc = new KubeConfig();
  kc.loadFromFile(kubeConfigFile);
  await waitFor('kube-apiserver ready', 90_000, async () => (await kc.makeApiClient(CoreV1Api).listNamespace()).items.length > 0, api);
  const controlFlags = [
    `--kubeconfig=${kubeConfigFile}`,
    `--authentication-kubeconfig=${kubeConfigFile}`,
    `--authorization-kubeconfig=${kubeConfigFile}`,
    '--leader-elect=false',
    '--bind-address=127.0.0.1',
    '--port=0',
  ];
  procs.push(startProc(dir, 'kube-scheduler', join(nodeBin, 'kube-scheduler'), [...controlFlags, `--secure-port=${schedPort}`]));
  procs.push(
    startProc(dir, 'kube-controller-manager', join(nodeBin, 'kube-controller-manager'), [
      ...controlFlags,
      `--secure-port=${cmPort}`,
      '--enable-hostpath-provisioner',
      `--service-account-private-key-file=${pki.saKey}`,
      `--root-ca-file=${pki.ca}`,
      `--cluster-signing-cert-file=${pki.ca}`,
      `--cluster-signing-key-file=${pki.caKey}`,
      // A stopped node is NotReady in seconds (the two-nodes test), not 40.
      '--node-monitor-grace-period=16s',
      '--node-monitor-period=2s',
    ]),
  );
  return { server, kubeConfigFile, kc };
}
