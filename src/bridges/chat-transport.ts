import type { ChannelMessage, ChannelSender, SendAbout } from '../channels/contract.js';
import type { PermissionLevel } from '../config/session.js';
import type { ProgressUpdate } from '../runs/agent-progress.js';
import type { ApprovalEvent } from '../store/approvals.js';
import type { ReplyParts } from '../store/chat-transcripts.js';
import type { InboxEntry } from '../store/inbox.js';
import type { RunFile } from '../store/run-files.js';

/**
 * What a transport hands the bridge core and what it is given back: a channel's messages and
 * sending side (channels/contract.ts), and what the web chat adds to both. Types only, so the
 * core's rooms (strangers, approvals, progress, recovery) share them without importing the core.
 */
export interface InboundMessage extends ChannelMessage {
  /** A transport where the person picks the conversation (web chat): its session id, else the chat's own. */
  session?: string;
  /** …and the level the person asked for (the transport applies it by the /level rule when it takes the message; journaled). */
  level?: PermissionLevel;
}

/** A channel's sending side (channels/contract.ts), and what the web chat adds to it. */
export interface ChatTransport extends Omit<ChannelSender, 'send'> {
  /** `reply`: a message's answer, with the agent's steps on the way to it and its output in order (web chat), and which message it answers. */
  send(chat: string, text: string, reply?: ReplyParts & SendAbout): Promise<void>;
  /** The agent's plain output as it is printed (web chat streams it; Signal shows typing instead). */
  output?(chat: string, stream: 'stdout' | 'stderr', chunk: string): void;
  /** The agent at work, live: its tool calls as they start and end, its words between them (web chat). Without it: one progress message for a long run. */
  progress?(chat: string, update: ProgressUpdate): void;
  /** The project a chat belongs to, when the transport knows it (web chat: its login's); else routes decide. */
  projectOf?(chat: string): string | undefined;
  /** /new where the person picks conversations (web chat): the transport makes the session and shows it. */
  newSession?(chat: string): string;
  /** Files the agent sent with an answer, shown the transport's own way (web chat: inline images and links with its login); without it: files.ts sends them. */
  runFiles?(chat: string, answerTo: string, project: string, run: string, files: RunFile[]): Promise<void>;
  /** The run asks its person (a card with its answers, web chat); without it: a question answered by /yes or /no. */
  approval?(chat: string, event: ApprovalEvent): void;
}

/** A journaled message as the core answers it (a recovered one too): what it says, who sent it where, the session and level they picked. */
export type JournaledMessage = Required<Pick<InboxEntry, 'id' | 'chat' | 'sender' | 'text'>> &
  Pick<InboxEntry, 'session' | 'level' | 'attachments'>;
