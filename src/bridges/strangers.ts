import type { Logger } from 'pino';
import type { BridgeState } from '../store/bridge-state.js';
import type { Inbox } from '../store/inbox.js';
import type { JournaledMessage } from './chat-transport.js';

/**
 * Pairing, the core's side: a sender nobody approved runs nothing. What is kept of their message
 * is bounded; the operator is told once per new sender; their first message (whole, if short
 * enough) is held and answered once they are approved; otherwise they hear one refusal per hour
 * (Signal rate-limits the bot, not them), and later messages end without one.
 */

/** What is kept of an unapproved sender's message (it never runs), and how often they hear a refusal. */
export const STRANGER_TEXT_CHARS = 200;
export const STRANGER_REPLY_EVERY_MS = 60 * 60 * 1000;
export const STRANGER_NOTICE =
  'berth: this bot does not know you yet. The operator has been asked to approve you; you will get a message when you can talk.';
/** What a stranger hears of their first message, which is kept: answered once they are approved. */
export const STRANGER_HELD_NOTICE =
  'berth: this bot does not know you yet. The operator has been asked to approve you; your message is kept and answered as soon as they do.';
/** The longest first message of a stranger that is kept for after their approval (longer: refused, to be sent again). */
export const STRANGER_HELD_CHARS = 4000;
/** How often held first messages are checked for their sender's approval. */
export const HELD_CHECK_MS = 2000;
/** Sent (by `berth bridge approve`) to a sender who waited. */
export const APPROVED_NOTICE = 'berth: the operator approved you: you can talk to this bot now (/help lists what it understands).';
/** The same, to a sender whose first message was kept. */
export const APPROVED_HELD_NOTICE =
  'berth: the operator approved you: your first message is being answered (/help lists what this bot understands).';

/** What is journaled of a message: all of it from a known sender; a stranger's up to STRANGER_HELD_CHARS (it may be held), else its start, for the operator. */
export function keptText(text: string, allowed: boolean): string {
  return allowed || text.length <= STRANGER_HELD_CHARS ? text : text.slice(0, STRANGER_TEXT_CHARS);
}

export interface StrangerDeps {
  state: BridgeState;
  inbox: Inbox;
  log: Logger;
  senderAllowed: (sender: string) => boolean;
  senderDenied?: (sender: string) => boolean;
  /** Tell the chat (best effort). */
  say: (chat: string, text: string) => void;
  /** End a message unrun, its sender told (the core's journal-then-tell). */
  fail: (id: string, chat: string, reason: string, notice: string) => Promise<void>;
  /** An approved sender's held message joins its chat's lane. */
  enqueue: (message: JournaledMessage, tenant: string) => void;
}

export interface Strangers {
  /** A stranger's journaled message: held (a first, `whole` one) or refused; never run. */
  refuse(m: JournaledMessage & { senderName?: string }, tenant: string, whole: boolean): void;
  /** Watch a held first message (a recovered one too) until its sender is approved or turned away. */
  hold(message: JournaledMessage, tenant: string): void;
  /** Run the held messages whose senders were approved meanwhile; drop those turned away. */
  releaseApproved(): void;
  /** Stop watching (the next core holds them again). */
  close(): void;
}

export function createStrangers(deps: StrangerDeps): Strangers {
  const { inbox, log } = deps;
  // Held first messages (at most bridge-state's MAX_PENDING: one per pending sender), and a check
  // every HELD_CHECK_MS while any wait: approval may come from another process (the CLI), so it
  // is read, not told.
  const held = new Map<string, { message: JournaledMessage; tenant: string }>();
  let timer: NodeJS.Timeout | undefined;

  function hold(message: JournaledMessage, tenant: string) {
    held.set(message.id, { message, tenant });
    timer ??= setInterval(releaseApproved, HELD_CHECK_MS);
    timer.unref();
  }

  function releaseApproved() {
    for (const [id, { message, tenant }] of held) {
      if (deps.senderDenied?.(message.sender)) {
        held.delete(id);
        inbox.mark(id, 'failed', { reason: 'its sender was turned away by the operator: not run, not answered' });
        continue;
      }
      if (!deps.senderAllowed(message.sender)) continue;
      held.delete(id);
      log.info({ id, sender: message.sender }, 'a held first message is answered: its sender was approved');
      inbox.mark(id, 'received', { reason: 'its sender was approved' });
      deps.enqueue(message, tenant);
    }
    if (held.size === 0 && timer) {
      clearInterval(timer);
      timer = undefined;
    }
  }

  return {
    refuse(m, tenant, whole) {
      const seen = deps.state.noteStranger(m.sender, m.senderName, new Date(), STRANGER_REPLY_EVERY_MS);
      if (seen.first)
        log.info(
          { sender: m.sender, name: m.senderName?.slice(0, 64) },
          `a new sender waits for approval (berth bridge approve ${m.sender})`,
        );
      if (seen.first && whole) {
        inbox.mark(m.id, 'held', { reason: 'sender not approved yet: answered once the operator approves them' });
        hold({ id: m.id, chat: m.chat, sender: m.sender, text: m.text }, tenant);
        deps.say(m.chat, STRANGER_HELD_NOTICE);
        return;
      }
      if (seen.reply) void deps.fail(m.id, m.chat, 'sender not approved', STRANGER_NOTICE);
      else inbox.mark(m.id, 'failed', { reason: 'sender not approved (refused already this hour: no reply)' });
    },
    hold,
    releaseApproved,
    close() {
      held.clear();
      clearInterval(timer);
      timer = undefined;
    },
  };
}
