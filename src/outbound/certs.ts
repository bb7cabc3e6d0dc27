import crypto, { type KeyObject } from 'node:crypto';
import { promisify } from 'node:util';
import forge from 'node-forge';

/**
 * X.509 for the egress proxy's TLS termination: berth's CA and the short-lived certificates it
 * signs for the hosts a project holds secrets for. node-forge builds the certificate structure
 * (Node has no certificate builder); every key is made and every signature computed by Node's
 * native crypto, so a new host's certificate costs about a millisecond, not forge's JS RSA
 * (and issueServerCertAsync computes it in libuv's thread pool, off the event loop).
 */
export interface Authority {
  key: KeyObject;
  certPem: string;
  cert: forge.pki.Certificate;
}

const DAY_MS = 24 * 3600 * 1000;
/** Leaves live a week (clients refuse longer ones for public CAs; ours are remade on demand). */
export const LEAF_LIFETIME_MS = 7 * DAY_MS;

export function newRsaKey(): KeyObject {
  return crypto.generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey;
}

/** forge's copy of a public key, parsed once per key (a leaf key signs many certificates). */
const forgeKeys = new WeakMap<KeyObject, forge.pki.PublicKey>();
function forgePublicKey(key: KeyObject): forge.pki.PublicKey {
  let known = forgeKeys.get(key);
  if (!known) {
    known = forge.pki.publicKeyFromPem(crypto.createPublicKey(key).export({ type: 'spki', format: 'pem' }).toString());
    forgeKeys.set(key, known);
  }
  return known;
}

/** The bytes to sign: forge lays out the TBS structure, Node computes the signature. */
function toBeSigned(cert: forge.pki.Certificate): Buffer {
  const withInfo = cert as forge.pki.Certificate & { siginfo: { algorithmOid: string }; tbsCertificate: forge.asn1.Asn1 };
  withInfo.signatureOid = forge.pki.oids.sha256WithRSAEncryption as string;
  withInfo.siginfo.algorithmOid = withInfo.signatureOid;
  // getTBSCertificate exists in node-forge but not in its type definitions.
  withInfo.tbsCertificate = (forge.pki as unknown as { getTBSCertificate(c: forge.pki.Certificate): forge.asn1.Asn1 }).getTBSCertificate(
    cert,
  );
  return Buffer.from(forge.asn1.toDer(withInfo.tbsCertificate).getBytes(), 'binary');
}

function signNatively(cert: forge.pki.Certificate, key: KeyObject): string {
  cert.signature = crypto.sign('sha256', toBeSigned(cert), key).toString('binary');
  return forge.pki.certificateToPem(cert);
}

const signInPool = promisify(crypto.sign);

function serial(): string {
  // Positive (leading bit clear), 16 random bytes: unique without a counter to keep.
  const bytes = crypto.randomBytes(16);
  bytes[0] = (bytes[0] as number) & 0x7f;
  return bytes.toString('hex');
}

/** A new CA: may sign server certificates only (pathlen 0), valid for ten years. */
export function makeAuthority(commonName: string, key: KeyObject = newRsaKey()): Authority {
  const cert = forge.pki.createCertificate();
  cert.publicKey = forgePublicKey(key);
  cert.serialNumber = serial();
  cert.validity.notBefore = new Date(Date.now() - DAY_MS);
  cert.validity.notAfter = new Date(Date.now() + 3650 * DAY_MS);
  const name = [{ name: 'commonName', value: commonName }];
  cert.setSubject(name);
  cert.setIssuer(name);
  cert.setExtensions([
    { name: 'basicConstraints', cA: true, pathLenConstraint: 0, critical: true },
    { name: 'keyUsage', keyCertSign: true, cRLSign: true, critical: true },
    { name: 'subjectKeyIdentifier' },
  ]);
  const certPem = signNatively(cert, key);
  return { key, certPem, cert };
}

/** An authority from its PEM files (berth's own, or a test's). */
export function loadAuthority(keyPem: string, certPem: string): Authority {
  return { key: crypto.createPrivateKey(keyPem), certPem, cert: forge.pki.certificateFromPem(certPem) };
}

/** A server certificate for one host name (or `*.parent`) or IP address, signed by `ca`, for `key`. */
export function issueServerCert(ca: Authority, host: string, key: KeyObject, lifetimeMs = LEAF_LIFETIME_MS): string {
  return signNatively(serverCert(ca, host, key, lifetimeMs), ca.key);
}

/** The same, its signature computed in libuv's thread pool. */
export async function issueServerCertAsync(ca: Authority, host: string, key: KeyObject, lifetimeMs = LEAF_LIFETIME_MS): Promise<string> {
  const cert = serverCert(ca, host, key, lifetimeMs);
  cert.signature = (await signInPool('sha256', toBeSigned(cert), ca.key)).toString('binary');
  return forge.pki.certificateToPem(cert);
}

function serverCert(ca: Authority, host: string, key: KeyObject, lifetimeMs: number): forge.pki.Certificate {
  const cert = forge.pki.createCertificate();
  cert.publicKey = forgePublicKey(key);
  cert.serialNumber = serial();
  cert.validity.notBefore = new Date(Date.now() - 3600 * 1000);
  cert.validity.notAfter = new Date(Date.now() + lifetimeMs);
  cert.setSubject([{ name: 'commonName', value: host.slice(0, 64) }]);
  cert.setIssuer(ca.cert.subject.attributes);
  const altName = /^[0-9.]+$/.test(host) || host.includes(':') ? { type: 7, ip: host } : { type: 2, value: host };
  cert.setExtensions([
    { name: 'basicConstraints', cA: false },
    { name: 'keyUsage', digitalSignature: true, keyEncipherment: true, critical: true },
    { name: 'extKeyUsage', serverAuth: true },
    { name: 'subjectAltName', altNames: [altName] },
  ]);
  return cert;
}
