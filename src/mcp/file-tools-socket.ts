import net from 'node:net';
import type { Logger } from 'pino';
import { GATEWAY_BOUNDS } from '../config/bounds.js';
import type { FileToolsCaller } from '../file-tools/service.js';
import { FILE_TOOLS } from './file-tools.js';
import { errorLine, LineTransport } from './line-transport.js';
import { createToolServer } from './server.js';
import { listenOnRunSocket } from '../outbound/unix-server.js';

/** Connections of every run's socket in this process (GATEWAY_BOUNDS.connectionsTotal). */
let openConnections = 0;

/**
 * One Unix socket per run, in a directory berth owns (never tenant-writable), bind-mounted into
 * that run's container only. Whoever connects is that run's tenant: identity comes from which
 * socket, never from a parameter. Speaks MCP's stdio framing (newline-delimited JSON-RPC), so
 * an agent CLI reaches it through the image's `berth-bridge` with no network. Everything a
 * connection can make berth hold is bounded (GATEWAY_BOUNDS); a failing connection only ever
 * ends itself.
 */
export async function openFileToolsSocket(opts: {
  path: string;
  caller: FileToolsCaller;
  logger: Logger;
  /** Why this run gets no file tools (its workspace is not berth's host copy: launcher kubernetes); the server lists none and says so. */
  withoutFiles?: string;
}): Promise<{ close(): Promise<void> }> {
  const connections = new Set<net.Socket>();
  // allowHalfOpen: a client that half-closes after its requests (berth-bridge at EOF) still gets every answer.
  const server = net.createServer({ pauseOnConnect: true, allowHalfOpen: true }, (socket) => {
    socket.on('error', () => socket.destroy());
    if (connections.size >= GATEWAY_BOUNDS.connectionsPerRun || openConnections >= GATEWAY_BOUNDS.connectionsTotal) {
      opts.logger.warn({ open: connections.size, total: openConnections }, 'gateway connection refused: too many');
      // Say why, then reset: a client blocked writing into an unread socket sees the error at once.
      socket.resume();
      socket.end(errorLine(null, -32000, `BUSY: at most ${GATEWAY_BOUNDS.connectionsPerRun} gateway connections per run`), () =>
        socket.destroy(),
      );
      return;
    }
    connections.add(socket);
    openConnections++;
    socket.once('close', () => {
      connections.delete(socket);
      openConnections--;
    });
    const mcp = createToolServer('berth-gateway', opts.withoutFiles ? [] : FILE_TOOLS, () => opts.caller, {
      instructions: opts.withoutFiles,
    });
    mcp.connect(new LineTransport(socket, GATEWAY_BOUNDS)).catch((err: unknown) => {
      opts.logger.warn({ err: String(err) }, 'gateway connection failed');
      socket.destroy();
    });
  });
  server.on('error', (err) => opts.logger.warn({ err: String(err) }, 'gateway socket error'));
  const listening = await listenOnRunSocket(server, opts.path);
  return {
    async close() {
      await listening.close();
      opts.caller.close(); // the scope roots its calls kept open
    },
  };
}
