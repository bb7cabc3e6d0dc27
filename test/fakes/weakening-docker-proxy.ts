import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';

/**
 * The weakening Docker-socket proxy of the outside attack report (round 3, M3 and its appendix),
 * as a test fake: dockerd is untouched, but every `POST /containers/create` that passes through
 * is rewritten to drop seccomp and AppArmor, the pid, memory and CPU limits, and to share the
 * host's PID and IPC namespaces. Everything else passes as it is, hijacked attach/exec streams
 * included. Point a client at it with DOCKER_HOST=unix://<socket>.
 */
export interface WeakeningProxy extends AsyncDisposable {
  socket: string;
  /** DOCKER_HOST for a client that must go through the proxy. */
  dockerHost: string;
  /** How many container creates it rewrote (a test that saw none proved nothing). */
  weakened(): number;
  close(): Promise<void>;
}

/**
 * What the proxy does to a create's HostConfig: all of the appendix's weakenings at once. It
 * also drops the namespaced IPC sysctls berth sets, as any engine sharing the host's IPC
 * namespace must (runc refuses them there): the containers run, weakened, and that is the attack.
 */
export function weakenHostConfig(hc: Record<string, unknown>): Record<string, unknown> {
  const { Sysctls: _dropped, ...rest } = hc;
  return {
    ...rest,
    SecurityOpt: ['no-new-privileges', 'seccomp=unconfined', 'apparmor=unconfined'],
    PidsLimit: -1,
    Memory: 0,
    MemorySwap: 0,
    NanoCpus: 0,
    IpcMode: 'host',
    PidMode: 'host',
  };
}

const CREATE = /^\/(v[\d.]+\/)?containers\/create(\?|$)/;

export async function startWeakeningProxy(socket: string, engineSocket = '/var/run/docker.sock'): Promise<WeakeningProxy> {
  fs.rmSync(socket, { force: true });
  let count = 0;
  const open = new Set<net.Socket>();
  const track = (s: net.Socket) => {
    if (open.has(s)) return; // a kept-alive socket to the engine serves many requests
    open.add(s);
    s.on('close', () => open.delete(s));
  };

  const server = http.createServer((req, res) => {
    const forward = (body?: Buffer) => {
      const headers = { ...req.headers };
      if (body) headers['content-length'] = String(body.length);
      const up = http.request({ socketPath: engineSocket, method: req.method, path: req.url, headers }, (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        // A non-upgraded attach answers at once and streams until the engine closes it: the client
        // starts the container only once it has the answer's head, so send that now.
        res.flushHeaders();
        answer.on('data', (d: Buffer) => res.write(d));
        answer.on('end', () => res.end());
        answer.on('error', () => res.destroy());
      });
      up.on('socket', track);
      up.on('error', () => res.destroy());
      res.on('close', () => up.destroy());
      if (body) up.end(body);
      else req.pipe(up);
    };
    if (req.method !== 'POST' || !CREATE.test(req.url ?? '')) return forward();
    const chunks: Buffer[] = [];
    req.on('data', (d: Buffer) => chunks.push(d));
    req.on('end', () => {
      const create = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { HostConfig?: Record<string, unknown> };
      create.HostConfig = weakenHostConfig(create.HostConfig ?? {});
      count++;
      forward(Buffer.from(JSON.stringify(create)));
    });
  });
  // Hijacked streams (exec start, attach with Upgrade: tcp): the request as it came, then bytes both ways.
  server.on('upgrade', (req: http.IncomingMessage, client: net.Socket, head: Buffer) => {
    track(client);
    const up = net.connect(engineSocket, () => {
      const lines = [`${req.method} ${req.url} HTTP/${req.httpVersion}`];
      for (let i = 0; i < req.rawHeaders.length; i += 2) lines.push(`${req.rawHeaders[i]}: ${req.rawHeaders[i + 1]}`);
      up.write(`${lines.join('\r\n')}\r\n\r\n`);
      if (head.length) up.write(head);
      up.pipe(client);
      client.pipe(up);
    });
    track(up);
    up.on('error', () => client.destroy());
    client.on('error', () => up.destroy());
    client.on('close', () => up.destroy());
  });
  server.on('connection', track);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(socket, resolve);
  });
  const close = async () => {
    for (const s of open) s.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
    fs.rmSync(socket, { force: true });
  };
  return { socket, dockerHost: `unix://${socket}`, weakened: () => count, close, [Symbol.asyncDispose]: close };
}
