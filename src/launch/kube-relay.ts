import { randomBytes } from 'node:crypto';
import net from 'node:net';
import { posix } from 'node:path';
import { SOCKET_NAMES } from '../plan/outbound.js';

/**
 * How a pod's berth-bridge reaches its run's sockets on Kubernetes, where Unix sockets do not
 * cross nodes: one TCP listener in berth, each connection opened by a line
 * `BERTH1 <token> <socket name>\n` and then spliced to that socket of the run the token was issued
 * for. A token is 256 random bits, bound to one run directory (so to its project, tenant and
 * session), issued when its pod is made and revoked when it is removed: it reaches nothing a run
 * does not already reach through its own sockets, and nothing once its pod is gone.
 */

export const RELAY_PREAMBLE = 'BERTH1';
/** Bounds: the opening line, the time to send it, tokens alive, connections per token, connections not yet past their opening line. */
export const RELAY_BOUNDS = { lineBytes: 128, lineMs: 5000, tokens: 4096, connectionsPerToken: 64, opening: 256 } as const;

export interface RelayTokens {
  /** A token for the run whose sockets are in `runDir` (a path on berth's host). */
  issue(runDir: string): string;
  revoke(token: string): void;
  /** The run directory a token opens, or undefined. */
  lookup(token: string): string | undefined;
  readonly size: number;
}

export function createRelayTokens(): RelayTokens {
  const byToken = new Map<string, string>();
  return {
    issue(runDir) {
      if (byToken.size >= RELAY_BOUNDS.tokens) throw new Error(`more than ${RELAY_BOUNDS.tokens} pods hold relay tokens`);
      const token = randomBytes(32).toString('hex');
      byToken.set(token, runDir);
      return token;
    },
    revoke: (token) => void byToken.delete(token),
    lookup(token) {
      // 256 random bits: a guess is hopeless, so a plain lookup (no prefix of it means anything).
      return /^[0-9a-f]{64}$/.test(token) ? byToken.get(token) : undefined;
    },
    get size() {
      return byToken.size;
    },
  };
}

const NAMES = new Set<string>(Object.values(SOCKET_NAMES));

/** Parse the opening line: the token and a socket name berth knows, or why not. */
export function parsePreamble(line: string): { token: string; socket: string } | { refused: string } {
  const parts = line.split(' ');
  if (parts.length !== 3 || parts[0] !== RELAY_PREAMBLE) return { refused: 'not a berth relay' };
  const [, token, socket] = parts as [string, string, string];
  if (!NAMES.has(socket)) return { refused: `no socket "${socket.slice(0, 40)}"` };
  return { token, socket };
}

/** The listener: each connection's first line picks a run's socket, then bytes flow both ways. */
export function createRelayServer(tokens: RelayTokens, onRefused?: (why: string) => void): net.Server {
  const open = new Map<string, number>();
  let opening = 0;
  // allowHalfOpen on both sides: a client's half-close (berth-bridge at the end of its input) is
  // passed on, and the answers still come back; a connection closes once both ways have ended.
  return net.createServer({ pauseOnConnect: false, allowHalfOpen: true }, (sock) => {
    let buffered = Buffer.alloc(0);
    let counted = true;
    opening++;
    const opened = () => {
      if (counted) opening--;
      counted = false;
    };
    const refuse = (why: string) => {
      opened();
      onRefused?.(why);
      sock.destroy();
    };
    sock.on('close', opened);
    let spliced = false;
    // Half-open is for a spliced connection: one that ends before its opening line is done with.
    sock.on('end', () => spliced || sock.destroy());
    if (opening > RELAY_BOUNDS.opening) return refuse('too many connections opening at once');
    const timer = setTimeout(() => refuse('no opening line in time'), RELAY_BOUNDS.lineMs);
    sock.on('error', () => undefined);
    const onData = (chunk: Buffer) => {
      buffered = Buffer.concat([buffered, chunk]);
      const nl = buffered.indexOf(0x0a);
      if (nl < 0) {
        if (buffered.length > RELAY_BOUNDS.lineBytes) refuse('opening line too long');
        return;
      }
      sock.off('data', onData);
      clearTimeout(timer);
      opened();
      if (nl > RELAY_BOUNDS.lineBytes) return refuse('opening line too long');
      const parsed = parsePreamble(buffered.subarray(0, nl).toString('latin1'));
      if ('refused' in parsed) return refuse(parsed.refused);
      const dir = tokens.lookup(parsed.token);
      if (dir === undefined) return refuse('unknown or revoked token');
      const count = open.get(parsed.token) ?? 0;
      if (count >= RELAY_BOUNDS.connectionsPerToken) return refuse('too many connections for one run');
      open.set(parsed.token, count + 1);
      const rest = buffered.subarray(nl + 1);
      spliced = true;
      sock.pause();
      const upstream = net.connect({ path: posix.join(dir, parsed.socket), allowHalfOpen: true });
      const done = () => {
        const n = (open.get(parsed.token) ?? 1) - 1;
        if (n > 0) open.set(parsed.token, n);
        else open.delete(parsed.token);
      };
      upstream.once('close', done);
      upstream.on('error', () => sock.destroy());
      sock.on('close', () => upstream.destroy());
      upstream.on('close', () => sock.destroy());
      upstream.once('connect', () => {
        if (rest.length) upstream.write(rest);
        sock.pipe(upstream);
        upstream.pipe(sock);
        sock.resume();
      });
    };
    sock.on('data', onData);
    sock.on('close', () => clearTimeout(timer));
  });
}
