/**
 * Every bound on what a tenant, a token holder or a stranger can make berth hold in memory, in
 * one place. The README's security section states these numbers; tests attack them.
 */
const MiB = 1024 * 1024;

/** The per-run gateway socket (agents in containers, through berth-bridge). */
export const GATEWAY_BOUNDS = {
  /** Connections one run may hold open at once; more are answered with an error and closed. */
  connectionsPerRun: 4,
  /** Connections across every run of this process. */
  connectionsTotal: 64,
  /** Requests of one connection being answered at once; berth stops reading past it. */
  inFlightPerConnection: 1,
  /** One request line (a write carries at most 4 MiB of content). */
  maxRequestBytes: 5 * MiB,
  /** One answer line; a bigger answer is replaced by an error. */
  maxResponseBytes: 12 * MiB,
  /** Answers the client has not read yet; berth stops reading requests past it (backpressure). */
  maxUnreadBytes: 1 * MiB,
} as const;

/** MCP over HTTP (/mcp for admins, /mcp/session for session tokens). */
export const MCP_HTTP_BOUNDS = {
  /** One request body. */
  maxBodyBytes: 6 * MiB,
  /** JSON-RPC messages in one request: MCP dropped batches, and one message keeps each answer's work short. */
  maxBatch: 1,
  /** One answer message; a bigger one is replaced by an error. */
  maxResponseBytes: 12 * MiB,
  /** MCP requests being answered (or their answers still unread) at once, per endpoint; more get 429 BUSY. */
  concurrent: 2,
  /** A client that has not read its whole answer by then is disconnected. */
  flushTimeoutMs: 30_000,
} as const;

/** Every other JSON body of the HTTP API. */
export const API_BODY_BYTES = 1 * MiB;
