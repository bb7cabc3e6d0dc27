import { join } from 'node:path';
import type { SessionRecord } from '../config/session.js';
import type { Project } from '../store/projects.js';
import { agentHomeDir } from '../store/agent-homes.js';
import { listWorkspaces, workspaceOf, type WorkspaceRecord } from '../store/workspaces.js';
import { readJsonLines, parseJsonLine } from '../fs/json-file.js';
import { MEMORY_FILE, MemoryEntrySchema, type MemoryEntry } from '../store/memory.js';
import { readRunRecords, type RunRecord } from '../store/run-log.js';

/**
 * Everything berth keeps of one tenant in one project, found once: what `berth tenant export`
 * writes and `berth tenant forget` removes (tenant-data.ts). Workspaces are the tenant's own
 * only: a shared-mode project's tree belongs to all its tenants, and is neither exported nor
 * removed for one of them.
 */
export interface TenantFootprint {
  project: Project;
  tenant: string;
  sessions: SessionRecord[];
  /** The tenant's own workspaces (their default one, and each session-mode one), from the registry. */
  workspaces: Array<WorkspaceRecord & { dir: string }>;
  /** Agent homes (the agent's side of each conversation), by session id. */
  homes: Array<{ session: string; dir: string }>;
  runs: RunRecord[];
  /** Memory entries the tenant wrote (by their opaque author id). */
  memory: MemoryEntry[];
}

/** Runs kept per project at most (runs.jsonl is append-only; this bounds one read of it). */
const RUNS_READ_MAX = 1_000_000;

export function tenantFootprint(opts: {
  project: Project;
  tenant: string;
  sessions: SessionRecord[];
  memoryAuthor: string;
}): TenantFootprint {
  const { project, tenant, sessions } = opts;
  const workspaces = project.metadata.workspace_isolation
    ? listWorkspaces(project)
        .filter((w) => w.tenant_key === tenant)
        .map((w) => ({ ...w, dir: workspaceOf(project, w.id).dir }))
    : [];
  const sessionIds = new Set(sessions.map((s) => s.id));
  const workspaceIds = new Set(workspaces.map((w) => w.id));
  const runs = readRunRecords(project.paths.sessionsDir, {
    keep: (r) => sessionIds.has(r.session) || workspaceIds.has(r.workspace),
    limit: RUNS_READ_MAX,
  }).records.reverse();
  const memory = readJsonLines(join(project.paths.memoryDir, MEMORY_FILE)).flatMap((line) => {
    const entry = parseJsonLine(line, MemoryEntrySchema);
    return entry && entry.author === opts.memoryAuthor ? [entry] : [];
  });
  return {
    project,
    tenant,
    sessions,
    workspaces,
    homes: sessions.map((s) => ({ session: s.id, dir: agentHomeDir(project, s.id) })),
    runs,
    memory,
  };
}
