import { randomBytes } from 'node:crypto';
import type { PermissionLevel } from '../config/session.js';
import type { RunResult, RunTimings } from '../launch/launcher.js';
import { RECORD_TEXT_CHARS, type RunRecord } from '../store/run-log.js';
import type { ProgressStep } from './agent-progress.js';
import type { RefusedFile, SavedFile } from '../plan/files-in.js';
import type { LeftFile, RunFile } from '../store/run-files.js';

/** A message run's files: what landed in inbox/ (and what did not), and what it left in outbox/ (runs/run-files.ts). */
export interface RunFiles {
  /** `notice`: what the person is told of them (refusals, what was heard in a voice note or why nothing was). */
  in?: { saved: SavedFile[]; refused: RefusedFile[]; notice?: string };
  out?: { files: RunFile[]; left: LeftFile[] };
}

/** What a run's caller gets: the launcher's result, the run's identity, and its record (built once). */
export interface RunOutcome extends RunResult {
  runId: string;
  project: string;
  workspaceId: string;
  sessionId: string;
  permissionLevel: PermissionLevel;
  /** The OCI runtime it ran under (the plan's). */
  runtime: string;
  workspaceRoot: string;
  warnings: string[];
  /** It ran in the session's warm container (an exec), not a new one. */
  warm: boolean;
  /** The schedule it was a firing of. */
  schedule?: string;
  /** The agent's tool calls, read from its output (plan.progress); absent when its output has none. */
  steps?: ProgressStep[];
  moreSteps?: number;
  /** A message run's files: what landed in inbox/, and what it left in outbox/ (runs/run-files.ts). */
  files?: RunFiles;
  /** The line appended to the project's run log. */
  record: RunRecord;
}

export function newRunId(): string {
  return `r${Date.now().toString(36)}${randomBytes(5).toString('hex')}`;
}

function roundedTimings(t: RunTimings) {
  const r = (ms: number) => Math.round(ms * 10) / 10;
  return { create: r(t.createMs), start: r(t.startMs), run: r(t.runMs), total: r(t.totalMs) };
}

const head = (text: string, max: number) => (text.length > max ? `${text.slice(0, max)}…` : text);
const tail = (text: string, max: number) => (text.length > max ? `…${text.slice(-max)}` : text);

/** What a record needs of the run's spec (run-context.ts LaunchSpec). */
type AskedSpec = { kind: string; message?: string; argv?: readonly string[] };

/** What the record says the run was asked: a message, or a shell tool's command (a workflow step's is its own record's). */
function askedOf(spec: AskedSpec): string | undefined {
  if (spec.kind === 'shell_tool') return spec.argv?.join(' ');
  return spec.kind === 'message' ? spec.message : undefined;
}

export function toRunRecord(o: Omit<RunOutcome, 'record'>, spec: AskedSpec, tenant: string): RunRecord {
  const asked = askedOf(spec);
  const warnings = o.warnings.slice(0, 20).map((w) => head(w, 499));
  return {
    run: o.runId,
    kind: spec.kind === 'shell_tool' ? 'shell_run' : 'message',
    tenant,
    ...(asked !== undefined ? { message: head(asked, RECORD_TEXT_CHARS.message) } : {}),
    ...(o.stdout ? { answer: head(o.stdout, RECORD_TEXT_CHARS.answer) } : {}),
    ...(o.stderr ? { stderr: tail(o.stderr, RECORD_TEXT_CHARS.stderr) } : {}),
    ...(warnings.length ? { warnings } : {}),
    session: o.sessionId,
    workspace: o.workspaceId,
    permission_level: o.permissionLevel,
    runtime: o.runtime,
    workspace_root: o.workspaceRoot,
    exit_code: o.exitCode,
    timed_out: o.timedOut,
    truncated: o.truncated,
    output_bytes: Buffer.byteLength(o.stdout) + Buffer.byteLength(o.stderr),
    timings_ms: roundedTimings(o.timings),
    finished_at: new Date().toISOString(),
    ...(o.steps?.length
      ? {
          steps: o.steps.map((s) => ({
            tool: s.tool,
            detail: s.detail,
            state: s.state,
            ...(s.ms !== undefined ? { ms: Math.round(s.ms) } : {}),
          })),
        }
      : {}),
    ...(o.moreSteps ? { more_steps: o.moreSteps } : {}),
    ...(o.schedule ? { schedule: o.schedule } : {}),
    ...(o.files?.in?.saved.length ? { files_in: o.files.in.saved.slice(0, 100).map((f) => ({ path: f.path, size: f.size })) } : {}),
  };
}
