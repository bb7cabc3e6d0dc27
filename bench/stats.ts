/** Percentile of a sample (nearest rank). */
export function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[rank] ?? Number.NaN;
}

export function summary(values: number[]) {
  return { p50: percentile(values, 50), p95: percentile(values, 95), p99: percentile(values, 99), n: values.length };
}

export function fmt(ms: number): string {
  return `${ms.toFixed(1)} ms`;
}
