import type { Logger } from 'pino';
import { isBerthError } from '../base/errors.js';
import { boundOf, foreignRef, readCapped, tooLarge } from './attachment-bytes.js';
import { ChannelApiError, reach, withOneRetry, type ChannelAttachment, type ReplyFile } from './contract.js';
import { int, obj, str, type Json } from './json.js';
import { graphemeCut } from './text-cut.js';

/**
 * Files on Telegram (Bot API, https://core.telegram.org/bots/api):
 * - in: a message's photo (the largest size a bot may fetch), document, voice, audio, video or
 *   video note become attachments, ref `tg:<file_id>`; fetched by getFile, then the file path's URL
 *   (`<api>/file/bot<token>/<file_path>`). A bot may fetch at most 20 MB ("getFile"; the
 *   reference server's MAX_DOWNLOAD_FILE_SIZE is 20 << 20).
 * - out: an image Telegram shows as a photo (JPEG, PNG, WebP up to 10 MB: "sendPhoto") by
 *   sendPhoto, anything else (and a photo Telegram refuses) by sendDocument, up to 50 MB
 *   ("Sending files": multipart uploads). Upload limits are taken as decimal MB: a file between
 *   that and the binary reading goes as a link rather than fail.
 * The token is in every URL: none is logged.
 */
export const TELEGRAM_FETCH_LIMIT_BYTES = 20 * 1024 * 1024;
export const TELEGRAM_PHOTO_LIMIT_BYTES = 10 * 1000 * 1000;
export const TELEGRAM_FILE_LIMIT_BYTES = 50 * 1000 * 1000;
/** A caption is at most 1024 characters after parsing (sent plain: as written). */
const CAPTION_LIMIT = 1024;
/** A message carries one file; a photo's sizes are a handful. Anything past this is not read. */
const MAX_PHOTO_SIZES = 20;
const PHOTO_TYPES = new Set(['image/jpeg', 'image/png', 'image/webp']);
const REF = /^tg:([A-Za-z0-9_-]{1,256})$/;
/** A file path getFile answers: relative, no "..", no query. */
const FILE_PATH = /^(?!.*\.\.)[A-Za-z0-9_][A-Za-z0-9_./-]{0,511}$/;

const ref = (fileId: unknown) => {
  const id = str(fileId);
  return id !== undefined && REF.test(`tg:${id}`) ? `tg:${id}` : undefined;
};
const size = (v: unknown) => {
  const n = int(v);
  return n !== undefined && n >= 0 ? n : undefined;
};

/** What a message carries as files (one at most, as Telegram sends them); none for a text message. */
export function telegramAttachments(message: Json): ChannelAttachment[] {
  const id = int(message.message_id) ?? 0;
  const photos = Array.isArray(message.photo) ? message.photo.slice(0, MAX_PHOTO_SIZES).map(obj) : [];
  // Sizes come smallest first; the largest whose size a bot may fetch (unknown: taken as fitting).
  const photo = photos.filter((p) => p && ref(p.file_id) && (size(p.file_size) ?? 0) <= TELEGRAM_FETCH_LIMIT_BYTES).at(-1);
  if (photo) return [{ ref: ref(photo.file_id)!, name: `photo-${id}.jpg`, mime: 'image/jpeg', ...sized(photo) }];
  const kinds: Array<[string, string, string]> = [
    ['document', 'file', 'application/octet-stream'],
    ['voice', 'voice', 'audio/ogg'],
    ['audio', 'audio', 'audio/mpeg'],
    ['video', 'video', 'video/mp4'],
    ['video_note', 'video-note', 'video/mp4'],
  ];
  for (const [key, stem, mime] of kinds) {
    const f = obj(message[key]);
    const r = f && ref(f.file_id);
    if (!f || !r) continue;
    const given = str(f.mime_type);
    const type = given && /^[\w.+-]{1,64}\/[\w.+-]{1,128}$/.test(given) ? given : mime;
    const name = str(f.file_name) ?? `${stem}-${id}.${extensionOf(type)}`;
    return [{ ref: r, name, mime: type, ...sized(f), ...(key === 'voice' ? { voice: true } : {}) }];
  }
  return [];
}

const sized = (f: Json) => {
  const n = size(f.file_size);
  return n === undefined ? {} : { size: n };
};

const EXTENSIONS: Record<string, string> = {
  'audio/ogg': 'ogg',
  'audio/mpeg': 'mp3',
  'audio/mp4': 'm4a',
  'video/mp4': 'mp4',
  'image/jpeg': 'jpg',
  'application/pdf': 'pdf',
};
const extensionOf = (mime: string) => EXTENSIONS[mime] ?? 'bin';

export interface TelegramFileDeps {
  apiUrl: string;
  token: string;
  log: Logger;
  /** A JSON Bot API call (telegram.ts's). */
  call(method: string, params: Json, signal?: AbortSignal): Promise<unknown>;
  /** The chat's address as the Bot API takes it. */
  where(chat: string): Record<string, number>;
}

export function telegramFiles(deps: TelegramFileDeps) {
  const { apiUrl, token, log } = deps;

  async function upload(
    method: 'sendPhoto' | 'sendDocument',
    field: 'photo' | 'document',
    chat: string,
    file: ReplyFile,
    caption: string,
  ): Promise<void> {
    const form = new FormData();
    for (const [k, v] of Object.entries(deps.where(chat))) form.set(k, String(v));
    if (caption !== '') form.set('caption', caption.slice(0, graphemeCut(caption, CAPTION_LIMIT)));
    form.set(field, new Blob([file.data], { type: file.mime }), file.name);
    await withOneRetry(log, method, async () => {
      const res = await reach(`${method}: the Bot API`, `${apiUrl}/bot${token}/${method}`, {
        method: 'POST',
        body: form,
        signal: AbortSignal.timeout(120_000),
      });
      const body = obj(await res.json().catch(() => undefined));
      if (body?.ok !== true)
        throw new ChannelApiError(
          `${method}: ${str(body?.description) ?? `HTTP ${res.status}`}`,
          int(body?.error_code) ?? res.status,
          int(obj(body?.parameters)?.retry_after),
        );
    });
  }

  const sendDocument = (chat: string, file: ReplyFile, caption = 'the whole reply') =>
    upload('sendDocument', 'document', chat, file, caption);

  /** A photo where Telegram shows one; a photo it refuses (its dimensions, its format) goes as a document. */
  async function sendFile(chat: string, file: ReplyFile, caption: string): Promise<void> {
    if (file.data.byteLength > TELEGRAM_FILE_LIMIT_BYTES) throw tooLarge(TELEGRAM_FILE_LIMIT_BYTES, 'Telegram');
    const type = file.mime.split(';')[0]!.trim().toLowerCase();
    if (!PHOTO_TYPES.has(type) || file.data.byteLength > TELEGRAM_PHOTO_LIMIT_BYTES) return sendDocument(chat, file, caption);
    try {
      await upload('sendPhoto', 'photo', chat, file, caption);
    } catch (err) {
      if (!(err instanceof ChannelApiError) || err.status !== 400) throw err;
      log.warn({ err: err.message.slice(0, 200) }, 'telegram refused a photo: sending it as a document');
      await sendDocument(chat, file, caption);
    }
  }

  async function fetchAttachment(attachmentRef: string, limits: { maxBytes: number; signal: AbortSignal }): Promise<Uint8Array> {
    const fileId = REF.exec(attachmentRef)?.[1];
    if (fileId === undefined) throw foreignRef('telegram');
    const { max, service } = boundOf(limits.maxBytes, TELEGRAM_FETCH_LIMIT_BYTES, 'Telegram bots');
    let file: Json | undefined;
    try {
      file = obj(await deps.call('getFile', { file_id: fileId }, AbortSignal.any([limits.signal, AbortSignal.timeout(30_000)])));
    } catch (err) {
      // The Bot API's words for a file past its 20 MB: "Bad Request: file is too big".
      if (err instanceof ChannelApiError && /file is too big/i.test(err.message))
        throw tooLarge(TELEGRAM_FETCH_LIMIT_BYTES, 'Telegram bots');
      throw err;
    }
    const declared = size(file?.file_size);
    if (declared !== undefined && declared > max) throw tooLarge(max, service);
    const path = str(file?.file_path);
    if (path === undefined || !FILE_PATH.test(path))
      throw new ChannelApiError('getFile: no file path to download (the file may be gone)', 404);
    try {
      const res = await reach('the Bot API file download', `${apiUrl}/file/bot${token}/${path}`, {
        signal: limits.signal,
        redirect: 'error',
      });
      return await readCapped(res, max, 'the Bot API file download', service);
    } catch (err) {
      if (!isBerthError(err)) log.warn({ err: String((err as Error).message).slice(0, 200) }, 'a telegram file could not be downloaded');
      throw err;
    }
  }

  return { sendDocument, sendFile, fetchAttachment };
}
