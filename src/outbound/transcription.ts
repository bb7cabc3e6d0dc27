import type { Logger } from 'pino';
import { noMetrics, type Metrics } from '../base/metrics.js';
import { own } from '../base/own.js';
import { createSlots } from '../base/slots.js';
import type { BerthConfig } from '../config/berth-config.js';
import { TRANSCRIPTION_BOUNDS } from '../config/bounds.js';
import type { TranscriptionSettings } from '../config/transcription.js';
import type { ModelCall } from '../store/outbound-log.js';
import { noteModelCall, upstreamKeyHeaders, upstreamUrl } from './model-upstream.js';
import type { BudgetLimits } from './budget.js';
import type { BudgetOwner, TenantBudgets } from './tenant-budgets.js';
import { readTranscriptionAnswer, transcriptionCharge } from './transcription-answer.js';

/**
 * berth's own call to the transcription upstream (berth.yaml `transcription`) for a voice note
 * that landed in a tenant's inbox/: OpenAI's multipart /audio/transcriptions (file, model,
 * response_format=json), the upstream's key added here (no container holds it), bounded in size
 * (max_mb), time (the caller's signal), in flight per tenant and in all (waiting its turn), taken
 * from the tenant's hourly model budget and written to the outbound log as a model call, so the
 * daily budget and the chat's cost line count it too.
 */

export interface VoiceNoteAudio {
  /** The saved name (its extension tells the upstream the format). */
  name: string;
  mime: string;
  data: Uint8Array;
}

export interface TranscriptionCaller extends BudgetOwner {
  runId: string;
  session: string;
  /** The project's models.budget. */
  budget: BudgetLimits;
}

/** Why a note has no text: no upstream here; over max_mb; the tenant's budget spent; the call failed or ran out of time. */
export type TranscriptionRefusal = 'off' | 'too_big' | 'budget' | 'failed';

export type Transcription =
  | { ok: true; text: string; cut: boolean }
  /** `reason`: words a chat user reads after "could not be transcribed: ". */
  | { ok: false; why: TranscriptionRefusal; reason: string };

export interface Transcriber {
  transcribe(note: VoiceNoteAudio, caller: TranscriptionCaller, signal: AbortSignal): Promise<Transcription>;
}

export function createTranscriber(deps: {
  config: () => BerthConfig;
  logger: Logger;
  budgets: TenantBudgets;
  metrics?: Metrics;
}): Transcriber {
  const metrics = deps.metrics ?? noMetrics();
  const slots = createSlots(() => ({ perKey: TRANSCRIPTION_BOUNDS.perTenant, total: deps.config().transcription?.concurrent ?? 1 }));

  function record(
    caller: TranscriptionCaller,
    s: TranscriptionSettings,
    call: Pick<ModelCall, 'status' | 'input_tokens' | 'ms' | 'reason'>,
  ) {
    noteModelCall(
      { sessionsDir: caller.sessionsDir, logger: deps.logger, metrics },
      {
        kind: 'model',
        at: new Date().toISOString(),
        run: caller.runId,
        tenant: caller.tenantKey,
        session: caller.session,
        upstream: s.upstream,
        model: s.model,
        output_tokens: 0,
        ...call,
      },
      { msg: 'transcription', fields: { project: caller.project, run: caller.runId } },
    );
  }

  return {
    async transcribe(note, caller, signal) {
      const config = deps.config();
      const s = config.transcription;
      if (!s) return { ok: false, why: 'off', reason: 'voice is not enabled here' };
      const upstream = own(config.models, s.upstream);
      if (!upstream) return { ok: false, why: 'failed', reason: 'the transcription service is not set up' };
      if (note.data.byteLength > s.max_mb * 1024 * 1024) return { ok: false, why: 'too_big', reason: `it is bigger than ${s.max_mb} MB` };
      let release: (() => void) | undefined;
      try {
        release = await slots.take(`${caller.project}\0${caller.tenantKey}`, signal);
      } catch {
        return { ok: false, why: 'failed', reason: `it took longer than ${s.timeout_seconds} s` };
      }
      const started = performance.now();
      const ms = () => Math.round(performance.now() - started);
      try {
        const verdict = deps.budgets.take(caller, caller.budget);
        if (!verdict.ok) {
          const reason = `this tenant's model budget (${verdict.reason}) is spent; it frees up in ${verdict.retryAfterS} s`;
          record(caller, s, { status: 429, input_tokens: 0, ms: 0, reason });
          return { ok: false, why: 'budget', reason };
        }
        const form = new FormData();
        form.append('file', new Blob([note.data as Uint8Array<ArrayBuffer>], { type: note.mime }), note.name);
        form.append('model', s.model);
        form.append('response_format', 'json');
        if (s.language) form.append('language', s.language);
        const url = upstreamUrl(upstream, s.path);
        let status: number;
        let body: string;
        try {
          const res = await fetch(url, {
            method: 'POST',
            headers: upstreamKeyHeaders(upstream),
            body: form,
            signal,
            redirect: 'manual',
          });
          status = res.status;
          body = await boundedText(res, TRANSCRIPTION_BOUNDS.maxAnswerBytes);
        } catch (err) {
          const why = signal.aborted ? `it took longer than ${s.timeout_seconds} s` : 'the transcription service could not be reached';
          const detail = (err as { cause?: { code?: string } }).cause?.code ?? (err as Error).message;
          record(caller, s, { status: 502, input_tokens: 0, ms: ms(), reason: `${why} (${String(detail).slice(0, 200)})` });
          return { ok: false, why: 'failed', reason: why };
        }
        const answer = readTranscriptionAnswer(status, body, TRANSCRIPTION_BOUNDS.maxTranscriptChars);
        if (!answer.ok) {
          // The upstream's own words go to the operator's log only, never with the key.
          const detail = answer.detail?.split(upstream.api_key).join('[key]');
          record(caller, s, {
            status: status >= 200 && status < 300 ? 502 : status,
            input_tokens: 0,
            ms: ms(),
            reason: `${answer.reason}${detail ? `: ${detail}` : ''}`,
          });
          return { ok: false, why: 'failed', reason: `the transcription service failed (${answer.reason})` };
        }
        const tokens = transcriptionCharge(answer.usage, note.data.byteLength, s);
        deps.budgets.spend(caller, tokens);
        record(caller, s, { status, input_tokens: tokens, ms: ms() });
        return { ok: true, text: answer.text, cut: answer.cut };
      } finally {
        release();
      }
    },
  };
}

/** The answer's text, at most `max` bytes: past it, nothing (a transcript is far smaller; a bigger answer is not one). */
async function boundedText(res: Response, max: number): Promise<string> {
  if (!res.body) return '';
  const chunks: Uint8Array[] = [];
  let size = 0;
  const reader = res.body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return Buffer.concat(chunks).toString('utf8');
    size += value.byteLength;
    if (size > max) {
      await reader.cancel().catch(() => undefined);
      return '';
    }
    chunks.push(value);
  }
}
