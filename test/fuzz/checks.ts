import type { RawRequest, SendResult } from './http.js';

/** What every answer must respect: the error table (code → status) and the secrets it must not show. */
export interface CheckEnv {
  codes: Map<string, number>;
  secrets: string[];
}

export interface Problem {
  kind: string;
  detail?: string;
}

const STACK = /(?:\n|\\n)\s+at \S+/;
const ERROR_KEYS = new Set(['code', 'message', 'issues', 'hint', 'path', 'rule', 'kind']);

function leaks(text: string, env: CheckEnv): Problem[] {
  const out: Problem[] = [];
  if (env.secrets.some((s) => s && text.includes(s))) out.push({ kind: 'token leaked in the response' });
  if (STACK.test(text)) out.push({ kind: 'stack trace in the response', detail: STACK.exec(text)?.[0] });
  return out;
}

/** Problems with a berth error body `{error: {code, message, issues?, hint?, path?, rule?}}` (undefined: fine). */
export function errorShapeProblem(body: unknown, status: number | undefined, env: CheckEnv): string | undefined {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return 'error body is not an object';
  const keys = Object.keys(body);
  if (keys.length !== 1 || keys[0] !== 'error') return `error body has keys ${JSON.stringify(keys)}, expected only "error"`;
  const e = (body as { error: unknown }).error;
  if (typeof e !== 'object' || e === null || Array.isArray(e)) return '"error" is not an object';
  const err = e as Record<string, unknown>;
  if (typeof err.code !== 'string') return 'error.code is not a string';
  if (typeof err.message !== 'string') return 'error.message is not a string';
  const unknownKeys = Object.keys(err).filter((k) => !ERROR_KEYS.has(k));
  if (unknownKeys.length) return `error has undocumented keys ${JSON.stringify(unknownKeys)}`;
  for (const k of ['hint', 'path', 'rule', 'kind']) if (k in err && typeof err[k] !== 'string') return `error.${k} is not a string`;
  if ('issues' in err) {
    if (!Array.isArray(err.issues)) return 'error.issues is not an array';
    for (const i of err.issues) {
      if (typeof i !== 'object' || i === null || typeof i.field !== 'string' || typeof i.reason !== 'string')
        return `error.issues has an entry that is not {field, reason}: ${JSON.stringify(i).slice(0, 100)}`;
    }
  }
  const expected = env.codes.get(err.code);
  if (expected === undefined) return `unknown error code "${err.code}" (not in ERROR_TABLE)`;
  if (status !== undefined && expected !== status) return `code ${err.code} belongs to HTTP ${expected}, answered with ${status}`;
  return undefined;
}

export function codeOf(text: string): string | undefined {
  try {
    const code = JSON.parse(text)?.error?.code;
    return typeof code === 'string' || typeof code === 'number' ? String(code) : undefined;
  } catch {
    return undefined;
  }
}

/** The HTTP API's contract for one answer. */
export function checkHttp(res: SendResult, req: { mustReject?: string; expectStatus?: number }, env: CheckEnv): Problem[] {
  if ('error' in res) return [{ kind: 'no answer', detail: res.error }];
  const out: Problem[] = [...leaks(res.text, env)];
  const code = codeOf(res.text);
  if (res.status >= 500) out.push({ kind: `${res.status} ${code ?? '(no code)'}`, detail: res.text.slice(0, 300) });
  if (res.status >= 400) {
    let body: unknown;
    try {
      body = JSON.parse(res.text);
    } catch {
      out.push({ kind: `${res.status} error body is not JSON`, detail: res.text.slice(0, 200) });
      return out;
    }
    if (!String(res.headers['content-type'] ?? '').startsWith('application/json'))
      out.push({ kind: `${res.status} error without content-type application/json`, detail: String(res.headers['content-type']) });
    const shape = errorShapeProblem(body, res.status, env);
    if (shape) out.push({ kind: `${res.status} ${code ?? ''} error shape: ${shape}`.replace(/"[^"]{40,}"/g, '"…"') });
  } else if (res.status >= 200 && res.status < 300) {
    if (req.mustReject) out.push({ kind: `${res.status} for invalid input (${req.mustReject})`, detail: res.text.slice(0, 200) });
  }
  // 413/415 refuse the request itself and reveal nothing: they may come before the token check.
  if (req.expectStatus !== undefined && res.status !== req.expectStatus && res.status !== 413 && res.status !== 415) {
    out.push({ kind: `expected ${req.expectStatus}, got ${res.status} ${code ?? ''}` });
  }
  return out;
}

/**
 * The MCP endpoints' contract for one answer: no 5xx, no -32603, tool errors carry berth's error
 * body with a code of the table that is not a 5xx, and arguments that certainly fail the
 * schema are refused with CONFIG_INVALID (tool error) or -32602.
 */
export function checkMcp(res: SendResult, req: { invalidArgs?: string; expectStatus?: number }, env: CheckEnv): Problem[] {
  if ('error' in res) return [{ kind: 'no answer', detail: res.error }];
  const out: Problem[] = [...leaks(res.text, env)];
  if (res.status >= 500) out.push({ kind: `HTTP ${res.status} ${codeOf(res.text) ?? ''}`, detail: res.text.slice(0, 300) });
  if (req.expectStatus !== undefined && res.status !== req.expectStatus)
    out.push({ kind: `expected HTTP ${req.expectStatus}, got ${res.status} ${codeOf(res.text) ?? ''}` });
  if (res.text === '') {
    if (res.status >= 400) out.push({ kind: `HTTP ${res.status} with an empty body` });
    return out;
  }
  let body: unknown;
  try {
    body = JSON.parse(res.text);
  } catch {
    out.push({ kind: `HTTP ${res.status} body is not JSON`, detail: res.text.slice(0, 200) });
    return out;
  }
  // berth's own errors (auth, unknown route) before the MCP transport.
  if (typeof body === 'object' && body !== null && 'error' in body && !('jsonrpc' in body)) {
    const shape = errorShapeProblem(body, res.status, env);
    if (shape) out.push({ kind: `HTTP ${res.status} error shape: ${shape}` });
    if (req.invalidArgs && res.status < 400) out.push({ kind: 'invalid arguments not refused' });
    return out;
  }
  const messages = Array.isArray(body) ? body : [body];
  for (const m of messages) {
    if (typeof m !== 'object' || m === null || (m as { jsonrpc?: unknown }).jsonrpc !== '2.0') {
      out.push({ kind: 'answer is not a JSON-RPC message', detail: JSON.stringify(m).slice(0, 200) });
      continue;
    }
    const msg = m as {
      error?: { code?: unknown; message?: unknown };
      result?: { isError?: boolean; content?: Array<{ type?: string; text?: string }> };
    };
    if (msg.error) {
      if (typeof msg.error.code !== 'number' || typeof msg.error.message !== 'string')
        out.push({ kind: 'JSON-RPC error without a numeric code and a message' });
      else if (msg.error.code === -32603)
        out.push({ kind: 'JSON-RPC -32603 internal error', detail: String(msg.error.message).slice(0, 200) });
      if (req.invalidArgs && msg.error.code !== -32602 && msg.error.code !== -32603)
        out.push({ kind: `invalid arguments answered with JSON-RPC ${String(msg.error.code)} (expected -32602 or CONFIG_INVALID)` });
      continue;
    }
    const result = msg.result;
    if (!result || !Array.isArray(result.content)) {
      if (req.invalidArgs) out.push({ kind: 'invalid arguments not refused' });
      continue;
    }
    if (result.isError) {
      const text = result.content[0]?.text;
      let err: unknown;
      try {
        err = JSON.parse(text ?? '');
      } catch {
        out.push({ kind: 'tool error text is not berth error JSON', detail: String(text).slice(0, 200) });
        continue;
      }
      const shape = errorShapeProblem(err, undefined, env);
      const code = (err as { error?: { code?: string } })?.error?.code ?? '';
      if (shape) out.push({ kind: `tool error shape: ${shape}` });
      else if ((env.codes.get(code) ?? 0) >= 500)
        out.push({ kind: `tool error ${code} (HTTP ${env.codes.get(code)})`, detail: String(text).slice(0, 300) });
      if (req.invalidArgs && code !== 'CONFIG_INVALID')
        out.push({ kind: `invalid arguments answered with tool error ${code} (expected CONFIG_INVALID)` });
    } else if (req.invalidArgs) {
      out.push({ kind: `invalid arguments accepted (${req.invalidArgs})`, detail: res.text.slice(0, 200) });
    }
  }
  return out;
}

/** Failures grouped by operation, then by kind; the first example of each kept for the report. */
export class FailureLog {
  private readonly groups = new Map<string, Map<string, { count: number; example: string; detail?: string }>>();
  total = 0;

  add(op: string, problem: Problem, example: string): void {
    this.total++;
    const byKind = this.groups.get(op) ?? new Map();
    this.groups.set(op, byKind);
    const entry = byKind.get(problem.kind);
    if (entry) entry.count++;
    else byKind.set(problem.kind, { count: 1, example, detail: problem.detail });
  }

  get size(): number {
    return this.total;
  }

  report(header: string): string {
    const lines = [header];
    for (const [op, byKind] of this.groups) {
      lines.push('', `■ ${op}`);
      for (const [kind, e] of byKind) {
        lines.push(`  ✗ ${kind}  ×${e.count}`);
        lines.push(...e.example.split('\n').map((l) => `      ${l}`));
        if (e.detail) lines.push(`      → ${e.detail.replace(/\s+/g, ' ').slice(0, 300)}`);
      }
    }
    return lines.join('\n');
  }
}

/** A request as text for the report: method, path, headers, body (500 characters). Tokens are redacted. */
export function describeRequest(r: RawRequest, secrets: Record<string, string>, note?: string): string {
  const redact = (s: string) =>
    Object.entries(secrets).reduce((acc, [name, value]) => (value ? acc.split(value).join(`<${name}>`) : acc), s);
  const body = r.big
    ? `<${r.big.size} bytes: ${JSON.stringify(r.big.prefix.slice(0, 80))} + ${JSON.stringify(r.big.fill)}… + ${JSON.stringify(r.big.suffix)}>`
    : r.body === undefined
      ? '<no body>'
      : (() => {
          const s = typeof r.body === 'string' ? r.body : r.body.toString('utf8');
          return s.length > 500 ? `${JSON.stringify(s.slice(0, 500))}… (${s.length} chars)` : JSON.stringify(s);
        })();
  const path = r.path.length > 300 ? `${r.path.slice(0, 300)}… (${r.path.length} chars)` : r.path;
  return [
    `${r.method} ${redact(path)}${note ? `    [${note}]` : ''}`,
    `headers: ${redact(r.headers.map(([k, v]) => `${k}: ${v.length > 120 ? `${v.slice(0, 120)}…` : v}`).join(' | ') || '(none)')}`,
    `body: ${redact(body)}`,
  ].join('\n');
}
