import type { FilesSettings } from '../config/metadata.js';
import { kindOf, mediaTypeOf, safeFileName, sizeWords, typeAllowed, type FileKind } from './file-names.js';

/**
 * Files in, pure: which of a message's files land in inbox/ and why the others do not, what the
 * agent is told (prepended to the message, in words Claude Code and Codex act on: a path they open),
 * and what the person is told of the ones refused. store/run-files.ts writes; runs/ and bridges/ carry.
 */

/** The folder of the workspace a person's files land in, and the one the agent's files leave from. */
export const INBOX_DIR = 'inbox';
export const OUTBOX_DIR = 'outbox';

/** The message an agent gets when the person sent files without words (the files' words come before it). */
export const FILES_ONLY = '(The person sent only the files above, without a message.)';

/** Why a file was not saved (the run record's and the API's enum). */
export const REFUSAL_REASONS = ['too_big', 'type', 'count', 'message_total', 'quota', 'fetch', 'unwritable', 'shared'] as const;
export type RefusalReason = (typeof REFUSAL_REASONS)[number];

/** A file as it arrives: from a channel (fetched by the core) or the run API. `refused`: its fetch already failed. */
export interface IncomingFile {
  name?: string;
  mime?: string;
  data?: Uint8Array;
  /** Bytes as declared where the bytes never came (a refused fetch). */
  size?: number;
  voice?: boolean;
  refused?: RefusalReason;
}

export interface PlannedFile {
  /** Its place in the message's files. */
  index: number;
  /** Safe, not yet made unique (the writer numbers a collision). */
  name: string;
  type: string;
  kind: FileKind;
  size: number;
  voice: boolean;
}

export interface RefusedFile {
  name: string;
  reason: RefusalReason;
  size?: number;
}

/** A file written: where it is in the workspace ("inbox/chart.png"). */
export interface SavedFile {
  path: string;
  kind: FileKind;
  size: number;
  voice: boolean;
  /** A voice note's transcript, beside it ("inbox/voice.ogg.txt"): runs/voice-notes.ts. */
  transcript?: string;
}

/**
 * Decide, in order: past max_files, a failed fetch, over max_file_mb, a type not allowed, past
 * max_message_mb with the ones before it, past what the workspace has left (`freeBytes`, from
 * limits.disk_mb and what it holds; undefined: not known, the write finds out). The rest land.
 */
export function planIncoming(
  files: readonly IncomingFile[],
  settings: FilesSettings,
  freeBytes?: number,
): { accept: PlannedFile[]; refuse: RefusedFile[] } {
  const accept: PlannedFile[] = [];
  const refuse: RefusedFile[] = [];
  const maxFile = settings.max_file_mb * 1024 * 1024;
  const maxTotal = settings.max_message_mb * 1024 * 1024;
  let total = 0;
  files.forEach((f, index) => {
    const name = safeFileName(f.name, f.mime);
    const size = f.data?.byteLength ?? f.size ?? 0;
    const type = mediaTypeOf(name, f.mime);
    const refused = (reason: RefusalReason) => refuse.push({ name, reason, ...(size > 0 || f.data ? { size } : {}) });
    if (index >= settings.max_files) return refused('count');
    if (f.refused) return refused(f.refused);
    if (!f.data) return refused('fetch');
    if (size > maxFile) return refused('too_big');
    if (!typeAllowed(type, settings.types)) return refused('type');
    if (total + size > maxTotal) return refused('message_total');
    if (freeBytes !== undefined && total + size > freeBytes) return refused('quota');
    total += size;
    accept.push({ index, name, type, kind: kindOf(type), size, voice: f.voice === true });
  });
  return { accept, refuse };
}

/** What the agent reads about a file: its path, kind and size, and what to do with an image. */
function savedLine(f: SavedFile): string {
  const how = f.voice
    ? f.transcript
      ? `: a voice note; what it says is in this message and in ${f.transcript}`
      : ': a voice note, not transcribed'
    : f.kind === 'image'
      ? ': open it to see it'
      : f.kind === 'PDF'
        ? ': read it'
        : '';
  return `${f.path} (${f.kind}, ${sizeWords(f.size)}${how})`;
}

/**
 * The words put before the person's message when files came with it (none: the message as it is).
 * `comment`: as shell comment lines, for an agent that runs the message as a command (the shell
 * preset); a file name holds no line break (safeFileName), so none ends its comment.
 */
export function withIncomingWords(message: string, saved: readonly SavedFile[], refusedCount: number, comment = false): string {
  if (saved.length === 0 && refusedCount === 0) return message;
  const parts: string[] = [];
  if (saved.length > 0) {
    const n = saved.length === 1 ? 'a file' : `${saved.length} files`;
    parts.push(`[The person sent ${n} with this message, saved in your working directory: ${saved.map(savedLine).join('; ')}.]`);
  }
  if (refusedCount > 0)
    parts.push(`[${refusedCount === 1 ? '1 more file' : `${refusedCount} more files`} could not be saved; the person was told.]`);
  parts.push(`[To send the person a file, save it in ${OUTBOX_DIR}/ (in your working directory): it is delivered after your answer.]`);
  return comment ? `${parts.map((p) => `# ${p}`).join('\n')}\n${message}` : `${parts.join(' ')}\n\n${message}`;
}

function reasonWords(r: RefusedFile, settings: FilesSettings): string {
  switch (r.reason) {
    case 'too_big':
      return `too big${r.size ? ` (${sizeWords(r.size)})` : ''}: files up to ${settings.max_file_mb} MB are taken`;
    case 'type':
      return 'this kind of file is not taken here';
    case 'count':
      return `only ${settings.max_files} files are taken with one message`;
    case 'message_total':
      return `the files of one message may hold ${settings.max_message_mb} MB together`;
    case 'quota':
      return 'your workspace is full (delete files there, or ask the operator for more room)';
    case 'fetch':
      return 'it could not be fetched from the chat service';
    case 'unwritable':
      return 'it could not be written to your workspace';
    case 'shared':
      return "this project's workspace is shared with other people, so files are not kept there";
  }
}

/** What the person reads about their files: the ones refused and why (voice notes: plan/voice-notes.ts). Undefined: nothing to say. */
export function incomingNotice(saved: readonly SavedFile[], refused: readonly RefusedFile[], settings: FilesSettings): string | undefined {
  const lines: string[] = [];
  if (refused.length > 0) {
    const which = refused.map((r) => `${r.name}: ${reasonWords(r, settings)}`).join('; ');
    const rest = saved.length > 0 ? ` The other${saved.length === 1 ? '' : 's'} went to the agent with your message.` : '';
    lines.push(`berth: ${refused.length === 1 ? 'a file was' : `${refused.length} files were`} not saved (${which}).${rest}`);
  }
  return lines.length > 0 ? lines.join('\n') : undefined;
}
