/**
 * Every bound on what a tenant, a token holder or a stranger can make berth hold in memory, in
 * one place. docs/security.md states these numbers; tests attack them.
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

/**
 * Files in and out (docs/files.md): the ceilings of a project's `files` settings. A message's
 * files are held in memory from their fetch to their write into the workspace, so these bound
 * what one message can make berth hold.
 */
export const FILE_BOUNDS = {
  maxFileMb: 64,
  maxMessageMb: 64,
  maxFiles: 50,
  /** A run API body with files: base64 of maxMessageMb, and the rest of the request. */
  runBodyBytes: Math.ceil((64 * MiB * 4) / 3) + 1 * MiB,
  /** Files one run may leave in outbox/ that berth looks at (the rest wait for the next run). */
  outboxEntries: 200,
  /** How long berth keeps a run's outbox files for download, and a project's most (oldest runs' go first). */
  runFilesDays: 7,
  runFilesBytes: 2 * 1024 * MiB,
  /** Fetching one attachment from its channel. */
  fetchTimeoutMs: 60_000,
} as const;

/** The model gateway (a run's model.sock): what one run's agent can make berth hold. */
export const MODEL_GATEWAY_BOUNDS = {
  /** One request body (a long conversation with its tools is a few MiB). */
  maxRequestBytes: 32 * MiB,
  /** Model calls of one run in flight at once; more get 429 (retryable). */
  callsPerRun: 8,
  /** Across every run of this process. */
  callsTotal: 128,
  /** An upstream that sends nothing for this long is cut off (a model may think a while). */
  idleTimeoutMs: 10 * 60_000,
  /** Bytes of a non-streamed answer kept to count its tokens (the answer itself passes through). */
  maxUsageScanBytes: 4 * MiB,
  /** Connections to one run's model.sock (the relay's cap is the container's own; this one is berth's). */
  connectionsPerRun: 16,
  connectionsTotal: 256,
  /**
   * Request bodies being received are held whole (berth re-serializes what it checked), so their
   * bytes share a budget: one tenant (all its runs) at most one largest body, the process two.
   * A call past it gets 429 (retryable) before its body is read.
   */
  bufferedBytesPerTenant: 32 * MiB,
  bufferedBytesTotal: 64 * MiB,
  /** A body must arrive whole within this (a stalled upload would keep its share of the budget). */
  bodyTimeoutMs: 30_000,
  /**
   * How deeply a body's JSON may nest (a tool's schema is a few dozen levels). Re-serializing it
   * recurses once per level: thousands of levels would overflow the stack of the whole process.
   */
  maxBodyDepth: 128,
} as const;
export type ModelGatewayBounds = { readonly [K in keyof typeof MODEL_GATEWAY_BOUNDS]: number };

/** Voice notes sent to berth.yaml's transcription upstream (its max_mb, timeout_seconds and concurrent are the operator's). */
export const TRANSCRIPTION_BOUNDS = {
  /** Transcriptions of one tenant in flight at once (across its sessions); more wait for a turn. */
  perTenant: 2,
  /** The upstream's answer read at most (a JSON object with the text); past it the note counts as failed. */
  maxAnswerBytes: 1 * MiB,
  /** Characters of a transcript kept (in inbox/<note>.txt); past it the text is cut, and said so. */
  maxTranscriptChars: 100_000,
  /** Characters of each transcript put in the message (the rest is in its file). */
  messageChars: 20_000,
  /** Characters of a transcript echoed back to the person in the chat. */
  echoChars: 200,
} as const;

/** The outbound log is rotated past this size (one older file kept). */
export const OUTBOUND_LOG_BYTES = 64 * MiB;

/** The egress proxy (a run's egress.sock). */
export const EGRESS_BOUNDS = {
  /** Connections one run may hold open through the proxy at once. */
  connectionsPerRun: 32,
  connectionsTotal: 512,
  /** A request head (CONNECT line and headers). */
  maxHeaderBytes: 16 * 1024,
  /** A tunnel or request with no traffic for this long is closed. */
  idleTimeoutMs: 5 * 60_000,
  /** Requests berth reads (terminated TLS, absolute-URI HTTP) being answered at once: on one connection (pipelined), and per run. */
  inFlightPerConnection: 4,
  inFlightPerRun: 32,
  /** Connections a run's requests may hold open to the hosts berth reads for (per scheme). */
  upstreamPerRun: 8,
} as const;
