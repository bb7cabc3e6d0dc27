import type { Agent } from '../config/metadata.js';
import { MESSAGE_PLACEHOLDER } from '../config/metadata.js';

/**
 * The argv each preset runs; "{message}" is replaced by the user's message, never parsed by a
 * shell of ours. The message always follows "--", so one that starts with "-" is never read as
 * an option ("--help", "-x", "--dangerously-…").
 *
 * - The agents skip their own permission prompts: nobody is there to answer them, and the
 *   container is the boundary that holds.
 * - They continue the session's conversation, kept in its agent home (measured: on a home with
 *   no conversation yet, `claude -p --continue` and `codex exec resume --last` start one).
 * - Factory's droid continues only by a session id it prints (`droid exec -s <id>`); berth does
 *   not track that yet, so each droid message starts afresh.
 */
export const PRESET_ARGV = {
  shell: ['sh', '-c', '--', MESSAGE_PLACEHOLDER],
  droid: ['droid', 'exec', '--skip-permissions-unsafe', '--output-format', 'stream-json', '--', MESSAGE_PLACEHOLDER],
  claude: [
    'claude',
    '-p',
    '--output-format',
    'stream-json',
    '--verbose',
    '--dangerously-skip-permissions',
    '--continue',
    '--',
    MESSAGE_PLACEHOLDER,
  ],
  codex: [
    'codex',
    'exec',
    'resume',
    '--last',
    '--json',
    '--dangerously-bypass-approvals-and-sandbox',
    '--skip-git-repo-check',
    '--',
    MESSAGE_PLACEHOLDER,
  ],
} as const;

/** How berth reads an agent's output as it works (runs/agent-progress.ts): steps, notes, the answer. */
export type ProgressFormat = 'claude-stream-json' | 'codex-json' | 'droid-stream-json' | 'shell-trace';

/** The shell preset's PS4: a trace line starts with it. Set inside the shell, never exported: the agent's environment does not show it. */
export const SHELL_TRACE_PS4 = '\x1fberth-step\x1f ';

/** What `wget` says where there is no network (level low): busybox's own wget crashes on a name it cannot resolve. */
export const NO_NETWORK_WORDS = 'there is no network at level low (at medium the agent reaches the hosts this project allows)';

/**
 * How the no-network wget calls the image's own for a loopback address (the model gateway is
 * there at every level); ash traces it as "BERTH_LOOPBACK=1 wget …", which the reader drops.
 */
const LOOPBACK_MARK = 'BERTH_LOOPBACK=1 ';

/**
 * The shell preset's script around the message, which is its $1 (never parsed by a shell of
 * ours): traced, PS4 is set in the shell and `set -x` turned on inside the eval, so only the
 * message's own commands are traced; without a network, `wget` is a function that says so for
 * any address but loopback (busybox's wget crashes on a name it cannot resolve).
 */
function shellScript(trace: boolean, noNetwork: boolean): string | undefined {
  if (!trace && !noNetwork) return undefined;
  const refuse = `sh -c 'echo "wget: ${NO_NETWORK_WORDS}" >&2; exit 1'`;
  const wget = noNetwork
    ? `wget() { case "$*" in *127.0.0.1*|*localhost*) ${LOOPBACK_MARK}command wget "$@";; *) ${refuse};; esac; }; `
    : '';
  return trace ? `PS4=$(printf '\\037berth-step\\037 '); ${wget}eval "set -x; $1"` : `${wget}eval "$1"`;
}

/**
 * The format a preset's output is read in. Claude Code, Codex and droid always stream events
 * (their answer is read from them); the shell traces its commands only when someone watches
 * (`live`): the trace costs output bytes. Custom argv: plain output.
 */
export function progressFormatOf(agent: Agent, live: boolean): ProgressFormat | undefined {
  if (agent === 'claude') return 'claude-stream-json';
  if (agent === 'codex') return 'codex-json';
  if (agent === 'droid') return 'droid-stream-json';
  if (agent === 'shell' && live) return 'shell-trace';
  return undefined;
}

/**
 * Codex ignores OPENAI_BASE_URL (since 0.119): berth's model gateway is named as a provider on
 * its command line instead, plain HTTP and no websockets (the relay is a byte pipe on loopback).
 */
export function codexProviderArgs(baseUrl: string): string[] {
  const provider = `{name="berth",base_url=${JSON.stringify(baseUrl)},env_key="OPENAI_API_KEY",wire_api="responses",supports_websockets=false}`;
  return ['-c', `model_providers.berth=${provider}`, '-c', 'model_provider=berth'];
}

/**
 * Codex's own background calls, off (measured with codex 0.169.0 against the fake Responses API,
 * docs/agents.md): plugins (github.com, api.github.com, chatgpt.com: the plugin marketplace and
 * its connectors) and analytics (ab.chatgpt.com). With both off, `codex exec` contacts no host
 * but the model's.
 */
export const CODEX_QUIET_ARGS = ['-c', 'features.plugins=false', '-c', 'analytics.enabled=false'] as const;

/**
 * Hosts a preset is known to call for itself (telemetry, plugins), never for the person's task:
 * refused without asking anyone (egress-proxy.ts), in case a CLI version calls them despite its
 * settings. github.com is not one: a task may need it (git clone), so it is still asked for.
 * Claude Code called only api.anthropic.com for itself, and nothing with
 * CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC (plan/outbound.ts); that host is a task's too.
 */
export const PRESET_OWN_HOSTS: Partial<Record<string, readonly string[]>> = {
  codex: ['chatgpt.com:443', 'ab.chatgpt.com:443'],
};

/** Whether `target` ("host:port") is a host the agent's preset calls for itself (a custom argv: none). */
export function presetOwnHost(agent: Agent, target: string): boolean {
  return typeof agent === 'string' && (PRESET_OWN_HOSTS[agent]?.includes(target) ?? false);
}

/** A trace line of the wrapper's own wget (its refusal, or its call of the real one): no step of the person's. */
export function isShellWrapperTrace(command: string): boolean {
  return command.includes(NO_NETWORK_WORDS) || command.startsWith(LOOPBACK_MARK);
}

/** The message a shell preset's argv (agentArgv) runs, as the person wrote it; undefined for any other argv. */
export function shellMessageOf(exec: readonly string[]): string | undefined {
  if (exec[0] === 'sh' && exec[1] === '-c' && exec[3] === 'sh' && exec.length === 5) return exec[4];
  if (exec[0] === 'sh' && exec[1] === '-c' && exec[2] === '--' && exec.length === 4) return exec[3];
  return undefined;
}

/** `noNetwork`: the run reaches no host at all (level low). */
export function agentArgv(
  agent: Agent,
  message: string,
  opts: { openaiBaseUrl?: string; progress?: ProgressFormat; noNetwork?: boolean } = {},
): string[] {
  let template: readonly string[] = typeof agent === 'string' ? PRESET_ARGV[agent] : agent;
  const script = agent === 'shell' ? shellScript(opts.progress === 'shell-trace', opts.noNetwork === true) : undefined;
  if (script) return ['sh', '-c', script, 'sh', message];
  if (agent === 'codex')
    template = [
      ...template.slice(0, 4),
      ...(opts.openaiBaseUrl ? codexProviderArgs(opts.openaiBaseUrl) : []),
      ...CODEX_QUIET_ARGS,
      ...template.slice(4),
    ];
  return template.map((arg) => arg.split(MESSAGE_PLACEHOLDER).join(message));
}
