import type { Logger } from 'pino';
import { ownerAlive } from '../fs/process-identity.js';
import type { DeliveryStep, Inbox, InboxEntry } from '../store/inbox.js';
import type { JournaledMessage } from './chat-transport.js';
import type { LaneKey } from './lanes.js';
import { restartedNotice } from './reply-words.js';
import type { Strangers } from './strangers.js';

export interface RecoverDeps {
  inbox: Inbox;
  log: Logger;
  /** This berth process: a message another live berth of the home took is left to it. */
  owner?: string;
  senderAllowed: (sender: string) => boolean;
  strangers: Pick<Strangers, 'hold' | 'refuse' | 'releaseApproved'>;
  /** A message to answer, into its chat's lane. */
  enqueue: (message: JournaledMessage, tenant: string) => void;
  /** Send a journaled answer, in its chat's lane (after what the chat has waiting, never refused). `failure`: it tells of one; `from`: the way of sending a dead berth was trying (its earlier ways failed); `sent`: the parts of it already delivered. */
  redeliver: (
    lane: LaneKey,
    id: string,
    reply: string,
    failure?: string,
    from?: DeliveryStep,
    sent?: number,
    files?: InboxEntry['files'],
  ) => void;
}

/**
 * At startup: each message a dead berth left open ends its own way. Never started: answered now
 * (a stranger's: held, or refused); answered: the answer is sent; started: not run again (that
 * could do twice what the agent did once), the sender is told. `heldOnly`: a bridge restarted in
 * this process (the one before answers its own): only the strangers' held first messages.
 */
export function recoverInbox(deps: RecoverDeps, opts: { heldOnly?: boolean } = {}): void {
  const { inbox, log, strangers } = deps;
  for (const entry of inbox.open()) {
    if (opts.heldOnly && entry.phase !== 'held') continue;
    // Another live berth of this home (a serve beside a bridge) is still answering it.
    if (entry.owner !== undefined && entry.owner !== deps.owner && ownerAlive(entry.owner)) continue;
    if (entry.chat === undefined || entry.sender === undefined || entry.text === undefined) {
      inbox.mark(entry.id, 'failed', { reason: 'journal entry incomplete' });
      continue;
    }
    const message: JournaledMessage = {
      id: entry.id,
      chat: entry.chat,
      sender: entry.sender,
      text: entry.text,
      session: entry.session,
      level: entry.level,
      ...(entry.attachments?.length ? { attachments: entry.attachments } : {}),
    };
    const tenant = entry.tenant ?? entry.sender;
    const lane: LaneKey = { chat: entry.chat, tenant, sender: entry.sender };
    if (entry.phase === 'held') {
      // A stranger's first message: answered once they are approved (now, if they were meanwhile).
      strangers.hold(message, tenant);
    } else if (entry.phase === 'received' && !deps.senderAllowed(entry.sender)) {
      // A stranger's message a dead berth journaled but never refused: it is refused now, never run.
      strangers.refuse(message, tenant, false); // its text may be the cut one
    } else if (entry.phase === 'received') {
      log.info({ id: entry.id }, 'answering a message a previous berth journaled');
      deps.enqueue(message, tenant);
    } else if (entry.phase === 'answered' && entry.reply !== undefined) {
      deps.redeliver(lane, entry.id, entry.reply, entry.reason, entry.delivery, entry.sent, entry.files);
    } else {
      const reason = 'berth restarted while this message was running';
      const notice = restartedNotice(entry.text);
      inbox.mark(entry.id, 'answered', { reply: notice, reason });
      deps.redeliver(lane, entry.id, notice, reason);
    }
  }
  strangers.releaseApproved();
}
