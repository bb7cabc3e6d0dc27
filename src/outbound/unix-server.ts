import fs from 'node:fs';
import type { Server, Socket } from 'node:net';

/**
 * Listen on a run's socket path; the agent user connects (the run directory, mounted into this
 * run's container only, is what confines it). close() ends every connection at once.
 */
export async function listenOnRunSocket(server: Server, path: string): Promise<{ close(): Promise<void> }> {
  const open = new Set<Socket>();
  server.on('connection', (s: Socket) => {
    open.add(s);
    s.once('close', () => open.delete(s));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(path, () => resolve());
  });
  fs.chmodSync(path, 0o666);
  return {
    async close() {
      for (const s of open) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** Connections of one kind (model gateway, egress proxy) open across every run of this process. */
export interface ConnectionPool {
  open: number;
}

/**
 * Bound a run's socket: at most connectionsPerRun here and connectionsTotal across the pool
 * (more are closed at once), and none idle past idleTimeoutMs. The socket is reachable from the
 * container without the relay too, so berth bounds it itself.
 */
export function limitConnections(
  server: Server,
  pool: ConnectionPool,
  bounds: { connectionsPerRun: number; connectionsTotal: number; idleTimeoutMs: number },
  onRefused: (openHere: number) => void,
): void {
  let here = 0;
  server.on('connection', (socket: Socket) => {
    if (here >= bounds.connectionsPerRun || pool.open >= bounds.connectionsTotal) {
      onRefused(here);
      socket.destroy();
      return;
    }
    here++;
    pool.open++;
    socket.once('close', () => {
      here--;
      pool.open--;
    });
    socket.setTimeout(bounds.idleTimeoutMs, () => socket.destroy());
  });
}
