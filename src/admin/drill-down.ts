import { join } from 'node:path';
import { BerthError } from '../base/errors.js';
import { parseJsonLine, readJsonLines } from '../fs/json-file.js';
import { TranscriptEntrySchema, type TranscriptEntry } from '../store/chat-transcripts.js';
import { daysOf } from '../outbound/cost.js';
import { interruptedRuns, openRuns } from '../store/journal.js';
import { readOutbound } from '../store/outbound-log.js';
import type { Project } from '../store/projects.js';
import { readRunFiles } from '../store/run-files.js';
import { readRunRecords, type RunRecord } from '../store/run-log.js';
import type { SessionStore } from '../store/sessions.js';
import type { Schedule } from '../store/schedules.js';
import { pauseOf, type PauseView } from './project-pause.js';

/**
 * What the operator opens from the console (and GET /api/…/runs/{run}, …/sessions/{id}/view,
 * …/tenants/{tenant}): one run, one session, one tenant, read from the records berth keeps. Each
 * read is bounded (RUN_LOG_SCAN records, OUTBOUND_SHOWN calls, SESSION_RUNS_SHOWN runs).
 */
export const RUN_LOG_SCAN = 5000;
export const OUTBOUND_SHOWN = 200;
export const SESSION_RUNS_SHOWN = 100;

/** The channel a tenant key names: "web:alice" → web, "telegram:42" → telegram; a key without one came by the API or the CLI. */
export function channelOfTenant(tenant: string | undefined): string {
  const m = tenant === undefined ? null : /^([a-z][a-z0-9-]{0,31}):/.exec(tenant);
  return m ? (m[1] as string) : 'api';
}

export interface EgressLine {
  at: string;
  host: string;
  port: number;
  method: string;
  status: number;
  reason?: string;
  secret?: string;
}

export function runDetail(p: Project, sessions: SessionStore, run: string) {
  const { sessionsDir, stateDir } = p.paths;
  const record: RunRecord | undefined = readRunRecords(sessionsDir, { keep: (r) => r.run === run, limit: 1 }).records[0];
  const open = openRuns(sessionsDir).find((r) => r.run === run);
  const interrupted = record || open ? undefined : interruptedRuns(sessionsDir, 1000).find((r) => r.run === run);
  if (!record && !open && !interrupted)
    throw new BerthError('NOT_FOUND', `no run ${run.slice(0, 40)} in ${p.metadata.name}`, {
      issues: [{ field: 'run', reason: 'not in the run log, nor going on (the log keeps what berth recorded)' }],
    });
  const sessionId = record?.session ?? open?.session ?? interrupted?.session;
  const session = sessionId === undefined ? undefined : sessions.list(p).find((s) => s.id === sessionId);
  const tenant = record?.tenant ?? session?.tenant_key;
  const calls = readOutbound(sessionsDir, { keep: (r) => r.run === run, limit: OUTBOUND_SHOWN * 10 });
  const egress: EgressLine[] = calls
    .flatMap((c) => (c.kind === 'egress' ? [c] : []))
    .slice(0, OUTBOUND_SHOWN)
    .map((c) => ({
      at: c.at,
      host: c.host,
      port: c.port,
      method: c.method,
      status: c.status,
      ...(c.reason ? { reason: c.reason } : {}),
      ...(c.secret ? { secret: c.secret } : {}),
    }));
  const models = calls.flatMap((c) => (c.kind === 'model' ? [c] : []));
  const secretsUsed = new Set(egress.flatMap((e) => (e.secret && e.status < 400 ? e.secret.split(',') : [])));
  return {
    project: p.metadata.name,
    run,
    state: record ? 'ended' : open ? `going on (${open.phase})` : 'interrupted',
    since: open?.at ?? null,
    interrupted: interrupted ? { at: interrupted.at, reason: interrupted.reason ?? 'its berth process died' } : null,
    tenant: tenant ?? null,
    channel: channelOfTenant(tenant),
    session: session
      ? { id: session.id, title: session.title ?? null, level: session.settings.permission_level }
      : sessionId
        ? { id: sessionId, title: null, level: null }
        : null,
    start: record?.receipt?.policy.start ?? null,
    record: record ?? null,
    egress,
    model_calls: {
      count: models.length,
      input_tokens: models.reduce((n, c) => n + c.input_tokens, 0),
      output_tokens: models.reduce((n, c) => n + c.output_tokens, 0),
    },
    secrets: { granted: record?.receipt?.policy.secrets ?? [], used: [...secretsUsed].sort() },
    files_out: readRunFiles(stateDir, run)?.files ?? [],
  };
}
export type RunDetail = ReturnType<typeof runDetail>;

/** A run as a list shows it: who, what, how long (no steps' details, no texts but the message's start). */
export function runLine(r: RunRecord, titles: Pick<ReadonlyMap<string, string | undefined>, 'get'>) {
  return {
    run: r.run,
    finished_at: r.finished_at,
    session: r.session,
    session_title: titles.get(r.session) ?? null,
    tenant: r.tenant ?? null,
    channel: channelOfTenant(r.tenant),
    message: r.message === undefined ? null : r.message.slice(0, 160),
    permission_level: r.permission_level,
    runtime: r.runtime ?? null,
    start: r.receipt?.policy.start ?? null,
    exit_code: r.exit_code,
    timed_out: r.timed_out,
    ms: Math.round(r.timings_ms.total),
    steps: (r.steps?.length ?? 0) + (r.more_steps ?? 0),
    failed_steps: r.steps?.filter((s) => s.state === 'failed').length ?? 0,
  };
}
export type RunLine = ReturnType<typeof runLine>;

/** What a session view shows of a web chat transcript (store/chat-transcripts.ts): its last entries, each text cut. */
export const TRANSCRIPT_SHOWN = 100;
export const TRANSCRIPT_TEXT_CHARS = 8000;

function transcriptOf(p: Project, id: string): TranscriptEntry[] {
  return readJsonLines(join(p.paths.stateDir, 'chat', `${id}.jsonl`))
    .slice(-TRANSCRIPT_SHOWN)
    .flatMap((l) => parseJsonLine(l, TranscriptEntrySchema) ?? [])
    .map(({ output: _o, ...e }) => ({
      ...e,
      text: e.text.length > TRANSCRIPT_TEXT_CHARS ? `${e.text.slice(0, TRANSCRIPT_TEXT_CHARS)}…` : e.text,
    }));
}

export function sessionDetail(p: Project, sessions: SessionStore, id: string) {
  const session = sessions.get(p.metadata.name, id).session;
  const titles = new Map([[session.id, session.title]]);
  const runs = readRunRecords(p.paths.sessionsDir, { keep: (r) => r.session === id, limit: SESSION_RUNS_SHOWN }).records;
  return {
    project: p.metadata.name,
    session: { ...session, channel: channelOfTenant(session.tenant_key) },
    runs: runs.map((r) => ({ ...runLine(r, titles), answer: r.answer ?? null, stderr: r.stderr ?? null, message: r.message ?? null })),
    transcript: transcriptOf(p, session.id),
  };
}

/** A tenant's schedules as a view shows them (at most SCHEDULES_SHOWN, the task cut). */
export const SCHEDULES_SHOWN = 50;
const scheduleLine = (s: Schedule) => ({
  id: s.id,
  task: s.task.slice(0, 200),
  next_at: s.next_at,
  runs: s.runs,
  session: s.session ?? null,
  last_outcome: s.last?.outcome ?? null,
});

/** A tenant: their sessions, schedules, today's runs and model use against the project's budget (UTC day), and the pause. */
export function tenantDetail(p: Project, sessions: SessionStore, tenant: string, schedules: Schedule[] = [], now = Date.now()) {
  const mine = sessions.list(p, { tenantKey: tenant });
  const ids = new Set(mine.map((s) => s.id));
  const today = daysOf(now).today;
  const runsToday = readRunRecords(p.paths.sessionsDir, {
    keep: (r) => r.finished_at >= today && (r.tenant === tenant || ids.has(r.session)),
    limit: RUN_LOG_SCAN,
  }).records;
  const calls = readOutbound(p.paths.sessionsDir, {
    since: today,
    keep: (r) => r.kind === 'model' && r.tenant === tenant,
    limit: RUN_LOG_SCAN,
  });
  const tokens = calls.reduce((n, c) => n + (c.kind === 'model' ? c.input_tokens + c.output_tokens : 0), 0);
  const budget = p.metadata.models.budget;
  const titles = new Map(mine.map((s) => [s.id, s.title]));
  return {
    project: p.metadata.name,
    tenant,
    channel: channelOfTenant(tenant),
    pause: pauseOf(p) as PauseView,
    sessions: mine
      .sort((a, b) => b.updated_at.localeCompare(a.updated_at))
      .map((s) => ({ id: s.id, title: s.title ?? null, level: s.settings.permission_level, runs: s.runs, updated_at: s.updated_at })),
    today: {
      since: today,
      runs: runsToday.length,
      run_ms: Math.round(runsToday.reduce((n, r) => n + r.timings_ms.total, 0)),
      model_requests: calls.length,
      tokens,
      budget,
    },
    schedules: schedules.slice(0, SCHEDULES_SHOWN).map(scheduleLine),
    recent_runs: runsToday.slice(0, 20).map((r) => runLine(r, titles)),
  };
}
