import { createHash } from 'node:crypto';
import fs from 'node:fs';
import { join } from 'node:path';
import { BerthError } from '../base/errors.js';
import { VERSION } from '../base/version.js';
import { releaseLoopQuota } from '../fs/loop-quota.js';
import { openRootDir, withFd } from '../fs/fd-path.js';
import { rewriteLines } from '../fs/rewrite-lines.js';
import { removeTreeAt } from '../fs/tree.js';
import type { AuditTrail } from './audit-trail.js';
import type { AdminService } from './service.js';
import { openChatTranscripts } from '../store/chat-transcripts.js';
import { homePaths } from '../config/home.js';
import { memoryAuthorFor } from '../store/secret.js';
import type { Runner } from '../runs/runner.js';
import { MEMORY_FILE } from '../store/memory.js';
import { openFrozenTenants } from '../store/frozen-tenants.js';
import { openDecoyHolders } from '../store/decoy-holders.js';
import type { ProjectStore } from '../store/projects.js';
import { runFilesDirOf } from '../store/run-files.js';
import { runFilesOfTenant } from '../store/person-files.js';
import { openBudgetDays } from '../store/budget-days.js';
import type { ScheduleStore } from '../store/schedules.js';
import type { SessionStore } from '../store/sessions.js';
import { quotaImageOf } from '../store/workspaces.js';
import { writeArchive, type Skipped } from './tenant-archive.js';
import { tenantFootprint, type TenantFootprint } from './tenant-footprint.js';

/** An archive holds at most this much of a tenant's files (a planted sparse file counts in full); what is over is listed as skipped. */
export const EXPORT_MAX_BYTES = 8 * 1024 ** 3;

export interface TenantExport {
  project: string;
  tenant: string;
  out: string;
  bytes: number;
  counts: Record<string, number>;
  skipped: Skipped[];
}

export interface TenantForget {
  project: string;
  tenant: string;
  removed: Record<
    'sessions' | 'workspaces' | 'runs' | 'memory' | 'schedules' | 'chat_logins' | 'run_files' | 'outbound' | 'budget_marks',
    number
  >;
}

/** The digest an audit line names a forgotten tenant by: it proves which one, to whoever still knows the key, and says nothing else. */
export const tenantDigest = (project: string, tenant: string) =>
  `sha256:${createHash('sha256').update(`${project}\0${tenant}`).digest('hex')}`;

const chatUserOf = (tenant: string) => (tenant.startsWith('web:') ? tenant.slice(4) : tenant.startsWith('oidc:') ? tenant : undefined);

/**
 * A person's data, whole: `export` writes one tar archive of everything berth keeps of one tenant
 * in one project (manifest.json says what is in it and what was skipped); `forget` removes it
 * (sessions with their containers, agent homes, transcripts, tokens and cluster volumes, their own
 * workspaces with their quota images, run records, memory entries, schedules, chat links and
 * logins, kept files) and leaves one audit line naming the tenant by digest only. The audit log's
 * older lines stay: it is a hash chain whose lines carry names, never content (docs/receipts.md).
 */
export function createTenantData(berth: {
  readonly home: string;
  readonly store: ProjectStore;
  readonly sessions: SessionStore;
  readonly admin: AdminService;
  readonly runner: Pick<Runner, 'forgetSession' | 'checkpoints'>;
  readonly secret: Buffer;
  readonly scheduleStore: ScheduleStore;
  readonly audit: AuditTrail;
}) {
  const deps = {
    store: berth.store,
    sessions: berth.sessions,
    scheduleStore: berth.scheduleStore,
    audit: berth.audit,
    admin: () => berth.admin,
    stateDir: homePaths(berth.home).stateDir,
    memoryAuthor: (project: string, tenant: string) => memoryAuthorFor(berth.secret, project, tenant),
    forgetSession: (project: string, session: string) => berth.runner.forgetSession(project, session),
  };
  const frozen = openFrozenTenants(deps.stateDir);
  const footprint = (name: string, tenant: string): TenantFootprint => {
    const project = deps.store.get(name);
    return tenantFootprint({
      project,
      tenant,
      sessions: deps.sessions.list(project, { tenantKey: tenant }),
      memoryAuthor: deps.memoryAuthor(name, tenant),
    });
  };

  return {
    /** `maxBytes`: the files the archive may hold (a chat's /export keeps less than the CLI may write). */
    async export(project: string, tenant: string, out: string, maxBytes = EXPORT_MAX_BYTES): Promise<TenantExport> {
      const fp = footprint(project, tenant);
      const transcripts = openChatTranscripts(deps.stateDir);
      const schedules = deps.scheduleStore.list({ project, tenant });
      const audit = deps.audit.list({ project, actor: `tenant:${tenant}`, limit: 1000 });
      const counts = {
        sessions: fp.sessions.length,
        workspaces: fp.workspaces.length,
        runs: fp.runs.length,
        memory: fp.memory.length,
        schedules: schedules.length,
        audit: audit.length,
      };
      const lines = (items: unknown[]) => items.map((i) => `${JSON.stringify(i)}\n`).join('');
      const { bytes, skipped } = await writeArchive(
        out,
        async (a) => {
          for (const s of fp.sessions) {
            await a.add(`sessions/${s.id}.json`, `${JSON.stringify(s, null, 2)}\n`);
            await a.add(`transcripts/${s.id}.jsonl`, lines(transcripts.read(project, s.id)));
          }
          for (const home of fp.homes) await a.addTree(`homes/${home.session}`, home.dir);
          for (const w of fp.workspaces) await a.addTree(`workspaces/${w.id}`, w.dir);
          await a.add('runs.jsonl', lines(fp.runs));
          await a.add('memory.jsonl', lines(fp.memory));
          await a.add('schedules.json', `${JSON.stringify(schedules, null, 2)}\n`);
          await a.add('audit.jsonl', lines(audit.reverse()));
          const manifest = { project, tenant, exported_at: new Date().toISOString(), berth: VERSION, counts, skipped: a.skipped };
          await a.add('manifest.json', `${JSON.stringify(manifest, null, 2)}\n`);
        },
        maxBytes,
      );
      deps.audit.record({ kind: 'admin', action: 'tenant.export', project, target: tenant, outcome: 'ok' });
      return { project, tenant, out, bytes, counts, skipped };
    },

    async forget(project: string, tenant: string, confirm: string | undefined): Promise<TenantForget> {
      if (confirm !== tenant) {
        throw new BerthError('CONFIG_INVALID', `forgetting needs --confirm ${tenant}`, {
          issues: [{ field: 'confirm', reason: `must equal the tenant "${tenant}"` }],
        });
      }
      const fp = footprint(project, tenant);
      const { paths } = fp.project;
      const removed = { sessions: 0, workspaces: 0, schedules: 0, chat_logins: 0 };
      for (const s of fp.sessions) {
        deps.admin().deleteSession(project, s.id);
        await deps.forgetSession(project, s.id); // its container goes before its workspace; its checkpoints too (in the thread's order)
        await berth.runner.checkpoints.dropSession(fp.project, tenant, s.id);
        removed.sessions++;
      }
      if (fp.workspaces.length > 0) {
        withFd(openRootDir(paths.workspacesDir), (root) => {
          for (const w of fp.workspaces) {
            releaseLoopQuota(w.dir);
            removeTreeAt(root, w.id);
            fs.rmSync(quotaImageOf(fp.project, w.id), { force: true });
            fs.rmSync(join(paths.stateDir, 'workspaces', `${w.id}.json`), { force: true });
            removed.workspaces++;
          }
        });
      }
      const records = forgetRecords(fp, deps.stateDir, tenant, deps.memoryAuthor(project, tenant));
      for (const s of deps.scheduleStore.list({ project, tenant })) {
        deps.scheduleStore.cancel(s.id, { project, tenant });
        removed.schedules++;
      }
      const user = chatUserOf(tenant);
      if (user !== undefined) {
        try {
          removed.chat_logins = deps.admin().revokeChatUser(project, user).logins_revoked;
        } catch (err) {
          if (!(err instanceof BerthError && err.code === 'CONFIG_INVALID')) throw err; // not a chat user name
        }
      }
      frozen.unfreeze(project, tenant);
      deps.audit.record({ kind: 'admin', action: 'tenant.forget', project, target: tenantDigest(project, tenant), outcome: 'ok' });
      return { project, tenant, removed: { ...removed, ...records } };
    },

    /** Tenants frozen for using a decoy credential (outbound/honeytokens.ts), and lifting one after a look. */
    frozen: () => frozen.list(),
    unfreeze(project: string, tenant: string): { project: string; tenant: string; unfrozen: boolean } {
      deps.store.get(project);
      const unfrozen = frozen.unfreeze(project, tenant);
      if (unfrozen) deps.audit.record({ kind: 'admin', action: 'tenant.unfreeze', project, target: tenant, outcome: 'ok' });
      return { project, tenant, unfrozen };
    },
  };
}

export type TenantData = ReturnType<typeof createTenantData>;

/**
 * A forgotten tenant's lines in the project's logs and their kept files: run records, the files
 * kept for their runs (also those whose record rotated away) and the archives /export made, the
 * outbound log (hosts, sizes, tokens: what the per-day model budget counts), the day's budget
 * mark and the note that they hold decoys (in berth's own state, `homeState`), and their memory entries.
 */
function forgetRecords(fp: TenantFootprint, homeState: string, tenant: string, author: string) {
  const { paths, metadata } = fp.project;
  const runIds = new Set(fp.runs.map((r) => r.run));
  const runs = rewriteLines(join(paths.sessionsDir, 'runs.jsonl'), (line) => runIds.has(fieldOf(line, 'run') ?? ''));
  let runFiles = 0;
  for (const run of new Set([...runIds, ...runFilesOfTenant(paths.stateDir, tenant)])) {
    if (fs.existsSync(runFilesDirOf(paths.stateDir, run))) runFiles++;
    fs.rmSync(runFilesDirOf(paths.stateDir, run), { recursive: true, force: true });
  }
  let outbound = 0;
  for (const file of ['outbound.jsonl', 'outbound.jsonl.1'])
    outbound += rewriteLines(join(paths.sessionsDir, file), (line) => fieldOf(line, 'tenant') === tenant);
  const budgetMarks = openBudgetDays(homeState).forget(metadata.name, tenant) ? 1 : 0;
  openDecoyHolders(homeState).remove(metadata.name, tenant); // berth's API no longer looks for their decoys
  const memory = rewriteLines(join(paths.memoryDir, MEMORY_FILE), (line) => fieldOf(line, 'author') === author);
  return { runs, run_files: runFiles, outbound, budget_marks: budgetMarks, memory };
}

/** A JSON line's string field, or undefined (not JSON, not a string). */
function fieldOf(line: string, field: string): string | undefined {
  try {
    const value = (JSON.parse(line) as Record<string, unknown>)[field];
    return typeof value === 'string' ? value : undefined;
  } catch {
    return undefined;
  }
}
