import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http';
import type { ModelApi } from '../config/outbound.js';

/**
 * What the model gateway accepts from a container, decided on the request alone (no I/O): the
 * path, the method, the headers passed on and the body sent; and which of the answer's headers
 * go back. What the upstream gets is rebuilt from what berth checked, never the tenant's bytes, so
 * the two cannot disagree. A call may use only tools the agent runs in its own container: one the
 * provider runs (web search, MCP connectors, code execution, …) would reach the network berth's
 * level withholds and spend outside the budget berth counts.
 */

/** A path segment after %-decoding: unreserved characters only (so it needs no re-encoding). */
const SEGMENT = /^[A-Za-z0-9._~-]+$/;

export type GatewayPath = { ok: true; upstream: string; path: string; query?: string } | { ok: false; reason: string };

/**
 * "/<upstream>/<api path>[?query]", each segment decoded once and checked before anything matches
 * it: no "." or ".." (an upstream's URL parser would resolve them, also from %2e), no empty ones.
 */
export function parseGatewayPath(url: string): GatewayPath {
  const q = url.indexOf('?');
  const raw = q < 0 ? url : url.slice(0, q);
  if (!raw.startsWith('/')) return { ok: false, reason: 'a path starts with "/"' };
  const segments: string[] = [];
  for (const part of raw.slice(1).split('/')) {
    let s: string;
    try {
      s = decodeURIComponent(part);
    } catch {
      return { ok: false, reason: 'a path segment is not valid %-encoding' };
    }
    if (s === '') return { ok: false, reason: 'a path has no empty segments ("//" or a trailing "/")' };
    if (s === '.' || s === '..') return { ok: false, reason: 'a path has no "." or ".." segments (%2e-encoded ones included)' };
    if (!SEGMENT.test(s)) return { ok: false, reason: 'a path segment holds only letters, digits and . _ ~ -' };
    segments.push(s);
  }
  const [upstream = '', ...rest] = segments;
  return { ok: true, upstream, path: `/${rest.join('/')}`, ...(q < 0 ? {} : { query: url.slice(q + 1) }) };
}

/**
 * The endpoints berth forwards, per API: model calls it can check and count (POST, a JSON body
 * naming its model) and the model listings (GET, no body). Batch and file endpoints are not among
 * them (a batch names its models inside and runs thousands of calls).
 */
const MODEL_CALLS: Record<ModelApi, RegExp> = {
  anthropic: /^\/v1\/(messages|messages\/count_tokens)$/,
  openai: /^\/v1\/(responses|chat\/completions|completions|embeddings)$/,
};
const LISTINGS = /^\/v1\/models(\/[A-Za-z0-9._~-]+)?$/;

/** The one method an endpoint takes, or undefined when berth does not forward it at all. */
export function methodOf(api: ModelApi, path: string): 'POST' | 'GET' | undefined {
  if (MODEL_CALLS[api].test(path)) return 'POST';
  if (LISTINGS.test(path)) return 'GET';
  return undefined;
}

/**
 * The request headers berth passes on; every other header a tenant sends stays behind (who is
 * billed — OpenAI-Organization, OpenAI-Project — credentials, cookies, proxy and SDK extras).
 * Anthropic's API refuses calls without anthropic-version, and Claude Code sends anthropic-beta on
 * every call (tool and thinking features fail without it): only the betas of ANTHROPIC_BETAS pass.
 * OpenAI's endpoints berth forwards need no header of their own.
 */
export const FORWARDED_HEADERS: Record<ModelApi, readonly string[]> = {
  anthropic: ['content-type', 'accept', 'user-agent', 'anthropic-version', 'anthropic-beta'],
  openai: ['content-type', 'accept', 'user-agent'],
};

/**
 * The anthropic-beta values passed on, by family (the name before its date), each changing how
 * one call of an allowed model runs, its tokens counted: what Claude Code 2.1.330 sends on every
 * call (measured: claude-code … effort), and what it or earlier versions send for caching,
 * streaming, long context, structured output and token counting. Any other value is dropped (the
 * call goes on without it): betas that make the provider act outside the sandbox (mcp-client,
 * mcp-servers, web-search, web-fetch, code-execution, skills, advisor-tool), reach the
 * organization's stored data (files-api, managed-agents, environments), answer from another model
 * (server-side-fallback) or bill at another rate (fast-mode).
 */
const ANTHROPIC_BETAS = new RegExp(
  `^(${[
    'claude-code',
    'interleaved-thinking',
    'context-management',
    'per-turn-control',
    'mid-conversation-tool-changes',
    'thinking-token-count',
    'advanced-tool-use',
    'effort',
    'claude-code-side-query',
    'mid-conversation-system',
    'redact-thinking',
    'context-1m',
    'structured-outputs',
    'fine-grained-tool-streaming',
    'token-efficient-tools',
    'prompt-caching',
    'extended-cache-ttl',
    'output-128k',
    'token-counting',
  ].join('|')})-(\\d{8}|\\d{4}-\\d{2}-\\d{2})$`,
);

export function forwardedHeaders(api: ModelApi, incoming: IncomingHttpHeaders): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of FORWARDED_HEADERS[api]) {
    const value = incoming[name];
    if (typeof value !== 'string') continue;
    if (name !== 'anthropic-beta') out[name] = value;
    else {
      const kept = value
        .split(',')
        .map((beta) => beta.trim())
        .filter((beta) => ANTHROPIC_BETAS.test(beta));
      if (kept.length > 0) out[name] = kept.join(',');
    }
  }
  return out;
}

/**
 * The answer's headers that stay with berth: hop-by-hop ones, cookies, whose account the upstream
 * billed (the operator's organization and project) and that account's rate limits (what is left of
 * them tells one tenant how much the others use; a tenant's own limit is berth's budget).
 */
const WITHHELD_ANSWER_HEADERS = new Set([
  'connection',
  'keep-alive',
  'transfer-encoding',
  'trailer',
  'upgrade',
  'set-cookie',
  'openai-organization',
  'openai-project',
  'anthropic-organization-id',
]);
const WITHHELD_ANSWER_PREFIXES = /^(x-ratelimit-|anthropic-ratelimit-)/;

export function returnedHeaders(incoming: IncomingHttpHeaders): OutgoingHttpHeaders {
  const out: OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(incoming)) {
    if (value !== undefined && !WITHHELD_ANSWER_HEADERS.has(name) && !WITHHELD_ANSWER_PREFIXES.test(name)) out[name] = value;
  }
  return out;
}

export type ModelBody = { ok: true; model: string; json: string } | { ok: false; reason: string };

/**
 * A model call's body: one JSON object naming its "model", at most `maxDepth` levels deep, using
 * only tools the agent runs in its sandbox. What goes upstream is the parsed object serialized
 * again, so a duplicate key cannot make berth check one model and the upstream bill another
 * (JSON.parse keeps the last; some parsers keep the first). The text goes out as a string: Node
 * encodes it while writing and frees that copy when the write is done.
 */
export function parseModelBody(api: ModelApi, path: string, bytes: Buffer, maxDepth: number): ModelBody {
  const refused = { ok: false, reason: 'a model call is one JSON object naming its "model"' } as const;
  let parsed: unknown;
  try {
    parsed = JSON.parse(bytes.toString('utf8'));
  } catch {
    return refused;
  }
  if (!isRecord(parsed) || typeof parsed.model !== 'string') return refused;
  if (nestsDeeperThan(parsed, maxDepth)) return { ok: false, reason: `a model call nests at most ${maxDepth} levels deep` };
  const outside = findProviderRun(api, parsed);
  if (outside !== undefined) return { ok: false, reason: outside };
  return { ok: true, model: parsed.model, json: JSON.stringify(withUsageRequested(api, path, parsed)) };
}

/**
 * Tool types the agent runs itself, in its container (the provider only names the call). An
 * allowlist: a type the provider adds later is refused until it is known to run on the agent's side.
 */
const AGENT_TOOLS: Record<ModelApi, { allows: (type: unknown) => boolean; names: string }> = {
  // Tools the client defines (no type, or "custom") and Anthropic's client built-ins, any version.
  anthropic: {
    allows: (type) =>
      type === undefined || type === 'custom' || (typeof type === 'string' && /^(bash|text_editor|computer|memory)_\d{8}$/.test(type)),
    names: 'no type, custom, bash_*, text_editor_*, computer_*, memory_*',
  },
  // Functions, free-form custom tools, the local shell and patch tools Codex runs; a namespace groups functions.
  openai: {
    allows: (type) => type === 'function' || type === 'custom' || type === 'local_shell' || type === 'apply_patch' || type === 'namespace',
    names: 'function, custom, local_shell, apply_patch, namespace',
  },
};

/** Body fields that make the provider act on its own, refused whenever they are used. */
const PROVIDER_FIELDS: Record<ModelApi, Record<string, string>> = {
  anthropic: {
    mcp_servers: 'the provider would connect to these MCP servers itself; berth allows only tools the agent runs in its sandbox',
    container: 'a code-execution container runs at the provider; berth allows only tools the agent runs in its sandbox',
  },
  openai: {
    background: 'a background response is fetched later, with no usage berth can count against the budget',
    web_search_options: 'the provider would search the web itself; berth allows only tools the agent runs in its sandbox',
  },
};

/**
 * Why a call would have the provider act outside the agent's sandbox — a provider-run tool, a
 * field in PROVIDER_FIELDS, an input it fetches from a URL — naming the field; undefined when
 * it would not.
 */
export function findProviderRun(api: ModelApi, call: Record<string, unknown>): string | undefined {
  const tool = toolOutsideSandbox(api, call.tools, 'tools', false);
  if (tool !== undefined) return tool;
  for (const [field, why] of Object.entries(PROVIDER_FIELDS[api])) if (used(call[field])) return `${field}: ${why}`;
  for (const list of api === 'anthropic' ? ['system', 'messages'] : ['input', 'messages']) {
    const fetched = fetchedInput(call[list], list);
    if (fetched !== undefined) return `${fetched}: the provider would fetch this URL itself; send the data inline instead`;
  }
  return undefined;
}

function toolOutsideSandbox(api: ModelApi, tools: unknown, at: string, inNamespace: boolean): string | undefined {
  if (tools === undefined || tools === null) return undefined;
  if (!Array.isArray(tools)) return `${at} is a list of tool definitions`;
  const agent = AGENT_TOOLS[api];
  for (const [i, tool] of tools.entries()) {
    if (!isRecord(tool)) return `${at}[${i}] is not a tool definition`;
    if (!agent.allows(tool.type) || (inNamespace && tool.type === 'namespace')) {
      const shown = tool.type === undefined ? '(none)' : String(JSON.stringify(tool.type)).slice(0, 100);
      return `${at}[${i}].type ${shown} is not one berth forwards: berth allows only tools the agent runs in its sandbox (${agent.names}), none the provider runs`;
    }
    if (tool.type === 'namespace') {
      const inner = toolOutsideSandbox(api, tool.tools, `${at}[${i}].tools`, true);
      if (inner !== undefined) return inner;
    }
  }
  return undefined;
}

/** A field is used unless absent, null, false or an empty list. */
const used = (value: unknown) => value !== undefined && value !== null && value !== false && !(Array.isArray(value) && value.length === 0);

/**
 * Where a conversation hands the provider a URL to fetch: an Anthropic block with a "url" source,
 * an OpenAI part with an image_url that is not a data: URL, or a file_url. Blocks are looked for
 * where inputs live (a list's items, their content and output, a tool result's content), never in
 * the model's own tool inputs.
 */
function fetchedInput(items: unknown, at: string): string | undefined {
  if (!Array.isArray(items)) return undefined;
  for (const [i, item] of items.entries()) {
    const found = fetchedBy(item, `${at}[${i}]`);
    if (found !== undefined) return found;
    if (!isRecord(item)) continue;
    for (const key of ['content', 'output']) {
      const parts = item[key];
      if (!Array.isArray(parts)) continue;
      for (const [j, part] of parts.entries()) {
        const where = `${at}[${i}].${key}[${j}]`;
        const inPart = fetchedBy(part, where) ?? (isRecord(part) ? fetchedInput(part.content, `${where}.content`) : undefined);
        if (inPart !== undefined) return inPart;
      }
    }
  }
  return undefined;
}

function fetchedBy(part: unknown, at: string): string | undefined {
  if (!isRecord(part)) return undefined;
  if (isRecord(part.source) && part.source.type === 'url') return `${at}.source`;
  // The Responses API puts an image's URL in image_url, chat completions in image_url.url.
  const image = part.image_url;
  const url = isRecord(image) ? image.url : image;
  if (typeof url === 'string' && !/^data:/i.test(url)) return isRecord(image) ? `${at}.image_url.url` : `${at}.image_url`;
  if (typeof part.file_url === 'string') return `${at}.file_url`;
  return undefined;
}

/**
 * Whether `value` nests more than `max` objects and arrays deep. A loop holding one iterator per
 * level it is in (never more than `max`), so any depth and any width are safe to ask about.
 */
function nestsDeeperThan(value: object, max: number): boolean {
  const levels: Array<Iterator<unknown>> = [childrenOf(value)];
  while (levels.length > 0) {
    const next = levels[levels.length - 1]!.next();
    if (next.done) levels.pop();
    else if (typeof next.value === 'object' && next.value !== null) {
      if (levels.length === max) return true;
      levels.push(childrenOf(next.value));
    }
  }
  return false;
}

const childrenOf = (node: object): Iterator<unknown> => (Array.isArray(node) ? node : Object.values(node))[Symbol.iterator]();

const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

/**
 * An OpenAI chat stream reports usage only when asked: berth asks, so a tenant who leaves it out
 * is still counted. Other bodies pass unchanged.
 */
function withUsageRequested(api: ModelApi, path: string, call: { stream?: unknown; stream_options?: unknown }): object {
  if (api !== 'openai' || path !== '/v1/chat/completions' || call.stream !== true) return call;
  const options = typeof call.stream_options === 'object' && call.stream_options !== null ? call.stream_options : {};
  return { ...call, stream_options: { ...options, include_usage: true } };
}
