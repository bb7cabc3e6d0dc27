import type { Logger } from 'pino';
import type { AdminService } from '../admin/service.js';
import type { ApprovalEvent } from '../store/approvals.js';
import { openChatTranscripts, type TranscriptEntry } from '../store/chat-transcripts.js';
import { approvalOutcome, approvalUnreachable } from './approval-words.js';
import type { WebServerMessage } from './web-protocol.js';

type Where = { project: string; session: string };

/**
 * What the web chat keeps of a session for the page to show again after a reload (the
 * transcript: store/chat-transcripts.ts), beside what it pushes live.
 */
export function openWebHistory(deps: { stateDir: string; admin: Pick<AdminService, 'getSession'>; log: Logger }) {
  const transcripts = openChatTranscripts(deps.stateDir);
  /** The session is still there (a reply for one deleted meanwhile is shown, never written: its transcript went with it). */
  const sessionThere = (a: Where) => {
    try {
      deps.admin.getSession(a.project, a.session);
      return true;
    } catch {
      return false;
    }
  };
  return {
    /** What the person sent (its message was accepted). */
    sent: (a: Where, entry: Omit<TranscriptEntry, 'at'>) => transcripts.append(a.project, a.session, entry),
    /** What came back: kept unless the session went meanwhile. */
    keep(a: Where, entry: Omit<TranscriptEntry, 'at'>): void {
      if (sessionThere(a)) transcripts.append(a.project, a.session, entry);
    },
    /** An approval card or its answer: as keep, but never throws (the egress proxy calls it). */
    keepQuietly(a: Where, entry: Omit<TranscriptEntry, 'at'>): void {
      try {
        if (sessionThere(a)) transcripts.append(a.project, a.session, entry);
      } catch (err) {
        deps.log.warn({ err: String(err).slice(0, 200), session: a.session }, 'chat transcript: entry not kept');
      }
    },
    read: (a: Where) => transcripts.read(a.project, a.session),
  };
}

/**
 * An approval card or its answer, as the history keeps it and the page is told (pure): the card
 * and its answer (who, when) stay in the conversation after a reload.
 */
export function approvalForWeb(
  event: ApprovalEvent,
  session: string,
  now: string,
): { entry: Omit<TranscriptEntry, 'at'>; message: WebServerMessage } {
  if (event.type === 'asked') {
    const { id, kind, target, approver, asked_at, expires_at } = event.approval;
    return {
      entry: {
        role: 'approval',
        text: kind === 'secret' ? `asked to use secret ${target}` : `asked to reach ${target}`,
        approval: { id, kind, target, approver, asked_at, expires_at },
      },
      message: { type: 'approval', session_id: session, approval: event.approval },
    };
  }
  // An allowed host that still failed: one line for the person, kept as berth's reply.
  if (event.type === 'unreachable') {
    const text = approvalUnreachable(event.target, event.reason);
    return { entry: { role: 'reply', text }, message: { type: 'note', session_id: session, text } };
  }
  const answer = { id: event.id, decision: event.decision, by: event.by, at: event.at || now };
  return {
    entry: { role: 'answer', text: approvalOutcome({ target: event.target, kind: event.kind }, event), answer },
    message: { type: 'approval_answered', session_id: session, ...answer },
  };
}
