import fs from 'node:fs';
import net from 'node:net';
import { join } from 'node:path';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import type { Logger } from 'pino';
import { createToolServer } from '../mcp/server.js';
import type { GatewayCaller } from './service.js';
import { GATEWAY_TOOLS } from './tools.js';

export const GATEWAY_SOCKET_NAME = 'gateway.sock';

/**
 * One Unix socket per run, in a directory berth owns (never tenant-writable), bind-mounted into
 * that run's container only. Whoever connects is that run's tenant: identity comes from which
 * socket, never from a parameter. Speaks MCP's stdio framing (newline-delimited JSON-RPC), so
 * an agent CLI reaches it through the image's `berth-bridge` with no network.
 */
export async function openGatewaySocket(opts: { dir: string; caller: GatewayCaller; logger: Logger }): Promise<{ dir: string; close(): Promise<void> }> {
  fs.mkdirSync(opts.dir, { recursive: true, mode: 0o755 });
  const path = join(opts.dir, GATEWAY_SOCKET_NAME);
  const connections = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    connections.add(socket);
    socket.on('close', () => connections.delete(socket));
    socket.on('error', () => socket.destroy());
    const mcp = createToolServer('berth-gateway', GATEWAY_TOOLS, () => opts.caller);
    const transport = new StdioServerTransport(socket, socket);
    // Answer everything asked before the client's half-close, then end the connection.
    let pending = 0;
    let inputEnded = false;
    const maybeEnd = () => {
      if (inputEnded && pending === 0) socket.end();
    };
    void mcp.connect(transport).then(() => {
      const onmessage = transport.onmessage;
      transport.onmessage = (m: JSONRPCMessage) => {
        if ('id' in m && 'method' in m) pending++;
        onmessage?.(m);
      };
      const send = transport.send.bind(transport);
      transport.send = async (m: JSONRPCMessage) => {
        await send(m);
        if ('id' in m && !('method' in m)) {
          pending--;
          maybeEnd();
        }
      };
    });
    socket.on('end', () => {
      inputEnded = true;
      setImmediate(maybeEnd);
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(path, () => resolve());
  });
  fs.chmodSync(path, 0o666); // the agent user connects; the directory, not the mode, confines it
  return {
    dir: opts.dir,
    async close() {
      for (const c of connections) c.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      fs.rmSync(opts.dir, { recursive: true, force: true });
    },
  };
}
