import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import { join } from 'node:path';

/**
 * The real-node cluster's certificates, made with openssl as a kubeadm cluster has them: one CA;
 * the API server's serving cert; its client cert to the kubelets (the kubelets authorise it by a
 * SubjectAccessReview); each kubelet's serving cert for 127.0.0.1, which the API server verifies
 * (--kubelet-certificate-authority). Loopback names only.
 */
export interface KubePki {
  dir: string;
  ca: string;
  caKey: string;
  apiserverCert: string;
  apiserverKey: string;
  kubeletClientCert: string;
  kubeletClientKey: string;
  saKey: string;
  /** A serving cert for node `name` (IP:127.0.0.1), made on first ask. */
  kubeletServing(name: string): { cert: string; key: string };
}

const openssl = (dir: string, args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });

function signed(dir: string, name: string, subject: string, ext: string): { cert: string; key: string } {
  const key = join(dir, `${name}.key`);
  const csr = join(dir, `${name}.csr`);
  const cert = join(dir, `${name}.crt`);
  const extFile = join(dir, `${name}.ext`);
  fs.writeFileSync(extFile, ext);
  openssl(dir, ['req', '-new', '-newkey', 'rsa:2048', '-nodes', '-keyout', key, '-out', csr, '-subj', subject]);
  openssl(dir, [
    'x509',
    '-req',
    '-in',
    csr,
    '-CA',
    'ca.crt',
    '-CAkey',
    'ca.key',
    '-CAcreateserial',
    '-out',
    cert,
    '-days',
    '2',
    '-extfile',
    extFile,
  ]);
  return { cert, key };
}

/** A new CA and the API server's certs in `dir`. */
export function makeKubePki(dir: string): KubePki {
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  openssl(dir, [
    'req',
    '-x509',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-keyout',
    'ca.key',
    '-out',
    'ca.crt',
    '-days',
    '2',
    '-subj',
    '/CN=berth-test-ca',
  ]);
  const server = 'basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n';
  const client = 'basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n';
  signed(
    dir,
    'apiserver',
    '/CN=kube-apiserver',
    `${server}subjectAltName=IP:127.0.0.1,IP:10.96.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default.svc\n`,
  );
  signed(dir, 'apiserver-kubelet-client', '/O=system:masters/CN=kube-apiserver-kubelet-client', client);
  openssl(dir, ['genrsa', '-out', 'sa.key', '2048']);
  return kubePkiAt(dir);
}

/** The certs made by makeKubePki (in another process too: a test file's own node signs with the same CA). */
export function kubePkiAt(dir: string): KubePki {
  const server = 'basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n';
  const nodes = new Map<string, { cert: string; key: string }>();
  return {
    dir,
    ca: join(dir, 'ca.crt'),
    caKey: join(dir, 'ca.key'),
    apiserverCert: join(dir, 'apiserver.crt'),
    apiserverKey: join(dir, 'apiserver.key'),
    kubeletClientCert: join(dir, 'apiserver-kubelet-client.crt'),
    kubeletClientKey: join(dir, 'apiserver-kubelet-client.key'),
    saKey: join(dir, 'sa.key'),
    kubeletServing(name) {
      let got = nodes.get(name);
      if (!got) {
        got = signed(dir, `kubelet-${name}`, `/O=system:nodes/CN=system:node:${name}`, `${server}subjectAltName=IP:127.0.0.1\n`);
        nodes.set(name, got);
      }
      return got;
    },
  };
}
