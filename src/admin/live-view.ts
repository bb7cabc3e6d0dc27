import type { Registry } from 'prom-client';
import type { ContainerStats, ManagedContainer } from '../launch/launcher.js';
import { POOLED } from '../plan/pool.js';
import { total } from './metrics-history.js';

/**
 * What the console's live view shows besides runs: berth's containers on the engine with their
 * memory and CPU (the launcher's cgroup figures, when it has them), the warm and pool counts, and
 * each chat bridge's health. Bounded: the first CONTAINERS_SHOWN containers, their figures asked
 * at most once per STATS_TTL_MS whoever asks.
 */
export const CONTAINERS_SHOWN = 100;
export const STATS_TTL_MS = 2500;
/** A bridge's failures counted back this far. */
const BRIDGE_ERRORS_MS = 3600_000;

export interface BridgeHealthSource {
  name: string;
  connected(): boolean;
  inbox: { all(): Array<{ at: string; phase: string }> };
}

export interface LiveSources {
  containers: () => Promise<ManagedContainer[]>;
  /** The launcher's figures; absent: "not available" with why. */
  stats?: (ids: string[]) => Promise<ContainerStats[]>;
  statsMissing?: string;
  registry?: Registry;
  bridges?: () => BridgeHealthSource[];
}

export interface LiveContainer extends ManagedContainer {
  memory_bytes: number | null;
  memory_limit_bytes: number | null;
  cpu_percent: number | null;
  pids: number | null;
}

export interface LiveView {
  at: string;
  containers: LiveContainer[];
  containers_total: number;
  /** null: the figures are not available (why in stats_missing). */
  stats: 'engine' | null;
  stats_missing: string | null;
  counts: { warm: number; pool: number; in_flight: number; queued: number };
  bridges: Array<{ name: string; connected: boolean; last_event: string | null; errors_last_hour: number; waiting: number }>;
}

/** One bridge's health from its inbox: the last message's time, failures in the last hour, messages not yet ended. */
export function bridgeHealth(b: BridgeHealthSource, now: number): LiveView['bridges'][number] {
  const entries = b.inbox.all();
  const since = new Date(now - BRIDGE_ERRORS_MS).toISOString();
  let last: string | null = null;
  let errors = 0;
  let waiting = 0;
  for (const e of entries) {
    if (last === null || e.at > last) last = e.at;
    if (e.phase === 'failed' && e.at >= since) errors++;
    if (e.phase === 'received' || e.phase === 'started' || e.phase === 'held') waiting++;
  }
  return { name: b.name, connected: b.connected(), last_event: last, errors_last_hour: errors, waiting };
}

export function createLiveView(src: LiveSources): () => Promise<LiveView> {
  let cached: { at: number; stats: Map<string, ContainerStats> } | undefined;
  let asking: Promise<Map<string, ContainerStats>> | undefined;
  const statsOf = async (ids: string[]): Promise<Map<string, ContainerStats>> => {
    if (!src.stats) return new Map();
    if (cached && Date.now() - cached.at < STATS_TTL_MS) return cached.stats;
    // One question to the engine at a time, whoever asks (every open console shares it).
    asking ??= src
      .stats(ids)
      .then((list) => new Map(list.map((s) => [s.id, s])))
      .catch(() => new Map<string, ContainerStats>())
      .then((stats) => {
        cached = { at: Date.now(), stats };
        return stats;
      })
      .finally(() => (asking = undefined));
    return asking;
  };
  return async () => {
    const now = Date.now();
    const all = await src.containers().catch(() => [] as ManagedContainer[]);
    const shown = all.slice(0, CONTAINERS_SHOWN);
    const stats = await statsOf(shown.filter((c) => c.state === 'running').map((c) => c.id));
    const metric = (name: string) => (src.registry ? total(src.registry, name) : Promise.resolve(0));
    const [warm, pool, inFlight, queued] = await Promise.all([
      metric('berth_warm_containers'),
      metric('berth_pool_containers'),
      metric('berth_runs_in_flight'),
      metric('berth_run_queue_depth'),
    ]);
    return {
      at: new Date(now).toISOString(),
      containers: shown.map((c) => {
        const s = stats.get(c.id);
        return {
          ...c,
          memory_bytes: s?.memory_bytes ?? null,
          memory_limit_bytes: s?.memory_limit_bytes ?? null,
          cpu_percent: s?.cpu_percent ?? null,
          pids: s?.pids ?? null,
        };
      }),
      containers_total: all.length,
      stats: src.stats ? 'engine' : null,
      stats_missing: src.stats ? null : (src.statsMissing ?? 'this launcher gives no container figures'),
      counts: { warm, pool: pool || all.filter((c) => c.workspace === POOLED).length, in_flight: inFlight, queued },
      bridges: (src.bridges?.() ?? []).map((b) => bridgeHealth(b, now)),
    };
  };
}
