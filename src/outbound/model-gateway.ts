import http from 'node:http';
import https from 'node:https';
import type { Logger } from 'pino';
import type { BerthConfig } from '../config/berth-config.js';
import { MODEL_GATEWAY_BOUNDS, type ModelGatewayBounds } from '../config/bounds.js';
import { modelAllowed, type ModelApi } from '../config/outbound.js';
import { own } from '../base/own.js';
import type { ModelCall } from '../store/outbound-log.js';
import { noMetrics, type Metrics } from '../base/metrics.js';
import { createBodyBudget, readBody } from './body-budget.js';
import { forwardedHeaders, methodOf, parseGatewayPath, parseModelBody, returnedHeaders } from './model-request.js';
import type { RunSocketOpener } from './run-identity.js';
import { DECOY_STOP, type Honeytokens } from './honeytokens.js';
import { createTenantBudgets } from './tenant-budgets.js';
import { createTranscriber, type Transcriber } from './transcription.js';
import { noteModelCall, upstreamKeyHeaders, upstreamUrl } from './model-upstream.js';
import { limitConnections, listenOnRunSocket, type ConnectionPool } from './unix-server.js';
import { usageTap } from './usage.js';

/**
 * The model gateway: each run's model.sock, reached from the container through berth-bridge on
 * its loopback. The path's first segment names the upstream ("/anthropic/v1/messages"); berth
 * checks the path, method, project's upstreams, models, the tools a call may have the provider run
 * (none) and the tenant's hourly budget, sends on what it checked (the parsed body re-serialized,
 * allowlisted headers) with the real key (which never enters a container) and streams the answer
 * back chunk by chunk as it arrives, without the headers that name the operator's account.
 */

/** When an answer does not say what it used, berth charges about a token per 4 bytes each way. */
const estimate = (bytes: number) => Math.ceil(bytes / 4);

export interface ModelGateway {
  open: RunSocketOpener;
  /** berth's own calls for a run's voice notes: the same budgets, log and keys as the calls it forwards. */
  transcriber: Transcriber;
}

type Refusal = { status: number; type: string; message: string; headers?: Record<string, string> };

export function createModelGateway(deps: {
  config: () => BerthConfig;
  logger: Logger;
  metrics?: Metrics;
  bounds?: ModelGatewayBounds;
  /** Decoy credentials: a model call quoting one freezes its tenant (honeytokens.ts). */
  honeytokens?: Pick<Honeytokens, 'check'>;
}): ModelGateway {
  const metrics = deps.metrics ?? noMetrics();
  const bounds = deps.bounds ?? MODEL_GATEWAY_BOUNDS;
  const budgets = createTenantBudgets();
  const bodies = createBodyBudget({ perTenant: bounds.bufferedBytesPerTenant, total: bounds.bufferedBytesTotal });
  let inFlightTotal = 0;
  const pool: ConnectionPool = { open: 0 };

  return {
    transcriber: createTranscriber({ config: deps.config, logger: deps.logger, metrics, budgets }),
    async open({ path, run, logger, stopRun }) {
      let inFlight = 0;
      /** Calls in a row whose upstream could not be reached: past UNREACHABLE_STOP the run ends. */
      let unreachable = 0;
      const key = `${run.project}\0${run.tenantKey}`;
      const server = http.createServer({ maxHeaderSize: 64 * 1024 }, (req, res) => {
        const started = performance.now();
        const log = (call: Partial<ModelCall> & { status: number; upstream: string }) =>
          noteModelCall(
            { sessionsDir: run.sessionsDir, logger, metrics },
            {
              kind: 'model',
              at: new Date().toISOString(),
              run: run.runId,
              tenant: run.tenantKey,
              session: run.session,
              input_tokens: 0,
              output_tokens: 0,
              ms: Math.round(performance.now() - started),
              ...call,
            },
            { msg: 'model call' },
          );
        const target = parseGatewayPath(req.url ?? '/');
        const name = target.ok ? target.upstream : ((req.url ?? '').split('/')[1]?.slice(0, 64) ?? '');
        const upstream = own(deps.config().models, name);
        const api: ModelApi = upstream?.api ?? 'anthropic';
        const refuse = (r: Refusal, model?: string) => {
          log({ upstream: name, model, status: r.status, reason: r.message });
          sendError(res, api, r);
        };
        // The path is judged as sent, before anything matches it: an upstream would resolve "..".
        if (!target.ok) return refuse({ status: 400, type: 'invalid_request_error', message: `berth: ${target.reason}` });
        if (!upstream || !run.metadata.models.upstreams.includes(name)) {
          return refuse({
            status: 403,
            type: 'permission_error',
            message: `berth: project "${run.project}" may not call model upstream "${name}" (allowed: ${run.metadata.models.upstreams.join(', ') || 'none'})`,
          });
        }
        const method = methodOf(api, target.path);
        if (!method) {
          return refuse({
            status: 404,
            type: 'not_found_error',
            message: `berth: ${target.path.slice(0, 100)} is not an endpoint berth forwards for ${api} (model calls only; no batches or files)`,
          });
        }
        // Model calls are POSTs with a body berth checks; listings are GETs without one. No other pairing.
        if (req.method !== method) {
          return refuse({
            status: 405,
            type: 'invalid_request_error',
            message: `berth: ${target.path} takes ${method} only`,
            headers: { allow: method },
          });
        }
        if (method === 'GET' && (req.headers['transfer-encoding'] !== undefined || Number(req.headers['content-length'] ?? 0) > 0)) {
          return refuse({ status: 400, type: 'invalid_request_error', message: 'berth: a GET carries no body' });
        }
        const encoding = req.headers['content-encoding'];
        if (encoding !== undefined && encoding !== 'identity') {
          return refuse({
            status: 415,
            type: 'invalid_request_error',
            message: 'berth: send model calls uncompressed (berth reads the model name)',
          });
        }
        if (inFlight >= bounds.callsPerRun || inFlightTotal >= bounds.callsTotal) {
          return refuse({
            status: 429,
            type: 'rate_limit_error',
            message: `berth: at most ${bounds.callsPerRun} model calls at once per run`,
            headers: { 'retry-after': '1', 'x-should-retry': 'true' },
          });
        }
        inFlight++;
        inFlightTotal++;
        const lease = bodies.lease(key);
        res.once('close', () => {
          inFlight--;
          inFlightTotal--;
          lease.release();
        });
        const send = (body: string | undefined, model: string | undefined) => {
          const verdict = budgets.take(run, run.metadata.models.budget);
          if (!verdict.ok) {
            // x-should-retry: the SDKs would otherwise retry a budget that frees up only later.
            return refuse(
              {
                status: 429,
                type: 'rate_limit_error',
                message: `berth: this tenant's model budget (${verdict.reason}) is spent; it frees up in ${verdict.retryAfterS} s`,
                headers: { 'retry-after': String(verdict.retryAfterS), 'x-should-retry': 'false' },
              },
              model,
            );
          }
          const headers = forwardedHeaders(api, req.headers);
          forward(
            {
              method,
              res,
              body,
              headers,
              upstream,
              target: upstreamUrl(upstream, target.path, target.query),
              bounds,
              sent: () => lease.release(),
            },
            (outcome) => {
              budgets.spend(run, outcome.input + outcome.output); // estimated when the answer did not say
              log({
                upstream: name,
                model,
                status: outcome.status,
                input_tokens: outcome.input,
                output_tokens: outcome.output,
                reason: outcome.reason,
              });
              // An agent CLI retries an unreachable service for minutes: the person waits for nothing.
              unreachable = outcome.unreachable ? unreachable + 1 : 0;
              if (unreachable >= UNREACHABLE_STOP) {
                stopRun(
                  `its model service cannot be reached ("${name}": ${outcome.reason}). The operator must fix it (berth doctor); send the message again later.`,
                );
              }
            },
          );
        };
        if (method === 'GET') return send(undefined, undefined);
        readBody(req, lease, { max: bounds.maxRequestBytes, timeoutMs: bounds.bodyTimeoutMs }).then(
          (read) => {
            if (!read.ok) {
              lease.release();
              const retry = read.status === 429 ? { 'retry-after': '1', 'x-should-retry': 'true' } : undefined;
              return refuse({
                status: read.status,
                type: read.status === 413 ? 'request_too_large' : read.status === 429 ? 'rate_limit_error' : 'invalid_request_error',
                message: `berth: ${read.reason}`,
                headers: retry,
              });
            }
            // Something in the container read a decoy and is sending it to the model: the tenant is frozen, the run stopped.
            if (deps.honeytokens?.check(run, 'model call', read.body)) {
              stopRun(DECOY_STOP);
              return refuse({
                status: 403,
                type: 'permission_error',
                message: 'berth: this tenant is frozen (a decoy credential was used)',
              });
            }
            const call = parseModelBody(api, target.path, read.body, bounds.maxBodyDepth);
            if (!call.ok) return refuse({ status: 400, type: 'invalid_request_error', message: `berth: ${call.reason}` });
            if (!modelAllowed(run.metadata.models.allow, call.model)) {
              return refuse(
                {
                  status: 403,
                  type: 'permission_error',
                  message: `berth: model "${call.model}" is not allowed for project "${run.project}" (allowed: ${run.metadata.models.allow.join(', ')})`,
                },
                call.model,
              );
            }
            send(call.json, call.model);
          },
          () => res.destroy(),
        );
      });
      server.headersTimeout = 30_000;
      server.requestTimeout = 0; // answers stream for minutes; bodies have their own deadline (bodyTimeoutMs)
      limitConnections(server, pool, bounds, (open) => logger.warn({ open }, 'model gateway connection refused: too many'));
      return listenOnRunSocket(server, path);
    },
  };
}

interface Forwarded {
  status: number;
  input: number;
  output: number;
  reason?: string;
  /** No answer came at all: the upstream could not be connected to, or said nothing in time. */
  unreachable?: boolean;
}

/** Model calls in a row that reach no upstream before berth stops the run (the CLIs retry the first at once). */
export const UNREACHABLE_STOP = 2;

function forward(
  call: {
    method: string;
    res: http.ServerResponse;
    /** The JSON text of a model call; none for a listing. */
    body: string | undefined;
    headers: Record<string, string>;
    upstream: { api: ModelApi; api_key: string };
    target: string;
    bounds: ModelGatewayBounds;
    sent: () => void;
  },
  done: (o: Forwarded) => void,
) {
  const { res, upstream, bounds } = call;
  // Only its size outlives the write: the body itself must not stay reachable while the answer streams.
  const bodyBytes = call.body === undefined ? 0 : Buffer.byteLength(call.body);
  const url = new URL(call.target);
  const headers: http.OutgoingHttpHeaders = { ...call.headers };
  headers['accept-encoding'] = 'identity'; // berth counts tokens in what passes; it never re-encodes
  if (call.body !== undefined) headers['content-length'] = String(bodyBytes);
  Object.assign(headers, upstreamKeyHeaders(upstream));
  let finished = false;
  let tap: ReturnType<typeof usageTap> | undefined;
  let answerBytes = 0;
  /** What the answer said it used, else an estimate from what passed: never nothing. */
  const used = () => {
    const u = tap?.result() ?? { input: 0, output: 0, known: false };
    return u.known ? { input: u.input, output: u.output } : { input: estimate(bodyBytes), output: estimate(answerBytes) };
  };
  const finish = (o: Forwarded) => {
    if (finished) return;
    finished = true;
    done(o);
  };
  let answered = false;
  const upstreamReq = (url.protocol === 'https:' ? https : http).request(
    url,
    { method: call.method, headers, timeout: bounds.idleTimeoutMs },
    (up) => {
      answered = true;
      res.writeHead(up.statusCode ?? 502, returnedHeaders(up.headers));
      res.flushHeaders();
      tap = usageTap(up.headers['content-type'], bounds.maxUsageScanBytes);
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
    },
  );
  upstreamReq.on('timeout', () => upstreamReq.destroy(new Error(`no data from upstream for ${bounds.idleTimeoutMs / 1000} s`)));
  upstreamReq.on('error', (err) => {
    if (!res.headersSent)
      sendError(res, upstream.api, {
        status: 502,
        type: 'api_error',
        message: `berth: the model upstream could not be reached (${err.message})`,
      });
    else res.destroy();
    finish({ status: 502, input: 0, output: 0, reason: err.message, unreachable: !answered });
  });
  // The container went away: stop paying for an answer nobody reads.
  res.once('close', () => {
    if (!res.writableFinished) {
      upstreamReq.destroy();
      // What the upstream already counted is spent, read or not.
      finish({ status: 499, ...used(), reason: 'the container closed the connection' });
    }
  });
  // Once the body is handed to the upstream's socket, its bytes leave berth's budget.
  if (call.body !== undefined) upstreamReq.end(call.body, 'utf8', call.sent);
  else upstreamReq.end();
}

/** An error in the shape the calling SDK expects, so the agent CLI prints berth's reason. */
function sendError(res: http.ServerResponse, api: ModelApi, r: Refusal) {
  if (res.headersSent) return void res.destroy();
  const body =
    api === 'anthropic'
      ? { type: 'error', error: { type: r.type, message: r.message } }
      : { error: { message: r.message, type: r.type, code: r.type } };
  res.writeHead(r.status, { 'content-type': 'application/json', 'x-berth-error': r.type, ...r.headers, connection: 'close' });
  res.end(JSON.stringify(body));
}
