import { createHash } from 'node:crypto';
import type { Logger } from 'pino';
import { isBerthError, type ErrorCode } from '../base/errors.js';
import type { BridgeState } from '../store/bridge-state.js';
import type { ChatTransport, JournaledMessage } from './chat-transport.js';
import type { CommandAdmin } from './commands.js';
import type { BerthConfig } from '../config/berth-config.js';
import { own } from '../base/own.js';
import { loggedOutNotice, sessionGoneNotice } from './reply-words.js';

// A chat's conversation as the core keeps it: which session a chat talks in, and whether a message
// taken from its lane may still run in it.

/** The project (and workflow) answering a chat: the transport's own, else its routes ("<name>:<chat>", then "<name>", unless the channel names them). */
export function routeOf(
  transport: Pick<ChatTransport, 'name' | 'projectOf' | 'profileKeys'>,
  routes: BerthConfig['routes'],
  chat: string,
): { project: string; workflow?: string } | undefined {
  const project = transport.projectOf?.(chat);
  if (project !== undefined) return { project };
  for (const key of transport.profileKeys?.(chat) ?? [`${transport.name}:${chat}`, transport.name]) {
    const route = own(routes, key);
    if (route) return route;
  }
  return undefined;
}

/** Why a message taken from its lane may no longer run, with what its person is told. */
export type Lapsed = { code: ErrorCode; reason: string; notice: string };

export function chatConversations(deps: {
  admin: Pick<CommandAdmin, 'getSession'>;
  state: BridgeState;
  transport: Pick<ChatTransport, 'name' | 'newSession'>;
  log: Logger;
  stillAllowed?: (message: { id: string; chat: string; sender: string }) => boolean;
}) {
  const { transport, log } = deps;
  /** Why a message taken from its lane may no longer run: its sender was logged out, or the session they picked is gone. */
  function lapsed(entry: JournaledMessage, project: string, tenant: string): Lapsed | undefined {
    if (deps.stillAllowed && !deps.stillAllowed(entry))
      return { code: 'UNAUTHORIZED', reason: 'its sender was logged out before it ran', notice: loggedOutNotice(entry.text) };
    if (entry.session !== undefined && !sessionStillThere(project, entry.session, tenant))
      return { code: 'SESSION_NOT_FOUND', reason: 'its session was deleted before it ran', notice: sessionGoneNotice(entry.text) };
    return undefined;
  }

  /**
   * The chat's conversation. A chat that changed hands (a direct chat that became a group, or
   * back: its tenant is another now) never continues the conversation of the one who held it: it
   * starts its next one, as /new does, and the former holder's session (and home) stays theirs.
   */
  function chatSession(project: string, chat: string, tenant: string): string {
    const id = chatSessionId(transport.name, chat, deps.state.generation(chat));
    const holder = sessionHolder(project, id);
    if (holder === undefined || holder === tenant) return id;
    log.info({ chat, from: holder, to: tenant }, 'the chat changed hands: a new conversation for it');
    return transport.newSession?.(chat) ?? chatSessionId(transport.name, chat, deps.state.nextGeneration(chat));
  }

  /** Whose a session is; undefined when there is none (or it cannot be read: the run reports that). */
  function sessionHolder(project: string, id: string): string | undefined {
    try {
      return deps.admin.getSession(project, id).tenant_key;
    } catch {
      return undefined;
    }
  }

  /** The session the person picked is there and still theirs. Any other trouble is the run's to report. */
  function sessionStillThere(project: string, id: string, tenant: string): boolean {
    try {
      return deps.admin.getSession(project, id).tenant_key === tenant;
    } catch (err) {
      if (isBerthError(err, 'SESSION_NOT_FOUND') || isBerthError(err, 'CONFIG_INVALID')) return false;
      return true;
    }
  }

  return { lapsed, chatSession };
}

const BUSY_ATTEMPTS = 10;

/**
 * A chat message is already journaled: a full run queue (BUSY) makes it wait its Retry-After
 * and try again (a few times, about ten minutes at most) instead of failing at once.
 */
export async function whenAdmitted<T>(fn: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await fn();
    } catch (err) {
      if (!isBerthError(err, 'BUSY') || attempt >= BUSY_ATTEMPTS) throw err;
      await new Promise((r) => setTimeout(r, (err.details.retry_after ?? 5) * 1000));
    }
  }
}

/** A stable session id for a chat and its generation (/new starts the next). */
export function chatSessionId(bridge: string, chat: string, generation: number): string {
  return `chat-${createHash('sha256').update(`${bridge}\0${chat}`).digest('hex').slice(0, 20)}-${generation}`;
}
