import fs from 'node:fs';
import { join } from 'node:path';
import tls from 'node:tls';
import type { KeyObject } from 'node:crypto';
import { errnoOf } from '../errors.js';
import { readTextIfExists } from '../fs/json-file.js';
import { atomicWriteFile } from '../fs/tree.js';
import { issueServerCert, LEAF_LIFETIME_MS, loadAuthority, makeAuthority, newRsaKey, type Authority } from './certs.js';

/**
 * berth's own CA, one per installation: the egress proxy signs with it a certificate for each
 * host it terminates TLS for (hosts a project holds a secret grant for), and containers that
 * reach those hosts trust it. Its key and certificate are one 0600 file in berth's private
 * state, made once; only the certificate (public) ever goes near a container.
 */
export interface EgressCa {
  /** The CA certificate (PEM): what NODE_EXTRA_CA_CERTS names. */
  certPem: string;
  /** The public roots Node trusts plus berth's CA: what SSL_CERT_FILE, curl, git and requests read. */
  bundlePem: string;
  /** A TLS context presenting a certificate for `host`, signed by the CA (made once per host and week). */
  contextFor(host: string): tls.SecureContext;
  /** The two public files (0644) a run that reaches a terminated host gets mounted. */
  files: EgressTrustFiles;
}

export interface EgressTrustFiles {
  ca: string;
  bundle: string;
}

/** Rewrite a public file only when its content changed (a mounted file keeps its inode otherwise). */
function writePublic(file: string, text: string): void {
  if (readTextIfExists(file) !== text) atomicWriteFile(file, text, 0o644);
}

export const EGRESS_CA_FILE = 'egress-ca.pem';
/** Hosts whose certificates are kept; past it the oldest is made again when next needed. */
const MAX_HOSTS = 512;

function loadOrCreateAuthority(stateDir: string): Authority {
  const file = join(stateDir, EGRESS_CA_FILE);
  const read = (): Authority | undefined => {
    const text = readTextIfExists(file);
    if (text === undefined) return undefined;
    const key = /-----BEGIN PRIVATE KEY-----[\s\S]+?-----END PRIVATE KEY-----/.exec(text)?.[0];
    const cert = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/.exec(text)?.[0];
    if (!key || !cert) throw new Error(`${file} does not hold berth's egress CA; remove it to make a new one (containers trust the new one from their next run)`);
    return loadAuthority(key, `${cert}\n`);
  };
  const existing = read();
  if (existing) return existing;
  fs.mkdirSync(stateDir, { recursive: true, mode: 0o700 });
  const made = makeAuthority(`berth egress CA ${new Date().toISOString().slice(0, 10)}`);
  const tmp = `${file}.${process.pid}.tmp`;
  const fd = fs.openSync(tmp, 'w', 0o600);
  try {
    fs.writeFileSync(fd, `${made.key.export({ type: 'pkcs8', format: 'pem' }).toString()}${made.certPem}`);
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
  try {
    // link, not rename: another process that made one first keeps its CA, and this one reads it.
    fs.linkSync(tmp, file);
  } catch (err) {
    if (errnoOf(err) !== 'EEXIST') throw err;
  } finally {
    fs.rmSync(tmp, { force: true });
  }
  return read() as Authority;
}

export function loadOrCreateEgressCa(stateDir: string): EgressCa {
  const authority = loadOrCreateAuthority(stateDir);
  let leafKey: KeyObject | undefined;
  let leafKeyPem: string | undefined;
  const contexts = new Map<string, { context: tls.SecureContext; until: number }>();
  const bundlePem = `${tls.rootCertificates.join('\n')}\n${authority.certPem}`;
  const trustDir = join(stateDir, 'egress-trust');
  fs.mkdirSync(trustDir, { recursive: true, mode: 0o755 });
  const files = { ca: join(trustDir, 'berth-egress-ca.crt'), bundle: join(trustDir, 'ca-certificates.crt') };
  writePublic(files.ca, authority.certPem);
  writePublic(files.bundle, bundlePem);
  return {
    certPem: authority.certPem,
    bundlePem,
    files,
    contextFor(host) {
      const known = contexts.get(host);
      if (known && known.until > Date.now()) return known.context;
      leafKey ??= newRsaKey();
      leafKeyPem ??= leafKey.export({ type: 'pkcs8', format: 'pem' }).toString();
      const context = tls.createSecureContext({ key: leafKeyPem, cert: issueServerCert(authority, host, leafKey), minVersion: 'TLSv1.2' });
      contexts.delete(host);
      if (contexts.size >= MAX_HOSTS) contexts.delete(contexts.keys().next().value as string);
      // Made again a day before it expires, so no client sees one about to run out.
      contexts.set(host, { context, until: Date.now() + LEAF_LIFETIME_MS - 24 * 3600 * 1000 });
      return context;
    },
  };
}
