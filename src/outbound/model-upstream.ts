import type { Logger } from 'pino';
import type { Metrics } from '../base/metrics.js';
import type { ModelApi } from '../config/outbound.js';
import { appendOutbound, type ModelCall } from '../store/outbound-log.js';

/**
 * What every call berth makes to a model upstream shares, the calls it forwards for a run (the
 * model gateway) and its own (a voice note's transcription): the upstream's URL for a path, its
 * key as that API takes it (added by berth: no container holds it), and the call written down
 * (the run's outbound log, which the budgets and the chat's cost line read; the metric; a log line).
 */

/** The upstream's URL for `path` (and its query, if any). */
export const upstreamUrl = (upstream: { url: string }, path: string, query?: string) =>
  `${upstream.url.replace(/\/$/, '')}${path}${query !== undefined ? `?${query}` : ''}`;

/** The upstream's key in the header its API reads it from. */
export const upstreamKeyHeaders = (upstream: { api: ModelApi; api_key: string }): Record<string, string> =>
  upstream.api === 'anthropic' ? { 'x-api-key': upstream.api_key } : { authorization: `Bearer ${upstream.api_key}` };

/** A model call written down: its line in the run's outbound log, the gateway metric, and berth's log line (`said` adds to it). */
export function noteModelCall(
  to: { sessionsDir: string; logger: Logger; metrics: Pick<Metrics, 'gatewayCall'> },
  call: ModelCall,
  said: { msg: string; fields?: Record<string, unknown> },
): void {
  try {
    appendOutbound(to.sessionsDir, call);
  } catch (err) {
    to.logger.error({ err: String(err) }, 'could not write the outbound log');
  }
  to.metrics.gatewayCall({
    kind: 'model',
    outcome: call.status >= 500 ? 'error' : call.reason !== undefined && call.status >= 300 ? 'refused' : 'allowed',
  });
  to.logger.info(
    {
      ...said.fields,
      upstream: call.upstream,
      model: call.model,
      status: call.status,
      input_tokens: call.input_tokens,
      output_tokens: call.output_tokens,
      ms: call.ms,
      reason: call.reason,
    },
    said.msg,
  );
}
