import type { RunView } from '../admin/views.js';
import { LOST_WARNING, STOPPED_WARNING } from '../runs/run-halt.js';
import { CHAT_PENDING_MAX, TENANT_PENDING_MAX } from './lanes.js';

/**
 * What the bridge core tells a chat about a message: a run's answer, and why a message was not
 * run or not finished. Pure. (A run that could not start is `chat-words.ts`.)
 */

/** A message as the chat is reminded of it. */
export function preview(text: string): string {
  return text.length > 60 ? `${text.slice(0, 57)}...` : text;
}

/** The end of a run's stderr a chat is shown, when it failed or printed nothing else. */
const STDERR_SHOWN = 1500;

/** A run's answer as the chat shows it: what the agent said, and why it ended if not on its own. */
export function replyText(run: RunView): string {
  const out = run.stdout.trim();
  if (run.timed_out) return `${out}\n\n[berth: stopped after the time limit]`.trim();
  // Stopped by berth for a reason of its own (disk limit, an unreachable model service): say it.
  const stopped = run.warnings.find((w) => w.startsWith(STOPPED_WARNING));
  if (stopped) return `${out}${out ? '\n\n' : ''}[berth stopped the agent: ${stopped.slice(STOPPED_WARNING.length)}]`;
  const lost = run.warnings.find((w) => w.startsWith(LOST_WARNING));
  if (lost) return `${out}${out ? '\n\n' : ''}[the agent's container ended before it finished: ${lost.slice(LOST_WARNING.length)}]`;
  const err = run.stderr.trim().slice(-STDERR_SHOWN);
  if (run.exit_code !== 0) return `${out}${out ? '\n\n' : ''}[exit ${run.exit_code}]${err ? `\n${err}` : ''}`;
  // A run that printed only to stderr still says what it printed (a chat without live output would show nothing).
  return out || (err ? `[stderr]\n${err}` : '(no output)');
}

/** A message refused at the lane's door: which bound was full (lanes.ts). */
export function refusedNotice(full: 'chat' | 'tenant' | 'sender' | 'bridge', text: string): string {
  const again = 'Send it again once I have answered the others.';
  if (full === 'chat')
    return `berth: ${CHAT_PENDING_MAX} of your messages in this chat are waiting already, so "${preview(text)}" was not run. ${again}`;
  if (full === 'tenant' || full === 'sender')
    return `berth: ${TENANT_PENDING_MAX} of your messages are waiting already, so "${preview(text)}" was not run. ${again}`;
  return `berth: I am too busy to take more messages right now, so "${preview(text)}" was not run. Please send it again in a few minutes.`;
}

/** Its sender's login ended while it waited (web chat). */
export const loggedOutNotice = (text: string) => `berth: you were logged out before your message "${preview(text)}" ran; it was not run.`;

/** The session its sender picked was deleted while it waited. */
export const sessionGoneNotice = (text: string) => `berth: that conversation was deleted; your message "${preview(text)}" was not run.`;

/** No way of sending the answer went through; the notice is short, so it may still go. `refused`: the service would not take it, else it failed. */
export const undeliveredNotice = (id: string, refused: boolean) =>
  `berth: the answer to your message could not be delivered here (the chat service ${refused ? 'refused it' : 'failed'}). The operator can find it as message ${id}.`;

/** berth restarted while it ran: it is not run again (that could do twice what the agent did once). */
export const restartedNotice = (text: string) =>
  `berth: I restarted while working on your message "${preview(text)}". It was not finished; please send it again.`;
