import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import os from 'node:os';
import { join } from 'node:path';
import tls from 'node:tls';
import zlib from 'node:zlib';
import type { AddressInfo } from 'node:net';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BerthConfigSchema, type BerthConfig } from '../../src/config/berth-config-schema.js';
import { ProjectMetadataSchema } from '../../src/config/metadata.js';
import { placeholderOf } from '../../src/config/secrets.js';
import { createMetrics } from '../../src/base/metrics.js';
import { issueServerCert, makeAuthority, newRsaKey } from '../../src/outbound/certs.js';
import { loadOrCreateEgressCa } from '../../src/outbound/egress-ca.js';
import { createEgressProxy } from '../../src/outbound/egress-proxy.js';
import { createCredentialUses } from '../../src/outbound/credential-uses.js';
import type { RunIdentity } from '../../src/outbound/run-identity.js';
import { createSecretBroker, type SecretBroker } from '../../src/outbound/secret-broker.js';
import { createApprovals } from '../../src/outbound/approvals.js';
import { openApprovalStore, type ApprovalEvent } from '../../src/store/approvals.js';
import type { AuditEvent } from '../../src/store/audit.js';
import { readOutbound } from '../../src/store/outbound-log.js';
import { createSecretValues } from '../../src/store/secret-values.js';
import { until } from '../helpers/until.js';

/**
 * The egress proxy's brokered secrets, in process on loopback: a CONNECT toward a granted host
 * is answered with berth's CA, the token goes into granted requests only, a placeholder toward
 * anything else is refused and audited, answers that echo the token are masked, revocation holds
 * at the next request, and a host that cannot prove itself gets nothing. The same through real
 * git, curl and Node in a container is test/integration/secrets.test.ts.
 */
const TOKEN = `ghp_${Math.random().toString(36).slice(2)}REALTOKEN`;
const dir = fs.mkdtempSync(join(os.tmpdir(), 'berth-secrets-'));
const publicCa = makeAuthority('test public CA');
const strangerCa = makeAuthority('a CA nobody trusts');
const serverKey = newRsaKey();
const seen: Array<{ method: string; url: string; headers: http.IncomingHttpHeaders; body: string }> = [];
let upstream: https.Server;
let untrusted: https.Server;
let port: number;
let untrustedPort: number;
let config: BerthConfig;
const audits: AuditEvent[] = [];
const metrics = createMetrics({ processMetrics: false });
let socketPath: string;
let closeProxy: () => Promise<void>;
const berthCa = loadOrCreateEgressCa(join(dir, 'state'));

function configWith(secrets: unknown): BerthConfig {
  return BerthConfigSchema.parse({
    egress: { private_hosts: [`localhost:${port}`, `localhost:${untrustedPort}`], trust_ca_files: [join(dir, 'public-ca.pem')] },
    secrets,
  });
}
const tokenFile = join(dir, 'gh-token');
const grant = (extra: Record<string, unknown> = {}) => ({ project: 'p', host: `localhost:${port}`, ...extra });

function startEcho(certPem: string): Promise<https.Server> {
  const server = https.createServer({ key: serverKey.export({ type: 'pkcs8', format: 'pem' }), cert: certPem }, (req, res) => {
    let received = '';
    req.setEncoding('latin1').on('data', (c: string) => (received += c));
    req.on('end', () => {
      seen.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body: received });
      // A precompressed object served whatever Accept-Encoding says, cut short (or with no body at all).
      if (req.url?.endsWith('/broken-gzip')) {
        res.writeHead(req.method === 'HEAD' ? 200 : 206, { 'content-encoding': 'gzip', 'content-length': '10' });
        return void res.end(req.method === 'HEAD' ? undefined : Buffer.alloc(10, 1));
      }
      // A host that hands back, to anyone, what an earlier request carried.
      if (req.url?.endsWith('/leak')) return void res.end(`earlier someone sent ${TOKEN}`);
      const body = JSON.stringify({
        url: req.url,
        authorization: req.headers.authorization ?? null,
        'x-api-key': req.headers['x-api-key'] ?? null,
      });
      // An API that echoes what it got, in a header and the body, as some do on errors.
      if (req.url === '/gzip') {
        res.writeHead(200, { 'content-encoding': 'gzip', 'x-echo': String(req.headers.authorization) });
        res.end(zlib.gzipSync(body));
      } else {
        res.writeHead(200, { 'content-type': 'application/json', 'x-echo': String(req.headers.authorization) });
        res.end(body);
      }
    });
  });
  return new Promise((r) => server.listen(0, '127.0.0.1', () => r(server)));
}

const credentialUses = createCredentialUses();
/** The egress proxy of these tests, around a broker. */
const proxyWith = (broker: SecretBroker) =>
  createEgressProxy({ config: () => config, logger: pino({ level: 'silent' }), metrics, broker, ca: () => berthCa, credentialUses });

beforeAll(async () => {
  fs.writeFileSync(join(dir, 'public-ca.pem'), publicCa.certPem);
  fs.writeFileSync(tokenFile, `${TOKEN}\n`, { mode: 0o600 });
  upstream = await startEcho(issueServerCert(publicCa, 'localhost', serverKey));
  port = (upstream.address() as AddressInfo).port;
  untrusted = await startEcho(issueServerCert(strangerCa, 'localhost', serverKey));
  untrustedPort = (untrusted.address() as AddressInfo).port;
  config = configWith({ GH_TOKEN: { file: tokenFile, grants: [grant({ path_prefix: '/acme/' })] } });
  const broker = createSecretBroker({
    config: () => config,
    values: createSecretValues({ API_KEY_ENV: 'from-env-value-123' }),
    metrics,
    audit: (e) => audits.push(e),
  });
  const proxy = proxyWith(broker);
  fs.mkdirSync(join(dir, 'run'), { mode: 0o755 });
  socketPath = join(dir, 'run', 'egress.sock');
  const run: RunIdentity = {
    runId: 'r1',
    project: 'p',
    metadata: ProjectMetadataSchema.parse({ name: 'p', egress: { allow: [`localhost:${port}`] } }),
    tenantKey: 'sig:+1',
    session: 's1',
    workspaceId: 'w',
    sessionsDir: join(dir, 'sessions'),
  };
  const socket = await proxy.open({ path: socketPath, run, logger: pino({ level: 'silent' }), stopRun: () => undefined });
  closeProxy = () => socket.close();
});
afterAll(async () => {
  await closeProxy();
  upstream.close();
  untrusted.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}

/** CONNECT through the run's socket, then TLS trusting `ca`, then requests on that one connection. */
async function tunnel(
  targetPort: number,
  ca: string,
  through = socketPath,
): Promise<{
  request(method: string, path: string, headers?: Record<string, string>): Promise<Answer>;
  close(): void;
  peerIssuer: string;
  secure: tls.TLSSocket;
}> {
  const connect = http.request({ socketPath: through, method: 'CONNECT', path: `localhost:${targetPort}` });
  connect.end();
  const [res, raw] = await new Promise<[http.IncomingMessage, import('node:net').Socket]>((resolve, reject) => {
    connect.once('connect', (r, s) => resolve([r, s]));
    connect.once('error', reject);
  });
  if (res.statusCode !== 200) throw new Error(`CONNECT ${res.statusCode}`);
  const secure = tls.connect({ socket: raw, servername: 'localhost', ca });
  await new Promise<void>((resolve, reject) => {
    secure.once('secureConnect', resolve);
    secure.once('error', reject);
  });
  const peerIssuer = secure.getPeerCertificate().issuer.CN as string;
  const agent = new https.Agent({ keepAlive: true, maxSockets: 1 });
  (agent as unknown as { createConnection: () => tls.TLSSocket }).createConnection = () => secure;
  return {
    peerIssuer,
    secure,
    request: (method, path, headers = {}) =>
      new Promise<Answer>((resolve, reject) => {
        const req = https.request({ host: 'localhost', port: targetPort, method, path, headers, agent }, (r) => {
          let body = '';
          r.setEncoding('latin1').on('data', (c: string) => (body += c));
          r.on('end', () => resolve({ status: r.statusCode ?? 0, headers: r.headers, body }));
        });
        req.on('error', reject);
        req.end();
      }),
    close: () => secure.destroy(),
  };
}

const lastSeen = () => seen.at(-1);

/** Run `fn` with berth.yaml's secrets set to `secrets`, then put the suite's own back. */
async function withSecrets(secrets: unknown, fn: () => Promise<void>): Promise<void> {
  const kept = config;
  config = configWith(secrets);
  try {
    await fn();
  } finally {
    config = kept;
  }
}

/** Write bytes into a terminated session and read until the proxy closes it. */
function rawExchange(secure: tls.TLSSocket, text: string): Promise<string> {
  return new Promise((resolve) => {
    let out = '';
    secure.on('data', (c: Buffer) => (out += c.toString('latin1')));
    secure.on('close', () => resolve(out));
    secure.on('error', () => undefined);
    secure.write(text);
  });
}

describe('brokered secrets on the egress proxy', () => {
  it("answers a CONNECT toward a granted host with berth's CA and adds the token to a granted request only", async () => {
    const t = await tunnel(port, berthCa.certPem);
    expect(t.peerIssuer).toMatch(/^berth egress CA/);
    const a = await t.request('GET', '/acme/repo', { authorization: `Bearer ${placeholderOf('GH_TOKEN')}` });
    expect(a.status).toBe(200);
    expect(lastSeen()?.headers.authorization).toBe(`Bearer ${TOKEN}`);
    // The echo comes back masked, in the header and in the body.
    expect(a.body).not.toContain(TOKEN);
    expect(a.headers['x-echo']).not.toContain(TOKEN);
    expect(a.body).toContain(`Bearer ${'*'.repeat(TOKEN.length)}`);
    // Outside the path prefix: nothing added (the request goes as the agent sent it).
    const b = await t.request('GET', '/other/repo');
    expect(b.status).toBe(200);
    expect(lastSeen()?.headers.authorization).toBeUndefined();
    t.close();
    const log = readOutbound(join(dir, 'sessions'), { limit: 20 }).filter((r) => r.kind === 'egress' && r.secret);
    expect(log[0]).toMatchObject({
      kind: 'egress',
      method: 'GET',
      host: 'localhost',
      path: '/acme/repo',
      secret: 'GH_TOKEN',
      tenant: 'sig:+1',
      status: 200,
    });
    expect(JSON.stringify(readOutbound(join(dir, 'sessions'), { limit: 100 }))).not.toContain(TOKEN);
    // For the run's receipt: the one request the token went into, by name, never by value.
    expect(credentialUses.take('r1')).toEqual({
      kept: [{ secret: 'GH_TOKEN', method: 'GET', host: 'localhost', path: '/acme/repo', status: 200 }],
      more: 0,
    });
    expect(credentialUses.take('r1')).toEqual({ kept: [], more: 0 });
  });

  it('refuses, and audits, a placeholder sent where its secret is not granted', async () => {
    const t = await tunnel(port, berthCa.certPem);
    const before = seen.length;
    const a = await t.request('GET', '/elsewhere', { authorization: `token ${placeholderOf('GH_TOKEN')}` });
    expect(a.status).toBe(403);
    expect(a.headers['x-berth-error']).toBe('secret_not_granted');
    expect(a.body).toContain('GH_TOKEN');
    // Hidden in Basic credentials, too.
    const b = await t.request('GET', '/elsewhere', {
      authorization: `Basic ${Buffer.from(`me:${placeholderOf('GH_TOKEN')}`).toString('base64')}`,
    });
    expect(b.status).toBe(403);
    expect(seen.length).toBe(before); // nothing reached the host
    t.close();
    // Over plain HTTP, toward a host with no grant at all.
    const plain = await new Promise<Answer>((resolve) => {
      const req = http.request({ socketPath, method: 'GET', path: `http://localhost:${port}/x?k=${placeholderOf('GH_TOKEN')}` }, (r) => {
        let body = '';
        r.on('data', (c) => (body += c)).on('end', () => resolve({ status: r.statusCode ?? 0, headers: r.headers, body }));
      });
      req.end();
    });
    expect(plain.status).toBe(403);
    expect(plain.body).toContain('HTTPS only');
    expect(audits.filter((e) => e.action === 'secret.use')).toEqual(
      expect.arrayContaining([
        expect.objectContaining({
          kind: 'permission_denied',
          actor: 'tenant:sig:+1',
          project: 'p',
          outcome: 'refused',
          code: 'SECRET_NOT_GRANTED',
        }),
      ]),
    );
    expect(JSON.stringify(audits)).not.toContain(TOKEN);
    const text = (await metrics.render()).body;
    expect(text).toMatch(/berth_secret_requests_total\{secret="GH_TOKEN",outcome="not_granted"\} [3-9]/);
    expect(text).toMatch(/berth_secret_requests_total\{secret="GH_TOKEN",outcome="injected"\} [1-9]/);
  });

  it('reads a path as the server will: a dot segment out of the granted prefix gets nothing; the Host header cannot move the request', async () => {
    const t = await tunnel(port, berthCa.certPem);
    for (const path of ['/acme%2f..%2fadmin', '/acme/../admin', '/acme/%2e%2e/admin']) {
      const a = await t.request('GET', path, { authorization: `Bearer ${placeholderOf('GH_TOKEN')}` });
      expect(a.status, path).toBe(403);
      expect(a.headers['x-berth-error']).toBe('secret_not_granted');
    }
    const before = seen.length;
    expect((await t.request('GET', '/acme/../admin')).status).toBe(200);
    expect(seen.length).toBe(before + 1);
    expect(lastSeen()?.headers.authorization).toBeUndefined();
    t.close();
    // The request goes where the CONNECT said, whatever its Host header claims (written raw:
    // Node's own client would take the header for a new connection's name).
    const raw = await tunnel(port, berthCa.certPem);
    raw.secure.write('GET /acme/x HTTP/1.1\r\nhost: attacker.example\r\nconnection: close\r\n\r\n');
    const answer = await untilClose(raw.secure);
    expect(answer).toMatch(/^HTTP\/1.1 200/);
    expect(lastSeen()?.headers.host).toBe(`localhost:${port}`);
    expect(lastSeen()?.headers.authorization).toBe(`Bearer ${TOKEN}`);
    // Nor can an absolute URL inside the tunnel name another host.
    const other = await tunnel(port, berthCa.certPem);
    const before2 = seen.length;
    other.secure.write('GET https://attacker.example/acme/x HTTP/1.1\r\nhost: attacker.example\r\nconnection: close\r\n\r\n');
    const refused = await untilClose(other.secure);
    expect(refused).toMatch(/^HTTP\/1.1 400/);
    expect(seen.length).toBe(before2);
  });

  it('keeps a chunked body framed: what it holds is never read upstream as another request', async () => {
    const t = await tunnel(port, berthCa.certPem);
    const smuggled = 'POST /acme/store HTTP/1.1\r\nhost: localhost\r\ncontent-length: 120\r\n\r\n';
    const before = seen.length;
    const answers = await rawExchange(
      t.secure,
      `GET /acme/one HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\n\r\n${smuggled.length.toString(16)}\r\n${smuggled}\r\n0\r\n\r\nGET /acme/two HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n`,
    );
    expect(answers.match(/HTTP\/1.1 200/g)).toHaveLength(2);
    // Pipelined requests go upstream at once, on connections of their own: in either order.
    const upstream = seen.slice(before);
    expect(upstream.map((s) => `${s.method} ${s.url}`).sort()).toEqual(['GET /acme/one', 'GET /acme/two']);
    expect(upstream.find((s) => s.url === '/acme/one')?.body).toBe(smuggled);
  });

  it('survives a broken compressed answer, with a body or without (HEAD)', async () => {
    const t = await tunnel(port, berthCa.certPem);
    await expect(t.request('GET', '/acme/broken-gzip')).rejects.toThrow();
    t.close();
    const again = await tunnel(port, berthCa.certPem);
    const head = await again.request('HEAD', '/acme/broken-gzip');
    expect(head.status).toBe(200);
    expect((await again.request('GET', '/acme/after')).status).toBe(200);
    again.close();
  });

  it('answers at most 4 pipelined requests of a connection at once; the rest get 429 and the connection ends', async () => {
    const t = await tunnel(port, berthCa.certPem);
    const before = seen.length;
    const answers = await rawExchange(t.secure, 'GET /acme/p HTTP/1.1\r\nhost: x\r\n\r\n'.repeat(40));
    expect(answers).toContain('HTTP/1.1 429');
    expect(seen.length - before).toBeLessThanOrEqual(4);
  });

  it('gives nothing to a path or method a server may read as another: ";", double escapes, override headers and parameters', async () => {
    const t = await tunnel(port, berthCa.certPem);
    for (const [path, headers] of [
      ['/acme/..;/admin', {}],
      ['/acme/..%3b/admin', {}],
      ['/acme/%252e%252e/admin', {}],
      ['/acme/x', { 'x-http-method-override': 'DELETE' }],
      ['/acme/x', { 'x-original-url': '/admin/users' }],
      ['/acme/x?_method=DELETE', {}],
    ] as Array<[string, Record<string, string>]>) {
      expect((await t.request('GET', path, headers)).status, path).toBe(200);
      expect(lastSeen()?.headers.authorization, `${path} ${JSON.stringify(headers)}`).toBeUndefined();
    }
    // Ranges are not asked for with a secret (an echo cut in two would pass the mask in halves).
    await t.request('GET', '/acme/ranged', { range: 'bytes=0-10' });
    expect(lastSeen()?.headers.authorization).toBe(`Bearer ${TOKEN}`);
    expect(lastSeen()?.headers.range).toBeUndefined();
    // An answer from a granted host is masked even when this request carried no secret.
    const leak = await t.request('GET', '/other/leak');
    expect(lastSeen()?.headers.authorization).toBeUndefined();
    expect(leak.body).toBe(`earlier someone sent ${'*'.repeat(TOKEN.length)}`);
    t.close();
  });

  it('refuses TLS sent before the CONNECT was answered', async () => {
    const net = await import('node:net');
    const raw = net.connect(socketPath);
    await new Promise((r) => raw.once('connect', r));
    raw.write(`CONNECT localhost:${port} HTTP/1.1\r\nhost: localhost:${port}\r\n\r\n\x16\x03\x01\x00\x05hello`);
    const answer = await untilClose(raw);
    expect(answer).toMatch(/^HTTP\/1.1 400/);
    expect(answer).toContain('wait for the 200');
  });

  it('takes a revoked grant away at the next request on the same connection', async () => {
    const t = await tunnel(port, berthCa.certPem);
    expect((await t.request('GET', '/acme/x')).status).toBe(200);
    expect(lastSeen()?.headers.authorization).toBe(`Bearer ${TOKEN}`);
    await withSecrets({ GH_TOKEN: { file: tokenFile, grants: [grant({ path_prefix: '/nothing-now/' })] } }, async () => {
      expect((await t.request('GET', '/acme/x')).status).toBe(200);
      expect(lastSeen()?.headers.authorization).toBeUndefined();
    });
    t.close();
  });

  it('sends Basic credentials, custom headers and environment values; bounds a tenant by rate', async () => {
    await withSecrets(
      {
        REPO_TOKEN: { file: tokenFile, grants: [grant({ basic_user: 'x-access-token', path_prefix: '/git/' })] },
        API_KEY: {
          env: 'API_KEY_ENV',
          grants: [grant({ header: 'X-Api-Key', format: '{}', path_prefix: '/api/', methods: ['POST'], per_tenant_per_minute: 2 })],
        },
      },
      async () => {
        const t = await tunnel(port, berthCa.certPem);
        await t.request('GET', '/git/info/refs');
        expect(lastSeen()?.headers.authorization).toBe(`Basic ${Buffer.from(`x-access-token:${TOKEN}`).toString('base64')}`);
        expect((await t.request('GET', '/api/v1')).status).toBe(200); // GET is not granted: nothing added
        expect(lastSeen()?.headers['x-api-key']).toBeUndefined();
        expect((await t.request('POST', '/api/v1')).status).toBe(200);
        expect(lastSeen()?.headers['x-api-key']).toBe('from-env-value-123');
        expect((await t.request('POST', '/api/v1')).status).toBe(200);
        const third = await t.request('POST', '/api/v1');
        expect(third.status).toBe(429);
        expect(third.headers['x-berth-error']).toBe('secret_rate_limited');
        t.close();
      },
    );
  });

  it('masks the token in a compressed echo', async () => {
    await withSecrets({ GH_TOKEN: { file: tokenFile, grants: [grant()] } }, async () => {
      const t = await tunnel(port, berthCa.certPem);
      const a = await t.request('GET', '/gzip');
      expect(a.status).toBe(200);
      expect(a.headers['content-encoding']).toBeUndefined();
      expect(a.body).toContain('*'.repeat(TOKEN.length));
      expect(a.body).not.toContain(TOKEN);
      t.close();
    });
  });

  it('gives nothing to a host that cannot prove itself, and says so', async () => {
    await withSecrets({ GH_TOKEN: { file: tokenFile, grants: [{ project: 'p', host: `localhost:${untrustedPort}` }] } }, async () => {
      const before = seen.length;
      const t = await tunnel(untrustedPort, berthCa.certPem);
      const a = await t.request('GET', '/');
      expect(a.status).toBe(502);
      expect(a.headers['x-berth-error']).toBe('upstream_tls');
      expect(a.body).toMatch(
        /certificate could not be verified \(SELF_SIGNED_CERT_IN_CHAIN|UNABLE_TO_VERIFY_LEAF_SIGNATURE|UNABLE_TO_GET_ISSUER_CERT_LOCALLY/,
      );
      expect(seen.length).toBe(before);
      t.close();
    });
  });

  it("says plainly when the client refuses berth's certificate (a pinned client)", async () => {
    await expect(tunnel(port, publicCa.certPem)).rejects.toThrow(/self-signed|unable to verify|certificate/i);
    const refused = await until(
      () => readOutbound(join(dir, 'sessions'), { limit: 50 }).find((r) => r.kind === 'egress' && r.method === 'TLS'),
      'the refusal in the outbound log',
    );
    expect(refused).toMatchObject({ status: 495, host: 'localhost' });
    expect(refused?.reason).toMatch(/does not trust berth's CA/);
  });

  it('a secret file others may read is refused, by name, never by value', async () => {
    const loose = join(dir, 'loose');
    fs.writeFileSync(loose, TOKEN, { mode: 0o644 });
    await withSecrets({ GH_TOKEN: { file: loose, grants: [grant()] } }, async () => {
      const t = await tunnel(port, berthCa.certPem);
      const a = await t.request('GET', '/');
      expect(a.status).toBe(502);
      expect(a.headers['x-berth-error']).toBe('secret_unavailable');
      expect(a.body).toContain('may be read by others');
      expect(a.body).not.toContain(TOKEN);
      t.close();
    });
  });

  it('leaves a host with no grant a blind tunnel; keeps its CA key private and its certificate public', async () => {
    await withSecrets({ GH_TOKEN: { file: tokenFile, grants: [{ project: 'p', host: 'example.invalid' }] } }, async () => {
      // On the project's allowlist, with no grant toward it: the host's own certificate comes through,
      // and a placeholder travels as it is (berth cannot read it; it is worth nothing to the host).
      const t = await tunnel(port, publicCa.certPem);
      expect(t.peerIssuer).toBe('test public CA');
      expect((await t.request('GET', '/acme/x', { authorization: `Bearer ${placeholderOf('GH_TOKEN')}` })).status).toBe(200);
      expect(lastSeen()?.headers.authorization).toBe(`Bearer ${placeholderOf('GH_TOKEN')}`);
      t.close();
    });
    expect(fs.readFileSync(berthCa.files.ca, 'utf8')).toBe(berthCa.certPem);
    expect(fs.readFileSync(berthCa.files.bundle, 'utf8')).toContain(berthCa.certPem);
    expect(fs.readFileSync(berthCa.files.bundle, 'utf8')).not.toContain('PRIVATE KEY');
    expect(fs.statSync(berthCa.files.bundle).mode & 0o777).toBe(0o644);
    expect(fs.readFileSync(join(dir, 'state', 'egress-ca.pem')).toString()).toContain('PRIVATE KEY');
    expect(fs.statSync(join(dir, 'state', 'egress-ca.pem')).mode & 0o777).toBe(0o600);
  });
});

/** Everything a socket says until it closes. */
function untilClose(socket: NodeJS.ReadableStream): Promise<string> {
  return new Promise((resolve) => {
    let text = '';
    socket.on('data', (c: Buffer) => (text += c.toString()));
    socket.on('close', () => resolve(text));
  });
}

describe('a grant that asks before its first use (ask: first_use)', () => {
  /** A proxy whose broker asks through real approvals; each run's chat answers with `answer` (or never). */
  async function asking(answer: 'once' | 'session' | 'deny' | undefined) {
    const sessionAllowed: string[] = [];
    const approvals = createApprovals({
      store: openApprovalStore(fs.mkdtempSync(join(dir, 'approvals-'))),
      logger: pino({ level: 'silent' }),
      audit: (e) => audits.push(e as AuditEvent),
      sessionHosts: () => sessionAllowed,
      approveForSession: (_p, _s, target) => void sessionAllowed.push(target),
      raiseLevel: () => undefined,
    });
    const broker = createSecretBroker({ config: () => config, values: createSecretValues(), metrics, approvals });
    const proxy = proxyWith(broker);
    const asks: ApprovalEvent[] = [];
    const open = async (runId: string) => {
      const path = join(fs.mkdtempSync(join(dir, 'ask-')), 'egress.sock');
      const run: RunIdentity = {
        runId,
        project: 'p',
        metadata: ProjectMetadataSchema.parse({
          name: 'p',
          egress: { allow: [`localhost:${port}`] },
          chat: { approval_timeout_seconds: 30 },
        }),
        tenantKey: 'web:alice',
        session: 's1',
        workspaceId: 'w',
        sessionsDir: join(dir, 'sessions'),
        ask: (e) => {
          asks.push(e);
          if (e.type === 'asked' && answer)
            setImmediate(() => approvals.answer(e.approval.id, answer, { actor: 'tenant:web:alice', project: 'p', tenant: 'web:alice' }));
        },
      };
      const socket = await proxy.open({ path, run, logger: pino({ level: 'silent' }), stopRun: () => undefined });
      return { path, close: () => socket.close() };
    };
    return { open, asks, sessionAllowed };
  }
  const asked = (asks: ApprovalEvent[]) => asks.flatMap((e) => (e.type === 'asked' ? [e.approval] : []));

  it('the person says yes once: this run gets the secret from then on without asking again; the next run asks anew', async () => {
    await withSecrets({ GH_TOKEN: { file: tokenFile, grants: [grant({ ask: 'first_use' })] } }, async () => {
      const rig = await asking('once');
      const first = await rig.open('ask-r1');
      const t = await tunnel(port, berthCa.certPem, first.path);
      for (const path of ['/a', '/b']) {
        const got = await t.request('GET', path);
        expect(got.status).toBe(200);
        expect(lastSeen()?.headers.authorization).toBe(`Bearer ${TOKEN}`);
      }
      expect(asked(rig.asks)).toEqual([
        expect.objectContaining({ kind: 'secret', target: `GH_TOKEN for localhost:${port}`, approver: 'person' }),
      ]);
      t.close();
      await first.close();
      const second = await rig.open('ask-r2');
      const t2 = await tunnel(port, berthCa.certPem, second.path);
      expect((await t2.request('GET', '/c')).status).toBe(200);
      expect(asked(rig.asks)).toHaveLength(2); // "once" was this run's
      expect(rig.sessionAllowed).toEqual([]);
      t2.close();
      await second.close();
    });
  });

  it('yes for the conversation: kept in the session, no later run asks', async () => {
    await withSecrets({ GH_TOKEN: { file: tokenFile, grants: [grant({ ask: 'first_use' })] } }, async () => {
      const rig = await asking('session');
      for (const runId of ['ask-s1', 'ask-s2']) {
        const r = await rig.open(runId);
        const t = await tunnel(port, berthCa.certPem, r.path);
        expect((await t.request('GET', '/x')).status).toBe(200);
        expect(lastSeen()?.headers.authorization).toBe(`Bearer ${TOKEN}`);
        t.close();
        await r.close();
      }
      expect(asked(rig.asks)).toHaveLength(1);
      expect(rig.sessionAllowed).toEqual([`GH_TOKEN for localhost:${port}`]);
    });
  });

  it("no: 403 in words, nothing sent upstream, the refusal in the run's credential uses; a grant without ask never asks", async () => {
    await withSecrets({ GH_TOKEN: { file: tokenFile, grants: [grant({ ask: 'first_use' })] } }, async () => {
      const rig = await asking('deny');
      const r = await rig.open('ask-d1');
      const t = await tunnel(port, berthCa.certPem, r.path);
      const before = seen.length;
      const got = await t.request('GET', '/secret-please');
      expect(got.status).toBe(403);
      expect(got.headers['x-berth-error']).toBe('secret_not_allowed');
      expect(got.body).toMatch(/secret GH_TOKEN for localhost:\d+ is added only once someone allows it .* and it was denied/);
      expect(seen.length).toBe(before);
      expect(credentialUses.take('ask-d1')?.kept).toEqual([
        expect.objectContaining({ secret: 'GH_TOKEN', method: 'GET', path: '/secret-please', status: 403 }),
      ]);
      t.close();
      await r.close();
    });
    await withSecrets({ GH_TOKEN: { file: tokenFile, grants: [grant()] } }, async () => {
      const rig = await asking(undefined);
      const r = await rig.open('ask-n1');
      const t = await tunnel(port, berthCa.certPem, r.path);
      expect((await t.request('GET', '/plain')).status).toBe(200);
      expect(rig.asks).toEqual([]);
      t.close();
      await r.close();
    });
  });
});
