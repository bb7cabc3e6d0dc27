import { z } from 'zod';
import { didYouMean } from '../base/did-you-mean.js';

/**
 * How a container reaches anything outside: its model (through berth's model gateway, which
 * holds the keys) and, at medium and high, the hosts its project allows (through berth's
 * egress proxy). The operator's half lives in berth.yaml, the project's in metadata.json.
 */

export const UPSTREAM_NAME_PATTERN = /^[a-z0-9][a-z0-9_-]{0,31}$/;
const UpstreamNameSchema = z.string().regex(UPSTREAM_NAME_PATTERN, 'must be 1-32 characters of a-z, 0-9, "_" and "-"');

/** The APIs berth knows how to give a key to and count tokens of. */
export const MODEL_APIS = ['anthropic', 'openai'] as const;
export type ModelApi = (typeof MODEL_APIS)[number];

const PerMillionSchema = z.number().min(0).max(100_000);

/** berth.yaml `models.<name>.prices`: what a million tokens cost, by model name pattern (the first that matches counts). */
export const ModelPricesSchema = z
  .record(
    z
      .string()
      .min(1)
      .max(128)
      .regex(/^[A-Za-z0-9._:@/*-]+$/, 'must be a model name, "*" standing for any characters'),
    z
      .object({
        input: PerMillionSchema.describe('Price of a million input tokens (US dollars), cached ones included.'),
        output: PerMillionSchema.describe('Price of a million output tokens (US dollars).'),
      })
      .strict(),
  )
  .refine((r) => Object.keys(r).length <= 64, 'at most 64 model patterns')
  .optional()
  .describe(
    'Prices per million tokens by model name ("claude-sonnet-*"); the chat shows what an answer cost with them. None: tokens only.',
  );
export type ModelPrices = z.output<typeof ModelPricesSchema>;

/** berth.yaml `models`: upstream name → where it is and the key berth adds (containers never see it). */
export const ModelUpstreamsSchema = z
  .record(
    UpstreamNameSchema,
    z
      .object({
        api: z.enum(MODEL_APIS).describe('anthropic: the key goes in x-api-key; openai: in Authorization: Bearer.'),
        url: z
          .url({ protocol: /^https?$/, error: 'must be an http(s) URL' })
          .refine((u) => !new URL(u).search && !new URL(u).hash, 'must not carry a query or fragment')
          .describe('Base URL of the API, e.g. https://api.anthropic.com'),
        api_key: z.string().min(1).max(4096).describe('The real key; berth adds it to each forwarded call.'),
        prices: ModelPricesSchema,
      })
      .strict(),
  )
  .default({})
  .describe('Model APIs berth forwards to, with their keys; projects name the ones they may use.');
export type ModelUpstreams = z.output<typeof ModelUpstreamsSchema>;

const HOST_LABEL = '[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?';
/** A host name (lowercase, no trailing dot), "*.suffix" for its subdomains, optionally ":port". */
export const HOST_PATTERN = new RegExp(`^(?:\\*\\.)?${HOST_LABEL}(?:\\.${HOST_LABEL})*(?::(?:[1-9][0-9]{0,4}))?$`);

export const HostPatternSchema = z
  .string()
  .max(260)
  .regex(HOST_PATTERN, 'must be a lowercase host name or "*.suffix", optionally with ":port" (no scheme, no path, no IP ranges)')
  .refine((p) => !p.includes(':') || Number(p.slice(p.lastIndexOf(':') + 1)) <= 65535, 'port must be at most 65535');

/** berth.yaml `egress`: what only the operator decides. */
export const OperatorEgressSchema = z
  .object({
    private_hosts: z
      .array(HostPatternSchema)
      .max(256)
      .default([])
      .describe(
        'Hosts the egress proxy may reach although they resolve to private or loopback addresses (an internal mirror); nothing else ever does.',
      ),
    trust_ca_files: z
      .array(
        z
          .string()
          .min(1)
          .max(4096)
          .refine((p) => p.startsWith('/'), 'must be an absolute path'),
      )
      .max(16)
      .default([])
      .describe(
        'PEM files of CAs the egress proxy trusts, beside the public ones, when it verifies a host it adds a secret for (a company CA).',
      ),
  })
  .strict()
  .prefault({});

export const ModelBudgetSchema = z
  .object({
    requests_per_hour: z.number().int().min(1).max(1_000_000).default(200).describe('Model calls one tenant may make in any hour.'),
    tokens_per_hour: z
      .number()
      .int()
      .min(1)
      .max(1_000_000_000)
      .default(2_000_000)
      .describe('Input plus output tokens one tenant may use in any hour.'),
    tokens_per_day: z
      .number()
      .int()
      .min(1)
      .max(100_000_000_000)
      .optional()
      .describe(
        'Input plus output tokens one tenant may use in a day (UTC). At it, a chat message is held until the person (or the operator, as chat.approvals says) allows going past it for the day. None: no daily limit.',
      ),
  })
  .strict();

const ModelPatternSchema = z
  .string()
  .min(1)
  .max(128)
  .regex(/^[A-Za-z0-9._:@/*-]+$/, 'must be a model name, "*" standing for any characters');

/** metadata.json `models`: which upstreams and models this project's agents may call, and each tenant's budget. */
export const ProjectModelsSchema = z
  .object({
    upstreams: z
      .array(UpstreamNameSchema)
      .max(16)
      .default([])
      .describe("Names from berth.yaml's models this project may call (none by default)."),
    allow: z
      .array(ModelPatternSchema)
      .min(1)
      .max(64)
      .default(['*'])
      .describe('Model names allowed, "*" matching any characters (default: any).'),
    budget: ModelBudgetSchema.prefault({}).describe('Per tenant, per rolling hour.'),
  })
  .strict();

/** metadata.json `egress`: the hosts agents at medium and high may reach through berth's proxy. */
export const ProjectEgressSchema = z
  .object({
    allow: z
      .array(HostPatternSchema)
      .max(256)
      .default([])
      .describe(
        'Host names (exact or "*.suffix", optionally ":port"; default ports 80 and 443) agents at medium and high may reach; everything else gets 403.',
      ),
  })
  .strict();

/**
 * A project's model upstreams against berth.yaml's models: the fields at fault (with the closest
 * name it has), so a create or update is refused, never stored to fail in the chat ("Not logged
 * in") at the first message.
 */
export function modelChoiceIssues(
  choice: { models?: { upstreams?: unknown } },
  defined: readonly string[],
): Array<{ field: string; reason: string }> {
  const upstreams = choice.models?.upstreams;
  if (!Array.isArray(upstreams)) return []; // a value of the wrong shape is the schema's to refuse
  return upstreams.flatMap((name, i) =>
    typeof name === 'string' && !defined.includes(name)
      ? [{ field: `models.upstreams.${i}`, reason: `model upstream "${name}" is not one berth.yaml defines${didYouMean(name, defined)}` }]
      : [],
  );
}

/** "*" in a model pattern matches any run of characters; everything else is literal. */
export function modelAllowed(patterns: readonly string[], model: string): boolean {
  return patterns.some((p) => new RegExp(`^${p.split('*').map(escapeRegExp).join('.*')}$`).test(model));
}

/** Does `host:port` match one allowlist entry ("*.x" matches subdomains of x, not x itself). */
export function hostAllowed(patterns: readonly string[], host: string, port: number): boolean {
  const name = host.toLowerCase().replace(/\.$/, '');
  return patterns.some((entry) => {
    const colon = entry.lastIndexOf(':');
    const [pattern, entryPort] = colon >= 0 ? [entry.slice(0, colon), Number(entry.slice(colon + 1))] : [entry, undefined];
    if (entryPort === undefined ? port !== 80 && port !== 443 : port !== entryPort) return false;
    return pattern.startsWith('*.') ? name.endsWith(pattern.slice(1)) : name === pattern;
  });
}

function escapeRegExp(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
