import { z } from 'zod';
import { own } from '../base/own.js';
import { HostPatternSchema } from './outbound.js';

/**
 * Brokered secrets (berth.yaml `secrets`): values berth keeps and its egress proxy adds to a
 * granted project's HTTPS requests, outside the container. A container sees only a placeholder
 * in an environment variable of the secret's name. Shapes and pure matching here; reading the
 * values is store/secret-values.ts, injecting them outbound/egress-proxy.ts.
 */
export const SECRET_NAME_PATTERN = /^[A-Z][A-Z0-9_]{0,63}$/;

/** Variables berth or the runtime set itself: a secret of that name would shadow them. */
const RESERVED =
  /^(PATH|HOME|USER|SHELL|TERM|PWD|HOSTNAME|LANG|TZ|TMPDIR|NO_PROXY|HTTPS?_PROXY|ALL_PROXY|SSL_CERT_FILE|SSL_CERT_DIR|NODE_.*|REQUESTS_CA_BUNDLE|CURL_CA_BUNDLE|GIT_.*|LD_.*|BERTH_.*|ANTHROPIC_.*|OPENAI_.*|CLAUDE_.*|CODEX_.*)$/;

export const SecretNameSchema = z
  .string()
  .regex(SECRET_NAME_PATTERN, 'must be an environment variable name: A-Z, 0-9 and "_", starting with a letter, at most 64 characters')
  .refine(
    (n) => !RESERVED.test(n),
    'is a variable berth or the container sets itself (PATH, HOME, proxies, CA bundles, NODE_*, GIT_*, BERTH_*, model keys)',
  );

const HEADER_NAME = /^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,64}$/;
/** Headers a grant may not set: the proxy owns the connection and the host it talks to. */
const HOP_HEADERS = new Set([
  'host',
  'connection',
  'content-length',
  'transfer-encoding',
  'upgrade',
  'proxy-authorization',
  'te',
  'trailer',
  'keep-alive',
  'proxy-connection',
]);

export const SECRET_METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'] as const;

export const SecretGrantSchema = z
  .object({
    project: z
      .string()
      .min(1)
      .max(128)
      .describe('The project whose agents may use the secret (through the egress proxy, at levels medium and high).'),
    host: HostPatternSchema.describe(
      'Destination host, exact or "*.suffix" (subdomains only), optionally ":port" (default 443). Only HTTPS requests get the secret.',
    ),
    path_prefix: z
      .string()
      .max(512)
      .regex(/^\/[\x21-\x7e]*$/, 'must start with "/" and hold no spaces or control characters')
      .optional()
      .describe('Only requests whose path starts with this (default: any path).'),
    methods: z.array(z.enum(SECRET_METHODS)).min(1).max(SECRET_METHODS.length).optional().describe('Only these methods (default: any).'),
    header: z
      .string()
      .regex(HEADER_NAME, 'must be an HTTP header name')
      .refine((h) => !HOP_HEADERS.has(h.toLowerCase()), 'is a header the proxy sets itself')
      .default('Authorization')
      .describe('The request header the secret goes in.'),
    format: z
      .string()
      .max(256)
      .refine((f) => f.split('{}').length === 2, 'must hold "{}" exactly once, where the secret goes')
      .optional()
      .describe(
        'The header\'s value, "{}" standing for the secret: "token {}", "{}" (a custom header); default "Bearer {}", or "Basic {}" with basic_user, where "{}" is the Basic credential.',
      ),
    basic_user: z
      .string()
      .min(1)
      .max(128)
      .regex(/^[^:\s]+$/, 'must hold no ":" or spaces')
      .optional()
      .describe(
        'Send HTTP Basic auth, this user name and the secret as password (git over HTTPS: x-access-token); format then defaults to "Basic {}".',
      ),
    per_tenant_per_minute: z
      .number()
      .int()
      .min(1)
      .max(100_000)
      .optional()
      .describe('At most this many requests with the secret per tenant per minute (default: no limit); past it, 429.'),
    ask: z
      .enum(['never', 'first_use'])
      .default('never')
      .describe(
        "first_use: the first request of a conversation that would carry the secret waits until its person (or the operator, as the project's chat.approvals says) allows it: once (this message) or for the conversation; no answer is no. never: it is added without asking.",
      ),
  })
  .strict();
export type SecretGrant = z.output<typeof SecretGrantSchema>;

export const SecretEntrySchema = z
  .object({
    file: z
      .string()
      .min(1)
      .max(4096)
      .optional()
      .describe("Absolute path of a file holding the value (mode 0600 or stricter, owned by berth's user); read again when it changes."),
    env: z
      .string()
      .regex(/^[A-Za-z_][A-Za-z0-9_]*$/)
      .max(128)
      .optional()
      .describe("An environment variable of berth's own process holding the value."),
    command: z
      .array(z.string().min(1).max(4096))
      .min(1)
      .max(64)
      .optional()
      .describe('A command (argv, no shell) that prints the value; run at most once every refresh_seconds, 10 s at most.'),
    refresh_seconds: z
      .number()
      .int()
      .min(1)
      .max(86_400)
      .default(300)
      .describe("How long a command's value is kept before it is asked again."),
    grants: z.array(SecretGrantSchema).max(64).default([]).describe('Which projects may use it, toward which hosts, and how it is sent.'),
  })
  .strict()
  .refine((e) => [e.file, e.env, e.command].filter((x) => x !== undefined).length === 1, {
    message: 'give exactly one of file, env or command',
    path: ['file'],
  })
  .refine((e) => e.file === undefined || e.file.startsWith('/'), { message: 'must be an absolute path', path: ['file'] });
export type SecretEntry = z.output<typeof SecretEntrySchema>;

export const SecretsSchema = z
  .record(SecretNameSchema, SecretEntrySchema)
  .default({})
  .describe(
    'Credentials berth keeps and its egress proxy adds to granted HTTPS requests; a container sees only a placeholder (docs/secrets.md).',
  );
export type Secrets = z.output<typeof SecretsSchema>;

/** What a container finds in the secret's variable: berth swaps in the value outside, for granted requests only. */
export function placeholderOf(name: string): string {
  return `berth-placeholder-${name}`;
}

/** A placeholder anywhere in a text: the secret it stands for. */
export const PLACEHOLDER_PATTERN = /berth-placeholder-([A-Z][A-Z0-9_]{0,63})/g;

export interface GrantedUse {
  name: string;
  grant: SecretGrant;
}

function hostMatches(pattern: string, host: string, port: number): boolean {
  const colon = pattern.lastIndexOf(':');
  const [name, entryPort] = colon >= 0 ? [pattern.slice(0, colon), Number(pattern.slice(colon + 1))] : [pattern, 443];
  if (port !== entryPort) return false;
  return name.startsWith('*.') ? host.endsWith(name.slice(1)) : host === name;
}

/** Every grant of every secret to this project, toward this host:port. Pure. */
export function grantsToward(secrets: Secrets, project: string, host: string, port: number): GrantedUse[] {
  const name = host.toLowerCase().replace(/\.$/, '');
  return Object.entries(secrets).flatMap(([secret, entry]) =>
    entry.grants.filter((g) => g.project === project && hostMatches(g.host, name, port)).map((grant) => ({ name: secret, grant })),
  );
}

/**
 * A path as every server reads it alike: no dot segments (plain or escaped), no encoded or back
 * slashes, no ";" (Tomcat and Jetty read "/acme/..;/admin" as "/admin"), no escape of "%" itself,
 * of a control character or of anything outside ASCII, no "%u". "/acme/../admin" starts with
 * "/acme/" but is "/admin" to the server: such a path is covered by no path-prefix grant.
 */
export function isCanonicalPath(path: string): boolean {
  if (!path.startsWith('/') || !/^[\x21-\x7e]*$/.test(path) || /[;\\]|%(2f|5c|3b|25|2e|[01][0-9a-f]|7f|[89a-f][0-9a-f])|%u/i.test(path))
    return false;
  try {
    return new URL(path, 'https://berth.invalid').pathname === path;
  } catch {
    return false;
  }
}

/** The request's path (no query) and method against a grant. Pure. */
export function grantCovers(grant: SecretGrant, method: string, path: string): boolean {
  if (grant.methods && !grant.methods.includes(method as (typeof SECRET_METHODS)[number])) return false;
  return grant.path_prefix === undefined || (isCanonicalPath(path) && path.startsWith(grant.path_prefix));
}

/** Names of the secrets a project holds any grant of (their placeholders go in its environment). */
export function secretsGrantedTo(secrets: Secrets, project: string): string[] {
  return Object.entries(secrets)
    .filter(([, entry]) => entry.grants.some((g) => g.project === project))
    .map(([name]) => name)
    .sort();
}

/** The header value a grant sends for a value. */
export function headerValueOf(grant: SecretGrant, value: string): string {
  if (grant.basic_user === undefined) return (grant.format ?? 'Bearer {}').replace('{}', () => value);
  const credential = Buffer.from(`${grant.basic_user}:${value}`).toString('base64');
  return (grant.format ?? 'Basic {}').replace('{}', () => credential);
}

/** The secret's own entry, by own property only. */
export function secretEntry(secrets: Secrets, name: string): SecretEntry | undefined {
  return own(secrets, name);
}
