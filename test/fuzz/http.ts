import http from 'node:http';

/** One request exactly as it goes on the wire (raw path: "..", "%2e%2e" and "%00" are not normalised). */
export interface RawRequest {
  method: string;
  path: string;
  /** Repeated names are sent as repeated header lines (two Content-Type headers). */
  headers: Array<[string, string]>;
  body?: string | Buffer;
  /** A body of this many bytes, streamed: prefix + filler + suffix. */
  big?: { size: number; prefix: string; suffix: string; fill: string };
}

export interface RawResponse {
  status: number;
  headers: http.IncomingHttpHeaders;
  text: string;
  ms: number;
}

/** Who used a keep-alive connection last: blamed when the server drops it under the next request. */
export interface Tag {
  op: string;
  example: string;
}

export type SendResult = (RawResponse | { error: string; ms: number }) & {
  /** The server answered this earlier request with "Connection: keep-alive", then dropped the connection. */
  droppedAfter?: Tag & { status: number };
};

type TaggedSocket = import('node:net').Socket & { fuzzLast?: Tag & { status: number } };

const agent = new http.Agent({ keepAlive: true, maxSockets: 4 });

export function closeAgent(): void {
  agent.destroy();
}

/**
 * Send with node:http (fetch would normalise the path and refuse duplicate Content-Type headers),
 * over keep-alive connections like real clients. A request that finds its reused connection
 * dropped is sent again on a fresh one, and the request before it on that connection is named.
 */
export async function send(port: number, r: RawRequest, timeoutMs: number, tag?: Tag): Promise<SendResult> {
  const first = await sendOnce(port, r, timeoutMs, tag, true);
  if (!('reused' in first)) return first;
  const again = await sendOnce(port, r, timeoutMs, tag, false);
  return { ...(again as SendResult), droppedAfter: first.reused };
}

function sendOnce(
  port: number,
  r: RawRequest,
  timeoutMs: number,
  tag: Tag | undefined,
  keepAlive: boolean,
): Promise<SendResult | { reused: Tag & { status: number } }> {
  const t0 = performance.now();
  const ms = () => Math.round(performance.now() - t0);
  return new Promise((resolve) => {
    let done = false;
    let previous: (Tag & { status: number }) | undefined;
    let socket: TaggedSocket | undefined;
    const finish = (v: SendResult | { reused: Tag & { status: number } }) => {
      if (!done) {
        done = true;
        resolve(v);
      }
    };
    const grouped = new Map<string, string[]>();
    for (const [k, v] of r.headers) grouped.set(k.toLowerCase(), [...(grouped.get(k.toLowerCase()) ?? []), v]);
    let req: http.ClientRequest;
    try {
      req = http.request({
        host: '127.0.0.1',
        port,
        method: r.method,
        path: r.path,
        agent: keepAlive && !r.big ? agent : false,
        setHost: true,
      });
      req.on('socket', (s: TaggedSocket) => {
        socket = s;
        previous = req.reusedSocket ? s.fuzzLast : undefined;
        s.fuzzLast = undefined;
      });
      for (const [k, v] of grouped) req.setHeader(k, v.length === 1 ? (v[0] as string) : v);
      // Always framed: node sends a GET/DELETE body without Content-Length otherwise, and the
      // server would read it as the next request on the connection.
      if (r.big) req.setHeader('content-length', String(r.big.size));
      else if (r.body !== undefined) req.setHeader('content-length', String(Buffer.byteLength(r.body)));
    } catch (err) {
      finish({ error: `client refused to send: ${(err as Error).message}`, ms: ms() });
      return;
    }
    const timer = setTimeout(() => {
      finish({ error: `no answer within ${timeoutMs} ms`, ms: ms() });
      req.destroy();
    }, timeoutMs);
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        clearTimeout(timer);
        if (socket && tag) socket.fuzzLast = { ...tag, status: res.statusCode ?? 0 };
        finish({ status: res.statusCode ?? 0, headers: res.headers, text: Buffer.concat(chunks).toString('utf8'), ms: ms() });
      });
      res.on('error', (err) => {
        clearTimeout(timer);
        finish({ error: `response aborted: ${err.message}`, ms: ms() });
      });
    });
    req.on('error', (err) => {
      // A server may answer early (413) and close while the body is still being written: wait a
      // moment for that answer before calling it a failure.
      setTimeout(() => {
        clearTimeout(timer);
        if (req.reusedSocket && previous) finish({ reused: previous });
        else finish({ error: `connection failed without an answer: ${err.message}`, ms: ms() });
      }, 200);
    });
    if (r.big) {
      const { size, prefix, suffix, fill } = r.big;
      const chunk = Buffer.from(fill.repeat(Math.ceil((1 << 20) / fill.length))).subarray(0, 1 << 20);
      let left = size - Buffer.byteLength(prefix) - Buffer.byteLength(suffix);
      req.write(prefix);
      const pump = () => {
        while (left > 0) {
          const part = left >= chunk.length ? chunk : chunk.subarray(0, left);
          left -= part.length;
          if (!req.write(part)) {
            req.once('drain', pump);
            return;
          }
        }
        req.end(suffix);
      };
      pump();
    } else {
      req.end(r.body);
    }
  });
}
