import { lookup } from 'node:dns/promises';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import type { BerthConfig } from '../config/berth-config.js';
import { EGRESS_BOUNDS } from '../config/bounds.js';
import { hostAllowed } from '../config/outbound.js';
import { appendOutbound } from '../store/outbound-log.js';
import { noMetrics, type Metrics } from '../metrics.js';
import { isPrivateAddress } from './addresses.js';
import type { Approvals } from './approvals.js';
import type { RunIdentity, RunSocketOpener } from './run-identity.js';
import { limitConnections, listenOnRunSocket, type ConnectionPool } from './unix-server.js';

/**
 * The egress proxy: each medium/high run's egress.sock, reached from the container (which has
 * no network) through berth-bridge on its loopback, as HTTP_PROXY/HTTPS_PROXY. It speaks CONNECT
 * and absolute-URI HTTP(S), lets through only hosts on the project's allowlist, and connects to
 * the address it resolved itself — never to a private one unless the operator named the host.
 * A host outside the allowlist is asked for (approvals.ts): the connection waits for the answer.
 * Every decision is logged; a refusal is a 403 that says why.
 */
/** A DNS name (or an IPv4 address) as a person can read it in a question: never an IPv6 literal or odd bytes. */
const HOST_NAME = /^(?=.{1,253}$)[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*$/;
const HOP = new Set(['connection', 'keep-alive', 'proxy-authorization', 'proxy-connection', 'te', 'trailer', 'transfer-encoding', 'upgrade', 'host']);

export interface EgressProxy {
  open: RunSocketOpener;
}

type Decision = { ok: true; address: string } | { ok: false; reason: string };

export function createEgressProxy(deps: { config: () => BerthConfig; logger: Logger; metrics?: Metrics; approvals?: Approvals }): EgressProxy {
  const metrics = deps.metrics ?? noMetrics();
  const pool: ConnectionPool = { open: 0 };

  async function decide(run: RunIdentity, rawHost: string, port: number): Promise<Decision> {
    const allow = run.metadata.egress.allow;
    const host = rawHost.replace(/\.$/, '');
    if (!host || !Number.isInteger(port) || port < 1 || port > 65535) return { ok: false, reason: 'not a host:port berth can check' };
    if (!hostAllowed(allow, host, port)) {
      const notListed = `${host}:${port} is not in project "${run.project}"'s egress allowlist (${allow.join(', ') || 'empty'})`;
      // Only a plain host name is worth a question (and nothing is looked up before the answer:
      // a lookup of a name the agent made up would be a way out on its own).
      if (!deps.approvals || !HOST_NAME.test(host)) return { ok: false, reason: notListed };
      const verdict = await deps.approvals.request(run, `${host}:${port}`);
      if (!verdict.allowed) return { ok: false, reason: verdict.reason };
    }
    let addresses: Array<{ address: string }>;
    try {
      addresses = await lookup(host, { all: true });
    } catch {
      return { ok: false, reason: `${host} does not resolve` };
    }
    const privateOk = hostAllowed(deps.config().egress.private_hosts, host, port);
    if (!privateOk && (addresses.length === 0 || addresses.some((a) => isPrivateAddress(a.address)))) {
      return { ok: false, reason: `${host} resolves to a private or loopback address (the operator may allow it in berth.yaml egress.private_hosts)` };
    }
    return { ok: true, address: (addresses[0] as { address: string }).address };
  }

  return {
    async open({ path, run, logger }) {
      const record = (method: string, host: string, port: number, status: number, reason?: string) => {
        try {
          appendOutbound(run.sessionsDir, { kind: 'egress', at: new Date().toISOString(), run: run.runId, tenant: run.tenantKey, session: run.session, method, host: host.slice(0, 256), port, status, reason });
        } catch (err) {
          logger.error({ err: String(err) }, 'could not write the outbound log');
        }
        metrics.gatewayCall({ kind: 'egress', outcome: status === 403 ? 'refused' : status >= 500 ? 'error' : 'allowed' });
        if (status === 403) logger.warn({ host, port, reason }, 'egress refused');
        else logger.info({ host, port, method, status }, 'egress');
      };
      const server = http.createServer({ maxHeaderSize: EGRESS_BOUNDS.maxHeaderBytes }, (req, res) => {
        void proxyRequest(req, res);
      });
      // busybox wget half-closes after its request and still wants the answer.
      (server as unknown as { httpAllowHalfOpen: boolean }).httpAllowHalfOpen = true;
      server.headersTimeout = 30_000;
      limitConnections(server, pool, EGRESS_BOUNDS, (open) => logger.warn({ open }, 'egress connection refused: too many'));

      server.on('connect', (req: http.IncomingMessage, client: Duplex, head: Buffer) => {
        client.on('error', () => client.destroy());
        const { host, port } = splitHostPort(req.url ?? '');
        void decide(run, host, port).then((d) => {
          if (!d.ok) {
            record('CONNECT', host, port, 403, d.reason);
            client.end(`HTTP/1.1 403 Forbidden\r\nx-berth-error: egress_denied\r\ncontent-type: text/plain\r\nconnection: close\r\n\r\nberth: ${d.reason}\n`);
            return;
          }
          const upstream = net.connect({ host: d.address, port });
          upstream.setTimeout(EGRESS_BOUNDS.idleTimeoutMs, () => upstream.destroy());
          upstream.once('connect', () => {
            record('CONNECT', host, port, 200);
            client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
            if (head.length) upstream.write(head);
            upstream.pipe(client);
            client.pipe(upstream);
          });
          upstream.on('error', (err) => {
            if (upstream.connecting) {
              record('CONNECT', host, port, 502, err.message);
              client.end(`HTTP/1.1 502 Bad Gateway\r\nconnection: close\r\n\r\nberth: ${host}:${port} could not be reached\n`);
            } else client.destroy();
          });
          client.once('close', () => upstream.destroy());
        });
      });

      async function proxyRequest(req: http.IncomingMessage, res: http.ServerResponse) {
        let url: URL;
        try {
          url = new URL(req.url ?? '');
          if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new Error('scheme');
        } catch {
          res.writeHead(400, { 'content-type': 'text/plain', 'x-berth-error': 'bad_proxy_request' });
          res.end('berth: this is an HTTP proxy: send CONNECT host:port or an absolute http(s) URL\n');
          return;
        }
        const host = url.hostname.replace(/^\[|\]$/g, '');
        const port = Number(url.port || (url.protocol === 'https:' ? 443 : 80));
        const method = req.method ?? 'GET';
        const d = await decide(run, host, port);
        if (!d.ok) {
          record(method, host, port, 403, d.reason);
          res.writeHead(403, { 'content-type': 'text/plain', 'x-berth-error': 'egress_denied', connection: 'close' });
          res.end(`berth: ${d.reason}\n`);
          return;
        }
        const headers: http.OutgoingHttpHeaders = { host: url.host };
        for (const [name, value] of Object.entries(req.headers)) if (!HOP.has(name) && value !== undefined) headers[name] = value;
        const options = { host: d.address, port, path: `${url.pathname}${url.search}`, method, headers, servername: host, timeout: EGRESS_BOUNDS.idleTimeoutMs };
        const upstream = (url.protocol === 'https:' ? https : http).request(options, (up) => {
          record(method, host, port, up.statusCode ?? 502);
          const out: http.OutgoingHttpHeaders = {};
          for (const [name, value] of Object.entries(up.headers)) if (!HOP.has(name) && value !== undefined) out[name] = value;
          res.writeHead(up.statusCode ?? 502, out);
          up.pipe(res);
        });
        upstream.on('timeout', () => upstream.destroy(new Error('idle')));
        upstream.on('error', (err) => {
          record(method, host, port, 502, err.message);
          if (!res.headersSent) {
            res.writeHead(502, { 'content-type': 'text/plain' });
            res.end(`berth: ${host}:${port} could not be reached\n`);
          } else res.destroy();
        });
        res.once('close', () => upstream.destroy());
        req.pipe(upstream);
      }

      const listening = await listenOnRunSocket(server, path);
      return {
        async close() {
          deps.approvals?.endRun(run.runId);
          await listening.close();
        },
      };
    },
  };
}

function splitHostPort(target: string): { host: string; port: number } {
  const m = /^\[([^\]]+)\]:(\d+)$/.exec(target) ?? /^([^:]+):(\d+)$/.exec(target);
  return m ? { host: (m[1] as string).toLowerCase(), port: Number(m[2]) } : { host: '', port: 0 };
}
