import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import net, { type AddressInfo } from 'node:net';
import os from 'node:os';
import { join } from 'node:path';
import tls from 'node:tls';
import zlib from 'node:zlib';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BerthConfigSchema, type BerthConfig } from '../../src/config/berth-config-schema.js';
import { ProjectMetadataSchema } from '../../src/config/metadata.js';
import { createMetrics } from '../../src/base/metrics.js';
import { issueServerCert, makeAuthority, newRsaKey } from '../../src/outbound/certs.js';
import { loadOrCreateEgressCa } from '../../src/outbound/egress-ca.js';
import { createEgressProxy, NEW_CERT_NAMES_PER_MINUTE } from '../../src/outbound/egress-proxy.js';
import type { RunIdentity } from '../../src/outbound/run-identity.js';
import { createSecretBroker } from '../../src/outbound/secret-broker.js';
import { createSecretValues } from '../../src/store/secret-values.js';

/**
 * The outside report's attacks on brokered secrets (round 4, M2, M3, L1), in process on
 * loopback: a granted host that writes the header back in another encoding, a grant limited by
 * method sent on a POST that asks to be read as another method, and a tenant that makes berth
 * sign certificates for names without end. Each case first shows the attack would work against
 * the raw answer (or request), then that it does not through berth.
 */
const VALUE = 'Sx+9/aB3cD7eF1gH2iJ4kL6mN8oP0qR=';
const USER = 'x-access-token';
const CREDENTIAL = Buffer.from(`${USER}:${VALUE}`).toString('base64');
const dir = fs.mkdtempSync(join(os.tmpdir(), 'berth-secret-attacks-'));
const publicCa = makeAuthority('test public CA');
const serverKey = newRsaKey();
const berthCa = loadOrCreateEgressCa(join(dir, 'state'));
const metrics = createMetrics({ processMetrics: false });
const seen: Array<{ method: string; url: string; headers: http.IncomingHttpHeaders; body: Buffer }> = [];
let upstream: https.Server;
let port: number;
let config: BerthConfig;
let socketPath: string;
let closeProxy: () => Promise<void>;

const hex = (s: string) => Buffer.from(s).toString('hex');
const b64 = (s: string) => Buffer.from(s).toString('base64');
const slug = (s: string) => s.toLowerCase().replace(/[^a-z0-9]/g, '-');

/** How the fake host writes back the header it got, per path (the report's upstream.mjs, and more). */
const REFLECT: Record<string, (v: string) => { status?: number; headers?: http.OutgoingHttpHeaders; body?: string | Buffer }> = {
  echo: (v) => ({ body: JSON.stringify({ authorization: v }) }),
  b64: (v) => ({ body: b64(v) }),
  b64url: (v) => ({ body: b64(`x${v}`).replace(/\+/g, '-').replace(/\//g, '_') }),
  url: (v) => ({ body: encodeURIComponent(v) }),
  upper: (v) => ({ body: v.toUpperCase() }),
  hex: (v) => ({ body: hex(v) }),
  phpjson: (v) => ({ body: JSON.stringify({ a: v }).replace(/\//g, '\\/') }),
  gojson: (v) => ({ body: JSON.stringify({ a: v }).replace(/[+=/]/g, (c) => `\\u00${c.charCodeAt(0).toString(16)}`) }),
  html: (v) => ({ body: `<p>${v.replace(/[^A-Za-z0-9 ]/g, (c) => `&#${c.charCodeAt(0)};`)}</p>` }),
  htmlnamed: (v) => ({ body: `<p>${v.replace(/\+/g, '&plus;').replace(/\//g, '&sol;').replace(/=/g, '&equals;')}</p>` }),
  cred: (v) => ({ body: `credential: ${v.replace(/^\S+\s+/, '')}` }),
  slow: (v) => ({ body: `AAA${v.toLowerCase()}` }),
  gzip: (v) => ({ headers: { 'content-encoding': 'gzip' }, body: zlib.gzipSync(JSON.stringify({ a: encodeURIComponent(v) })) }),
  location: (v) => ({ status: 302, headers: { location: `https://elsewhere.example/cb?t=${encodeURIComponent(v)}` } }),
  cookie: (v) => ({ headers: { 'set-cookie': [`x=${encodeURIComponent(v)}`, `y=${b64(v)}`] } }),
  hdrname: (v) => ({ headers: { [`x-${slug(v)}`]: '1' } }),
  hdrnamehex: (v) => ({ headers: { [`x-${hex(v)}`]: '1' } }),
  hdrb64: (v) => ({ headers: { 'x-echo': b64(v).replace(/=+$/, '') } }),
};

function reflection(path: string, v: string) {
  const name = path.split('/').filter(Boolean).at(-1)?.split('?')[0] ?? '';
  return REFLECT[name]?.(v);
}

/**
 * Can an attacker get `secret` back from `text`? Tries what one would: the text as it is,
 * percent-, JSON- and HTML-decoded, base64 and hex runs decoded at every offset, case ignored,
 * punctuation ignored. The first and last three characters of the secret may stay (base64 masks
 * the value's whole groups only).
 */
function recoverable(text: string, secret: string): boolean {
  const middle = secret.slice(3, -3).toLowerCase();
  const bare = (s: string) => s.toLowerCase().replace(/[^a-z0-9]/g, '');
  const views = [text, text.replace(/%([0-9a-f]{2})/gi, (_, h: string) => String.fromCharCode(parseInt(h, 16)))];
  views.push(text.replace(/\\u00([0-9a-f]{2})/gi, (_, h: string) => String.fromCharCode(parseInt(h, 16))).replace(/\\(.)/g, '$1'));
  views.push(
    text
      .replace(/&#x([0-9a-f]+);/gi, (_, h: string) => String.fromCharCode(parseInt(h, 16)))
      .replace(/&#(\d+);/g, (_, d: string) => String.fromCharCode(Number(d)))
      .replace(/&plus;/gi, '+')
      .replace(/&sol;/gi, '/')
      .replace(/&equals;/gi, '='),
  );
  for (const run of views[1]!.match(/[A-Za-z0-9+/_-]{8,}/g) ?? []) {
    for (let skip = 0; skip < 4; skip++)
      views.push(Buffer.from(run.slice(skip).replace(/-/g, '+').replace(/_/g, '/'), 'base64').toString('latin1'));
  }
  for (const run of text.match(/[0-9a-f]{8,}/gi) ?? [])
    for (let skip = 0; skip < 2; skip++) views.push(Buffer.from(run.slice(skip), 'hex').toString('latin1'));
  return views.some((v) => v.toLowerCase().includes(middle) || bare(v).includes(bare(middle)));
}

function configWith(secrets: unknown): BerthConfig {
  return BerthConfigSchema.parse({
    egress: { private_hosts: [`localhost:${port}`, `*.lab.test:${port}`], trust_ca_files: [join(dir, 'public-ca.pem')] },
    secrets,
  });
}

beforeAll(async () => {
  fs.writeFileSync(join(dir, 'public-ca.pem'), publicCa.certPem);
  fs.writeFileSync(join(dir, 'tok'), VALUE, { mode: 0o600 });
  upstream = https.createServer(
    { key: serverKey.export({ type: 'pkcs8', format: 'pem' }), cert: issueServerCert(publicCa, 'localhost', serverKey) },
    (req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        seen.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks) });
        const got = req.headers['x-basic'] ?? req.headers.authorization;
        const r = typeof got === 'string' ? reflection(req.url ?? '', got) : undefined;
        res.writeHead(r?.status ?? 200, r?.headers ?? {});
        if (req.url?.includes('/slow') && typeof r?.body === 'string') {
          // One byte per write: the seams fall everywhere.
          const bytes = Buffer.from(r.body);
          let at = 0;
          const next = () => (at < bytes.length ? res.write(bytes.subarray(at, ++at), () => setImmediate(next)) : res.end());
          return void next();
        }
        res.end(r?.body ?? 'ok');
      });
    },
  );
  await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
  port = (upstream.address() as AddressInfo).port;
  config = configWith({
    MYTOK: { file: join(dir, 'tok'), grants: [{ project: 'p', host: `localhost:${port}`, path_prefix: '/r/' }] },
    BASICTOK: {
      file: join(dir, 'tok'),
      grants: [{ project: 'p', host: `localhost:${port}`, path_prefix: '/basic/', basic_user: USER, header: 'X-Basic' }],
    },
    METHTOK: {
      file: join(dir, 'tok'),
      grants: [{ project: 'p', host: `localhost:${port}`, path_prefix: '/m/', methods: ['GET', 'POST'], header: 'X-M', format: '{}' }],
    },
    WILD: { file: join(dir, 'tok'), grants: [{ project: 'p', host: `*.lab.test:${port}` }] },
  });
  const broker = createSecretBroker({ config: () => config, values: createSecretValues(), metrics });
  // Names under lab.test resolve to loopback, as a wildcard DNS record would.
  const lookup = async (host: string) => (host === 'localhost' || host.endsWith('.lab.test') ? [{ address: '127.0.0.1', family: 4 }] : []);
  const proxy = createEgressProxy({ config: () => config, logger: pino({ level: 'silent' }), metrics, broker, ca: () => berthCa, lookup });
  fs.mkdirSync(join(dir, 'run'));
  socketPath = join(dir, 'run', 'egress.sock');
  const run: RunIdentity = {
    runId: 'r1',
    project: 'p',
    metadata: ProjectMetadataSchema.parse({ name: 'p' }),
    tenantKey: 't:alice',
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
  fs.rmSync(dir, { recursive: true, force: true });
});

interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}

/** CONNECT through the run's socket: the proxy's first answer line, and the socket. */
async function connect(target: string): Promise<{ status: number; socket: net.Socket; head: string }> {
  const req = http.request({ socketPath, method: 'CONNECT', path: target });
  req.end();
  return new Promise((resolve, reject) => {
    req.once('connect', (res, socket) => resolve({ status: res.statusCode ?? 0, socket, head: JSON.stringify(res.headers) }));
    req.once('error', reject);
  });
}

/** A TLS session to `host` (trusting berth's CA) through the proxy, and requests on it. */
async function tunnel(host = 'localhost') {
  const c = await connect(`${host}:${port}`);
  if (c.status !== 200) throw new Error(`CONNECT ${c.status}`);
  const secure = tls.connect({ socket: c.socket, servername: host, ca: berthCa.certPem });
  await new Promise<void>((resolve, reject) => {
    secure.once('secureConnect', resolve);
    secure.once('error', reject);
  });
  const agent = new https.Agent({ keepAlive: true, maxSockets: 1 });
  (agent as unknown as { createConnection: () => tls.TLSSocket }).createConnection = () => secure;
  return {
    secure,
    request: (method: string, path: string, headers: Record<string, string> = {}, body?: string | Buffer | string[]) =>
      new Promise<Answer>((resolve, reject) => {
        const req = https.request({ host, port, method, path, headers, agent }, (r) => {
          let text = '';
          r.setEncoding('latin1').on('data', (c: string) => (text += c));
          r.on('end', () => resolve({ status: r.statusCode ?? 0, headers: r.headers, body: text }));
        });
        req.on('error', reject);
        if (Array.isArray(body)) for (const part of body) req.write(part);
        else if (body !== undefined) req.write(body);
        req.end();
      }),
    close: () => secure.destroy(),
  };
}

const lastSeen = () => seen.at(-1);

describe('M2: a granted host that writes the secret back in another form hands nothing back', () => {
  it('masks every reflection of the report, in the body, header values and header names', async () => {
    const t = await tunnel();
    for (const [prefix, header] of [
      ['/r/', 'authorization'],
      ['/basic/', 'x-basic'],
    ] as const) {
      for (const name of Object.keys(REFLECT)) {
        const a = await t.request('GET', `${prefix}${name}`);
        const sent = lastSeen()?.headers[header];
        expect(typeof sent, `${prefix}${name}: the grant sent its header`).toBe('string');
        // What the host wrote back carries the secret (the attack works on the raw answer) ...
        const raw = reflection(name, sent as string);
        const rawText =
          JSON.stringify(raw?.headers ?? {}) +
          (Buffer.isBuffer(raw?.body) ? zlib.gunzipSync(raw.body).toString('latin1') : (raw?.body ?? ''));
        expect(recoverable(rawText, VALUE) || recoverable(rawText, CREDENTIAL), `${prefix}${name} raw`).toBe(true);
        // ... and nothing of it comes through berth.
        const text = `${JSON.stringify(a.headers)}\n${a.body}`;
        expect(recoverable(text, VALUE), `${prefix}${name}: ${text}`).toBe(false);
        expect(recoverable(text, CREDENTIAL), `${prefix}${name}: ${text}`).toBe(false);
      }
    }
    t.close();
  });

  it('keeps what carries no secret: the status, a header named without it, the length of a masked body', async () => {
    const t = await tunnel();
    const a = await t.request('GET', '/r/location');
    expect(a.status).toBe(302);
    expect(a.headers.location).toBe(`https://elsewhere.example/cb?t=Bearer%20${'*'.repeat(encodeURIComponent(VALUE).length)}`);
    const c = await t.request('GET', '/r/cookie');
    expect(c.headers['set-cookie']).toEqual([
      `x=Bearer%20${'*'.repeat(encodeURIComponent(VALUE).length)}`,
      expect.stringMatching(/^y=QmVhcmVy.{0,4}\*{36}.{0,4}$/),
    ]);
    const n = await t.request('GET', '/r/hdrname');
    expect(Object.keys(n.headers).filter((h) => h.startsWith('x-'))).toEqual([]);
    expect(n.status).toBe(200);
    const e = await t.request('GET', '/r/echo');
    expect(e.body).toBe(JSON.stringify({ authorization: `Bearer ${'*'.repeat(VALUE.length)}` }));
    t.close();
  });
});

describe('M3: a grant limited by method is not sent on a request that asks to be read as another method', () => {
  const FORM = { 'content-type': 'application/x-www-form-urlencoded' };
  const JSON_TYPE = { 'content-type': 'application/json' };
  const multipart = (name: string) => ({
    headers: { 'content-type': 'multipart/form-data; boundary=XyZ' },
    body: `--XyZ\r\nContent-Disposition: form-data; name="a"\r\n\r\n1\r\n--XyZ\r\n${name}\r\n\r\nDELETE\r\n--XyZ--\r\n`,
  });

  it('sends the secret on what the grant covers, the body untouched (the controls)', async () => {
    const t = await tunnel();
    const big = Buffer.alloc(600 * 1024, 'b');
    for (const [path, headers, body] of [
      ['/m/plain', FORM, 'a=1&b=2'],
      ['/m/json', JSON_TYPE, '{"a":1,"method":"x","_methodical":true}'],
      ['/m/rpc?method=flickr.photos.search&methods=2', FORM, 'methodology=1&method=2'],
      [
        '/m/multi',
        multipart('Content-Disposition: form-data; name="_methods"').headers,
        multipart('Content-Disposition: form-data; name="_methods"').body,
      ],
      ['/m/upload', { 'content-type': 'application/octet-stream' }, big],
    ] as Array<[string, Record<string, string>, string | Buffer]>) {
      const a = await t.request('POST', path, headers, body);
      expect(a.status, path).toBe(200);
      expect(lastSeen()?.headers['x-m'], path).toBe(VALUE);
      expect(lastSeen()?.body.equals(Buffer.from(body)), `${path}: the body arrived whole`).toBe(true);
    }
    // The same form body, sent chunked in pieces.
    await t.request('POST', '/m/chunked', { ...FORM, 'transfer-encoding': 'chunked' }, ['a=1&', 'b=', '2']);
    expect(lastSeen()?.headers['x-m']).toBe(VALUE);
    expect(lastSeen()?.body.toString()).toBe('a=1&b=2');
    t.close();
  });

  it('does not send it with _method in the body, in any form a framework reads', async () => {
    const t = await tunnel();
    const cases: Array<[string, Record<string, string>, string | string[] | Buffer]> = [
      ['/m/a', FORM, '_method=DELETE'],
      ['/m/f', FORM, 'a=1&_method=delete'],
      ['/m/g', FORM, 'a=1&%5Fmethod=PUT'],
      ['/m/g2', FORM, 'a=1&%5fMETHOD=PUT'],
      ['/m/h', FORM, 'a=1;_method=PUT'],
      ['/m/i', FORM, 'a=1&_method[]=PUT'],
      ['/m/j', FORM, 'a=1&.method=PUT'],
      ['/m/k', FORM, 'a=1& _method=PUT'],
      ['/m/l', FORM, 'a=1&x-http-method-override=DELETE'],
      ['/m/n', {}, '_method=DELETE'],
      ['/m/o', { 'content-type': 'Application/X-WWW-Form-Urlencoded; charset=utf-8' }, '_method=DELETE'],
      ['/m/p', JSON_TYPE, '{"_method":"DELETE"}'],
      ['/m/q', JSON_TYPE, '{"a":1, "\\u005fmethod":"PUT"}'],
      ['/m/r', { 'content-type': 'application/vnd.api+json' }, ' {"_METHOD":"PUT"}'],
      [
        '/m/s',
        multipart('Content-Disposition: form-data; name="_method"').headers,
        multipart('Content-Disposition: form-data; name="_method"').body,
      ],
      [
        '/m/t',
        multipart('content-disposition: form-data; name=_method').headers,
        multipart('content-disposition: form-data; name=_method').body,
      ],
      [
        '/m/u',
        multipart('Content-Disposition: form-data; NAME="_METHOD"; filename="x"').headers,
        multipart('Content-Disposition: form-data; NAME="_METHOD"; filename="x"').body,
      ],
      [
        '/m/v',
        multipart("Content-Disposition: form-data; name*=UTF-8''%5Fmethod").headers,
        multipart("Content-Disposition: form-data; name*=UTF-8''%5Fmethod").body,
      ],
      ['/m/w', { ...FORM, 'transfer-encoding': 'chunked' }, ['a=1&_me', 'th', 'od=DELETE']],
      ['/m/x', FORM, `${'a=1&'.repeat(40_000)}_method=DELETE`],
      // A compressed body a server may unpack: berth does not read into it.
      ['/m/z', { ...FORM, 'content-encoding': 'gzip' }, zlib.gzipSync('_method=DELETE')],
      // Too long to read through before sending: not covered by a grant limited by method.
      ['/m/y', FORM, `${'a=1&'.repeat(300_000)}`],
    ];
    for (const [path, headers, body] of cases) {
      const a = await t.request('POST', path, headers, body);
      expect(a.status, path).toBe(200);
      expect(lastSeen()?.url).toBe(path);
      expect(lastSeen()?.headers['x-m'], `${path}: ${String(body).slice(0, 80)}`).toBeUndefined();
      expect(
        lastSeen()?.body.equals(Buffer.from(Array.isArray(body) ? body.join('') : body)),
        `${path}: the body still arrives whole`,
      ).toBe(true);
    }
    t.close();
  });

  it('does not send it with _method in the query (percent-decoded) or an override header', async () => {
    const t = await tunnel();
    const cases: Array<[string, string, Record<string, string>]> = [
      ['POST', '/m/b?%5Fmethod=DELETE', {}],
      ['POST', '/m/e?x=1&%5fmethod=PUT', {}],
      ['POST', '/m/c?_method=DELETE', {}],
      ['POST', '/m/c2?_METHOD=DELETE', {}],
      ['POST', '/m/c3?x=1;_method=DELETE', {}],
      ['POST', '/m/c4?_method%5B%5D=DELETE', {}],
      ['POST', '/m/c5?.method=DELETE', {}],
      ['POST', '/m/c6?x=1&%2E%6Dethod=DELETE', {}],
      ['GET', '/m/c7?X-HTTP-Method-Override=DELETE', {}],
      ['POST', '/m/c8?_method', {}],
      ['POST', '/m/h1', { 'x-http-method-override': 'DELETE' }],
      ['POST', '/m/h2', { 'x-http-method': 'DELETE' }],
      ['POST', '/m/h3', { 'x-method-override': 'PUT' }],
      ['POST', '/m/h4', { x_http_method_override: 'DELETE' }],
      ['POST', '/m/h5', { 'X-Original-Method': 'DELETE' }],
      ['GET', '/m/h6', { 'x-original-url': '/admin' }],
      ['GET', '/m/h7', { 'x-original-uri': '/admin' }],
      ['GET', '/m/h8', { 'x-rewrite-url': '/admin' }],
      ['GET', '/m/h9', { 'x-forwarded-prefix': '/admin' }],
      ['GET', '/m/h10', { 'x-forwarded-path': '/admin' }],
      ['GET', '/m/h11', { 'x-envoy-original-path': '/admin' }],
    ];
    for (const [method, path, headers] of cases) {
      const a = await t.request(method, path, headers, method === 'POST' ? 'a=1' : undefined);
      expect(a.status, path).toBe(200);
      expect(lastSeen()?.url).toBe(path);
      expect(lastSeen()?.headers['x-m'], `${method} ${path} ${JSON.stringify(headers)}`).toBeUndefined();
    }
    t.close();
  });
});

describe('L1: a wildcard grant cannot make berth sign certificates without end', () => {
  const fingerprint = async (host: string) => {
    const c = await connect(`${host}:${port}`);
    expect(c.status, host).toBe(200);
    const secure = tls.connect({ socket: c.socket, servername: host, ca: berthCa.certPem });
    await new Promise<void>((resolve, reject) => {
      secure.once('secureConnect', resolve);
      secure.once('error', reject);
    });
    const cert = secure.getPeerCertificate();
    secure.destroy();
    return { fingerprint: cert.fingerprint256, names: cert.subjectaltname };
  };

  it('presents one certificate for every name one label under a wildcard grant, and clients accept it', async () => {
    const first = await fingerprint('h1.lab.test');
    expect(first.names).toBe('DNS:*.lab.test');
    for (const host of ['h2.lab.test', 'h3.lab.test', 'other.lab.test']) expect(await fingerprint(host)).toEqual(first);
    // The exact host of an exact grant keeps a certificate of its own name.
    expect((await fingerprint('localhost')).names).toBe('DNS:localhost');
  });

  it('answers 429 once a run has made berth sign its budget of new names this minute; names it has stay usable', async () => {
    // Names two labels deep each need a certificate of their own (a wildcard covers one label).
    let refused: { status: number; head: string } | undefined;
    let made = 0;
    for (let i = 0; i < NEW_CERT_NAMES_PER_MINUTE + 5 && !refused; i++) {
      const c = await connect(`a.n${i}.lab.test:${port}`);
      c.socket.destroy();
      if (c.status === 200) made++;
      else refused = c;
    }
    expect(refused?.status).toBe(429);
    expect(refused?.head).toContain('egress_busy');
    // The first test made one (*.lab.test); this one at most the budget's rest.
    expect(made).toBeLessThanOrEqual(NEW_CERT_NAMES_PER_MINUTE);
    expect((await fingerprint('h9.lab.test')).names).toBe('DNS:*.lab.test');
    expect((await fingerprint('a.n0.lab.test')).names).toBe('DNS:*.n0.lab.test');
  });
});
