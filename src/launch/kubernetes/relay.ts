import { randomBytes } from 'node:crypto';
import net from 'node:net';
import { posix } from 'node:path';
import { SOCKET_NAMES } from '../../plan/outbound.js';

/**
 * How a pod's berth-bridge reaches its run's sockets on Kubernetes, where Unix sockets do not
 * cross nodes: one TCP listener in berth, each connection opened by a line
 * `BERTH1 <token> <socket name>\n` and then spliced to that socket of the run the token was issued
 * for. A token is 256 random bits, bound to one run directory (so to its project, tenant and
 * session), issued when its pod is made and revoked when it is removed: it reaches nothing a run
 * does not already reach through its own sockets, and nothing once its pod is gone.
 */

export const RELAY_PREAMBLE = 'BERTH1';
/**
 * Bounds: the opening line and the time to send it (berth-bridge writes it as soon as it is
 * connected), tokens alive, connections per token, and connections not yet past their opening
 * line: in all, from one address (a pod) that has never shown a live token, and from one that
 * has. Addresses that showed a live token are remembered, at most `tokens` of them.
 */
export const RELAY_BOUNDS = {
  lineBytes: 128,
  lineMs: 1000,
  tokens: 4096,
  connectionsPerToken: 64,
  opening: 256,
  openingPerSource: 16,
  openingPerKnownSource: 64,
} as const;

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

/** A connection's source address: an IPv4 address as such whether the listener is IPv4 or dual-stack. */
const sourceOf = (sock: net.Socket) => (sock.remoteAddress ?? '?').replace(/^::ffff:(\d+\.\d+\.\d+\.\d+)$/, '$1');

/**
 * The listener: each connection's first line picks a run's socket, then bytes flow both ways.
 *
 * Until its opening line a connection is nobody's: every tenant pod can reach the listener, and
 * a silent connection costs nothing to open. So connections still opening are counted per
 * source address, each address at most `openingPerSource` (`openingPerKnownSource` once a
 * connection from it showed a live token: a pod of one of berth's runs), and, when the whole
 * listener holds `opening` of them, a newcomer takes the place of the oldest opening connection
 * of the address holding the most: first among addresses that never showed a live token (which
 * a newcomer from an address that did always displaces), else among those that did, and only
 * from one holding more than the newcomer's address does. One address, or many, saying nothing
 * cannot keep a pod with a token out.
 */
export function createRelayServer(tokens: RelayTokens, onRefused?: (why: string) => void): net.Server {
  const open = new Map<string, number>();
  /** Connections not past their opening line, by source address, each with how it is refused (insertion order: oldest first). */
  const opening = new Map<string, Map<net.Socket, (why: string) => void>>();
  let openingCount = 0;
  /** Addresses that showed a live token, with the last one they showed (oldest first; at most RELAY_BOUNDS.tokens). */
  const known = new Map<string, string>();
  const isKnown = (source: string) => {
    const token = known.get(source);
    if (token === undefined) return false;
    if (tokens.lookup(token) !== undefined) return true;
    known.delete(source); // its token was revoked: its pod is gone
    return false;
  };
  const remember = (source: string, token: string) => {
    known.delete(source);
    known.set(source, token);
    if (known.size > RELAY_BOUNDS.tokens) known.delete(known.keys().next().value as string);
  };
  /** The listener is full: the oldest opening connection of the address that gives way to a newcomer from `source`, if one does. */
  const displaceFor = (source: string, mine: number, newcomerKnown: boolean): ((why: string) => void) | undefined => {
    // Addresses without a live token give way first; then the one holding the most.
    const rank = (isKnownSource: boolean, count: number) => (isKnownSource ? 0 : RELAY_BOUNDS.opening + 1) + count;
    let best: { refusers: Map<net.Socket, (why: string) => void>; known: boolean; rank: number } | undefined;
    for (const [other, refusers] of opening) {
      if (other === source) continue;
      const otherKnown = isKnown(other);
      const r = rank(otherKnown, refusers.size);
      if (!best || r > best.rank) best = { refusers, known: otherKnown, rank: r };
    }
    if (!best) return undefined;
    // A newcomer with a live token displaces any address without one; otherwise only one holding more than its own address.
    const fair = best.known ? newcomerKnown && best.refusers.size > mine : newcomerKnown || best.refusers.size > mine;
    return fair ? best.refusers.values().next().value : undefined;
  };
  // allowHalfOpen on both sides: a client's half-close (berth-bridge at the end of its input) is
  // passed on, and the answers still come back; a connection closes once both ways have ended.
  return net.createServer({ pauseOnConnect: false, allowHalfOpen: true }, (sock) => {
    let buffered = Buffer.alloc(0);
    const source = sourceOf(sock);
    let counted = false;
    const opened = () => {
      if (!counted) return;
      counted = false;
      openingCount--;
      const mine = opening.get(source);
      mine?.delete(sock);
      if (mine?.size === 0) opening.delete(source);
    };
    const refuse = (why: string) => {
      opened();
      onRefused?.(why);
      sock.destroy();
    };
    sock.on('close', opened);
    sock.on('error', () => undefined);
    let spliced = false;
    // Half-open is for a spliced connection: one that ends before its opening line is done with.
    sock.on('end', () => spliced || sock.destroy());
    const sourceKnown = isKnown(source);
    const mine = opening.get(source)?.size ?? 0;
    if (mine >= (sourceKnown ? RELAY_BOUNDS.openingPerKnownSource : RELAY_BOUNDS.openingPerSource))
      return refuse('too many connections opening from one address');
    if (openingCount >= RELAY_BOUNDS.opening) {
      const displace = displaceFor(source, mine, sourceKnown);
      if (!displace) return refuse('too many connections opening at once');
      displace('too many connections opening at once: gave way to another address');
    }
    counted = true;
    openingCount++;
    let refusers = opening.get(source);
    if (!refusers) opening.set(source, (refusers = new Map()));
    refusers.set(sock, refuse);
    const timer = setTimeout(() => refuse('no opening line in time'), RELAY_BOUNDS.lineMs);
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
      remember(source, parsed.token);
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
