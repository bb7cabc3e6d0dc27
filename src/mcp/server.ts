import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { CallToolRequestSchema, ListToolsRequestSchema, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { errorBody, toBerthError } from '../api/error-response.js';
import { parseOrThrow } from '../config/parse.js';
import { BerthError } from '../errors.js';
import { VERSION } from '../version.js';
import type { ToolSpec } from './tools.js';

function jsonSchema(schema: z.ZodType, io: 'input' | 'output') {
  const { $schema: _drop, ...rest } = z.toJSONSchema(schema, { io, target: 'draft-7', unrepresentable: 'any' }) as Record<string, unknown>;
  return rest as { type: 'object'; [k: string]: unknown };
}

/**
 * berth's admin tools over MCP. The low-level server is used on purpose: berth validates the
 * arguments itself, so a bad argument is a tool error carrying CONFIG_INVALID and the fields
 * at fault, like every other surface, instead of the SDK's generic message.
 */
export function createToolServer<C>(name: string, tools: ToolSpec<C>[], context: () => C): Server {
  const server = new Server({ name, version: VERSION }, { capabilities: { tools: {} } });
  const listed = tools.map((t) => ({
    name: t.name,
    description: t.description,
    inputSchema: jsonSchema(t.input, 'input'),
    outputSchema: jsonSchema(t.output, 'output'),
  }));

  server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: listed }));

  server.setRequestHandler(CallToolRequestSchema, async (request): Promise<CallToolResult> => {
    try {
      const spec = tools.find((t) => t.name === request.params.name);
      if (!spec) throw new BerthError('USAGE', `unknown tool "${request.params.name}"`);
      const input = parseOrThrow(spec.input, request.params.arguments ?? {}, `${spec.name} arguments`);
      const output = await spec.run(context(), input as never);
      return { content: [{ type: 'text', text: JSON.stringify(output, null, 2) }], structuredContent: output };
    } catch (err) {
      const e = toBerthError(err);
      return { isError: true, content: [{ type: 'text', text: JSON.stringify(errorBody(e)) }] };
    }
  });
  return server;
}
