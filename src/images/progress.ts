/** Seconds since `startMs` (from Date.now()), for progress lines: "12.3 s". */
export function secondsSince(startMs: number): string {
  return `${((Date.now() - startMs) / 1000).toFixed(1)} s`;
}

/** Bytes as progress lines show them: "812 MB". */
export function megabytes(bytes: number): string {
  return `${Math.round(bytes / 1e6)} MB`;
}

/** How often a long step with no output of its own says it is still going. */
export const HEARTBEAT_MS = 10_000;

/**
 * Run `work`, saying "<label>: still <doing> (N s)" every HEARTBEAT_MS while it lasts: a step
 * that prints nothing for minutes (npm's download, the engine reading the build context) reads
 * as hung otherwise.
 */
export async function withHeartbeat<T>(label: string, doing: string, onProgress: (line: string) => void, work: () => Promise<T>, everyMs = HEARTBEAT_MS): Promise<T> {
  const started = Date.now();
  const timer = setInterval(() => onProgress(`${label}: still ${doing} (${Math.round((Date.now() - started) / 1000)} s)`), everyMs);
  timer.unref();
  try {
    return await work();
  } finally {
    clearInterval(timer);
  }
}
