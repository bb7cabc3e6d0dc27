import http from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A "site" on loopback standing in for the internet in the approval tests: it answers
 * "fetched <path>" and counts what reached it (a host the agent was not let through to gets
 * nothing). The tests let the egress proxy reach it with berth.yaml egress.private_hosts.
 */
export async function startLoopbackSite(): Promise<{ port: number; hits(): number; close(): void }> {
  let hits = 0;
  const server = http.createServer((req, res) => {
    hits++;
    res.end(`fetched ${req.url}\n`);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { port: (server.address() as AddressInfo).port, hits: () => hits, close: () => void server.close() };
}
