import fs from 'node:fs';
import { join } from 'node:path';
import crypto, { type KeyObject } from 'node:crypto';
import tls from 'node:tls';
import { promisify } from 'node:util';
import { BerthError, errnoOf } from '../base/errors.js';
import { readTextIfExists } from '../fs/json-file.js';
import { atomicWriteFile } from '../fs/tree.js';
import { issueServerCertAsync, LEAF_LIFETIME_MS, loadAuthority, makeAuthority, type Authority } from './certs.js';

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
  /**
   * A TLS context presenting a certificate for `name` (a host, or `*.parent`), signed by the CA:
   * made once per name and week, off the event loop. A name not at hand is signed only if
   * `allowNew` (the caller's budget) says yes; else BUSY.
   */
  contextFor(name: string, allowNew?: () => boolean): Promise<tls.SecureContext>;
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
/** Names whose certificates are kept; past it the least recently used is made again when next needed. */
export const MAX_CERT_NAMES = 512;
/** Certificates signed at once: each takes a thread of libuv's pool, which file and DNS work share. */
const SIGNING_AT_ONCE = 2;

function loadOrCreateAuthority(stateDir: string): Authority {
  const file = join(stateDir, EGRESS_CA_FILE);
  const read = (): Authority | undefined => {
    const text = readTextIfExists(file);
    if (text === undefined) return undefined;
    const key = /-----BEGIN PRIVATE KEY-----[\s\S]+?-----END PRIVATE KEY-----/.exec(text)?.[0];
    const cert = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/.exec(text)?.[0];
    if (!key || !cert)
      throw new Error(
        `${file} does not hold berth's egress CA; remove it to make a new one (containers trust the new one from their next run)`,
      );
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
  let leaf: Promise<{ key: KeyObject; pem: string }> | undefined;
  const leafKey = () =>
    (leaf ??= promisify(crypto.generateKeyPair)('rsa', { modulusLength: 2048 }).then(({ privateKey }) => ({
      key: privateKey,
      pem: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
    })));
  // In order of use, least recent first: a name in use is never the one dropped.
  const contexts = new Map<string, { context: tls.SecureContext; until: number }>();
  const making = new Map<string, Promise<tls.SecureContext>>();
  const signing = { now: 0, waiting: [] as Array<() => void> };
  const bundlePem = `${tls.rootCertificates.join('\n')}\n${authority.certPem}`;
  const trustDir = join(stateDir, 'egress-trust');
  fs.mkdirSync(trustDir, { recursive: true, mode: 0o755 });
  const files = { ca: join(trustDir, 'berth-egress-ca.crt'), bundle: join(trustDir, 'ca-certificates.crt') };
  writePublic(files.ca, authority.certPem);
  writePublic(files.bundle, bundlePem);

  async function make(name: string): Promise<tls.SecureContext> {
    // A slot of SIGNING_AT_ONCE, or one handed over by a signing that ended.
    if (signing.now >= SIGNING_AT_ONCE) await new Promise<void>((resolve) => signing.waiting.push(resolve));
    else signing.now++;
    try {
      const { key, pem } = await leafKey();
      const context = tls.createSecureContext({ key: pem, cert: await issueServerCertAsync(authority, name, key), minVersion: 'TLSv1.2' });
      contexts.delete(name);
      if (contexts.size >= MAX_CERT_NAMES) contexts.delete(contexts.keys().next().value as string);
      // Made again a day before it expires, so no client sees one about to run out.
      contexts.set(name, { context, until: Date.now() + LEAF_LIFETIME_MS - 24 * 3600 * 1000 });
      return context;
    } finally {
      const next = signing.waiting.shift();
      if (next) next();
      else signing.now--;
    }
  }

  return {
    certPem: authority.certPem,
    bundlePem,
    files,
    async contextFor(name, allowNew) {
      const known = contexts.get(name);
      if (known && known.until > Date.now()) {
        contexts.delete(name);
        contexts.set(name, known);
        return known.context;
      }
      const pending = making.get(name);
      if (pending) return pending;
      if (allowNew && !allowNew())
        throw new BerthError(
          'BUSY',
          `no new certificate is made for ${name.slice(0, 256)} now: the budget of new host names is spent (names already in use still work)`,
          { retry_after: 60 },
        );
      const made = make(name).finally(() => making.delete(name));
      making.set(name, made);
      return made;
    },
  };
}
