import fs from 'node:fs';
import net from 'node:net';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { GATEWAY_BOUNDS } from '../config/bounds.js';
import type { GatewayCaller } from '../gateway/service.js';
import { GATEWAY_TOOLS } from './gateway-tools.js';
import { errorLine, LineTransport } from './line-transport.js';
import { createToolServer } from './server.js';

export const GATEWAY_SOCKET_NAME = 'gateway.sock';

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
export async function openGatewaySocket(opts: { dir: string; caller: GatewayCaller; logger: Logger }): Promise<{ dir: string; close(): Promise<void> }> {
  fs.mkdirSync(opts.dir, { recursive: true, mode: 0o755 });
  const path = join(opts.dir, GATEWAY_SOCKET_NAME);
  const connections = new Set<net.Socket>();
  const accepted = new Set<net.Socket>();
  // allowHalfOpen: a client that half-closes after its requests (berth-bridge at EOF) still gets every answer.
  const server = net.createServer({ pauseOnConnect: true, allowHalfOpen: true }, (socket) => {
    accepted.add(socket);
    socket.once('close', () => accepted.delete(socket));
    socket.on('error', () => socket.destroy());
    if (connections.size >= GATEWAY_BOUNDS.connectionsPerRun || openConnections >= GATEWAY_BOUNDS.connectionsTotal) {
      opts.logger.warn({ open: connections.size, total: openConnections }, 'gateway connection refused: too many');
      // Say why, then reset: a client blocked writing into an unread socket sees the error at once.
      socket.resume();
      socket.end(errorLine(null, -32000, `BUSY: at most ${GATEWAY_BOUNDS.connectionsPerRun} gateway connections per run`), () => socket.destroy());
      return;
    }
    connections.add(socket);
    openConnections++;
    socket.once('close', () => {
      connections.delete(socket);
      openConnections--;
    });
    const mcp = createToolServer('berth-gateway', GATEWAY_TOOLS, () => opts.caller);
    mcp.connect(new LineTransport(socket, GATEWAY_BOUNDS)).catch((err: unknown) => {
      opts.logger.warn({ err: String(err) }, 'gateway connection failed');
      socket.destroy();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(path, () => resolve());
  });
  server.on('error', (err) => opts.logger.warn({ err: String(err) }, 'gateway socket error'));
  fs.chmodSync(path, 0o666); // the agent user connects; the directory, not the mode, confines it
  return {
    dir: opts.dir,
    async close() {
      for (const c of accepted) c.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      fs.rmSync(opts.dir, { recursive: true, force: true });
    },
  };
}
