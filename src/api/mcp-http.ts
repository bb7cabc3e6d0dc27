import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js';
import type { Context } from 'hono';
import { JSONRPCMessageSchema } from '@modelcontextprotocol/sdk/types.js';
import { MCP_HTTP_BOUNDS } from '../config/bounds.js';
import { assertPlainInput } from '../config/parse.js';
import { BerthError } from '../base/errors.js';
import { readBodyBounded } from '../base/http-body.js';

/** At most `limit` holders at once; entering never waits (a full gate is BUSY, not a queue). */
export function createGate(limit: number) {
  let open = 0;
  return {
    tryEnter(): (() => void) | undefined {
      if (open >= limit) return undefined;
      open++;
      let left = false;
      return () => {
        if (!left) open--;
        left = true;
      };
    },
    get open() {
      return open;
    },
  };
}
export type Gate = ReturnType<typeof createGate>;

const JSON_TYPE = /^application\/json\s*(;|$)/i;

/**
 * MCP over HTTP (stateless, JSON answers), with bounds: berth reads the body itself (size
 * capped, JSON checked, batches capped) before the SDK's transport sees it, admits at most
 * `gate` requests at once (BUSY otherwise), and holds the place until the client has read the
 * whole answer — a slow reader cannot pile answers up; one that stalls is disconnected.
 * Every refusal here is berth's error body with a stable code, like the rest of the API.
 */
export async function serveMcp(c: Context, makeServer: () => Server, gate: Gate, bounds = MCP_HTTP_BOUNDS): Promise<Response> {
  if (c.req.method !== 'POST') {
    throw new BerthError('METHOD_NOT_ALLOWED', `${c.req.method} is not served here: berth's MCP endpoints are stateless, POST JSON-RPC`);
  }
  const accept = c.req.header('accept') ?? '';
  if (!accept.includes('application/json') || !accept.includes('text/event-stream')) {
    throw new BerthError('NOT_ACCEPTABLE', 'MCP clients must accept both application/json and text/event-stream', {
      issues: [{ field: 'accept', reason: 'must list application/json and text/event-stream' }],
    });
  }
  if (!JSON_TYPE.test(c.req.header('content-type') ?? '')) {
    throw new BerthError('UNSUPPORTED_MEDIA_TYPE', 'send JSON-RPC with "Content-Type: application/json"', {
      issues: [{ field: 'content-type', reason: 'must be application/json' }],
    });
  }
  const leave = gate.tryEnter();
  if (!leave) throw new BerthError('BUSY', `more than ${bounds.concurrent} MCP requests at once; try again shortly`, { retry_after: 1 });
  try {
    const text = (await readBodyBounded(c.req.raw, bounds.maxBodyBytes)).toString('utf8');
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      throw new BerthError('CONFIG_INVALID', 'request body is not JSON', { issues: [{ field: 'body', reason: 'is not JSON' }] });
    }
    if (Array.isArray(body) && (body.length === 0 || body.length > bounds.maxBatch)) {
      throw new BerthError(
        'CONFIG_INVALID',
        bounds.maxBatch === 1
          ? 'JSON-RPC batches are not served: send one message per request'
          : `a batch holds 1 to ${bounds.maxBatch} messages`,
        { issues: [{ field: 'body', reason: `batch of ${body.length}` }] },
      );
    }
    assertPlainInput(body, 'body');
    (Array.isArray(body) ? body : [body]).forEach((m, i) => {
      if (!JSONRPCMessageSchema.safeParse(m).success) {
        throw new BerthError('CONFIG_INVALID', 'not a JSON-RPC 2.0 message', {
          issues: [
            { field: Array.isArray(body) ? `body.${i}` : 'body', reason: 'is not a JSON-RPC 2.0 request, notification or response' },
          ],
        });
      }
    });
    const server = makeServer(); // only once admitted: a refused request costs no server
    const transport = new WebStandardStreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    await server.connect(transport);
    const response = await transport.handleRequest(c.req.raw, { parsedBody: body });
    leaveWhenRead(c.env as { incoming?: IncomingMessage; outgoing?: ServerResponse } | undefined, bounds.flushTimeoutMs, () => {
      leave();
      void server.close();
    });
    return response;
  } catch (err) {
    leave();
    throw err;
  }
}

/** Call done once the answer is fully handed to the client (or the connection is gone). */
function leaveWhenRead(
  env: { incoming?: IncomingMessage; outgoing?: ServerResponse } | undefined,
  timeoutMs: number,
  done: () => void,
): void {
  const outgoing = env?.outgoing;
  if (!outgoing) return done(); // in-process requests (tests): nothing is buffered for a client
  const timer = setTimeout(() => env?.incoming?.socket?.destroy(), timeoutMs);
  timer.unref();
  const finish = () => {
    clearTimeout(timer);
    done();
  };
  outgoing.once('finish', finish);
  outgoing.once('close', finish);
}
