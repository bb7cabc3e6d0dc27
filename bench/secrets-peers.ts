/**
 * The two outside parties of bench/secrets.ts, each its own process so the proxy's crypto does
 * not share a thread with theirs (as in life: the host, berth, the container):
 *   upstream TOKEN          an HTTPS API on loopback demanding "Bearer TOKEN": /small answers a
 *                           short JSON, /big streams 100 MiB; prints {port, caPem} and serves.
 *   client MODE ARGS(JSON)  MODE direct (to the API, sending the token itself) or proxy (CONNECT
 *                           through the egress socket, trusting berth's CA, sending no token):
 *                           `small` requests on one kept-alive connection, `fresh` requests each on
 *                           a new connection, or one `big` download; prints the timings as JSON.
 */
import http from 'node:http';
import https from 'node:https';
import tls from 'node:tls';
import type { AddressInfo, Socket } from 'node:net';
import { issueServerCert, makeAuthority, newRsaKey } from '../src/outbound/certs.js';

const [role, a, b] = process.argv.slice(2);

if (role === 'upstream') {
  const token = a as string;
  const ca = makeAuthority('bench public CA');
  const key = newRsaKey();
  const chunk = Buffer.alloc(1024 * 1024, 'x');
  const server = https.createServer(
    { key: key.export({ type: 'pkcs8', format: 'pem' }), cert: issueServerCert(ca, 'localhost', key) },
    (req, res) => {
      req.resume();
      if (req.headers.authorization !== `Bearer ${token}`) return void res.writeHead(401).end();
      if (req.url === '/big') {
        res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(100 * chunk.length) });
        let sent = 0;
        const more = () => {
          while (sent < 100) {
            sent++;
            if (!res.write(chunk)) return void res.once('drain', more);
          }
          res.end();
        };
        more();
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true,"login":"bench"}');
    },
  );
  server.listen(0, '127.0.0.1', () => console.log(JSON.stringify({ port: (server.address() as AddressInfo).port, caPem: ca.certPem })));
} else if (role === 'client') {
  const o = JSON.parse(b as string) as {
    port: number;
    ca: string;
    token?: string;
    socketPath?: string;
    kind: 'small' | 'fresh' | 'big';
    n: number;
  };
  const headers = o.token ? { authorization: `Bearer ${o.token}` } : {};
  async function connection(): Promise<tls.TLSSocket> {
    let raw: Socket | undefined;
    if (a === 'proxy') {
      const req = http.request({ socketPath: o.socketPath, method: 'CONNECT', path: `localhost:${o.port}` });
      req.end();
      raw = await new Promise<Socket>((resolve, reject) => {
        req.once('connect', (res, s) => (res.statusCode === 200 ? resolve(s) : reject(new Error(`CONNECT ${res.statusCode}`))));
        req.once('error', reject);
      });
    }
    const secure = tls.connect({ ...(raw ? { socket: raw } : { host: '127.0.0.1', port: o.port }), servername: 'localhost', ca: o.ca });
    await new Promise<void>((resolve, reject) => {
      secure.once('secureConnect', resolve);
      secure.once('error', reject);
    });
    return secure;
  }
  /** One agent per connection: requests go one after another on it. */
  const agents = new WeakMap<tls.TLSSocket, https.Agent>();
  function get(socket: tls.TLSSocket, path: string): Promise<number> {
    let agent = agents.get(socket);
    if (!agent) {
      agent = new https.Agent({ keepAlive: true, maxSockets: 1 });
      (agent as unknown as { createConnection: () => tls.TLSSocket }).createConnection = () => socket;
      agents.set(socket, agent);
    }
    return new Promise((resolve, reject) => {
      const req = https.request({ host: 'localhost', port: o.port, path, headers, agent }, (res) => {
        let bytes = 0;
        res.on('data', (c: Buffer) => (bytes += c.length));
        res.on('end', () => (res.statusCode === 200 ? resolve(bytes) : reject(new Error(`status ${res.statusCode}`))));
      });
      req.on('error', reject);
      req.end();
    });
  }
  const times: number[] = [];
  if (o.kind === 'small') {
    const s = await connection();
    for (let i = 0; i < o.n; i++) {
      const t0 = performance.now();
      await get(s, '/small');
      times.push(performance.now() - t0);
    }
    s.destroy();
  } else if (o.kind === 'fresh') {
    for (let i = 0; i < o.n; i++) {
      const t0 = performance.now();
      const s = await connection();
      await get(s, '/small');
      times.push(performance.now() - t0);
      s.destroy();
    }
  } else {
    const s = await connection();
    const t0 = performance.now();
    const bytes = await get(s, '/big');
    times.push(bytes / (1024 * 1024) / ((performance.now() - t0) / 1000)); // MiB/s
    s.destroy();
  }
  console.log(JSON.stringify(times));
}
