import fs from 'node:fs';
import v8 from 'node:v8';
import { AGENT_PRESETS } from '../config/metadata.js';
import { BerthError, isBerthError } from '../base/errors.js';
import { closestName, didYouMean } from '../base/did-you-mean.js';
import { createBerth, type Berth } from '../main.js';
import { VERSION } from '../base/version.js';
import { type Command, type Out } from './command.js';
import { ENGINE_COMMANDS } from './server.js';
import { PROJECT_COMMANDS } from './projects.js';
import { RUN_COMMANDS } from './runs.js';
import { CHAT_COMMANDS } from './chat.js';
import { TRUST_COMMANDS } from './trust.js';
import { CONFIG_COMMANDS } from './config.js';
import { SECRET_COMMANDS } from './secrets.js';
import { APPROVAL_COMMANDS } from './approvals.js';
import { SCHEDULE_COMMANDS } from './schedules.js';
import { TENANT_COMMANDS } from './tenants.js';
import { CHECKPOINT_CLI_COMMANDS } from './checkpoints.js';
import { CONTROL_COMMANDS } from './control.js';
import { own } from '../base/own.js';
import { CHANNEL_NAMES } from '../channels/registry.js';
import { SERVING_V8_FLAGS } from '../base/node-support.js';
import { defaultHome, homePaths } from '../config/home.js';
import { parseCommandArgs } from './args.js';

/** A directory that already is a berth home: its berth.yaml or its state. */
const isBerthHome = (dir: string) => fs.existsSync(homePaths(dir).configFile) || fs.existsSync(homePaths(dir).stateDir);

export const USAGE = `berth — one kernel-isolated container per tenant, for AI coding agents

Usage: berth [--home DIR] <command> [options]

Projects
  project create <name> [--isolation] [--protect PATH]... [--image IMG] [--agent PRESET]
                        [--runtime NAME] [--model UPSTREAM]... [--allow-host HOST]...
  project update <name> [--isolation|--no-isolation] [--protect PATH]... [--no-protect]
                        [--timeout SECONDS] [--image IMG] [--agent PRESET] [--runtime NAME]
                        [--model UPSTREAM]... [--allow-host HOST]... [--no-allow-host]
                        [--approvals person|operator|off]
                        (--protect replaces the list; --no-protect empties it;
                        --model: a berth.yaml models entry its agents may call;
                        --allow-host: HOST, *.SUFFIX or HOST:PORT reachable at medium/high;
                        --approvals: who is asked for a host outside it, default person)
  project get <name>            settings, workspaces and protection as JSON
  project list [--json]
  project show <name>           private workspace and shared-area grants (operator view)
  project delete <name> --confirm <name>
                                stop its containers, move it to .berth/trash/
  project pause <name> [--reason TEXT]   refuse its new runs (in words in the chats) until resumed
  project resume <name>
  project --help                the project commands (any group: chat-link, session, ...)

Operator (berth.yaml; comments and order kept)
  project grant <project> <area> [--rw]
  project revoke <project> <area>
  project set-private-workspace <project> <abs-path>   (moves the project there)
  project unset-private-workspace <project>            (moves it back)
  config get [<path>]           berth.yaml as berth reads it (secrets shown as "(set)")
  config set <path> <value>     one setting, e.g. config set runs.warm_idle_seconds 300
                                (checked with the whole file first; a running serve follows it)
  config unset <path>           remove one setting: its default applies again
  home                          the home this berth uses (where projects, berth.yaml and state live)
  secret set <NAME> (--from-file PATH | --from-env VAR | --from-command CMD | --stdin)
                                a credential agents use without holding it (never printed)
  secret grant <NAME> --project P --host HOST [--path-prefix /P] [--methods M,..]
                        [--header H] [--format "token {}" | --basic-user U] [--per-minute N]
                                berth adds it to P's HTTPS requests to HOST (docs/secrets.md)
  secret revoke <NAME> --project P [--host HOST]   takes effect at the next request
  secret list [--json]          sources, readable or not, grants
  secret rm <NAME>              forget it and its grants

Workflows
  workflow list <project>
  workflow run <project> <workflow> [--input TEXT]
  channel run <channel> [--input TEXT]   the default workflow of a route

Runs and sessions
  run <project> --user <tenant-key> [--session ID] [--level low|medium|high] [--] <message...>
                                prints the agent's output, exits with its exit code
                                (--level sets the session's permission level, persisted)
  runs <project> [--user T] [--limit N] [--json]   recent runs and interrupted ones
  runs show <project> <run> [--json]    one run: who, what, how, what it touched
  runs stop <project> <run> [--reason TEXT]   stop a run going on (in this home's serve too)
  tenant show <project> <tenant-key> [--json]  a tenant's sessions and today's use
  session list <project>
  session get <project> <session-id>
  session set <project> <session-id> [--level low|medium|high] [--mode tenant|session]
  session delete <project> <session-id>   forget its conversation (agent home) and tokens
  session snapshot|checkpoints <project> <session-id>   keep a checkpoint now; list them
  session restore <project> <session-id> [<checkpoint>]  workspace and conversation back (/undo)
  session fork <project> <session-id> <new-session-id>   a new session from this one (/fork)
  session end <project> <session-id>      stop its runs, let its container go, revoke its tokens (kept)
  schedule add <project> --user <tenant> [--session S] (--every SPEC | --at TIME) [--tz ZONE]
               [--chat CHANNEL:CHAT] -- <task...>
                                run the agent on a repeat or once (docs/schedules.md);
                                serve fires them, --chat posts the answers there
  schedule list [<project>] [--user T] [--json]
  schedule cancel <id>
  tenant export <project> <tenant> --out FILE   everything berth keeps of a person, as one tar
  tenant forget <project> <tenant> --confirm <tenant>   remove it all (one audit line, by digest)
  tenant frozen | tenant unfreeze <project> <tenant>   tenants stopped for using a decoy credential

Server
  serve [--host HOST] [--port PORT] [--demo]
                                HTTP admin API, /docs, /openapi.json, MCP at /mcp, web chat at /chat,
                                the operator's console at /console
                                (token: berth.yaml admin_token, $BERTH_ADMIN_TOKEN, or generated)
  chat-link <project> --user <name> [--base URL] [--ttl SECONDS]
                                a person's web chat link (tenant web:<name>): works once,
                                within a day; the login lasts 7 days (--ttl, at most 30)
  chat-link logins <project> [--user <name>] [--json]   who is logged in, unused links
  chat-link revoke <project> --user <name>   log a person out everywhere, void their links
  mcp [--print-config]          the admin tools as an MCP server over stdio
                                (--print-config: the config an MCP client needs to start it)
  bridge ${CHANNEL_NAMES.join('|')}
                                only that chat bridge (serve runs them all, and /hooks/)
  bridge pending                senders waiting for the operator's approval
  bridge approve <sender>       let a sender (signal:<uuid>, telegram:<id>) talk to the bot
  bridge deny <sender>          turn a waiting sender away (their kept first message is dropped)
  approvals list [--project P] [--json]   what agents wait for (a host outside the allowlist)
  approvals allow <id> [--session]        let the waiting run reach it (--session: its conversation)
  approvals deny <id>                     refuse it

Engine
  images build [shell|agent] [--base IMAGE] [--force]
                                build berth's images with no container registry (default: shell;
                                agent: real Claude Code and Codex on a Debian base, from Debian's
                                mirrors and npm: 1-20 min the first time, ~30 s cached)
  doctor                        engine, runc, images, config: non-zero exit when unsafe
  verify [--json]               attack this host live (throw-away project): exits 1 on any escape
  audit [--since T] [--project P] [--actor A] [--kind K] [--json]
                                the audit log, newest first (T: ISO time, or 10m, 2h, 7d)
  audit verify                  check the audit log's hash chain (exits 1 where it is broken)
  demo                          two tenants, one boundary: a walk-through (as demo:alice, demo:bob)

Options
  --home DIR    the berth home (default: $BERTH_HOME, else the current directory if it is one
                (berth.yaml or .berth/ there), else ~/.local/share/berth)
  -h, --help    this text        --version    berth's version

Agent presets: ${AGENT_PRESETS.join(', ')} (or a custom argv with {message} in metadata.json).
Errors print "<CODE>: <reason>" on stderr and exit non-zero.
`;

/** A session, checked to belong to the project named on the command line. */

const COMMANDS: Record<string, Command> = {
  ...PROJECT_COMMANDS,
  ...RUN_COMMANDS,
  ...CHAT_COMMANDS,
  ...ENGINE_COMMANDS,
  ...TRUST_COMMANDS,
  ...CONFIG_COMMANDS,
  ...SECRET_COMMANDS,
  ...APPROVAL_COMMANDS,
  ...SCHEDULE_COMMANDS,
  ...TENANT_COMMANDS,
  ...CHECKPOINT_CLI_COMMANDS,
  ...CONTROL_COMMANDS,
};

function commandHelp(name: string, command: Command): string {
  const related = groupOf(name).map((n) => `  berth ${(own(COMMANDS, n) as Command).usage.split('\n')[0]}`);
  return `Usage: berth [--home DIR] ${command.usage}\n${related.length ? `\nRelated:\n${related.join('\n')}\n` : ''}\n(berth --help lists every command)\n`;
}

/** The commands of a group ("project", "chat-link", ...): each one's synopsis and what it does. */
function groupOf(word: string): string[] {
  return Object.keys(COMMANDS).filter((name) => name.startsWith(`${word} `));
}

function groupHelp(word: string): string {
  const lines = groupOf(word).map((name) => `  berth ${(own(COMMANDS, name) as Command).usage.split('\n')[0]}`);
  return `The "${word}" commands:\n${lines.join('\n')}\n\n("berth help ${word} <command>" or "berth ${word} <command> --help" for one)\n`;
}

/** `berth help [command]`: one command's usage, a group's commands, or the whole list. */
function helpFor(words: string): string {
  if (!words) return USAGE;
  const command = own(COMMANDS, words);
  if (command) return commandHelp(words, command);
  if (groupOf(words).length) return groupHelp(words);
  throw new BerthError('USAGE', `no command "${words}"`, { hint: 'see "berth --help"' });
}

/** Node's parseArgs refusals, in berth's words (the option, the command, its usage). */
function usageError(name: string, command: Command, err: unknown): BerthError {
  const code = (err as { code?: string }).code;
  const option = /'([^']+)'/.exec((err as Error).message)?.[1] ?? '';
  const hint = `usage: berth ${command.usage.split('\n')[0]}`;
  if (code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION') {
    const known = ['home', 'help', ...Object.keys(command.options ?? {})].map((o) => `--${o}`);
    const suggestion = didYouMean(option, known);
    const run = name === 'run' && !suggestion ? ' (a message starting with - goes after --)' : '';
    return new BerthError('USAGE', `unknown option "${option}" for "berth ${name}"${suggestion}${run}`, { hint });
  }
  if (code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE')
    return new BerthError('USAGE', `option "${option.split(' ')[0]}" of "berth ${name}" needs a value`, { hint });
  return new BerthError('USAGE', `"berth ${name}": ${(err as Error).message.split('.')[0]}`, { hint });
}

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
    else
      throw new BerthError('USAGE', `unknown option "${a}"${didYouMean(a.split('=')[0] as string, ['--home', '--help', '--version'])}`, {
        hint: 'see "berth --help"',
      });
  }
  if (args[0] === 'help') return { home, name: 'help', rest: args.slice(1), help };
  const two = `${args[0]} ${args[1]}`;
  if (own(COMMANDS, two)) return { home, name: two, rest: args.slice(2), help };
  if (args[0] && own(COMMANDS, args[0])) return { home, name: args[0], rest: args.slice(1), help };
  if (args.length === 0) return { home, rest: [], help: true };
  const group = args[0] ? groupOf(args[0]) : [];
  if (group.length && (args[1] === undefined || args[1] === '--help' || args[1] === '-h'))
    return { home, name: 'help', rest: [args[0] as string], help: true };
  const hint = group.length
    ? `"berth ${args[0]} --help" lists its commands: ${group.map((n) => n.split(' ')[1]).join(', ')}`
    : 'see "berth --help"';
  const suggestion = closestCommand(args);
  throw new BerthError(
    'USAGE',
    `unknown command "${args.slice(0, 2).join(' ')}"${suggestion ? `; did you mean "berth ${suggestion}"?` : ''}`,
    { hint },
  );
}

/**
 * The command a mistyped one most likely meant: its first word as a command or group
 * ("projct" → "project"), then the second as one of that group's ("projct lst" → "project list").
 */
function closestCommand(args: string[]): string | undefined {
  const [first = '', second] = args;
  const heads = [...new Set(Object.keys(COMMANDS).map((n) => n.split(' ')[0] as string))];
  const head = heads.includes(first) ? first : closestName(first, heads);
  if (head === undefined) return undefined;
  const subs = groupOf(head).map((n) => n.split(' ')[1] as string);
  if (!subs.length || second === undefined || second.startsWith('-')) return head === first ? undefined : head;
  const sub = subs.includes(second) ? second : closestName(second, subs);
  if (sub === undefined) return head === first ? undefined : head;
  return `${head} ${sub}`;
}

export async function main(argv: string[], env: NodeJS.ProcessEnv, io: Out): Promise<number> {
  try {
    const split = splitCommand(argv);
    if (split.name === '--version') {
      io.out(`berth ${VERSION}\n`);
      return 0;
    }
    if (split.name === 'help') {
      io.out(helpFor(split.rest.join(' ')));
      return 0;
    }
    if (!split.name) {
      io.out(USAGE);
      return 0;
    }
    const command = own(COMMANDS, split.name) as Command;
    if (split.help) {
      io.out(commandHelp(split.name, command));
      return 0;
    }
    let parsed: ReturnType<typeof parseCommandArgs>;
    try {
      parsed = parseCommandArgs(split.rest, { ...command.options, home: { type: 'string' }, help: { type: 'boolean', short: 'h' } });
    } catch (err) {
      throw usageError(split.name, command, err);
    }
    if (parsed.values.help) {
      io.out(commandHelp(split.name, command));
      return 0;
    }
    const home = (parsed.values.home as string | undefined) ?? split.home ?? env.BERTH_HOME ?? defaultHome(env, process.cwd(), isBerthHome);
    if (command.longRunning) v8.setFlagsFromString(SERVING_V8_FLAGS);
    let berth: Berth | undefined;
    // Fault injection for the crash tests: die (no cleanup, like a power cut) after a create step.
    const killAt = env.BERTH_TEST_KILL_AFTER_STEP;
    const onCreateStep = killAt ? (step: string) => void (step === killAt && process.kill(process.pid, 'SIGKILL')) : undefined;
    const lazyBerth = () =>
      (berth ??= createBerth({
        home,
        logLevel: env.BERTH_LOG_LEVEL ?? command.logLevel ?? 'warn',
        onCreateStep,
        metricsToken: env.BERTH_METRICS_TOKEN,
        processMetrics: command.longRunning,
        warm: command.longRunning,
      }));
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
