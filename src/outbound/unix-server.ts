import fs from 'node:fs';
import type { Server } from 'node:net';
import type { Socket } from 'node:net';

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
