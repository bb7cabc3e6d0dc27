import type { Logger } from 'pino';
import type { RunView } from '../admin/views.js';
import type { ChannelAttachment } from '../channels/contract.js';
import { FILE_BOUNDS } from '../config/bounds.js';
import type { FilesSettings } from '../config/metadata.js';
import { isBerthError } from '../base/errors.js';
import { sizeWords } from '../plan/file-names.js';
import type { IncomingFile } from '../plan/files-in.js';
import { closeQuietly } from '../fs/fd-path.js';
import { readOpenedRunFile, type OpenedRunFile, type RunFile } from '../store/run-files.js';
import type { ChatTransport } from './chat-transport.js';

/**
 * The bridge core's files: a message's attachments fetched through its channel before the run
 * (each bounded by max_file_mb and a deadline; what fails is a refusal the runner words), and a
 * run's outbox files sent after its answer: as files where the channel takes them and they fit,
 * else as a link the person opens with their chat login — never dropped in silence.
 */

/**
 * Fetch each attachment (at most max_files of them, max_message_mb together: each fetch is bounded
 * by what is left of the message's total, so a message never holds more than that); one that fails
 * or is too big stays a refusal with its name.
 */
export async function fetchAttachments(
  transport: Pick<ChatTransport, 'fetchAttachment'>,
  attachments: readonly ChannelAttachment[],
  settings: FilesSettings,
  log: Logger,
): Promise<IncomingFile[]> {
  const maxFile = settings.max_file_mb * 1024 * 1024;
  let left = settings.max_message_mb * 1024 * 1024;
  const out: IncomingFile[] = [];
  for (const [i, a] of attachments.entries()) {
    const base = { name: a.name, mime: a.mime, voice: a.voice === true, ...(a.size !== undefined ? { size: a.size } : {}) };
    const maxBytes = Math.min(maxFile, left);
    // The reason a file past this fetch's bound is refused: its own size, or the message's total.
    const over = maxBytes < maxFile ? 'message_total' : 'too_big';
    // Past max_files, declared bigger than the limit, or nothing left of the total: refused without fetching a byte.
    if (i >= settings.max_files) out.push({ ...base, refused: 'count' });
    else if (a.size !== undefined && a.size > maxBytes) out.push({ ...base, refused: a.size > maxFile ? 'too_big' : over });
    else if (maxBytes <= 0) out.push({ ...base, refused: 'message_total' });
    else if (!transport.fetchAttachment) out.push({ ...base, refused: 'fetch' });
    else {
      try {
        const data = await transport.fetchAttachment(a.ref, { maxBytes, signal: AbortSignal.timeout(FILE_BOUNDS.fetchTimeoutMs) });
        if (data.byteLength > maxBytes) out.push({ ...base, size: data.byteLength, refused: over });
        else {
          left -= data.byteLength;
          out.push({ ...base, data });
        }
      } catch (err) {
        const tooBig = isBerthError(err, 'TOO_LARGE') || isBerthError(err, 'PAYLOAD_TOO_LARGE');
        log.warn({ attachment: i, code: isBerthError(err) ? err.code : (err as Error)?.name }, 'an attachment could not be fetched');
        out.push({ ...base, refused: tooBig ? over : 'fetch' });
      }
    }
  }
  return out;
}

export { FILES_ONLY } from '../plan/files-in.js';

/** What a person is told of files sent to a chat a workflow answers (a workflow's steps take text only). */
export const WORKFLOW_TAKES_NO_FILES = 'berth: this chat is answered by a workflow, which takes text only: your files were not saved.';

/** A run's answer beside its text: what to tell of the person's files, and the files the agent sent. */
export interface RanFiles {
  notice?: string;
  files?: { run: string; list: RunFile[] };
}

/** What of a run's view the chat needs after its answer (none: nothing to add). */
export function ranFilesOf(run: Pick<RunView, 'run' | 'files' | 'files_in'>): { ran?: RanFiles } {
  const ran: RanFiles = {
    ...(run.files_in?.notice ? { notice: run.files_in.notice } : {}),
    ...(run.files?.length ? { files: { run: run.run, list: run.files.map(({ name, size, type }) => ({ name, size, type })) } } : {}),
  };
  return ran.notice || ran.files ? { ran } : {};
}

/** A run's file as the chat reaches it: where its login opens it, or anyone with the run's link key. */
export const chatFileUrl = (publicUrl: string | undefined, run: string, name: string, access?: { project: string; key: string }) =>
  `${publicUrl?.replace(/\/+$/, '') ?? ''}/chat/api/runs/${run}/files/${encodeURIComponent(name)}${
    access ? `?project=${encodeURIComponent(access.project)}&key=${encodeURIComponent(access.key)}` : ''
  }`;

/**
 * The link a chat person gets for a run's file: with the run's key, since a person on Signal,
 * Telegram, … has no web chat login (a run stored before keys: the login's link).
 */
export function runFileLink(
  open: (run: string, name: string) => Pick<OpenedRunFile, 'fd' | 'key'>,
  publicUrl: string | undefined,
  project: string,
  run: string,
  name: string,
): string {
  let key: string | undefined;
  try {
    const f = open(run, name);
    closeQuietly(f.fd);
    key = f.key;
  } catch {
    // Gone meanwhile (pruned): its link still says where it was; a login's fetch answers 404.
  }
  return chatFileUrl(publicUrl, run, name, key ? { project, key } : undefined);
}

export interface OutFilesDeps {
  transport: ChatTransport;
  log: Logger;
  /** A stored file's bytes (AdminService.runFile, read whole). */
  read: (run: string, name: string) => { data: Buffer; type: string };
  /** Where the person opens a file sent as a link (runFileLink); without it, the web chat login's path. */
  urlOf?: (run: string, name: string) => string;
  publicUrl?: string;
}

/** A project's run files as the bridges send them: bytes read whole from the opened file, links with the run's key. */
export const outFilesDeps = (
  transport: ChatTransport,
  log: Logger,
  admin: { runFile(project: string, run: string, name: string): OpenedRunFile },
  project: string,
  publicUrl: string | undefined,
): OutFilesDeps => ({
  transport,
  log,
  read: (run, name) => readOpenedRunFile(admin.runFile(project, run, name)),
  urlOf: (run, name) => runFileLink((r, n) => admin.runFile(project, r, n), publicUrl, project, run, name),
});

/**
 * Send a run's files after its answer. One that the channel cannot take (no sendFile, over its
 * fileLimitBytes, or the send failed) is named with its link in one message after the others.
 */
export async function sendRunFiles(
  deps: OutFilesDeps,
  chat: string,
  answerTo: string,
  run: string,
  files: readonly RunFile[],
): Promise<void> {
  const { transport, log } = deps;
  const linked: RunFile[] = [];
  for (const f of files) {
    const fits = transport.sendFile !== undefined && (transport.fileLimitBytes === undefined || f.size <= transport.fileLimitBytes);
    if (!fits) {
      linked.push(f);
      continue;
    }
    try {
      const { data, type } = deps.read(run, f.name);
      await transport.sendFile!(chat, { name: f.name, mime: type, data: new Uint8Array(data) }, '', { answerTo });
    } catch (err) {
      log.warn(
        { run, file: f.name, err: String((err as Error)?.message ?? err).slice(0, 200) },
        'a file could not be sent: sent as a link',
      );
      linked.push(f);
    }
  }
  if (linked.length === 0) return;
  const text = linkedFilesNotice(linked, (name) => deps.urlOf?.(run, name) ?? chatFileUrl(deps.publicUrl, run, name));
  await sayPlain(transport, chat, text, answerTo);
}

/** berth's own words about a message (its files' fate, the agent's files' links): plain where the channel has it (a webhook's callback only takes these so). */
export const sayPlain = (transport: Pick<ChatTransport, 'send' | 'sendPlain'>, chat: string, text: string, answerTo: string) =>
  transport.sendPlain ? transport.sendPlain(chat, text, { answerTo }) : transport.send(chat, text, { answerTo, by: 'berth' });

/** The agent's files after its answer: the transport's own way (web chat), else as files or links; a failure is logged, never thrown. */
export async function deliverRunFiles(
  deps: OutFilesDeps,
  chat: string,
  answerTo: string,
  project: string,
  out: NonNullable<RanFiles['files']>,
): Promise<void> {
  try {
    if (deps.transport.runFiles) await deps.transport.runFiles(chat, answerTo, project, out.run, out.list);
    else await sendRunFiles(deps, chat, answerTo, out.run, out.list);
  } catch (err) {
    deps.log.error(
      { id: answerTo, run: out.run, err: String((err as Error)?.message ?? err).slice(0, 200) },
      'the files of an answer could not be delivered',
    );
  }
}

/** The words for files sent as links. */
export function linkedFilesNotice(files: readonly RunFile[], urlOf: (name: string) => string): string {
  const lines = files.map((f) => `${f.name} (${sizeWords(f.size)}): ${urlOf(f.name)}`);
  return `berth: the agent sent ${files.length === 1 ? 'a file' : `${files.length} files`} to open at ${files.length === 1 ? 'its link' : 'their links'}:\n${lines.join('\n')}`;
}
