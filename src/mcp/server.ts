import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import {
  ErrorCode,
  InitializeRequestSchema,
  ListToolsRequestSchema,
  McpError,
  PingRequestSchema,
  type CallToolResult,
} from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { parseOrThrow, toFieldIssues } from '../config/parse.js';
import { asBerthError, BerthError, errorBody } from '../base/errors.js';
import { VERSION } from '../base/version.js';
import type { ToolSpec } from './tool-spec.js';

function jsonSchema(schema: z.ZodType, io: 'input' | 'output') {
  const { $schema: _drop, ...rest } = z.toJSONSchema(schema, { io, target: 'draft-7', unrepresentable: 'any' }) as Record<string, unknown>;
  return rest as { type: 'object'; [k: string]: unknown };
}

/** tools/list of a tool list, made once (a server is made per HTTP request; JSON Schema is not free). */
const listings = new WeakMap<readonly ToolSpec<never>[], unknown[]>();
function listingOf<C>(tools: ToolSpec<C>[]): unknown[] {
  const key = tools as unknown as readonly ToolSpec<never>[];
  let listed = listings.get(key);
  if (!listed) {
    listed = tools.map((t) => ({
      name: t.name,
      description: t.description,
      inputSchema: jsonSchema(t.input, 'input'),
      annotations: t.annotations,
      ...(t.text ? {} : { outputSchema: jsonSchema(t.output, 'output') }),
    }));
    listings.set(key, listed);
  }
  return listed;
}

/** A tool answer's text (its structuredContent is the same object): one 4 MiB file read, escaped, fits. */
export const MAX_RESULT_BYTES = 6 * 1024 * 1024;

function invalidParams(error: z.ZodError, what: string, prefix = ''): McpError {
  const e = new BerthError('CONFIG_INVALID', `${what} params are invalid`, { issues: toFieldIssues(error, prefix) });
  return new McpError(ErrorCode.InvalidParams, e.toLine(), errorBody(e));
}

/**
 * A JSON-RPC error whose message goes on the wire as written: the SDK sends an error's `message`,
 * and McpError's own carries an "MCP error <code>: " prefix (the client adds that back itself).
 */
function protocolError(code: number, message: string, data: unknown): Error {
  return Object.assign(new Error(message), { code, data });
}

/** Register `handle` for schema's method, validating the whole request itself first. */
function handleChecked(server: Server, schema: z.ZodObject, handle: (request: unknown) => Promise<Record<string, unknown>>): void {
  const method = (schema.shape.method as z.ZodLiteral<string>).value;
  server.setRequestHandler(z.object({ method: z.literal(method) }).loose() as never, async (request: unknown) => {
    const parsed = schema.safeParse(request);
    if (!parsed.success) throw invalidParams(parsed.error, method);
    return handle(parsed.data) as never;
  });
}

/** The envelope of a tools/call; the arguments are each tool's own schema. */
const CallParamsSchema = z.object({
  name: z.string().max(128),
  arguments: z.record(z.string(), z.unknown()).optional(),
  _meta: z.unknown().optional(),
});

/**
 * berth's tools over MCP. tools/call is answered by berth, not the SDK's request schema: a
 * malformed call is JSON-RPC -32602 (invalid params) with berth's error body (CONFIG_INVALID and
 * the fields at fault) as its data, and so is an unknown tool ("Unknown tool: <name>"); arguments that fail a tool's schema are a tool error with
 * the same body, like every other surface. A result is serialized once, compactly, for the text
 * block, and structuredContent carries the same object — except for tools whose answer is one
 * text (a file read), which answer with that text alone.
 */
export function createToolServer<C>(
  name: string,
  tools: ToolSpec<C>[],
  context: () => C,
  opts: { maxResultBytes?: number; onError?: (tool: string, e: BerthError) => void; instructions?: string } = {},
): Server {
  const maxResultBytes = opts.maxResultBytes ?? MAX_RESULT_BYTES;
  const server = new Server(
    { name, version: VERSION },
    { capabilities: { tools: {} }, ...(opts.instructions ? { instructions: opts.instructions } : {}) },
  );
  const byName = new Map(tools.map((t) => [t.name, t]));
  const listed = listingOf(tools);

  // Each request is checked by berth, so malformed params are -32602 with berth's body (the SDK's own parse would answer -32603 and a zod dump).
  const sdk = server as unknown as { _oninitialize(request: unknown): Promise<Record<string, unknown>> };
  handleChecked(server, InitializeRequestSchema, (request) => sdk._oninitialize(request));
  handleChecked(server, PingRequestSchema, async () => ({}));
  handleChecked(server, ListToolsRequestSchema, async () => ({ tools: listed }));

  // Not setRequestHandler(CallToolRequestSchema): the SDK would answer a malformed envelope with
  // -32603 and a raw zod dump before berth sees it.
  server.fallbackRequestHandler = async (request): Promise<CallToolResult> => {
    if (request.method !== 'tools/call')
      throw new McpError(ErrorCode.MethodNotFound, `Method not found: ${String(request.method).slice(0, 100)}`);
    const envelope = CallParamsSchema.safeParse(request.params);
    if (!envelope.success) throw invalidParams(envelope.error, 'tools/call', 'params');
    const spec = byName.get(envelope.data.name);
    // A protocol error, as the MCP spec's own example answers it (-32602 "Unknown tool: <name>"); berth's body rides as data.
    if (!spec) {
      const e = new BerthError('USAGE', `unknown tool "${envelope.data.name}"`, { hint: 'tools/list names them' });
      throw protocolError(ErrorCode.InvalidParams, `Unknown tool: ${envelope.data.name}`, errorBody(e));
    }
    try {
      // The raw arguments, not the envelope's parse (which drops a "__proto__" key unseen).
      const input = parseOrThrow(spec.input, (request.params as { arguments?: unknown }).arguments ?? {}, `${spec.name} arguments`);
      const output = await spec.run(context(), input as never);
      const text = spec.text ? spec.text(output as never) : JSON.stringify(output);
      if (text.length > maxResultBytes) {
        throw new BerthError('PAYLOAD_TOO_LARGE', `the answer of ${spec.name} is larger than ${maxResultBytes} bytes`, {
          hint: 'ask for less at a time',
        });
      }
      return spec.text ? { content: [{ type: 'text', text }] } : { content: [{ type: 'text', text }], structuredContent: output };
    } catch (err) {
      const e = asBerthError(err);
      opts.onError?.(envelope.data.name, e);
      return { isError: true, content: [{ type: 'text', text: JSON.stringify(errorBody(e)) }] };
    }
  };
  return server;
}
