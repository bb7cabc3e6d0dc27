import { z } from 'zod';
import { PermissionLevelSchema, SessionIdSchema, type PermissionLevel } from '../config/session.js';
import type { AGENT_PRESETS, Agent } from '../config/metadata.js';
import type { ErrorCode } from '../base/errors.js';
import type { ProgressStep, ProgressUpdate } from '../runs/agent-progress.js';
import type { OutputSegment, ReplyFormat } from '../store/chat-transcripts.js';
import { FILE_BOUNDS } from '../config/bounds.js';
import { UPLOAD_ID_PATTERN } from '../store/chat-uploads.js';
import { APPROVAL_DECISIONS, APPROVAL_ID_PATTERN, type ApprovalDecision, type ApprovalView } from '../store/approvals.js';

/**
 * The web chat's wire: what a browser sends over /chat/ws, what berth pushes back, and the
 * shapes of /chat/api. Defined once here; the page's script follows them.
 */
export const WEB_CHAT_SOCKET_PATH = '/chat/ws';
export const WEB_INPUT_MAX_CHARS = 64 * 1024;

export const WebRunMessageSchema = z
  .object({
    type: z.literal('run'),
    id: z.uuid('must be a uuid (the page makes one per message)').describe('The message id: a re-sent message runs once.'),
    session_id: SessionIdSchema,
    permission_level: PermissionLevelSchema,
    input: z.string().max(WEB_INPUT_MAX_CHARS, `must be at most ${WEB_INPUT_MAX_CHARS} characters`),
    files: z
      .array(z.string().regex(UPLOAD_ID_PATTERN, 'must be the id of an upload (POST /chat/uploads)'))
      .max(FILE_BOUNDS.maxFiles)
      .optional()
      .describe("Files the person uploaded for this message: they land in the workspace's inbox/ before the run."),
  })
  .strict()
  .refine((m) => m.input.trim() !== '' || (m.files?.length ?? 0) > 0, { path: ['input'], message: 'must not be empty' });
export type WebRunMessage = z.infer<typeof WebRunMessageSchema>;

/** The person's answer to their agent's request (an approval card's button). */
export const WebApproveMessageSchema = z
  .object({
    type: z.literal('approve'),
    id: z.string().regex(APPROVAL_ID_PATTERN, 'must be the id of an approval card'),
    decision: z.enum(APPROVAL_DECISIONS).describe('once: this message; session: this conversation; deny.'),
  })
  .strict();
export type WebApproveMessage = z.infer<typeof WebApproveMessageSchema>;

/** Everything a browser may send. */
export const WebClientMessageSchema = z.discriminatedUnion('type', [WebRunMessageSchema, WebApproveMessageSchema]);

/** What berth pushes to a user's sockets. */
export type WebServerMessage =
  | { type: 'accepted'; id: string; session_id: string }
  | { type: 'output'; session_id: string; stream: 'stdout' | 'stderr'; chunk: string }
  | { type: 'step'; session_id: string; step: ProgressStep }
  | { type: 'note'; session_id: string; text: string }
  | { type: 'container'; session_id: string; phase: 'starting' | 'started' }
  | { type: 'typing'; session_id: string; on: boolean }
  | { type: 'reply'; session_id: string; text: string; format: ReplyFormat; output?: OutputSegment[]; exit?: number }
  | { type: 'files'; session_id: string; files: WebFileView[] }
  | { type: 'done'; id: string; session_id: string }
  | { type: 'session'; session_id: string }
  | { type: 'level'; session_id: string; permission_level: PermissionLevel }
  | { type: 'approval'; session_id: string; approval: ApprovalView }
  | { type: 'approval_answered'; session_id: string; id: string; decision: ApprovalDecision; by: string; at: string }
  | { type: 'error'; code: ErrorCode; field?: string; message: string; id?: string };

/** A file in the chat: what the person sent, or what the agent sent (with the URL the person's login opens it at). */
export interface WebFileView {
  name: string;
  size: number;
  type: string;
  url?: string;
}

/** POST /chat/uploads answers with this; its id goes in a run message's files. */
export interface WebUploadView {
  id: string;
  name: string;
  type: string;
  size: number;
}

export const ChatSessionViewSchema = z.object({
  id: SessionIdSchema,
  title: z.string().nullable(),
  created_at: z.string(),
  updated_at: z.string(),
  runs: z.number().int(),
  permission_level: PermissionLevelSchema,
});
export type ChatSessionView = z.infer<typeof ChatSessionViewSchema>;

/** PUT /chat/api/sessions/:id/settings */
export const ChatSettingsBodySchema = z.object({ permission_level: PermissionLevelSchema }).strict();

/** GET /chat/api/me: who is logged in, where, and what their agent is. */
export type AgentKind = (typeof AGENT_PRESETS)[number] | 'custom';
export interface ChatMe {
  project: string;
  user: string;
  tenant: string;
  agent: AgentKind;
}
export const agentKindOf = (agent: Agent): AgentKind => (Array.isArray(agent) ? 'custom' : agent);

/** The agent at work (a step, its words, its container starting), as the page is told it. */
export function progressMessage(session_id: string, update: ProgressUpdate): WebServerMessage {
  if (update.type === 'note') return { type: 'note', session_id, text: update.text };
  if (update.type === 'container') return { type: 'container', session_id, phase: update.phase };
  return { type: 'step', session_id, step: update.step };
}
