import type Docker from 'dockerode';
import type { ContainerStats } from '../launcher.js';

/** Containers asked at once (each answer takes the engine about a second: it samples the CPU twice). */
const STATS_CONCURRENCY = 8;

/** Docker's answer, the parts read (Engine API ContainerStats; cgroup v1 and v2). */
interface EngineStats {
  memory_stats?: { usage?: number; limit?: number; stats?: Record<string, number> };
  cpu_stats?: { cpu_usage?: { total_usage?: number }; system_cpu_usage?: number; online_cpus?: number };
  precpu_stats?: { cpu_usage?: { total_usage?: number }; system_cpu_usage?: number };
  pids_stats?: { current?: number };
}

/**
 * The cgroup figures of the engine's containers, as `docker stats` computes them: memory in use
 * without the page cache (inactive_file on cgroup v2, total_inactive_file on v1) and CPU as a
 * share of one core over the engine's sampling interval. A container that ended is left out.
 */
export function statsOf(id: string, s: EngineStats): ContainerStats {
  const mem = s.memory_stats ?? {};
  const cache = mem.stats?.inactive_file ?? mem.stats?.total_inactive_file ?? 0;
  const cpuDelta = (s.cpu_stats?.cpu_usage?.total_usage ?? 0) - (s.precpu_stats?.cpu_usage?.total_usage ?? 0);
  const systemDelta = (s.cpu_stats?.system_cpu_usage ?? 0) - (s.precpu_stats?.system_cpu_usage ?? 0);
  const cpus = s.cpu_stats?.online_cpus ?? 1;
  return {
    id,
    memory_bytes: Math.max(0, (mem.usage ?? 0) - cache),
    memory_limit_bytes: mem.limit ?? null,
    cpu_percent: cpuDelta > 0 && systemDelta > 0 ? Math.round((cpuDelta / systemDelta) * cpus * 1000) / 10 : 0,
    pids: s.pids_stats?.current ?? null,
  };
}

export async function dockerStats(docker: Docker, ids: string[]): Promise<ContainerStats[]> {
  const out: ContainerStats[] = [];
  for (let i = 0; i < ids.length; i += STATS_CONCURRENCY) {
    const batch = await Promise.all(
      ids.slice(i, i + STATS_CONCURRENCY).map(
        (id) =>
          docker
            .getContainer(id)
            .stats({ stream: false })
            .then((s) => statsOf(id, s as EngineStats))
            .catch(() => undefined), // ended meanwhile
      ),
    );
    out.push(...batch.filter((s): s is ContainerStats => s !== undefined));
  }
  return out;
}
