/**
 * A fake of the Anthropic Messages API that speaks the real wire protocol, for integration
 * tests that run the real Claude Code CLI (`ANTHROPIC_BASE_URL=<fake.url>`) against it.
 *
 * - `POST {prefix}/v1/messages[?beta=true]`: with `stream: true` a `text/event-stream` of the
 *   real events (`message_start`, `ping`, `content_block_start`, `content_block_delta`
 *   (`text_delta` / `input_json_delta`), `content_block_stop`, `message_delta`,
 *   `message_stop`), written and flushed one by one; otherwise the JSON Message object.
 * - `POST {prefix}/v1/messages/count_tokens` → `{ input_tokens }`.
 * - `GET {prefix}/v1/models` → the model list (`{ data: [{ type: "model", id, display_name,
 *   created_at }], has_more, first_id, last_id }`), as the Models API answers.
 * - Anything else → 404 with the API's error shape.
 *
 * Every request is recorded (method, path, query, headers, parsed JSON body). A `reply`
 * callback scripts the answers to "main" turns (requests that carry `tools`: the agent loop);
 * `sideReply` answers the CLI's small side requests (no `tools`: quota probes, titles, topic
 * checks) with short text unless a test overrides it.
 *
 * Only node:http; binds to 127.0.0.1 unless told otherwise.
 *
 * What Claude Code 2.1.330 sends (measured): with `ANTHROPIC_BASE_URL=<url>`,
 * `ANTHROPIC_API_KEY=<key>` and `CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1`, `claude -p` sends
 * only `POST <url>/v1/messages?beta=true` (streaming, `tools` present, key in `x-api-key`), one
 * per agent-loop step; no side requests. Without that variable it also sends
 * `HEAD <url>/api/hello` (answered 404 here; the CLI goes on) and tries api.anthropic.com.
 *
 * @example
 * const fake = await startFakeAnthropic({
 *   reply: perPrompt([bashThenText({ command: 'echo hi > out.txt', text: 'done' }), () => ({ content: 'second' })]),
 * });
 * // run: ANTHROPIC_BASE_URL=fake.url ANTHROPIC_API_KEY=x CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 claude -p --continue …
 * const second = fake.mainTurns().at(-1)!.body as MessagesRequestBody;
 * expect(conversationIncludes(second, 'echo hi > out.txt')).toBe(true); // the first exchange came along
 * await fake.close();
 */
import http from 'node:http';
import { randomBytes } from 'node:crypto';
import zlib from 'node:zlib';
import type { AddressInfo } from 'node:net';

// ---------------------------------------------------------------------------------------------
// Protocol types (the subset the fake reads and writes)

export interface TextBlock {
  type: 'text';
  text: string;
  [k: string]: unknown;
}
export interface ToolUseBlock {
  type: 'tool_use';
  id: string;
  name: string;
  input: Record<string, unknown>;
  [k: string]: unknown;
}
export interface ToolResultBlock {
  type: 'tool_result';
  tool_use_id: string;
  content?: string | Array<{ type: string; text?: string; [k: string]: unknown }>;
  is_error?: boolean;
  [k: string]: unknown;
}
export interface OtherBlock {
  type: string;
  [k: string]: unknown;
}
export type ContentBlock = TextBlock | ToolUseBlock | ToolResultBlock | OtherBlock;

export interface MessageParam {
  /** Claude Code 2.1 also sends `system` messages inside `messages` (environment notes). */
  role: 'user' | 'assistant' | 'system';
  content: string | ContentBlock[];
}

export interface ToolDefinition {
  name: string;
  description?: string;
  input_schema?: unknown;
  [k: string]: unknown;
}

export interface MessagesRequestBody {
  model: string;
  messages: MessageParam[];
  system?: string | Array<{ type: 'text'; text: string; [k: string]: unknown }>;
  tools?: ToolDefinition[];
  stream?: boolean;
  max_tokens?: number;
  metadata?: Record<string, unknown>;
  [k: string]: unknown;
}

export type StopReason = 'end_turn' | 'tool_use' | 'max_tokens' | 'stop_sequence' | 'pause_turn' | 'refusal';

export interface Usage {
  input_tokens: number;
  output_tokens: number;
  cache_creation_input_tokens: number;
  cache_read_input_tokens: number;
}

export interface Message {
  id: string;
  type: 'message';
  role: 'assistant';
  model: string;
  content: Array<TextBlock | ToolUseBlock>;
  stop_reason: StopReason;
  stop_sequence: string | null;
  usage: Usage;
}

// ---------------------------------------------------------------------------------------------
// Recording

export type RequestKind = 'messages' | 'count_tokens' | 'models' | 'other';

export interface RecordedRequest {
  /** 0-based arrival order over every request the fake saw. */
  seq: number;
  method: string;
  /** Request target as sent, e.g. `/v1/messages?beta=true`. */
  url: string;
  /** Path without the query, e.g. `/v1/messages`. */
  path: string;
  query: Record<string, string>;
  /** Lower-cased header names, as node:http gives them (`x-api-key`, `anthropic-version`, …). */
  headers: http.IncomingHttpHeaders;
  rawBody: string;
  /** Parsed JSON body, or undefined when there was none or it was not JSON. */
  body: unknown;
  kind: RequestKind;
  /** A Messages request of the agent loop (`tools` present), as opposed to a side request. */
  main: boolean;
  /** `stream: true` in the body. */
  stream: boolean;
  /** HTTP status the fake answered with (set once answered). */
  status?: number;
  /** The Message the fake answered with (messages requests only). */
  response?: Message;
  at: number;
}

// ---------------------------------------------------------------------------------------------
// Scripting

export type ReplyBlock = { type: 'text'; text: string } | { type: 'tool_use'; name: string; input: Record<string, unknown>; id?: string };

export interface ScriptedReply {
  /** A string is one text block. */
  content: string | ReplyBlock[];
  /** Defaults to `tool_use` when a tool_use block is present, else `end_turn`. */
  stopReason?: StopReason;
  /** Override the echoed model. */
  model?: string;
  inputTokens?: number;
  outputTokens?: number;
  /** Per-reply override of the delay between SSE events. */
  eventDelayMs?: number;
}

export interface ScriptedError {
  error: { status: number; type: string; message: string };
}

export type ReplyResult = ScriptedReply | ScriptedError;

export interface ReplyContext {
  body: MessagesRequestBody;
  request: RecordedRequest;
  /** Whether this is a main turn (`tools` present). */
  main: boolean;
  /** 0-based index among main turns (or among side requests, for sideReply). */
  index: number;
  /** Everything recorded so far, this request included. */
  requests: readonly RecordedRequest[];
}

export type ReplyFn = (ctx: ReplyContext) => ReplyResult | Promise<ReplyResult>;

export interface FakeAnthropicOptions {
  /** Answers main turns. Default: {@link defaultReply}. */
  reply?: ReplyFn;
  /** Answers side requests (no `tools`). Default: {@link defaultSideReply}. */
  sideReply?: ReplyFn;
  /** Delay between SSE events in ms (default 0: still written one by one). */
  eventDelayMs?: number;
  /** Max characters per text_delta / input_json_delta chunk (default 24). */
  chunkSize?: number;
  /** Path prefix the API lives under, e.g. `/anthropic` (default none). */
  pathPrefix?: string;
  /** When set, requests without this key (x-api-key or Bearer) get 401 authentication_error. */
  apiKey?: string;
  host?: string;
  port?: number;
}

export interface FakeAnthropic {
  /** Base URL including the path prefix, e.g. `http://127.0.0.1:41234/anthropic`. */
  url: string;
  port: number;
  /** Live list of every request seen, in arrival order. */
  requests: RecordedRequest[];
  /** Messages requests only. */
  messageRequests(): RecordedRequest[];
  /** Messages requests of the agent loop (`tools` present). */
  mainTurns(): RecordedRequest[];
  /** Messages requests without `tools` (quota probes, titles, …). */
  sideRequests(): RecordedRequest[];
  setReply(fn: ReplyFn): void;
  setSideReply(fn: ReplyFn): void;
  /** Forget recorded requests (and reset main/side counters). */
  reset(): void;
  close(): Promise<void>;
}

// ---------------------------------------------------------------------------------------------
// Helpers for reading requests (usable from tests)

const BASE62 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
function base62(n: number): string {
  const bytes = randomBytes(n);
  let s = '';
  for (const b of bytes) s += BASE62[b % 62];
  return s;
}
/** Ids shaped like the real ones: `msg_01…`, `toolu_01…`, `req_01…`. */
export const newId = (prefix: 'msg' | 'toolu' | 'req'): string => `${prefix}_01${base62(22)}`;

export function isMessagesBody(body: unknown): body is MessagesRequestBody {
  return typeof body === 'object' && body !== null && Array.isArray((body as MessagesRequestBody).messages);
}

/** The parsed Messages body of a recorded request (throws when it is not one). */
export function bodyOf(rec: RecordedRequest): MessagesRequestBody {
  if (!isMessagesBody(rec.body)) throw new Error(`request ${rec.seq} (${rec.method} ${rec.path}) has no Messages body`);
  return rec.body;
}

/** A main turn of the agent loop: the request offers tools. */
export function isMainTurn(body: unknown): boolean {
  return isMessagesBody(body) && Array.isArray(body.tools) && body.tools.length > 0;
}

export function blocksOf(message: MessageParam | undefined): ContentBlock[] {
  if (!message) return [];
  return typeof message.content === 'string' ? [{ type: 'text', text: message.content }] : message.content;
}

export function lastUserMessage(body: MessagesRequestBody): MessageParam | undefined {
  for (let i = body.messages.length - 1; i >= 0; i--) if (body.messages[i]?.role === 'user') return body.messages[i];
  return undefined;
}

/** Text of a tool_result's content (string or blocks). */
export function toolResultText(block: ToolResultBlock): string {
  const c = block.content;
  if (c === undefined) return '';
  if (typeof c === 'string') return c;
  return c.map((b) => (typeof b.text === 'string' ? b.text : '')).join('');
}

/** tool_result blocks of the last user message (empty when the user just typed). */
export function toolResults(body: MessagesRequestBody): ToolResultBlock[] {
  return blocksOf(lastUserMessage(body)).filter((b): b is ToolResultBlock => b.type === 'tool_result');
}

export function hasToolResult(body: MessagesRequestBody): boolean {
  return toolResults(body).length > 0;
}

/** Concatenated text blocks of a message (system reminders included, as the CLI sends them). */
export function textOf(message: MessageParam | undefined): string {
  return blocksOf(message)
    .filter((b): b is TextBlock => b.type === 'text' && typeof b.text === 'string')
    .map((b) => b.text)
    .join('\n');
}

/** Text blocks of a message minus the `<system-reminder>` blocks Claude Code adds: what the user typed. */
export function promptText(message: MessageParam | undefined): string {
  return blocksOf(message)
    .filter((b): b is TextBlock => b.type === 'text' && typeof b.text === 'string' && !b.text.trimStart().startsWith('<system-reminder>'))
    .map((b) => b.text)
    .join('\n');
}

/** The user messages that are typed prompts (not tool results, not bare system reminders), oldest first. */
export function typedPrompts(body: MessagesRequestBody): MessageParam[] {
  return body.messages.filter(
    (m) => m.role === 'user' && !blocksOf(m).some((b) => b.type === 'tool_result') && promptText(m).trim() !== '',
  );
}

/** What the user typed last (the prompt this turn answers), system reminders left out. */
export function lastPrompt(body: MessagesRequestBody): string {
  const prompts = typedPrompts(body);
  return promptText(prompts[prompts.length - 1]);
}

/** Every text the conversation carries: user texts, assistant texts, tool_use inputs (JSON), tool_result texts. */
export function conversationTexts(body: MessagesRequestBody): Array<{ role: string; type: string; text: string }> {
  const out: Array<{ role: string; type: string; text: string }> = [];
  for (const m of body.messages) {
    for (const b of blocksOf(m)) {
      if (b.type === 'text' && typeof b.text === 'string') out.push({ role: m.role, type: 'text', text: b.text });
      else if (b.type === 'tool_use') out.push({ role: m.role, type: 'tool_use', text: JSON.stringify((b as ToolUseBlock).input) });
      else if (b.type === 'tool_result') out.push({ role: m.role, type: 'tool_result', text: toolResultText(b as ToolResultBlock) });
    }
  }
  return out;
}

/** Whether any message of the conversation contains `needle` (in any text, tool input or result). */
export function conversationIncludes(body: MessagesRequestBody, needle: string): boolean {
  return conversationTexts(body).some((t) => t.text.includes(needle));
}

// ---------------------------------------------------------------------------------------------
// Ready-made scripts

/** A tool_use of Claude Code's Bash tool. */
export function bashToolUse(command: string, description = 'Run a command'): ReplyBlock {
  return { type: 'tool_use', name: 'Bash', input: { command, description } };
}

/**
 * The common turn: while the last user message carries no tool_result, ask for Bash with
 * `command`; once the result is back, answer `text` (the result can be checked in `onResult`).
 */
export function bashThenText(opts: {
  command: string;
  description?: string;
  text?: string | ((result: ToolResultBlock) => string);
  onResult?: (result: ToolResultBlock, ctx: ReplyContext) => void;
}): ReplyFn {
  return (ctx) => {
    const results = toolResults(ctx.body);
    const last = results[results.length - 1];
    if (!last) return { content: [bashToolUse(opts.command, opts.description)] };
    opts.onResult?.(last, ctx);
    const text = typeof opts.text === 'function' ? opts.text(last) : (opts.text ?? 'done');
    return { content: text };
  };
}

/**
 * Different scripts for successive typed prompts of one conversation: `scripts[i]` answers
 * every main turn whose conversation holds i+1 typed prompts (tool loops stay within one
 * script). Stateless: a second `claude -p` that really continued the conversation gets
 * `scripts[1]`; one that started afresh gets `scripts[0]` again. The last script repeats.
 */
export function perPrompt(scripts: ReplyFn[]): ReplyFn {
  if (scripts.length === 0) throw new Error('perPrompt needs at least one script');
  return (ctx) => {
    const n = Math.max(0, typedPrompts(ctx.body).length - 1);
    return scripts[Math.min(n, scripts.length - 1)]!(ctx);
  };
}

/** Answers main turn i with replies[i] (the last one repeats). */
export function sequence(replies: ReplyResult[]): ReplyFn {
  if (replies.length === 0) throw new Error('sequence needs at least one reply');
  return (ctx) => replies[Math.min(ctx.index, replies.length - 1)]!;
}

/**
 * Default main-turn script, driven by the prompt: a line `BASH: <command>` in the last typed
 * user message makes the fake ask for Bash with that command; after the tool_result (or
 * without such a line) it answers the text after a `REPLY: ` line, or `done`.
 */
export const defaultReply: ReplyFn = (ctx) => {
  const results = toolResults(ctx.body);
  const prompt = lastPrompt(ctx.body);
  const replyLine = /^REPLY: (.+)$/m.exec(prompt)?.[1];
  const bashLine = /^BASH: (.+)$/m.exec(prompt)?.[1];
  if (bashLine && results.length === 0) return { content: [bashToolUse(bashLine)] };
  return { content: replyLine ?? 'done' };
};

/** Default for side requests: short plain text, or a JSON object when the system prompt asks for JSON. */
export const defaultSideReply: ReplyFn = (ctx) => {
  const system = typeof ctx.body.system === 'string' ? ctx.body.system : (ctx.body.system ?? []).map((b) => b.text).join('\n');
  if (/\bJSON\b/.test(system)) {
    if (/isNewTopic/.test(system)) return { content: '{"isNewTopic": false, "title": null}' };
    if (/"title"/.test(system)) return { content: '{"title": "Fake session"}' };
  }
  return { content: 'Fake session' };
};

// ---------------------------------------------------------------------------------------------
// Server

function estimateTokens(s: string): number {
  return Math.max(1, Math.ceil(s.length / 4));
}

function chunks(s: string, size: number): string[] {
  if (s.length === 0) return [];
  const out: string[] = [];
  for (let i = 0; i < s.length; i += size) out.push(s.slice(i, i + size));
  return out;
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

function readBody(req: http.IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const parts: Buffer[] = [];
    req.on('data', (c: Buffer) => parts.push(c));
    req.on('end', () => resolve(Buffer.concat(parts)));
    req.on('error', reject);
  });
}

function decode(buf: Buffer, encoding: string | undefined): Buffer {
  switch ((encoding ?? '').toLowerCase()) {
    case 'gzip':
    case 'x-gzip':
      return zlib.gunzipSync(buf);
    case 'deflate':
      return zlib.inflateSync(buf);
    case 'br':
      return zlib.brotliDecompressSync(buf);
    default:
      return buf;
  }
}

function isError(r: ReplyResult): r is ScriptedError {
  return 'error' in r;
}

function sendError(res: http.ServerResponse, status: number, type: string, message: string): void {
  const requestId = newId('req');
  const body = JSON.stringify({ type: 'error', error: { type, message }, request_id: requestId });
  res.writeHead(status, { 'content-type': 'application/json', 'request-id': requestId, 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

function buildMessage(body: MessagesRequestBody, reply: ScriptedReply, rawLength: number): Message {
  const specs: ReplyBlock[] = typeof reply.content === 'string' ? [{ type: 'text', text: reply.content }] : reply.content;
  const content: Array<TextBlock | ToolUseBlock> = specs.map((b) =>
    b.type === 'text' ? { type: 'text', text: b.text } : { type: 'tool_use', id: b.id ?? newId('toolu'), name: b.name, input: b.input },
  );
  const stop: StopReason = reply.stopReason ?? (content.some((b) => b.type === 'tool_use') ? 'tool_use' : 'end_turn');
  const outText = content.map((b) => (b.type === 'text' ? b.text : JSON.stringify(b.input))).join('');
  return {
    id: newId('msg'),
    type: 'message',
    role: 'assistant',
    model: reply.model ?? (typeof body.model === 'string' ? body.model : 'claude-sonnet-4-5'),
    content,
    stop_reason: stop,
    stop_sequence: null,
    usage: {
      input_tokens: reply.inputTokens ?? Math.max(1, Math.ceil(rawLength / 4)),
      output_tokens: reply.outputTokens ?? estimateTokens(outText),
      cache_creation_input_tokens: 0,
      cache_read_input_tokens: 0,
    },
  };
}

/** Writes `message` as the real SSE event sequence, one event per write, `delay` ms apart. */
async function streamMessage(res: http.ServerResponse, message: Message, delay: number, chunkSize: number): Promise<void> {
  const requestId = newId('req');
  res.writeHead(200, {
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-cache',
    connection: 'keep-alive',
    'request-id': requestId,
  });
  res.flushHeaders();
  let closed = false;
  res.on('close', () => {
    closed = true;
  });
  const send = async (type: string, data: unknown): Promise<void> => {
    if (closed) return;
    res.write(`event: ${type}\ndata: ${JSON.stringify(data)}\n\n`);
    if (delay > 0) await sleep(delay);
  };

  await send('message_start', {
    type: 'message_start',
    message: { ...message, content: [], stop_reason: null, stop_sequence: null, usage: { ...message.usage, output_tokens: 1 } },
  });
  await send('ping', { type: 'ping' });
  for (const [index, block] of message.content.entries()) {
    if (block.type === 'text') {
      await send('content_block_start', { type: 'content_block_start', index, content_block: { type: 'text', text: '' } });
      for (const piece of chunks(block.text, chunkSize)) {
        await send('content_block_delta', { type: 'content_block_delta', index, delta: { type: 'text_delta', text: piece } });
      }
    } else {
      await send('content_block_start', {
        type: 'content_block_start',
        index,
        content_block: { type: 'tool_use', id: block.id, name: block.name, input: {} },
      });
      // The real API opens with an empty partial_json, then streams the JSON in pieces.
      await send('content_block_delta', { type: 'content_block_delta', index, delta: { type: 'input_json_delta', partial_json: '' } });
      for (const piece of chunks(JSON.stringify(block.input), chunkSize)) {
        await send('content_block_delta', { type: 'content_block_delta', index, delta: { type: 'input_json_delta', partial_json: piece } });
      }
    }
    await send('content_block_stop', { type: 'content_block_stop', index });
  }
  await send('message_delta', {
    type: 'message_delta',
    delta: { stop_reason: message.stop_reason, stop_sequence: message.stop_sequence },
    usage: { output_tokens: message.usage.output_tokens },
  });
  await send('message_stop', { type: 'message_stop' });
  if (!closed) res.end();
}

export async function startFakeAnthropic(opts: FakeAnthropicOptions = {}): Promise<FakeAnthropic> {
  let reply: ReplyFn = opts.reply ?? defaultReply;
  let sideReply: ReplyFn = opts.sideReply ?? defaultSideReply;
  const prefix = (opts.pathPrefix ?? '').replace(/\/+$/, '');
  const delay = opts.eventDelayMs ?? 0;
  const chunkSize = Math.max(1, opts.chunkSize ?? 24);
  const requests: RecordedRequest[] = [];
  let seq = 0;
  let mainCount = 0;
  let sideCount = 0;

  const handle = async (req: http.IncomingMessage, res: http.ServerResponse): Promise<void> => {
    const target = req.url ?? '/';
    const parsed = new URL(target, 'http://fake.invalid');
    const raw = decode(await readBody(req), req.headers['content-encoding'] as string | undefined).toString('utf8');
    let body: unknown;
    if (raw.length > 0) {
      try {
        body = JSON.parse(raw);
      } catch {
        body = undefined;
      }
    }
    const path = parsed.pathname;
    const kind: RequestKind =
      req.method === 'POST' && path === `${prefix}/v1/messages`
        ? 'messages'
        : req.method === 'POST' && path === `${prefix}/v1/messages/count_tokens`
          ? 'count_tokens'
          : req.method === 'GET' && path === `${prefix}/v1/models`
            ? 'models'
            : 'other';
    const rec: RecordedRequest = {
      seq: seq++,
      method: req.method ?? 'GET',
      url: target,
      path,
      query: Object.fromEntries(parsed.searchParams),
      headers: req.headers,
      rawBody: raw,
      body,
      kind,
      main: kind === 'messages' && isMainTurn(body),
      stream: isMessagesBody(body) && body.stream === true,
      at: Date.now(),
    };
    requests.push(rec);
    const answerError = (status: number, type: string, message: string) => {
      rec.status = status;
      sendError(res, status, type, message);
    };

    if (kind === 'other') return answerError(404, 'not_found_error', `Not found: ${req.method} ${path}`);
    if (opts.apiKey !== undefined) {
      const bearer = /^Bearer (.+)$/i.exec(req.headers.authorization ?? '')?.[1];
      if (req.headers['x-api-key'] !== opts.apiKey && bearer !== opts.apiKey) {
        return answerError(401, 'authentication_error', 'invalid x-api-key');
      }
    }
    if (kind === 'models') {
      rec.status = 200;
      const data = [{ type: 'model', id: 'claude-test-1', display_name: 'Claude Test 1', created_at: '2026-01-01T00:00:00Z' }];
      res.writeHead(200, { 'content-type': 'application/json', 'request-id': newId('req') });
      res.end(JSON.stringify({ data, has_more: false, first_id: data[0]!.id, last_id: data[0]!.id }));
      return;
    }
    if (!isMessagesBody(body)) return answerError(400, 'invalid_request_error', 'messages: Field required');
    if (kind === 'count_tokens') {
      rec.status = 200;
      const out = JSON.stringify({ input_tokens: estimateTokens(raw) });
      res.writeHead(200, { 'content-type': 'application/json', 'request-id': newId('req') });
      res.end(out);
      return;
    }

    const ctx: ReplyContext = { body, request: rec, main: rec.main, index: rec.main ? mainCount++ : sideCount++, requests };
    const result = await (rec.main ? reply : sideReply)(ctx);
    if (isError(result)) return answerError(result.error.status, result.error.type, result.error.message);
    const message = buildMessage(body, result, raw.length);
    rec.response = message;
    rec.status = 200;
    if (rec.stream) {
      await streamMessage(res, message, result.eventDelayMs ?? delay, chunkSize);
    } else {
      const out = JSON.stringify(message);
      res.writeHead(200, { 'content-type': 'application/json', 'request-id': newId('req') });
      res.end(out);
    }
  };

  const server = http.createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      if (!res.headersSent) sendError(res, 500, 'api_error', `fake-anthropic: ${err instanceof Error ? err.message : String(err)}`);
      else res.destroy();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, opts.host ?? '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  const host = opts.host ?? '127.0.0.1';

  return {
    url: `http://${host.includes(':') ? `[${host}]` : host}:${port}${prefix}`,
    port,
    requests,
    messageRequests: () => requests.filter((r) => r.kind === 'messages'),
    mainTurns: () => requests.filter((r) => r.kind === 'messages' && r.main),
    sideRequests: () => requests.filter((r) => r.kind === 'messages' && !r.main),
    setReply(fn) {
      reply = fn;
    },
    setSideReply(fn) {
      sideReply = fn;
    },
    reset() {
      requests.length = 0;
      mainCount = 0;
      sideCount = 0;
    },
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.close((err) => (err ? reject(err) : resolve()));
        server.closeAllConnections();
      }),
  };
}
