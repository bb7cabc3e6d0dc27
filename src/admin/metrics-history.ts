import type { Registry } from 'prom-client';

/**
 * The last hour of berth's own metrics, for the console's charts: every SAMPLE_MS the process's
 * registry is read (runs ended, refusals, warm containers, runs in flight and queued), and the
 * last SAMPLES_KEPT samples are kept in memory. A restart starts a new hour; the run latencies
 * come from the run records instead (console-state.ts), which outlive it.
 */
export const SAMPLE_MS = 10_000;
export const SAMPLES_KEPT = 360;

export interface MetricsSample {
  at: number;
  /** Runs ended since the process started (all outcomes). */
  runs: number;
  /** Requests berth refused: permission denials, wrong tokens, refused gateway calls. */
  refusals: number;
  warm: number;
  inFlight: number;
  queued: number;
}

export interface MetricsHistory {
  samples(): MetricsSample[];
  /** Take a sample now (the sampler does every SAMPLE_MS; tests and the first page view do it at once). */
  sample(): Promise<void>;
  stop(): void;
}

type Valued = { get(): Promise<{ values: Array<{ value: number; labels: Record<string, string | number> }> }> };

/** A metric's value summed over its labels (those `keep` keeps); 0 when it is not registered. */
export async function total(
  registry: Registry,
  name: string,
  keep: (labels: Record<string, string | number>) => boolean = () => true,
): Promise<number> {
  const metric = registry.getSingleMetric(name) as unknown as Valued | undefined;
  if (!metric) return 0;
  const { values } = await metric.get();
  return values.filter((v) => keep(v.labels)).reduce((sum, v) => sum + v.value, 0);
}

export function createMetricsHistory(registry: Registry, opts: { everyMs?: number; now?: () => number } = {}): MetricsHistory {
  const now = opts.now ?? Date.now;
  const kept: MetricsSample[] = [];
  const sample = async () => {
    const [runs, denials, auth, refusedCalls, warm, inFlight, queued] = await Promise.all([
      total(registry, 'berth_runs_total'),
      total(registry, 'berth_permission_denials_total'),
      total(registry, 'berth_auth_failures_total'),
      total(registry, 'berth_gateway_calls_total', (l) => l.outcome === 'refused'),
      total(registry, 'berth_warm_containers'),
      total(registry, 'berth_runs_in_flight'),
      total(registry, 'berth_run_queue_depth'),
    ]);
    kept.push({ at: now(), runs, refusals: denials + auth + refusedCalls, warm, inFlight, queued });
    if (kept.length > SAMPLES_KEPT) kept.splice(0, kept.length - SAMPLES_KEPT);
  };
  const timer = setInterval(() => void sample().catch(() => undefined), opts.everyMs ?? SAMPLE_MS);
  timer.unref();
  return {
    samples: () => [...kept],
    sample,
    stop: () => clearInterval(timer),
  };
}
