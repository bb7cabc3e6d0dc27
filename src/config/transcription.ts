import { z } from 'zod';
import { didYouMean } from '../base/did-you-mean.js';
import type { FieldIssue } from '../base/errors.js';
import { own } from '../base/own.js';
import type { ModelUpstreams } from './outbound.js';

/**
 * berth.yaml `transcription`: where voice notes become text. It names one of berth.yaml's model
 * upstreams (api: openai), so its URL and key are kept where every model key is — in berth.yaml,
 * added by berth on the way out, never seen by a container — and its calls are counted in the
 * tenant's model budget as model calls are (docs/files.md, "Voice notes").
 */
export const TRANSCRIPTION_PATH = '/v1/audio/transcriptions';

export const TranscriptionSchema = z
  .object({
    upstream: z
      .string()
      .min(1)
      .max(32)
      .describe('A name from berth.yaml\'s models with api "openai": its url and api_key are used (the key stays outside containers).'),
    model: z
      .string()
      .min(1)
      .max(128)
      .regex(/^[A-Za-z0-9._:@/-]+$/, 'must be a model name')
      .describe("The transcription model the upstream offers (whisper-1, gpt-4o-mini-transcribe, a local server's name)."),
    path: z
      .string()
      .max(256)
      .regex(/^\/[A-Za-z0-9._~/-]*$/, 'must be a URL path starting with "/", without query or "%"')
      .refine((p) => !p.split('/').includes('..'), 'must not contain ".."')
      .default(TRANSCRIPTION_PATH)
      .describe("Below the upstream's url, where OpenAI's /audio/transcriptions shape is answered."),
    language: z
      .string()
      .regex(/^[a-z]{2,3}$/, 'must be an ISO-639-1 code such as "en"')
      .optional()
      .describe('The language spoken, when known (sent as the `language` hint); none: the upstream detects it.'),
    max_mb: z
      .number()
      .min(0.01)
      .max(25)
      .default(20)
      .describe("A voice note bigger than this is not sent (saved only; the person is told). OpenAI's own limit is 25 MB."),
    timeout_seconds: z
      .number()
      .int()
      .min(1)
      .max(600)
      .default(60)
      .describe('How long the voice notes of one message may take together before the run goes on without the rest.'),
    concurrent: z
      .number()
      .int()
      .min(1)
      .max(64)
      .default(4)
      .describe('Transcriptions in flight at once across all tenants (each tenant has at most 2); more wait for a turn.'),
    tokens_per_minute: z
      .number()
      .int()
      .min(0)
      .max(1_000_000)
      .default(1000)
      .describe(
        "What a minute of audio counts as in the tenant's model budget (tokens_per_hour, tokens_per_day), when the upstream does not report tokens; berth.yaml models.<upstream>.prices price it as input tokens.",
      ),
    tokens_per_request: z
      .number()
      .int()
      .min(0)
      .max(1_000_000)
      .default(0)
      .describe('Tokens each transcription counts as, beside its minutes or reported tokens.'),
  })
  .strict();
export type TranscriptionSettings = z.output<typeof TranscriptionSchema>;

/** The upstream named must be one berth.yaml defines, speaking OpenAI's API (the Bearer key, the multipart shape). */
export function transcriptionIssues(settings: TranscriptionSettings | undefined, models: ModelUpstreams): FieldIssue[] {
  if (!settings) return [];
  const upstream = own(models, settings.upstream);
  if (!upstream)
    return [
      {
        field: 'transcription.upstream',
        reason: `names "${settings.upstream}", which berth.yaml's models does not define${didYouMean(settings.upstream, Object.keys(models))}`,
      },
    ];
  if (upstream.api !== 'openai')
    return [
      {
        field: 'transcription.upstream',
        reason: `names "${settings.upstream}", whose api is ${upstream.api}: transcription needs an "openai" upstream`,
      },
    ];
  return [];
}
