import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import type { Server } from '@modelcontextprotocol/sdk/server/index.js';

/**
 * An MCP client connected to `server` in memory (the SDK's linked transports): the whole
 * protocol (initialize, tools/list, tools/call) with no HTTP and no process. Disposing closes both.
 */
export async function connectInMemory(server: Server): Promise<Client & AsyncDisposable> {
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  const client = new Client({ name: 'berth-test', version: '1' });
  await Promise.all([server.connect(serverSide), client.connect(clientSide)]);
  return Object.assign(client, {
    async [Symbol.asyncDispose]() {
      await client.close();
      await server.close();
    },
  });
}

type CallResult = Awaited<ReturnType<Client['callTool']>>;

/** A tool answer's text block. */
export const textOf = (r: CallResult): string => (r.content as Array<{ type: string; text: string }>)[0]?.text ?? '';

/** A tool error's berth body ({ error: { code, message, ... } }), from its text block. */
export const errorBodyOf = (r: CallResult): { error: { code: string; message: string } & Record<string, unknown> } => JSON.parse(textOf(r));
