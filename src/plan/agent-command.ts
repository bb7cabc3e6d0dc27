import type { Agent } from '../config/metadata.js';
import { MESSAGE_PLACEHOLDER } from '../config/metadata.js';

/**
 * The argv each preset runs; "{message}" is replaced by the user's message, never parsed by a
 * shell of ours. The message always follows "--", so one that starts with "-" is never read as
 * an option ("--help", "-x", "--dangerously-…").
 */
export const PRESET_ARGV = {
  shell: ['sh', '-c', '--', MESSAGE_PLACEHOLDER],
  droid: ['droid', 'exec', '--', MESSAGE_PLACEHOLDER],
  claude: ['claude', '-p', '--', MESSAGE_PLACEHOLDER],
  codex: ['codex', 'exec', '--', MESSAGE_PLACEHOLDER],
} as const;

export function agentArgv(agent: Agent, message: string): string[] {
  const template = typeof agent === 'string' ? PRESET_ARGV[agent] : agent;
  return template.map((arg) => arg.split(MESSAGE_PLACEHOLDER).join(message));
}
