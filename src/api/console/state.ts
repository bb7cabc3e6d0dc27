import type { AdminService } from '../../admin/service.js';
import type { MetricsHistory, MetricsSample } from '../../admin/metrics-history.js';
import type { Approvals } from '../../outbound/approvals.js';
import type { ApprovalView } from '../../store/approvals.js';
import type { RunRecord } from '../../store/run-log.js';
import { runLine } from '../../admin/drill-down.js';
import type { LiveView } from '../../admin/live-view.js';
import type { TenantData } from '../../admin/tenant-data.js';

/**
 * What the operator's console shows, read fresh at each poll: what waits for them (requests to
 * go past a grant, strangers of the chat bots), the last hour in charts, runs in flight and
 * recent ones (with the interrupted), projects, sessions and each tenant's model use. Bounded:
 * the newest RUNS_SHOWN runs and SESSIONS_SHOWN sessions across projects.
 */
export const RUNS_SHOWN = 50;
export const SESSIONS_SHOWN = 200;
const HOUR_MINUTES = 60;

export interface ConsoleSenders {
  pending(): Array<{ sender: string; name?: string; first_seen: string; first_message?: string }>;
  approve(sender: string): Promise<unknown>;
  deny(sender: string): unknown;
}

export interface ConsoleSources {
  admin: () => AdminService;
  approvals?: Pick<Approvals, 'pending' | 'answer'>;
  /** The chat bots' strangers, when berth.yaml has a bridge with pairing. */
  senders?: () => ConsoleSenders | undefined;
  history?: MetricsHistory;
  /** Containers with their figures, warm and pool counts, bridges' health (admin/live-view.ts); berth serve gives it. */
  live?: () => Promise<LiveView>;
  /** Tenants frozen for using a decoy credential (admin/tenant-data.ts), and lifting one. */
  tenants?: () => Pick<TenantData, 'frozen' | 'unfreeze'>;
}

/** Per minute of the last hour (oldest first): runs ended and their latency, warm containers, refusals. */
export interface ConsoleSeries {
  minutes: number[];
  runs: number[];
  p50_ms: Array<number | null>;
  p95_ms: Array<number | null>;
  warm: Array<number | null>;
  refusals: Array<number | null>;
}

const percentile = (sorted: number[], p: number): number | null =>
  sorted.length ? (sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] as number) : null;

/** The series, from run records (they outlive a restart) and this process's samples. Pure. */
export function seriesOf(
  records: Array<Pick<RunRecord, 'finished_at' | 'timings_ms'>>,
  samples: MetricsSample[],
  now: number,
): ConsoleSeries {
  const last = Math.floor(now / 60_000);
  const minutes = Array.from({ length: HOUR_MINUTES }, (_, i) => (last - HOUR_MINUTES + 1 + i) * 60);
  const slot = (ms: number) => Math.floor(ms / 60_000) - (last - HOUR_MINUTES + 1);
  const totals: number[][] = minutes.map(() => []);
  for (const r of records) {
    const i = slot(Date.parse(r.finished_at));
    if (i >= 0 && i < HOUR_MINUTES) totals[i]?.push(r.timings_ms.total);
  }
  for (const t of totals) t.sort((a, b) => a - b);
  const warm: Array<number | null> = minutes.map(() => null);
  const refusals: Array<number | null> = minutes.map(() => null);
  let before: MetricsSample | undefined;
  for (const s of samples) {
    const i = slot(s.at);
    if (i >= 0 && i < HOUR_MINUTES) {
      warm[i] = s.warm;
      refusals[i] = (refusals[i] ?? 0) + (before ? Math.max(0, s.refusals - before.refusals) : 0);
    }
    before = s;
  }
  return {
    minutes,
    runs: totals.map((t) => t.length),
    p50_ms: totals.map((t) => percentile(t, 50)),
    p95_ms: totals.map((t) => percentile(t, 95)),
    warm,
    refusals,
  };
}

export function consoleState(src: ConsoleSources, now = Date.now()) {
  const admin = src.admin();
  const projects = admin.listProjects();
  const runs: Array<RunRecord & { project: string }> = [];
  const interrupted: Array<{ project: string; run: string; session: string | null; interrupted_at: string; reason: string }> = [];
  const live: Array<{
    project: string;
    run: string;
    session: string | null;
    tenant: string | null;
    kind: string | null;
    phase: string;
    since: string;
  }> = [];
  const sessions: Array<{
    project: string;
    id: string;
    tenant: string;
    title: string | null;
    level: string;
    runs: number;
    updated_at: string;
  }> = [];
  const models: Array<{ project: string } & ReturnType<AdminService['modelUse']>> = [];
  const hourAgo = new Date(now - 3600_000).toISOString();
  const titles = new Map<string, string | undefined>();
  for (const p of projects) {
    const listed = admin.listRuns(p.name, { limit: 1000 });
    runs.push(...listed.runs.filter((r, i) => i < RUNS_SHOWN || r.finished_at >= hourAgo).map((r) => ({ ...r, project: p.name })));
    interrupted.push(
      ...listed.interrupted.map((r) => ({
        project: p.name,
        run: r.run,
        session: r.session,
        interrupted_at: r.interrupted_at,
        reason: r.reason,
      })),
    );
    const listedSessions = admin.listSessions(p.name);
    const tenants = new Map(listedSessions.map((s) => [s.id, s.tenant_key]));
    for (const s of listedSessions) titles.set(`${p.name}/${s.id}`, s.title);
    live.push(...admin.openRuns(p.name).map((r) => ({ ...r, project: p.name, tenant: (r.session && tenants.get(r.session)) || null })));
    for (const s of listedSessions)
      sessions.push({
        project: p.name,
        id: s.id,
        tenant: s.tenant_key,
        title: s.title ?? null,
        level: s.settings.permission_level,
        runs: s.runs,
        updated_at: s.updated_at,
      });
    if (p.models.upstreams.length) models.push({ project: p.name, ...admin.modelUse(p.name) });
  }
  runs.sort((a, b) => b.finished_at.localeCompare(a.finished_at));
  sessions.sort((a, b) => b.updated_at.localeCompare(a.updated_at));
  const approvals: ApprovalView[] = src.approvals?.pending() ?? [];
  return {
    at: new Date(now).toISOString(),
    waiting: {
      approvals,
      senders: src.senders?.()?.pending() ?? null,
      frozen: (src.tenants?.().frozen() ?? []).sort((a, b) => b.at.localeCompare(a.at)).slice(0, RUNS_SHOWN),
    },
    series: seriesOf(runs, src.history?.samples() ?? [], now),
    runs: {
      live,
      recent: runs
        .slice(0, RUNS_SHOWN)
        .map((r) => ({ project: r.project, ...runLine(r, { get: (id) => titles.get(`${r.project}/${id}`) }) })),
      interrupted: interrupted.sort((a, b) => b.interrupted_at.localeCompare(a.interrupted_at)).slice(0, RUNS_SHOWN),
    },
    projects: projects.map((p) => ({
      name: p.name,
      paused: p.paused ?? null,
      agent: Array.isArray(p.agent) ? 'custom' : p.agent,
      runtime: p.runtime,
      isolation: p.workspace_isolation,
      workspaces: p.workspace_count,
      egress: p.egress.allow,
      approvals: p.chat.approvals,
      raise_level: p.chat.raise_level,
      models: p.models.upstreams,
    })),
    sessions: sessions.slice(0, SESSIONS_SHOWN),
    sessions_total: sessions.length,
    models,
  };
}
export type ConsoleState = ReturnType<typeof consoleState>;
