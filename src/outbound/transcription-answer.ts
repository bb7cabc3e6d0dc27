import type { TranscriptionSettings } from '../config/transcription.js';

/**
 * What a transcription upstream answered (OpenAI's /audio/transcriptions with response_format
 * json: `{text, usage?}`, usage `{type: "duration", seconds}` for whisper-1 or `{type: "tokens",
 * input_tokens, output_tokens}` for the gpt-4o transcribe models; an error as `{error: {message,
 * type, code}}`), and what the call counts as in the tenant's budget. Pure.
 */

export type AnswerUsage = { tokens: number } | { seconds: number } | undefined;

export type ReadAnswer =
  | { ok: true; text: string; usage: AnswerUsage; cut: boolean }
  /** `reason`: short, from the status and the error's type or code only (the person reads it); `detail`: the upstream's message, for the log. */
  | { ok: false; reason: string; detail?: string };

/** An audio byte rate to guess a note's length by when the upstream does not say it: 16 kbit/s, a voice note's usual Opus rate. */
export const ESTIMATED_BYTES_PER_SECOND = 2000;

// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;
const TOKEN = /^[A-Za-z0-9_.-]{1,64}$/;

const num = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) && v >= 0 ? v : undefined);
const obj = (v: unknown) => (v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined);

export function readTranscriptionAnswer(status: number, body: string, maxChars: number): ReadAnswer {
  let json: Record<string, unknown> | undefined;
  try {
    json = obj(JSON.parse(body));
  } catch {
    json = undefined;
  }
  if (status < 200 || status > 299) {
    const error = obj(json?.error);
    const named = [error?.code, error?.type].find((v): v is string => typeof v === 'string' && TOKEN.test(v));
    const message = typeof error?.message === 'string' ? error.message.slice(0, 300) : undefined;
    return { ok: false, reason: `it answered HTTP ${status}${named ? ` (${named})` : ''}`, ...(message ? { detail: message } : {}) };
  }
  if (typeof json?.text !== 'string') return { ok: false, reason: 'its answer had no text' };
  // A transcript is words: no control characters (but line breaks and tabs), no reordering marks.
  const clean = json.text.replace(/\r\n?/g, '\n').replace(CONTROL, '').trim();
  const cut = [...clean].length > maxChars;
  return { ok: true, text: cut ? [...clean].slice(0, maxChars).join('') : clean, usage: usageOf(json), cut };
}

function usageOf(json: Record<string, unknown>): AnswerUsage {
  const usage = obj(json.usage);
  if (usage?.type === 'tokens') {
    const total = num(usage.total_tokens) ?? (num(usage.input_tokens) ?? 0) + (num(usage.output_tokens) ?? 0);
    return { tokens: Math.ceil(total) };
  }
  const seconds = usage?.type === 'duration' ? num(usage.seconds) : num(json.duration);
  return seconds !== undefined ? { seconds } : undefined;
}

/**
 * The tokens a transcription counts as: what the upstream reported, else its minutes (reported,
 * else guessed from the bytes) at tokens_per_minute; plus tokens_per_request. A call that failed
 * counts as a request only (the budget's take), as a refused model call does.
 */
export function transcriptionCharge(
  usage: AnswerUsage,
  bytes: number,
  settings: Pick<TranscriptionSettings, 'tokens_per_minute' | 'tokens_per_request'>,
): number {
  if (usage && 'tokens' in usage) return usage.tokens + settings.tokens_per_request;
  const seconds = usage?.seconds ?? bytes / ESTIMATED_BYTES_PER_SECOND;
  return Math.ceil((seconds / 60) * settings.tokens_per_minute) + settings.tokens_per_request;
}
