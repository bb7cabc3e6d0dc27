import { isBerthError, type ErrorCode } from '../base/errors.js';

/**
 * What a person in a chat reads when their message could not be run: what happened, in their
 * words, and what to do next; the code and berth's own message follow, for the operator they may
 * forward it to. Pure.
 */

/** The server's side: nothing the person can do but try later or tell the operator. */
const OPERATOR_FIXES = 'berth could not start the agent: the server needs its operator ("berth doctor" says what). Send it again later.';

const WORDS: Partial<Record<ErrorCode, string>> = {
  BUSY: 'berth is busy with other messages right now. Send it again in a minute.',
  LIMIT_REACHED: 'you have reached the limit set for this chat. Try again later.',
  SHUTTING_DOWN: 'berth is restarting. Send it again in a moment.',
  SESSION_NOT_FOUND: 'that conversation no longer exists. Start a new one (/new) and send it again.',
  PERMISSION_DENIED: 'that is not allowed in this chat.',
  PAYLOAD_TOO_LARGE: 'it is too long. Send a shorter one.',
  PROJECT_PAUSED: 'the operator has paused this agent for now. Send it again once they resume it.',
};

export function chatFailure(preview: string, err: unknown): string {
  if (!isBerthError(err))
    return `berth: your message "${preview}" was not run: ${OPERATOR_FIXES}\n(for the operator: internal error, see the server log)`;
  const session = err.code === 'CONFIG_INVALID' && err.details.issues?.some((i) => i.field === 'session');
  const words = session
    ? 'this conversation cannot take messages. Start a new one (/new) and send it again.'
    : (WORDS[err.code] ?? OPERATOR_FIXES);
  return `berth: your message "${preview}" was not run: ${words}\n(for the operator: ${err.code}: ${err.message})`;
}
