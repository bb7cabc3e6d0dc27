import fs from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { ProjectNameSchema } from '../config/metadata.js';
import { parseOrThrow } from '../config/parse.js';
import { PermissionLevelSchema, SessionIdSchema } from '../config/session.js';
import { appendFsyncedLine } from '../fs/fsynced-lines.js';
import { parseJsonLine, readJsonLines } from '../fs/json-file.js';
import { atomicWriteFile } from '../fs/tree.js';
import { ApprovalAnswerSchema, ApprovalRequestSchema } from './approvals.js';
import { RUN_STEPS_MAX, RunStepSchema, type RunStep } from './run-log.js';

/**
 * A web chat session's transcript (what the person sent, what came back), so a reload shows the
 * conversation. berth's private state, beside the project's other state so it goes to the trash
 * with the project: .berth/projects/<project>/chat/<session>.jsonl. Bounded: the last
 * TRANSCRIPT_KEEP entries of at most TRANSCRIPT_ENTRY_BYTES each.
 */
export const TRANSCRIPT_KEEP = 200;
export const TRANSCRIPT_ENTRY_BYTES = 64 * 1024;

/** How much of a reply's output is kept in order, stdout and stderr apart (the rest is cut, saying so). */
export const REPLY_OUTPUT_CHARS = 32 * 1024;
export const REPLY_OUTPUT_SEGMENTS = 256;

export const OutputSegmentSchema = z.object({ stream: z.enum(['stdout', 'stderr']), text: z.string() }).strict();
export type OutputSegment = z.infer<typeof OutputSegmentSchema>;

/** A reply's parts beside its text: the agent's steps, its output in order (when it wrote to stderr), its exit status when not 0. */
export interface ReplyParts {
  steps?: RunStep[];
  output?: OutputSegment[];
  exit?: number;
  /** Words berth wrote itself (a chat command's answer, a notice), never the agent's: the web chat shows them as plain words. */
  by?: 'berth';
}

/** A reply berth wrote itself (a command's answer, a notice): the web chat shows it as plain words, never as the agent's. */
export const BY_BERTH: Readonly<ReplyParts> = Object.freeze({ by: 'berth' });

/**
 * How the web chat shows a reply: "markdown" and "text" are the project's chat format for the
 * agent's answers; "berth" is berth's own words (line breaks kept, never Markdown: a host pattern
 * like *.example.com must not turn into emphasis, nor berth's words into a terminal's).
 */
export const ReplyFormatSchema = z.enum(['markdown', 'text', 'berth']);
export type ReplyFormat = z.infer<typeof ReplyFormatSchema>;

/** An approval card as the history keeps it: what was asked, of whom, until when. */
export const TranscriptApprovalSchema = ApprovalRequestSchema.pick({
  id: true,
  kind: true,
  target: true,
  approver: true,
  asked_at: true,
  expires_at: true,
});
/** Its answer: which, by whom ("tenant:<key>", "operator", "timeout", "berth"), when. */
export const TranscriptAnswerSchema = ApprovalAnswerSchema.extend({ id: ApprovalRequestSchema.shape.id }).strict();

export const TranscriptEntrySchema = z
  .object({
    at: z.string(),
    role: z
      .enum(['user', 'reply', 'approval', 'answer', 'files'])
      .describe(
        '"user": what the person sent; "reply": what berth or the agent answered; "approval": the agent asked to go past a grant (a card); "answer": that card\'s answer; "files": files the agent sent (after its answer).',
      ),
    text: z.string(),
    id: z.string().optional().describe("The person's message id (user entries)."),
    level: PermissionLevelSchema.optional().describe('The permission level the message was sent at (user entries).'),
    format: ReplyFormatSchema.optional().describe(
      "How the page shows it (reply entries): the project's chat format when it was sent, or berth's own words.",
    ),
    steps: z
      .array(RunStepSchema)
      .max(RUN_STEPS_MAX)
      .optional()
      .describe("The agent's tool calls on the way to this reply (reply entries)."),
    output: z
      .array(OutputSegmentSchema)
      .max(REPLY_OUTPUT_SEGMENTS)
      .optional()
      .describe('The output in the order it was printed, stdout and stderr apart (reply entries of a run that wrote to stderr).'),
    exit: z.number().int().optional().describe('The exit status, when not 0 (reply entries with output).'),
    files: z
      .array(
        z
          .object({
            name: z.string().max(256),
            size: z.number().int().min(0),
            type: z.string().max(256),
            url: z.string().max(1024).optional(),
          })
          .strict(),
      )
      .max(100)
      .optional()
      .describe(
        'Files: the ones the person sent (user entries), or the ones the agent sent, with the URL their login opens them at (files entries).',
      ),
    approval: TranscriptApprovalSchema.optional().describe('The card (approval entries).'),
    answer: TranscriptAnswerSchema.optional().describe("The card's answer (answer entries)."),
  })
  .strict();
export type TranscriptEntry = z.infer<typeof TranscriptEntrySchema>;

/** Cut to the byte bound, never inside a character, saying so. */
export function boundText(text: string, bytes = TRANSCRIPT_ENTRY_BYTES): string {
  const size = Buffer.byteLength(text);
  if (size <= bytes) return text;
  const note = `\n[… cut: the whole text was ${size} bytes]`;
  return (
    Buffer.from(text)
      .subarray(0, bytes - Buffer.byteLength(note))
      .toString('utf8')
      .replace(/\uFFFD$/, '') + note
  );
}

/** A deleted session's transcript goes with it (projectStateDir: .berth/projects/<name>). */
export function removeChatTranscript(projectStateDir: string, session: string): void {
  parseOrThrow(SessionIdSchema, session, 'transcript');
  fs.rmSync(join(projectStateDir, 'chat', `${session}.jsonl`), { force: true });
}

export function openChatTranscripts(stateDir: string) {
  const ParamsSchema = z.object({ project: ProjectNameSchema, session: SessionIdSchema });
  const dirOf = (project: string) => join(stateDir, 'projects', project, 'chat');
  const fileOf = (project: string, session: string) => {
    parseOrThrow(ParamsSchema, { project, session }, 'transcript');
    return join(dirOf(project), `${session}.jsonl`);
  };
  // Lines per file, counted once per process: compaction rewrites only every TRANSCRIPT_KEEP appends.
  const lines = new Map<string, number>();
  const read = (file: string) => readJsonLines(file).flatMap((l) => parseJsonLine(l, TranscriptEntrySchema) ?? []);

  return {
    append(project: string, session: string, entry: Omit<TranscriptEntry, 'at'>): void {
      const file = fileOf(project, session);
      fs.mkdirSync(dirOf(project), { recursive: true, mode: 0o700 });
      appendFsyncedLine(file, { ...entry, text: boundText(entry.text), at: new Date().toISOString() });
      const count = (lines.get(file) ?? readJsonLines(file).length - 1) + 1;
      if (count < 2 * TRANSCRIPT_KEEP) {
        lines.set(file, count);
        return;
      }
      const kept = read(file).slice(-TRANSCRIPT_KEEP);
      atomicWriteFile(file, kept.map((e) => `${JSON.stringify(e)}\n`).join(''), 0o600);
      lines.set(file, kept.length);
    },
    /** The last TRANSCRIPT_KEEP entries, oldest first ([] for a session with none). */
    read: (project: string, session: string): TranscriptEntry[] => read(fileOf(project, session)).slice(-TRANSCRIPT_KEEP),
  };
}

export type ChatTranscripts = ReturnType<typeof openChatTranscripts>;
