import { parseArgs, type ParseArgsConfig } from 'node:util';
import { AGENT_PRESETS, type ProjectMetadataInput, type ProjectUpdate } from './config/metadata.js';
import { runDoctor } from './doctor.js';
import { parseOrThrow } from './config/parse.js';
import { PermissionLevelSchema, SessionSettingsUpdateSchema } from './config/session.js';
import { BerthError, isBerthError } from './errors.js';
import { buildImage, IMAGE_NAMES, type ImageName } from './images/build.js';
import { createBerth, type Berth } from './main.js';
import { VERSION } from './version.js';
import { runDemo } from './demo.js';
import { runServer, runStdioMcp } from './serve.js';
import { resolveChannel } from './workflows/channels.js';
import { listWorkflows, runWorkflow } from './workflows/run.js';
import type { Project } from './store/projects.js';
import { listWorkspaces } from './store/workspaces.js';


export const USAGE = `berth — one kernel-isolated container per tenant, for AI coding agents

Usage: berth [--home DIR] <command> [options]

Projects
  project create <name> [--isolation] [--protect PATH]... [--image IMG] [--agent PRESET]
  project update <name> [--isolation|--no-isolation] [--protect PATH]... [--no-protect]
                        [--timeout SECONDS] [--image IMG] [--agent PRESET]
                        (--protect replaces the list; --no-protect empties it)
  project get <name>            settings, workspaces and protection as JSON
  project list [--json]
  project show <name>           private workspace and shared-area grants (operator view)

Operator (berth.yaml; comments and order kept)
  project grant <project> <area> [--rw]
  project revoke <project> <area>
  project set-private-workspace <project> <abs-path>   (moves the project there)
  project unset-private-workspace <project>            (moves it back)

Workflows
  workflow list <project>
  workflow run <project> <workflow> [--input TEXT]
  channel run <channel> [--input TEXT]   the default workflow of a channel profile

Runs and sessions
  run <project> --user <tenant-key> [--session ID] [--level low|medium|high] [--] <message...>
                                prints the agent's output, exits with its exit code
                                (--level sets the session's permission level, persisted)
  session list <project>
  session get <project> <session-id>
  session set <project> <session-id> [--level low|medium|high] [--mode tenant|session]

Server
  serve [--host HOST] [--port PORT] [--demo]
                                HTTP admin API, /docs, /openapi.json and MCP at /mcp
                                (token: berth.yaml admin_token, $BERTH_ADMIN_TOKEN, or generated)
  mcp                           the admin tools as an MCP server over stdio

Engine
  images build [shell|agent] [--base IMAGE]
                                build berth's images offline (default: shell)
  doctor                        engine, runc, images, config: non-zero exit when unsafe
  demo                          two tenants, one boundary: a walk-through

Options
  --home DIR    the berth home (default: $BERTH_HOME or the current directory)
  -h, --help    this text        --version    berth's version

Agent presets: ${AGENT_PRESETS.join(', ')} (or a custom argv with {message} in metadata.json).
Errors print "<CODE>: <reason>" on stderr and exit non-zero.
`;

type Out = { out: (s: string) => void; err: (s: string) => void };

interface Command {
  options: ParseArgsConfig['options'];
  /** Log level when BERTH_LOG_LEVEL is unset. */
  logLevel?: string;
  run(berth: () => Berth, values: Record<string, unknown>, positionals: string[], io: Out, env: NodeJS.ProcessEnv): Promise<number>;
}

function need(positionals: string[], count: number, what: string): void {
  if (positionals.length < count) throw new BerthError('USAGE', `missing ${what}`, { hint: 'see "berth --help"' });
  if (positionals.length > count) throw new BerthError('USAGE', `unexpected argument "${positionals[count]}"`, { hint: 'see "berth --help"' });
}

function describeProject(berth: Berth, name: string) {
  return { ...berth.admin.getProject(name), workspaces: berth.admin.listWorkspaces(name) };
}

/** A session, checked to belong to the project named on the command line. */
function sessionOf(berth: Berth, project: string, id: string) {
  const session = berth.admin.getSession(id);
  if (session.project !== project) throw new BerthError('SESSION_NOT_FOUND', `session "${id}" is not in project "${project}"`);
  return session;
}

async function runWorkflowCli(b: Berth, project: string, workflow: string, input: string | undefined, io: Out): Promise<number> {
  const record = await runWorkflow(
    { store: b.store, runner: b.runner, assertGranted: b.operator.assertGranted },
    {
      project,
      workflow,
      input,
      onStep: (e) =>
        io.err(
          e.phase === 'start'
            ? `berth: step ${e.index + 1}/${e.total}${e.name ? ` (${e.name})` : ''} ...\n`
            : `berth: step ${e.index + 1}/${e.total} ${e.exitCode === 0 ? 'ok' : `failed (exit ${e.exitCode})`} in ${e.ms} ms\n`,
        ),
    },
  );
  for (const s of record.steps) io.out(s.stdout);
  if (record.error) {
    const failed = record.steps[record.error.step];
    if (failed?.stderr) io.err(failed.stderr);
    throw new BerthError('WORKFLOW_FAILED', `workflow ${workflow} stopped at step ${record.error.step + 1}: ${record.error.message} (run ${record.workflow_run})`);
  }
  return 0;
}

function printSkipped(p: Project, io: Out): void {
  for (const e of p.snapshot?.entries ?? []) {
    if (e.source === 'empty') io.err(`berth: protected "${e.path}" does not exist in the project; containers get an empty read-only ${e.kind}\n`);
    for (const s of e.skipped) io.err(`berth: not protected: ${s.path} (${s.reason})\n`);
  }
  if (!p.metadata.workspace_isolation && p.metadata.protected_paths.length > 0) {
    io.err('berth: note: with workspace isolation off, tenants could edit these files until now; protected content is what is there at this moment\n');
  }
}

const COMMANDS: Record<string, Command> = {
  'project create': {
    options: {
      isolation: { type: 'boolean' },
      protect: { type: 'string', multiple: true },
      image: { type: 'string' },
      agent: { type: 'string' },
    },
    async run(berth, v, pos, io) {
      need(pos, 1, 'project name');
      const input: ProjectMetadataInput = { name: pos[0] as string };
      if (v.isolation) input.workspace_isolation = true;
      if (v.protect) input.protected_paths = v.protect as string[];
      if (v.image) input.image = v.image as string;
      if (v.agent) input.agent = v.agent as ProjectMetadataInput['agent'];
      const b = berth();
      const p = b.store.create(input);
      printSkipped(p, io);
      io.out(`created project ${p.metadata.name} at ${p.paths.dir}\n`);
      return 0;
    },
  },
  'project update': {
    options: {
      isolation: { type: 'boolean' },
      'no-isolation': { type: 'boolean' },
      protect: { type: 'string', multiple: true },
      'no-protect': { type: 'boolean' },
      timeout: { type: 'string' },
      image: { type: 'string' },
      agent: { type: 'string' },
    },
    async run(berth, v, pos, io) {
      need(pos, 1, 'project name');
      if (v.isolation && v['no-isolation']) throw new BerthError('USAGE', '--isolation and --no-isolation contradict each other');
      if (v.protect && v['no-protect']) throw new BerthError('USAGE', '--protect and --no-protect contradict each other');
      const patch: Record<string, unknown> = {};
      if (v.isolation) patch.workspace_isolation = true;
      if (v['no-isolation']) patch.workspace_isolation = false;
      if (v.protect) patch.protected_paths = v.protect;
      if (v['no-protect']) patch.protected_paths = [];
      if (v.image) patch.image = v.image;
      if (v.agent) patch.agent = v.agent;
      if (v.timeout !== undefined) {
        const seconds = Number(v.timeout);
        patch.limits = { timeout_seconds: Number.isFinite(seconds) ? seconds : v.timeout };
      }
      const p = await berth().store.update(pos[0] as string, patch as ProjectUpdate);
      printSkipped(p, io);
      io.out(`updated project ${p.metadata.name}\n`);
      return 0;
    },
  },
  'project get': {
    options: {},
    async run(berth, _v, pos, io) {
      need(pos, 1, 'project name');
      const b = berth();
      io.out(`${JSON.stringify(describeProject(b, pos[0] as string), null, 2)}\n`);
      return 0;
    },
  },
  'project list': {
    options: { json: { type: 'boolean' } },
    async run(berth, v, pos, io) {
      need(pos, 0, '');
      const b = berth();
      const projects = b.store.list();
      if (v.json) {
        io.out(`${JSON.stringify(projects.map((p) => describeProject(b, p.metadata.name)), null, 2)}\n`);
        return 0;
      }
      if (projects.length === 0) {
        io.out('no projects yet; create one with "berth project create <name>"\n');
        return 0;
      }
      for (const p of projects) {
        const m = p.metadata;
        const agent = Array.isArray(m.agent) ? 'custom' : m.agent;
        io.out(`${m.name}\tisolation=${m.workspace_isolation ? 'on' : 'off'}\tagent=${agent}\tprotected=${m.protected_paths.join(',') || '-'}\tworkspaces=${listWorkspaces(p).length}\n`);
      }
      return 0;
    },
  },
  run: {
    options: { user: { type: 'string' }, session: { type: 'string' }, level: { type: 'string' } },
    async run(berth, v, pos, io) {
      if (pos.length < 1) throw new BerthError('USAGE', 'missing project name', { hint: 'berth run <project> --user <key> -- <message>' });
      if (typeof v.user !== 'string') throw new BerthError('USAGE', 'missing --user <tenant-key>');
      const message = pos.slice(1).join(' ');
      if (message.trim() === '') throw new BerthError('USAGE', 'missing message', { hint: 'berth run <project> --user <key> -- <message>' });
      const level = v.level === undefined ? undefined : parseOrThrow(PermissionLevelSchema, v.level, '--level');
      const outcome = await berth().runner.run({ project: pos[0] as string, tenantKey: v.user, message, sessionId: v.session as string | undefined, level });
      io.out(outcome.stdout);
      io.err(outcome.stderr);
      if (outcome.truncated) io.err(`\nberth: output passed the project's cap of ${berth().store.get(outcome.project).metadata.limits.output_bytes} bytes; the run was stopped\n`);
      if (outcome.timedOut) {
        throw new BerthError('RUN_TIMEOUT', `the run passed its timeout and was stopped (run ${outcome.runId})`, {
          hint: 'raise it with "berth project update <name> --timeout SECONDS"',
        });
      }
      return outcome.exitCode;
    },
  },
  'project show': {
    options: {},
    async run(berth, _v, pos, io) {
      need(pos, 1, 'project name');
      const b = berth();
      b.store.get(pos[0] as string);
      const a = b.operator.access(pos[0] as string);
      io.out(`project ${a.project}\nprivate workspace: ${a.private_workspace}${a.private_workspace_overridden ? ' (override in berth.yaml)' : ''}\n`);
      io.out(a.shared_access.length ? a.shared_access.map((g) => `shared: /shared/${g.name} → ${g.path} (${g.mode})\n`).join('') : 'shared: none (deny by default)\n');
      return 0;
    },
  },
  'project grant': {
    options: { rw: { type: 'boolean' } },
    async run(berth, v, pos, io) {
      need(pos, 2, 'project name and shared area');
      const a = await berth().operator.grant(pos[0] as string, pos[1] as string, v.rw ? 'rw' : 'ro');
      io.out(`granted ${pos[1]} (${v.rw ? 'rw' : 'ro'}) to ${a.project}\n`);
      return 0;
    },
  },
  'project revoke': {
    options: {},
    async run(berth, _v, pos, io) {
      need(pos, 2, 'project name and shared area');
      await berth().operator.revoke(pos[0] as string, pos[1] as string);
      io.out(`revoked ${pos[1]} from ${pos[0]}\n`);
      return 0;
    },
  },
  'project set-private-workspace': {
    options: {},
    async run(berth, _v, pos, io) {
      need(pos, 2, 'project name and absolute path');
      const a = await berth().operator.setPrivateWorkspace(pos[0] as string, pos[1] as string);
      io.out(`project ${a.project} now lives at ${a.private_workspace}\n`);
      return 0;
    },
  },
  'project unset-private-workspace': {
    options: {},
    async run(berth, _v, pos, io) {
      need(pos, 1, 'project name');
      const a = await berth().operator.setPrivateWorkspace(pos[0] as string, undefined);
      io.out(`project ${a.project} now lives at ${a.private_workspace}\n`);
      return 0;
    },
  },
  'workflow list': {
    options: {},
    async run(berth, _v, pos, io) {
      need(pos, 1, 'project name');
      for (const w of listWorkflows(berth().store.get(pos[0] as string))) io.out(`${w}\n`);
      return 0;
    },
  },
  'workflow run': {
    options: { input: { type: 'string' } },
    async run(berth, v, pos, io) {
      need(pos, 2, 'project name and workflow');
      return runWorkflowCli(berth(), pos[0] as string, pos[1] as string, v.input as string | undefined, io);
    },
  },
  'channel run': {
    options: { input: { type: 'string' } },
    async run(berth, v, pos, io) {
      need(pos, 1, 'channel');
      const b = berth();
      const profile = resolveChannel(b.config, pos[0] as string);
      io.err(`berth: channel ${pos[0]} → project ${profile.project}, workflow ${profile.workflow}\n`);
      return runWorkflowCli(b, profile.project, profile.workflow, v.input as string | undefined, io);
    },
  },
  'session list': {
    options: {},
    async run(berth, _v, pos, io) {
      need(pos, 1, 'project name');
      for (const s of berth().admin.listSessions(pos[0] as string)) {
        io.out(`${s.id}\tlevel=${s.settings.permission_level}\tmode=${s.settings.workspace.mode}\truns=${s.runs}\ttenant=${s.tenant_key}\n`);
      }
      return 0;
    },
  },
  'session get': {
    options: {},
    async run(berth, _v, pos, io) {
      need(pos, 2, 'project name and session id');
      const session = sessionOf(berth(), pos[0] as string, pos[1] as string);
      io.out(`${JSON.stringify(session, null, 2)}\n`);
      return 0;
    },
  },
  'session set': {
    options: { level: { type: 'string' }, mode: { type: 'string' } },
    async run(berth, v, pos, io) {
      need(pos, 2, 'project name and session id');
      sessionOf(berth(), pos[0] as string, pos[1] as string);
      const update = parseOrThrow(
        SessionSettingsUpdateSchema,
        { settings: { permission_level: v.level, workspace: v.mode === undefined ? undefined : { mode: v.mode } } },
        'session settings',
      );
      const s = berth().admin.updateSession(pos[1] as string, update.settings);
      io.out(`session ${s.id}: level=${s.settings.permission_level} mode=${s.settings.workspace.mode}\n`);
      return 0;
    },
  },
  'images build': {
    options: { base: { type: 'string' } },
    async run(berth, v, pos, io) {
      const names = (pos.length ? pos : ['shell']) as ImageName[];
      for (const name of names) {
        if (!IMAGE_NAMES.includes(name)) throw new BerthError('USAGE', `unknown image "${name}" (known: ${IMAGE_NAMES.join(', ')})`);
      }
      const b = berth();
      for (const name of names) {
        io.err(`berth: building ${b.config.images[name]} ...\n`);
        const tag = await buildImage({ engine: b.engine, config: b.config, name, base: v.base as string | undefined, onProgress: (l) => io.err(`  ${l}\n`) });
        io.out(`built ${tag}\n`);
      }
      return 0;
    },
  },
  doctor: {
    options: {},
    async run(berth, _v, pos, io) {
      need(pos, 0, '');
      const checks = await runDoctor(berth());
      const mark = { ok: 'ok  ', warn: 'WARN', fail: 'FAIL' } as const;
      for (const c of checks) io.out(`${mark[c.status]}  ${c.name.padEnd(28)} ${c.detail}\n`);
      const failed = checks.filter((c) => c.status === 'fail').length;
      io.out(failed ? `\n${failed} problem(s): berth is not safe to run as configured\n` : '\nall checks passed\n');
      return failed ? 1 : 0;
    },
  },
  serve: {
    options: { host: { type: 'string' }, port: { type: 'string' }, demo: { type: 'boolean' } },
    logLevel: 'info',
    async run(berth, v, pos, io, env) {
      need(pos, 0, '');
      const port = Number(v.port ?? 8080);
      if (!Number.isInteger(port) || port < 0 || port > 65535) throw new BerthError('USAGE', `--port must be 0-65535, not "${v.port}"`);
      return runServer(berth(), { host: (v.host as string | undefined) ?? '127.0.0.1', port, demo: Boolean(v.demo), envToken: env.BERTH_ADMIN_TOKEN }, io);
    },
  },
  mcp: {
    options: {},
    async run(berth, _v, pos) {
      need(pos, 0, '');
      return runStdioMcp(berth());
    },
  },
  demo: {
    options: {},
    async run(berth, _v, pos, io) {
      need(pos, 0, '');
      return runDemo(berth(), io);
    },
  },
};

/** Split "[--home DIR] <command words> ..." into the home, the command and its arguments. */
function splitCommand(argv: string[]): { home?: string; name?: string; rest: string[]; help: boolean } {
  const args = [...argv];
  let home: string | undefined;
  let help = false;
  while (args.length && args[0]?.startsWith('-')) {
    const a = args.shift() as string;
    if (a === '--home') home = args.shift();
    else if (a.startsWith('--home=')) home = a.slice('--home='.length);
    else if (a === '-h' || a === '--help') help = true;
    else if (a === '--version') return { name: '--version', rest: [], help };
    else throw new BerthError('USAGE', `unknown option "${a}"`, { hint: 'see "berth --help"' });
  }
  const two = `${args[0]} ${args[1]}`;
  if (COMMANDS[two]) return { home, name: two, rest: args.slice(2), help };
  if (args[0] && COMMANDS[args[0]]) return { home, name: args[0], rest: args.slice(1), help };
  if (args.length === 0) return { home, rest: [], help: true };
  throw new BerthError('USAGE', `unknown command "${args.slice(0, 2).join(' ')}"`, { hint: 'see "berth --help"' });
}

export async function main(argv: string[], env: NodeJS.ProcessEnv, io: Out): Promise<number> {
  try {
    const split = splitCommand(argv);
    if (split.name === '--version') {
      io.out(`berth ${VERSION}\n`);
      return 0;
    }
    if (split.help || !split.name) {
      io.out(USAGE);
      return 0;
    }
    const command = COMMANDS[split.name] as Command;
    let parsed: ReturnType<typeof parseArgs>;
    try {
      parsed = parseArgs({
        args: split.rest,
        options: { ...command.options, home: { type: 'string' }, help: { type: 'boolean', short: 'h' } },
        allowPositionals: true,
        strict: true,
      });
    } catch (err) {
      throw new BerthError('USAGE', (err as Error).message, { hint: 'see "berth --help"' });
    }
    if (parsed.values.help) {
      io.out(USAGE);
      return 0;
    }
    const home = (parsed.values.home as string | undefined) ?? split.home ?? env.BERTH_HOME ?? process.cwd();
    let berth: Berth | undefined;
    // Fault injection for the crash tests: die (no cleanup, like a power cut) after a create step.
    const killAt = env.BERTH_TEST_KILL_AFTER_STEP;
    const onCreateStep = killAt ? (step: string) => void (step === killAt && process.kill(process.pid, 'SIGKILL')) : undefined;
    const lazyBerth = () => (berth ??= createBerth({ home, logLevel: env.BERTH_LOG_LEVEL ?? command.logLevel ?? 'warn', onCreateStep }));
    return await command.run(lazyBerth, parsed.values, parsed.positionals, io, env);
  } catch (err) {
    if (isBerthError(err)) {
      io.err(`${err.toLine()}\n`);
      return err.exitCode;
    }
    io.err(`INTERNAL: ${(err as Error)?.stack ?? String(err)}\n`);
    return 70;
  }
}
