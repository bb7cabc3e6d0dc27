/** Seconds since `startMs` (from Date.now()), for progress lines: "12.3 s". */
export function secondsSince(startMs: number): string {
  return `${((Date.now() - startMs) / 1000).toFixed(1)} s`;
}

/** Bytes as progress lines show them: "812 MB". */
export function megabytes(bytes: number): string {
  return `${Math.round(bytes / 1e6)} MB`;
}
