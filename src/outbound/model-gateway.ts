import http from 'node:http';
import https from 'node:https';
import type { Logger } from 'pino';
import type { BerthConfig } from '../config/berth-config.js';
import { MODEL_GATEWAY_BOUNDS } from '../config/bounds.js';
import { modelAllowed, type ModelApi } from '../config/outbound.js';
import { own } from '../own.js';
import { appendOutbound, readOutbound, type ModelCall } from '../store/outbound-log.js';
import { noMetrics, type Metrics } from '../metrics.js';
import { createBudgets } from './budget.js';
import type { RunIdentity, RunSocketOpener } from './run-identity.js';
import { limitConnections, listenOnRunSocket, type ConnectionPool } from './unix-server.js';
import { usageTap } from './usage.js';

/**
 * The model gateway: each run's model.sock, reached from the container through berth-bridge on
 * its loopback. The path's first segment names the upstream ("/anthropic/v1/messages"); berth
 * checks the project's upstreams, models and the tenant's hourly budget, adds the real key
 * (which never enters a container) and streams the answer back chunk by chunk as it arrives.
 */

/** Headers that belong to one hop, or carry credentials berth replaces. */
const DROP_REQUEST = new Set(['host', 'connection', 'keep-alive', 'proxy-authorization', 'proxy-connection', 'te', 'trailer', 'transfer-encoding', 'upgrade', 'content-length', 'authorization', 'x-api-key', 'accept-encoding', 'cookie']);
const DROP_RESPONSE = new Set(['connection', 'keep-alive', 'transfer-encoding', 'trailer', 'upgrade', 'set-cookie']);
/**
 * The endpoints berth forwards, per API: model calls it can check and count. Batch and file
 * endpoints are not among them (a batch names its models inside and runs thousands of calls).
 */
const API_PATHS: Record<ModelApi, RegExp> = {
  anthropic: /^\/v1\/(messages|messages\/count_tokens|models|models\/[A-Za-z0-9._-]+)$/,
  openai: /^\/v1\/(responses|chat\/completions|completions|embeddings|models|models\/[A-Za-z0-9._-]+)$/,
};
/** When an answer does not say what it used, berth charges about a token per 4 bytes each way. */
const estimate = (bytes: number) => Math.ceil(bytes / 4);

export interface ModelGateway {
  open: RunSocketOpener;
}

type Refusal = { status: number; type: string; message: string; headers?: Record<string, string> };

export function createModelGateway(deps: { config: () => BerthConfig; logger: Logger; metrics?: Metrics }): ModelGateway {
  const metrics = deps.metrics ?? noMetrics();
  const budgets = createBudgets();
  const seeded = new Set<string>();
  let inFlightTotal = 0;
  const pool: ConnectionPool = { open: 0 };

  /** A restart keeps the hour's usage: it is read back from the project's outbound log once. */
  function seedFrom(run: RunIdentity) {
    if (seeded.has(run.sessionsDir)) return;
    seeded.add(run.sessionsDir);
    const since = new Date(Date.now() - 3_600_000).toISOString();
    for (const r of readOutbound(run.sessionsDir, { since, limit: 100_000, keep: (x) => x.kind === 'model' })) {
      const call = r as ModelCall;
      budgets.seed(`${run.project}\0${call.tenant}`, Date.parse(call.at), 1, call.input_tokens + call.output_tokens);
    }
  }

  return {
    async open({ path, run, logger }) {
      let inFlight = 0;
      const server = http.createServer({ maxHeaderSize: 64 * 1024 }, (req, res) => {
        const started = performance.now();
        const log = (call: Partial<ModelCall> & { status: number; upstream: string }) => {
          const record: ModelCall = { kind: 'model', at: new Date().toISOString(), run: run.runId, tenant: run.tenantKey, session: run.session, input_tokens: 0, output_tokens: 0, ms: Math.round(performance.now() - started), ...call };
          try {
            appendOutbound(run.sessionsDir, record);
          } catch (err) {
            logger.error({ err: String(err) }, 'could not write the outbound log');
          }
          metrics.gatewayCall({ kind: 'model', outcome: record.status >= 500 ? 'error' : record.reason !== undefined && record.status >= 400 ? 'refused' : 'allowed' });
          logger.info({ upstream: record.upstream, model: record.model, status: record.status, input_tokens: record.input_tokens, output_tokens: record.output_tokens, ms: record.ms, reason: record.reason }, 'model call');
        };
        const [, name = '', ...rest] = (req.url ?? '/').split('/');
        const [restPath = '', query] = `/${rest.join('/')}`.split(/\?(.*)/s);
        const upstream = own(deps.config().models, name);
        const api: ModelApi = upstream?.api ?? 'anthropic';
        const refuse = (r: Refusal, model?: string) => {
          log({ upstream: name, model, status: r.status, reason: r.message });
          sendError(res, api, r);
        };
        if (!upstream || !run.metadata.models.upstreams.includes(name)) {
          return refuse({ status: 403, type: 'permission_error', message: `berth: project "${run.project}" may not call model upstream "${name}" (allowed: ${run.metadata.models.upstreams.join(', ') || 'none'})` });
        }
        if (!API_PATHS[api].test(restPath)) {
          return refuse({ status: 404, type: 'not_found_error', message: `berth: ${restPath.slice(0, 100)} is not an endpoint berth forwards for ${api} (model calls only; no batches or files)` });
        }
        const encoding = req.headers['content-encoding'];
        if (encoding !== undefined && encoding !== 'identity') {
          return refuse({ status: 415, type: 'invalid_request_error', message: 'berth: send model calls uncompressed (berth reads the model name)' });
        }
        if (inFlight >= MODEL_GATEWAY_BOUNDS.callsPerRun || inFlightTotal >= MODEL_GATEWAY_BOUNDS.callsTotal) {
          return refuse({ status: 429, type: 'rate_limit_error', message: `berth: at most ${MODEL_GATEWAY_BOUNDS.callsPerRun} model calls at once per run`, headers: { 'retry-after': '1', 'x-should-retry': 'true' } });
        }
        inFlight++;
        inFlightTotal++;
        res.once('close', () => {
          inFlight--;
          inFlightTotal--;
        });
        readBody(req, MODEL_GATEWAY_BOUNDS.maxRequestBytes).then(
          (body) => {
            if (body === undefined) return refuse({ status: 413, type: 'request_too_large', message: `berth: a model request may be at most ${MODEL_GATEWAY_BOUNDS.maxRequestBytes} bytes` });
            const model = modelOf(body);
            if (req.method !== 'GET' && model === undefined) {
              return refuse({ status: 400, type: 'invalid_request_error', message: 'berth: a model call is a JSON body naming its "model"' });
            }
            if (model !== undefined && !modelAllowed(run.metadata.models.allow, model)) {
              return refuse({ status: 403, type: 'permission_error', message: `berth: model "${model}" is not allowed for project "${run.project}" (allowed: ${run.metadata.models.allow.join(', ')})` }, model);
            }
            seedFrom(run);
            const key = `${run.project}\0${run.tenantKey}`;
            const verdict = budgets.take(key, run.metadata.models.budget);
            if (!verdict.ok) {
              // x-should-retry: the SDKs would otherwise retry a budget that frees up only later.
              return refuse({ status: 429, type: 'rate_limit_error', message: `berth: this tenant's model budget (${verdict.reason}) is spent; it frees up in ${verdict.retryAfterS} s`, headers: { 'retry-after': String(verdict.retryAfterS), 'x-should-retry': 'false' } }, model);
            }
            forward({ req, res, body: withUsageRequested(api, restPath, body), upstream, target: `${upstream.url.replace(/\/$/, '')}${restPath}${query !== undefined ? `?${query}` : ''}` }, (outcome) => {
              budgets.spend(key, outcome.input + outcome.output); // estimated when the answer did not say
              log({ upstream: name, model, status: outcome.status, input_tokens: outcome.input, output_tokens: outcome.output, reason: outcome.reason });
            });
          },
          () => res.destroy(),
        );
      });
      server.headersTimeout = 30_000;
      server.requestTimeout = 0; // answers stream for minutes; idleness is bounded instead
      limitConnections(server, pool, MODEL_GATEWAY_BOUNDS, (open) => logger.warn({ open }, 'model gateway connection refused: too many'));
      return listenOnRunSocket(server, path);
    },
  };
}

interface Forwarded {
  status: number;
  input: number;
  output: number;
  reason?: string;
}

function forward(call: { req: http.IncomingMessage; res: http.ServerResponse; body: Buffer; upstream: { api: ModelApi; api_key: string }; target: string }, done: (o: Forwarded) => void) {
  const { req, res, body, upstream } = call;
  const url = new URL(call.target);
  const headers: http.OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(req.headers)) if (!DROP_REQUEST.has(name) && value !== undefined) headers[name] = value;
  headers['accept-encoding'] = 'identity'; // berth counts tokens in what passes; it never re-encodes
  headers['content-length'] = String(body.length);
  if (upstream.api === 'anthropic') headers['x-api-key'] = upstream.api_key;
  else headers.authorization = `Bearer ${upstream.api_key}`;
  let finished = false;
  let tap: ReturnType<typeof usageTap> | undefined;
  let answerBytes = 0;
  /** What the answer said it used, else an estimate from what passed: never nothing. */
  const used = () => {
    const u = tap?.result() ?? { input: 0, output: 0, known: false };
    return u.known ? { input: u.input, output: u.output } : { input: estimate(body.length), output: estimate(answerBytes) };
  };
  const finish = (o: Forwarded) => {
    if (finished) return;
    finished = true;
    done(o);
  };
  const upstreamReq = (url.protocol === 'https:' ? https : http).request(url, { method: req.method, headers, timeout: MODEL_GATEWAY_BOUNDS.idleTimeoutMs }, (up) => {
    const out: http.OutgoingHttpHeaders = {};
    for (const [name, value] of Object.entries(up.headers)) if (!DROP_RESPONSE.has(name) && value !== undefined) out[name] = value;
    res.writeHead(up.statusCode ?? 502, out);
    res.flushHeaders();
    tap = usageTap(up.headers['content-type'], MODEL_GATEWAY_BOUNDS.maxUsageScanBytes);
    const seen = tap;
    // Each chunk goes on the moment it arrives (no buffering of a streamed answer); a reader that
    // stops reading pauses the upstream instead of filling berth's memory.
    up.on('data', (chunk: Buffer) => {
      answerBytes += chunk.length;
      seen.push(chunk);
      if (!res.write(chunk)) {
        up.pause();
        res.once('drain', () => up.resume());
      }
    });
    up.on('end', () => {
      res.end();
      finish({ status: up.statusCode ?? 502, ...used() });
    });
    up.on('error', () => {
      res.destroy();
      finish({ status: up.statusCode ?? 502, ...used(), reason: 'upstream answer cut off' });
    });
  });
  upstreamReq.on('timeout', () => upstreamReq.destroy(new Error(`no data from upstream for ${MODEL_GATEWAY_BOUNDS.idleTimeoutMs / 1000} s`)));
  upstreamReq.on('error', (err) => {
    if (!res.headersSent) sendError(res, upstream.api, { status: 502, type: 'api_error', message: `berth: the model upstream could not be reached (${err.message})` });
    else res.destroy();
    finish({ status: 502, input: 0, output: 0, reason: err.message });
  });
  // The container went away: stop paying for an answer nobody reads.
  res.once('close', () => {
    if (!res.writableFinished) {
      upstreamReq.destroy();
      // What the upstream already counted is spent, read or not.
      finish({ status: 499, ...used(), reason: 'the container closed the connection' });
    }
  });
  upstreamReq.end(body);
}

/**
 * An OpenAI chat stream reports usage only when asked: berth asks, so a tenant who leaves it out
 * is still counted. Other bodies pass unchanged.
 */
function withUsageRequested(api: ModelApi, path: string, body: Buffer): Buffer {
  if (api !== 'openai' || path !== '/v1/chat/completions') return body;
  try {
    const parsed = JSON.parse(body.toString('utf8')) as { stream?: unknown; stream_options?: unknown };
    if (parsed.stream !== true) return body;
    const options = typeof parsed.stream_options === 'object' && parsed.stream_options !== null ? parsed.stream_options : {};
    return Buffer.from(JSON.stringify({ ...parsed, stream_options: { ...options, include_usage: true } }));
  } catch {
    return body;
  }
}

/** The whole request body, or undefined past `max` bytes (the rest is not read). */
function readBody(req: http.IncomingMessage, max: number): Promise<Buffer | undefined> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > max) {
        req.pause();
        resolve(undefined);
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

function modelOf(body: Buffer): string | undefined {
  if (body.length === 0) return undefined;
  try {
    const parsed: unknown = JSON.parse(body.toString('utf8'));
    const model = typeof parsed === 'object' && parsed !== null ? (parsed as { model?: unknown }).model : undefined;
    return typeof model === 'string' ? model : undefined;
  } catch {
    return undefined;
  }
}

/** An error in the shape the calling SDK expects, so the agent CLI prints berth's reason. */
function sendError(res: http.ServerResponse, api: ModelApi, r: Refusal) {
  if (res.headersSent) return void res.destroy();
  const body = api === 'anthropic' ? { type: 'error', error: { type: r.type, message: r.message } } : { error: { message: r.message, type: r.type, code: r.type } };
  res.writeHead(r.status, { 'content-type': 'application/json', 'x-berth-error': r.type, ...r.headers, connection: 'close' });
  res.end(JSON.stringify(body));
}
