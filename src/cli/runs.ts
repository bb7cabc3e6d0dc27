import { parseOrThrow } from '../config/parse.js';
import { PermissionLevelSchema, SessionSettingsUpdateSchema } from '../config/session.js';
import fs from 'node:fs';
import { basename } from 'node:path';
import { BerthError, errnoOf } from '../base/errors.js';
import { FILE_BOUNDS } from '../config/bounds.js';
import type { IncomingFile } from '../plan/files-in.js';
import type { StepListener } from '../admin/service.js';
import type { WorkflowRunRecord } from '../workflows/schema.js';
import { need, type Command, type Out } from './command.js';
import { printable } from '../base/printable.js';
import { describeRetired } from './projects.js';
import { receiptText } from './receipt-text.js';

/** Progress of a workflow on stderr, one line per step start and end. */
const progress =
  (io: Out): StepListener =>
  (e) =>
    io.err(
      e.phase === 'start'
        ? `berth: step ${e.index + 1}/${e.total}${e.name ? ` (${printable(e.name)})` : ''} ...\n`
        : `berth: step ${e.index + 1}/${e.total} ${e.exitCode === 0 ? 'ok' : `failed (exit ${e.exitCode})`} in ${e.ms} ms\n`,
    );

function printWorkflow(workflow: string, record: WorkflowRunRecord, io: Out): number {
  for (const s of record.steps) io.out(s.stdout);
  if (record.error) {
    const failed = record.steps[record.error.step];
    if (failed?.stderr) io.err(failed.stderr);
    throw new BerthError(
      'WORKFLOW_FAILED',
      `workflow ${workflow} stopped at step ${record.error.step + 1}: ${record.error.message} (run ${record.workflow_run})`,
    );
  }
  return 0;
}

/** --file paths read for a run: each a regular file (a link is followed: the operator named it), bounded before it is read. */
function readRunFiles(paths: readonly string[]): IncomingFile[] {
  if (paths.length > FILE_BOUNDS.maxFiles) throw new BerthError('USAGE', `at most ${FILE_BOUNDS.maxFiles} --file options`);
  return paths.map((path) => {
    let st: fs.Stats;
    try {
      st = fs.statSync(path);
    } catch (err) {
      throw new BerthError('USAGE', `--file ${path}: ${errnoOf(err) === 'ENOENT' ? 'no such file' : 'cannot be read'}`);
    }
    if (!st.isFile()) throw new BerthError('USAGE', `--file ${path}: not a regular file`);
    if (st.size > FILE_BOUNDS.maxFileMb * 1024 * 1024)
      throw new BerthError('PAYLOAD_TOO_LARGE', `--file ${path}: larger than ${FILE_BOUNDS.maxFileMb} MiB`);
    return { name: basename(path), data: fs.readFileSync(path) };
  });
}

/** Runs, sessions and workflows. */
export const RUN_COMMANDS: Record<string, Command> = {
  run: {
    usage:
      "run <project> --user <tenant-key> [--session ID] [--level low|medium|high] [--file PATH]... [--] <message...>\n  Run the project's agent for a tenant; prints its output and exits with its exit code. Put the message after -- so options in it reach the agent. --file (repeatable): a file for the agent, landing in the workspace's inbox/; files the agent leaves in outbox/ are listed on stderr.",
    options: { user: { type: 'string' }, session: { type: 'string' }, level: { type: 'string' }, file: { type: 'string', multiple: true } },
    async run(berth, v, pos, io) {
      if (pos.length < 1) throw new BerthError('USAGE', 'missing project name', { hint: 'berth run <project> --user <key> -- <message>' });
      if (typeof v.user !== 'string') throw new BerthError('USAGE', 'missing --user <tenant-key>');
      const message = pos.slice(1).join(' ');
      if (message.trim() === '')
        throw new BerthError('USAGE', 'missing message', { hint: 'berth run <project> --user <key> -- <message>' });
      const level = v.level === undefined ? undefined : parseOrThrow(PermissionLevelSchema, v.level, '--level');
      const files = readRunFiles((v.file as string[] | undefined) ?? []);
      const run = await berth().admin.runMessage(pos[0] as string, {
        user: v.user,
        message,
        session: v.session as string | undefined,
        level,
        ...(files.length ? { files } : {}),
      });
      io.out(run.stdout);
      io.err(run.stderr);
      if (run.files_in?.notice) io.err(`\n${run.files_in.notice}\n`);
      for (const f of run.files ?? []) io.err(`berth: the agent sent ${printable(f.name)} (${f.size} bytes): GET ${f.url} (admin token)\n`);
      if (run.truncated)
        io.err(
          `\nberth: output passed the project's cap of ${berth().admin.getProject(run.project).limits.output_bytes} bytes; the run was stopped\n`,
        );
      for (const w of run.warnings.filter((w) => w.startsWith('stopped: '))) io.err(`\nberth: ${w}\n`);
      if (run.timed_out) {
        throw new BerthError('RUN_TIMEOUT', `the run passed its timeout and was stopped (run ${run.run})`, {
          hint: 'raise it with "berth project update <name> --timeout SECONDS"',
        });
      }
      return run.exit_code;
    },
  },
  runs: {
    usage:
      "runs <project> [--user TENANT] [--limit N] [--receipt] [--json]\n  Recent runs, newest first, and the runs a dead berth left interrupted (from the run journal). --receipt: the last run's (or last N runs') whole receipt: what was planned for its container, what was observed of it at its start, and every difference (docs/receipts.md).",
    options: { user: { type: 'string' }, limit: { type: 'string' }, json: { type: 'boolean' }, receipt: { type: 'boolean' } },
    async run(berth, v, pos, io) {
      need(pos, 1, 'project name');
      const limit = v.limit === undefined ? (v.receipt ? 1 : 20) : Number(v.limit);
      if (!Number.isInteger(limit) || limit < 1 || limit > 500)
        throw new BerthError('USAGE', `--limit must be 1-500, not "${String(v.limit).slice(0, 20)}"`);
      const r = berth().admin.listRuns(pos[0] as string, { user: v.user as string | undefined, limit });
      if (v.receipt) {
        if (v.json)
          io.out(
            `${JSON.stringify({ runs: r.runs.map((x) => ({ run: x.run, finished_at: x.finished_at, receipt: x.receipt ?? null, receipt_digest: x.receipt_digest ?? null })) }, null, 2)}\n`,
          );
        else io.out(r.runs.length ? r.runs.map(receiptText).join('\n') : 'no runs yet\n');
        return r.runs.some((x) => x.receipt?.violations.length) ? 1 : 0;
      }
      if (v.json) {
        io.out(`${JSON.stringify(r, null, 2)}\n`);
        return 0;
      }
      for (const x of r.runs)
        io.out(
          `${x.finished_at}  ${x.run}  ${x.kind}  session=${printable(x.session)}  level=${x.permission_level}  exit=${x.exit_code}${x.timed_out ? ' timed-out' : ''}${x.truncated ? ' truncated' : ''}${x.schedule ? `  schedule=${x.schedule}` : ''}  ${Math.round(x.timings_ms.total)} ms\n`,
        );
      for (const x of r.interrupted)
        io.out(
          `${x.interrupted_at}  ${x.run}  ${x.kind ?? 'run'}  session=${printable(x.session ?? '-')}  INTERRUPTED: ${printable(x.reason)}\n`,
        );
      if (r.runs.length === 0 && r.interrupted.length === 0) io.out('no runs yet\n');
      if (r.corrupt_lines) io.err(`berth: ${r.corrupt_lines} corrupt line(s) of the run log were skipped\n`);
      return 0;
    },
  },
  'session list': {
    usage: "session list <project>\n  The project's sessions, one per line.",
    options: {},
    async run(berth, _v, pos, io) {
      need(pos, 1, 'project name');
      for (const s of berth().admin.listSessions(pos[0] as string)) {
        io.out(
          `${s.id}\tlevel=${s.settings.permission_level}\tmode=${s.settings.workspace.mode}\truns=${s.runs}\ttenant=${printable(s.tenant_key)}\n`,
        );
      }
      return 0;
    },
  },
  'session get': {
    usage: "session get <project> <session-id>\n  A session's settings and counters as JSON.",
    options: {},
    async run(berth, _v, pos, io) {
      need(pos, 2, 'project name and session id');
      const session = berth().admin.getSession(pos[0] as string, pos[1] as string);
      io.out(`${JSON.stringify(session, null, 2)}\n`);
      return 0;
    },
  },
  'session set': {
    usage:
      "session set <project> <session-id> [--level low|medium|high] [--mode tenant|session]\n  Change a session's permission level or workspace mode (from its next run).",
    options: { level: { type: 'string' }, mode: { type: 'string' } },
    async run(berth, v, pos, io) {
      need(pos, 2, 'project name and session id');
      const update = parseOrThrow(
        SessionSettingsUpdateSchema,
        { settings: { permission_level: v.level, workspace: v.mode === undefined ? undefined : { mode: v.mode } } },
        'session settings',
      );
      const s = berth().admin.updateSession(pos[0] as string, pos[1] as string, update.settings);
      io.out(`session ${s.id}: level=${s.settings.permission_level} mode=${s.settings.workspace.mode}\n`);
      return 0;
    },
  },
  'session delete': {
    usage:
      'session delete <project> <session-id>\n  Forget a session: settings, agent home (its conversation) and tokens. The workspace stays.',
    options: {},
    async run(berth, _v, pos, io) {
      need(pos, 2, 'project name and session id');
      const b = berth();
      const r = b.admin.deleteSession(pos[0] as string, pos[1] as string);
      io.out(`deleted session ${r.session} (${r.revoked} token(s) revoked)\n`);
      // launcher: kubernetes: its home's volume on the cluster, before this process ends.
      if (b.config.launcher === 'kubernetes') io.out(describeRetired(await b.admin.retireVolumes()));
      return 0;
    },
  },
  'workflow list': {
    usage: "workflow list <project>\n  The project's workflows (workflows/<name>.yaml).",
    options: {},
    async run(berth, _v, pos, io) {
      need(pos, 1, 'project name');
      for (const w of berth().admin.listWorkflows(pos[0] as string)) io.out(`${w}\n`);
      return 0;
    },
  },
  'workflow run': {
    usage:
      "workflow run <project> <workflow> [--input TEXT]\n  Run a workflow's steps with progress; the input reaches every step as $BERTH_INPUT.",
    options: { input: { type: 'string' } },
    async run(berth, v, pos, io) {
      need(pos, 2, 'project name and workflow');
      const workflow = pos[1] as string;
      return printWorkflow(
        workflow,
        await berth().admin.runWorkflow(pos[0] as string, workflow, v.input as string | undefined, progress(io)),
        io,
      );
    },
  },
  'channel run': {
    usage: 'channel run <channel> [--input TEXT]\n  Run the default workflow of a route (berth.yaml routes).',
    options: { input: { type: 'string' } },
    async run(berth, v, pos, io) {
      need(pos, 1, 'channel');
      let started = false;
      const onStep: StepListener = (e) => {
        if (!started) io.err(`berth: channel ${printable(pos[0] as string)} → workflow ${e.workflow} of project ${e.project}\n`);
        started = true;
        progress(io)(e);
      };
      const { workflow, run } = await berth().admin.runChannel(pos[0] as string, v.input as string | undefined, onStep);
      return printWorkflow(workflow, run, io);
    },
  },
};
