import { lookup } from 'node:dns/promises';
import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import type { Duplex, Readable } from 'node:stream';
import tls from 'node:tls';
import type { Logger } from 'pino';
import type { BerthConfig } from '../config/berth-config.js';
import { EGRESS_BOUNDS } from '../config/bounds.js';
import { isBerthError } from '../base/errors.js';
import { appendOutbound } from '../store/outbound-log.js';
import type { CredentialUses } from './credential-uses.js';
import { noMetrics, type Metrics } from '../base/metrics.js';
import type { Approvals } from './approvals.js';
import { createEgressDecision, unreachableWhy, type Resolve } from './egress-decision.js';
import { peekBody, sendBody, type PeekedBody } from './body-peek.js';
import { DECOY_STOP, type Honeytokens } from './honeytokens.js';
import { DECODERS, HOP, TLS_VERIFY_ERRORS, defaultPort, splitHostPort, type Target } from './egress-target.js';
import type { EgressCa } from './egress-ca.js';
import { maskHeaders, maskText, redactStream } from './redact-stream.js';
import type { SecretBroker } from './secret-broker.js';
import type { RunSocketOpener } from './run-identity.js';
import { limitConnections, listenOnRunSocket, type ConnectionPool } from './unix-server.js';

/**
 * The egress proxy: each medium/high run's egress.sock, reached from the container (which has
 * no network) through berth-bridge on its loopback, as HTTP_PROXY/HTTPS_PROXY. It speaks CONNECT
 * and absolute-URI HTTP(S), lets through only hosts on the project's allowlist, and connects to
 * the address it resolved itself — never to a private one unless the operator named the host.
 * A host outside the allowlist is asked for (approvals.ts): the connection waits for the answer.
 * Every decision is logged; a refusal is a 403 that says why.
 *
 * Toward a host the project holds a secret grant for (secret-broker.ts), a CONNECT is answered
 * by berth itself: TLS with a certificate from berth's CA (egress-ca.ts), each request read,
 * its secrets added, and sent on over a new TLS connection that verifies the real host. Every
 * other host stays a blind tunnel.
 */
export interface EgressProxy {
  open: RunSocketOpener;
}

/** Names a run may have berth sign a new certificate for, per minute (names under a wildcard grant share one). */
export const NEW_CERT_NAMES_PER_MINUTE = 32;
/** How much of a request's body berth reads ahead to look for a decoy credential (the rest goes on unread). */
const HONEYTOKEN_PEEK_BYTES = 256 * 1024;

export function createEgressProxy(deps: {
  config: () => BerthConfig;
  logger: Logger;
  metrics?: Metrics;
  approvals?: Approvals;
  broker?: SecretBroker;
  ca?: () => EgressCa;
  lookup?: Resolve;
  credentialUses?: CredentialUses;
  /** Decoy credentials: a request carrying one freezes its tenant (honeytokens.ts). */
  honeytokens?: Pick<Honeytokens, 'check' | 'enabled'>;
}): EgressProxy {
  const metrics = deps.metrics ?? noMetrics();
  const decide = createEgressDecision({ ...deps, lookup: deps.lookup ?? ((host) => lookup(host, { all: true })) });
  const pool: ConnectionPool = { open: 0 };

  /** Public roots plus the operator's CAs (egress.trust_ca_files), read again when the list changes. */
  let roots: { key: string; ca: string[] } | undefined;
  function trustedRoots(): { key: string; ca: string[] } {
    const files = deps.config().egress.trust_ca_files;
    const key = files.join('\n');
    if (roots?.key !== key) {
      const extra = files.flatMap((f) => {
        try {
          return [fs.readFileSync(f, 'utf8')];
        } catch (err) {
          deps.logger.error({ file: f, err: String(err) }, 'egress.trust_ca_files: cannot read a CA file; it is not trusted');
          return [];
        }
      });
      roots = { key, ca: [...tls.rootCertificates, ...extra] };
    }
    return roots;
  }

  return {
    async open({ path, run, logger, stopRun }) {
      const record = (
        method: string,
        host: string,
        port: number,
        status: number,
        reason?: string,
        about?: { path?: string; secret?: string; quiet?: boolean },
      ) => {
        try {
          appendOutbound(run.sessionsDir, {
            kind: 'egress',
            at: new Date().toISOString(),
            run: run.runId,
            tenant: run.tenantKey,
            session: run.session,
            method,
            host: host.slice(0, 256),
            port,
            status,
            reason,
            ...(about?.secret ? { path: about.path?.slice(0, 512), secret: about.secret } : {}),
          });
        } catch (err) {
          logger.error({ err: String(err) }, 'could not write the outbound log');
        }
        // For the run's receipt: each request a secret went into, or was refused for.
        if (about?.secret)
          deps.credentialUses?.note(run.runId, {
            secret: about.secret.slice(0, 256),
            method: method.slice(0, 16),
            host: host.slice(0, 256),
            path: (about.path ?? '').slice(0, 512),
            status,
            ...(reason ? { note: reason.slice(0, 300) } : {}),
          });
        metrics.gatewayCall({ kind: 'egress', outcome: status === 403 ? 'refused' : status >= 500 ? 'error' : 'allowed' });
        if (status === 403 && about?.quiet) logger.debug({ host, port, reason }, 'egress refused');
        else if (status === 403) logger.warn({ host, port, reason }, 'egress refused');
        else logger.info({ host, port, method, status, secret: about?.secret }, 'egress');
      };
      // A host someone allowed that still fails is told to the chat once per run, with the reason:
      // "allowed" followed by a bare error would read as if the answer had not worked.
      const told = new Set<string>();
      const tellUnreachable = (host: string, port: number, reason: string) => {
        const target = `${host}:${port}`;
        if (!run.ask || told.has(target)) return;
        told.add(target);
        try {
          run.ask({ type: 'unreachable', target, reason });
        } catch (err) {
          logger.warn({ err: String(err).slice(0, 200) }, 'could not tell the chat why an allowed host failed');
        }
      };
      /** A refusal: logged, answered with a 403 that says why, and told when someone had allowed the host. */
      const refused = (method: string, host: string, port: number, d: { reason: string; quiet?: boolean; asked?: boolean }) => {
        record(method, host, port, 403, d.reason, { quiet: d.quiet });
        if (d.asked) tellUnreachable(host, port, d.reason);
      };
      // This run's own connections upstream: a connection kept alive never carries another run's requests.
      let tlsAgent: { key: string; agent: https.Agent } | undefined;
      const plainAgent = new http.Agent({ maxSockets: EGRESS_BOUNDS.upstreamPerRun });
      const upstreamAgent = (): https.Agent => {
        const { key, ca } = trustedRoots();
        if (tlsAgent?.key !== key) {
          tlsAgent?.agent.destroy();
          tlsAgent = { key, agent: new https.Agent({ keepAlive: true, maxSockets: EGRESS_BOUNDS.upstreamPerRun, ca }) };
        }
        return tlsAgent.agent;
      };
      // New certificate names this run made berth sign, in the last minute.
      let signedFor: number[] = [];
      const mayMakeName = (): boolean => {
        const now = Date.now();
        signedFor = signedFor.filter((t) => t > now - 60_000);
        if (signedFor.length >= NEW_CERT_NAMES_PER_MINUTE) return false;
        signedFor.push(now);
        return true;
      };
      // Requests being answered: per connection (pipelined ones are read at once) and per run.
      const inFlight = new WeakMap<object, number>();
      let inFlightRun = 0;
      const server = http.createServer({ maxHeaderSize: EGRESS_BOUNDS.maxHeaderBytes }, (req, res) => {
        void proxyRequest(req, res);
      });
      // busybox wget half-closes after its request and still wants the answer.
      (server as unknown as { httpAllowHalfOpen: boolean }).httpAllowHalfOpen = true;
      server.headersTimeout = 30_000;
      limitConnections(server, pool, EGRESS_BOUNDS, (open) => logger.warn({ open }, 'egress connection refused: too many'));
      // Requests read from connections berth terminated TLS for, each tied to its CONNECT's target.
      const targets = new WeakMap<object, Target>();
      const terminated = http.createServer({ maxHeaderSize: EGRESS_BOUNDS.maxHeaderBytes }, (req, res) => {
        const target = targets.get(req.socket);
        if (!target) return void res.destroy();
        // Inside a tunnel a request names a path only: an absolute URL would name some other host.
        if (!req.url?.startsWith('/')) {
          res.writeHead(400, { 'content-type': 'text/plain', 'x-berth-error': 'bad_proxy_request' });
          return void res.end(`berth: inside this connection to ${target.host}, send a path (GET /...), not a URL\n`);
        }
        void forward(req, res, target, req.url);
      });
      terminated.headersTimeout = 30_000;

      server.on('connect', (req: http.IncomingMessage, client: Duplex, head: Buffer) => {
        client.on('error', () => client.destroy());
        const { host, port } = splitHostPort(req.url ?? '');
        void decide(run, host, port).then((d) => {
          if (!d.ok) {
            refused('CONNECT', host, port, d);
            client.end(
              `HTTP/1.1 403 Forbidden\r\nx-berth-error: egress_denied\r\ncontent-type: text/plain\r\nconnection: close\r\n\r\nberth: ${d.reason}\n`,
            );
            return;
          }
          if (deps.ca && d.granted) {
            terminate(client as net.Socket, head, { https: true, host, port, address: d.address, asked: d.asked }, deps.ca()).catch(
              (err: unknown) => {
                logger.error({ host, port, err: String(err) }, 'egress: could not answer a CONNECT berth terminates');
                client.destroy();
              },
            );
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
              if (d.asked) tellUnreachable(host, port, unreachableWhy(err));
              client.end(`HTTP/1.1 502 Bad Gateway\r\nconnection: close\r\n\r\nberth: ${host}:${port} could not be reached\n`);
            } else client.destroy();
          });
          client.once('close', () => upstream.destroy());
        });
      });

      /** Answer the CONNECT as the host (berth's CA), then read its requests as plain HTTP. */
      async function terminate(client: net.Socket, head: Buffer, target: Target, ca: EgressCa) {
        if (head.length) {
          // Bytes sent before the 200 would have to be fed under the TLS layer; every common client waits.
          record('CONNECT', target.host, target.port, 400, 'TLS sent before the CONNECT was answered');
          client.end(
            'HTTP/1.1 400 Bad Request\r\nx-berth-error: bad_proxy_request\r\nconnection: close\r\n\r\nberth: wait for the 200 before starting TLS toward this host\n',
          );
          return;
        }
        let secureContext: tls.SecureContext;
        try {
          const name = deps.broker?.certificateName(run.project, target.host, target.port) ?? target.host;
          secureContext = await ca.contextFor(name, mayMakeName);
        } catch (err) {
          const busy = isBerthError(err, 'BUSY');
          const reason = busy
            ? `this run made berth sign certificates for ${NEW_CERT_NAMES_PER_MINUTE} new host names in the last minute; try again in a minute`
            : `berth could not make a certificate for ${target.host}`;
          record('CONNECT', target.host, target.port, busy ? 429 : 502, busy ? reason : `${reason}: ${String(err)}`);
          client.end(
            `HTTP/1.1 ${busy ? '429 Too Many Requests\r\nx-berth-error: egress_busy\r\nretry-after: 60' : '502 Bad Gateway'}\r\ncontent-type: text/plain\r\nconnection: close\r\n\r\nberth: ${reason}\n`,
          );
          return;
        }
        if (client.destroyed) return;
        client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
        const secure = new tls.TLSSocket(client, { isServer: true, secureContext, ALPNProtocols: ['http/1.1'] });
        let handshaken = false;
        let refusal = 'it closed the connection';
        secure.once('secure', () => {
          handshaken = true;
        });
        secure.on('error', (err: NodeJS.ErrnoException) => {
          refusal = err.code ?? err.message;
          secure.destroy();
        });
        // A client that does not trust the certificate sends an alert and hangs up, often with no error here.
        secure.once('close', () => {
          if (handshaken) return;
          record(
            'TLS',
            target.host,
            target.port,
            495,
            `the client ended TLS with berth (${refusal}): it does not trust berth's CA for this host (a pinned certificate, or a client that ignores SSL_CERT_FILE and NODE_EXTRA_CA_CERTS); berth adds secrets only to connections it can read`,
          );
        });
        targets.set(secure, target);
        terminated.emit('connection', secure);
      }

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
        const https_ = url.protocol === 'https:';
        const port = Number(url.port || (https_ ? 443 : 80));
        const d = await decide(run, host, port);
        if (!d.ok) {
          refused(req.method ?? 'GET', host, port, d);
          res.writeHead(403, { 'content-type': 'text/plain', 'x-berth-error': 'egress_denied', connection: 'close' });
          res.end(`berth: ${d.reason}\n`);
          return;
        }
        await forward(req, res, { https: https_, host, port, address: d.address, asked: d.asked }, `${url.pathname}${url.search}`);
      }

      /** One request berth can read: its secrets (if any) added, sent to the target, the answer masked. */
      async function forward(req: http.IncomingMessage, res: http.ServerResponse, target: Target, pathAndQuery: string) {
        const here = inFlight.get(req.socket) ?? 0;
        if (here >= EGRESS_BOUNDS.inFlightPerConnection || inFlightRun >= EGRESS_BOUNDS.inFlightPerRun) {
          record(
            req.method ?? 'GET',
            target.host,
            target.port,
            429,
            here >= EGRESS_BOUNDS.inFlightPerConnection
              ? 'too many pipelined requests on one connection'
              : 'too many requests of this run at once',
          );
          res.writeHead(429, { 'content-type': 'text/plain', 'x-berth-error': 'egress_busy', connection: 'close', 'retry-after': '1' });
          res.end('berth: too many requests at once through the egress proxy\n');
          return;
        }
        inFlight.set(req.socket, here + 1);
        inFlightRun++;
        res.once('close', () => {
          inFlight.set(req.socket, (inFlight.get(req.socket) ?? 1) - 1);
          inFlightRun--;
        });
        const { host, port } = target;
        const method = req.method ?? 'GET';
        const about = { path: pathAndQuery.split('?')[0] };
        // A body the broker reads ahead (does it ask for another method?) goes on from what was read.
        let peeked: PeekedBody | undefined;
        const body = async (limit: number) => {
          peeked = await peekBody(req, limit);
          return { bytes: Buffer.concat(peeked.chunks), complete: peeked.complete };
        };
        const prepared = deps.broker
          ? await deps.broker.prepare(run, { https: target.https, host, port, method, target: pathAndQuery, headers: req.headers, body })
          : undefined;
        if (prepared && !prepared.ok) {
          record(method, host, port, prepared.status, prepared.reason, { ...about, secret: prepared.secret });
          res.writeHead(prepared.status, { 'content-type': 'text/plain', 'x-berth-error': prepared.code });
          res.end(`berth: ${prepared.reason}\n`);
          req.resume();
          return;
        }
        // A decoy credential in what is sent: refused, the run stopped, the tenant frozen (honeytokens.ts).
        const sent = deps.honeytokens?.enabled(run.project) ? (peeked?.chunks ?? [(await body(HONEYTOKEN_PEEK_BYTES)).bytes]) : undefined;
        if (
          sent &&
          deps.honeytokens?.check(run, `egress ${method} ${host}`, `${method} ${pathAndQuery}`, JSON.stringify(req.headers), ...sent)
        ) {
          record(method, host, port, 403, 'a decoy credential: the tenant is frozen', about);
          res.writeHead(403, { 'content-type': 'text/plain', 'x-berth-error': 'honeytoken' });
          res.end('berth: refused\n');
          return stopRun(DECOY_STOP);
        }
        const needles = prepared?.needles ?? [];
        const secret = prepared?.secrets.join(',') || undefined;
        const headers: http.OutgoingHttpHeaders = { host: defaultPort(target) ? host : `${host}:${port}` };
        for (const [name, value] of Object.entries(req.headers)) if (!HOP.has(name) && value !== undefined) headers[name] = value;
        // A chunked body stays chunked: Node frames no body of a GET, HEAD, DELETE or OPTIONS on its
        // own, and unframed bytes on a kept connection would be read upstream as the next request.
        if (req.headers['transfer-encoding'] !== undefined) headers['transfer-encoding'] = 'chunked';
        Object.assign(headers, prepared?.set);
        if (needles.length) {
          // An answer that echoes the secret is masked: berth asks for one it can read whole
          // (uncompressed, and not in ranges that could cut a value in two).
          headers['accept-encoding'] = 'identity';
          delete headers.range;
          delete headers['if-range'];
        }
        const name = net.isIP(host) ? {} : { servername: host };
        const options = {
          host: target.address,
          port,
          path: pathAndQuery,
          method,
          headers,
          timeout: EGRESS_BOUNDS.idleTimeoutMs,
          // The certificate is checked against the servername (a name), or the address itself (an IP
          // literal, which is then what `host` is). No per-request checkServerIdentity: it keeps the agent from reusing connections.
          ...(target.https ? { ...name, agent: upstreamAgent() } : { agent: plainAgent }),
        };
        const upstream = (target.https ? https : http).request(options, (up) => {
          up.on('error', () => res.destroy());
          const bodiless = method === 'HEAD' || up.statusCode === 204 || up.statusCode === 304;
          const encoding = maskText(String(up.headers['content-encoding'] ?? 'identity').toLowerCase(), needles);
          const decode = needles.length && encoding !== 'identity' && !bodiless ? DECODERS[encoding] : undefined;
          if (needles.length && encoding !== 'identity' && !bodiless && !decode) {
            record(method, host, port, 502, `an answer in ${encoding.slice(0, 32)} berth cannot check for the secret`, {
              ...about,
              secret,
            });
            res.writeHead(502, { 'content-type': 'text/plain', 'x-berth-error': 'unreadable_answer' });
            res.end(`berth: ${host} answered in ${encoding.slice(0, 32)}, which berth cannot check for the secret it sent\n`);
            up.destroy();
            return;
          }
          record(method, host, port, up.statusCode ?? 502, undefined, { ...about, secret });
          const out = maskHeaders(
            up.headers,
            needles,
            (key) => HOP.has(key) || (decode !== undefined && (key === 'content-encoding' || key === 'content-length')),
          );
          res.writeHead(up.statusCode ?? 502, out);
          // pipe, not pipeline: pipeline would destroy `up` (and the pooled connection under it) when `res` ends.
          // Each stage gets its own error listener: pipe passes no error on, and one unheard would end berth.
          let body: Readable = up;
          for (const stage of [...(decode ? [decode()] : []), ...(needles.length ? [redactStream(needles)] : [])]) {
            stage.on('error', () => res.destroy());
            body = body.pipe(stage);
          }
          body.pipe(res);
        });
        upstream.on('timeout', () => upstream.destroy(new Error('idle')));
        upstream.on('error', (err: NodeJS.ErrnoException) => {
          const tlsFailure = target.https && TLS_VERIFY_ERRORS.test(err.code ?? '');
          const reason = tlsFailure
            ? `${host}'s certificate could not be verified (${err.code}); berth talks only to hosts that prove who they are`
            : `${host}:${port} could not be reached`;
          record(method, host, port, 502, tlsFailure ? reason : err.message, { ...about, secret });
          if (target.asked) tellUnreachable(host, port, tlsFailure ? reason : unreachableWhy(err));
          if (!res.headersSent) {
            res.writeHead(502, { 'content-type': 'text/plain', ...(tlsFailure ? { 'x-berth-error': 'upstream_tls' } : {}) });
            res.end(`berth: ${reason}\n`);
          } else res.destroy();
        });
        // A client gone before its answer ends the upstream request; a finished one leaves the connection to the agent's pool.
        res.once('close', () => {
          if (!res.writableFinished) upstream.destroy();
        });
        sendBody(req, peeked, upstream);
      }

      const listening = await listenOnRunSocket(server, path);
      return {
        async close() {
          deps.approvals?.endRun(run.runId);
          deps.broker?.endRun(run.runId);
          terminated.close();
          tlsAgent?.agent.destroy();
          plainAgent.destroy();
          await listening.close();
        },
      };
    },
  };
}
