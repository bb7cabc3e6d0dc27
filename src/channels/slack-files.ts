import { foreignRef, readCapped, tooLarge } from './attachment-bytes.js';
import { ChannelApiError, reach, type ChannelAttachment, type ReplyFile } from './contract.js';
import { int, list, obj, str, type Json } from './json.js';

/**
 * Files on Slack (docs.slack.dev):
 * - in: a message's `files` (File objects: "file_share" messages, mentions with files) become
 *   attachments, ref `slack:<file id>:<url_private_download>`. The bytes are fetched with the bot
 *   token in Authorization (it needs files:read), and only from Slack's own file host or the
 *   configured Web API's origin (a test fake, a proxy the operator named): the token never goes
 *   to a host a message named. A redirect (Slack sends one to its sign-in page when the token
 *   may not read the file) is a refusal, never followed.
 * - out: files.getUploadURLExternal, the bytes POSTed to the upload URL it gives (no token: the
 *   URL is the credential), then files.completeUploadExternal into the channel (and thread).
 *   Slack takes files up to 1 GB ("File upload limits" in Slack's help centre).
 */
export const SLACK_FILE_LIMIT_BYTES = 1_000_000_000;
/** Where Slack serves url_private(_download). */
export const SLACK_FILE_ORIGIN = 'https://files.slack.com';
/** Slack shares at most 10 files in one message; anything past it is not read. */
const MAX_FILES = 10;
const FILE_ID = /^F[A-Z0-9]{2,32}$/;
const REF = /^slack:(F[A-Z0-9]{2,32}):(https?:\/\/[^\s]{1,2000})$/;
const MIME = /^[\w.+-]{1,64}\/[\w.+-]{1,128}$/;

/** The origin of a URL, or undefined when it is none. */
const originOf = (url: string) => {
  try {
    return new URL(url).origin;
  } catch {
    return undefined;
  }
};

/** A message event's files as attachments: hosted files from an allowed origin only (tombstones, files hidden by a plan's limit and external links are not files berth can fetch). */
export function slackAttachments(event: Json, origins: readonly string[]): ChannelAttachment[] {
  return list(event.files)
    .slice(0, MAX_FILES)
    .flatMap((f) => {
      const file = obj(f);
      const id = str(file?.id);
      const url = str(file?.url_private_download) ?? str(file?.url_private);
      if (
        !file ||
        !id ||
        !FILE_ID.test(id) ||
        !url ||
        file.is_external === true ||
        file.mode === 'tombstone' ||
        file.mode === 'hidden_by_limit'
      )
        return [];
      const origin = originOf(url);
      if (!origin || !origins.includes(origin) || !REF.test(`slack:${id}:${url}`)) return [];
      const mime = str(file.mimetype);
      const size = int(file.size);
      const name = str(file.name) ?? str(file.title);
      return [
        {
          ref: `slack:${id}:${url}`,
          ...(name ? { name } : {}),
          ...(mime && MIME.test(mime) ? { mime } : {}),
          ...(size !== undefined && size >= 0 ? { size } : {}),
          // A clip recorded in Slack ("slack_audio") is a voice note.
          ...(file.subtype === 'slack_audio' ? { voice: true } : {}),
        },
      ];
    });
}

export interface SlackFileDeps {
  botToken: string;
  /** Origins the bot token may be sent to for a file: Slack's file host and the Web API's. */
  origins: readonly string[];
  /** A Web API call (slack.ts's), form-encoded. */
  call(method: string, params: Json): Promise<Json>;
}

export function slackFiles(deps: SlackFileDeps) {
  async function fetchAttachment(ref: string, limits: { maxBytes: number; signal: AbortSignal }): Promise<Uint8Array> {
    const url = REF.exec(ref)?.[2];
    const origin = url === undefined ? undefined : originOf(url);
    if (!url || !origin || !deps.origins.includes(origin)) throw foreignRef('slack');
    const res = await reach('the Slack file download', url, {
      headers: { authorization: `Bearer ${deps.botToken}` },
      redirect: 'manual',
      signal: limits.signal,
    });
    // Slack's answer to a token that may not read the file: a redirect (or a page) to sign in.
    if ((res.status >= 300 && res.status < 400) || (res.ok && /^text\/html/i.test(res.headers.get('content-type') ?? ''))) {
      await res.body?.cancel().catch(() => undefined);
      throw new ChannelApiError(
        'Slack sent its sign-in page instead of the file: does the bot token have the files:read scope, and is the bot in the channel?',
        403,
      );
    }
    return readCapped(res, limits.maxBytes, 'the Slack file download');
  }

  /** The three steps of an upload; the file is shared in the chat (its thread, if it is one) with the caption as its message. */
  async function sendFile(where: { channel: string; thread_ts?: string }, file: ReplyFile, caption: string): Promise<void> {
    if (file.data.byteLength > SLACK_FILE_LIMIT_BYTES) throw tooLarge(SLACK_FILE_LIMIT_BYTES, 'Slack');
    const granted = await deps.call('files.getUploadURLExternal', { filename: file.name, length: file.data.byteLength });
    const uploadUrl = str(granted.upload_url);
    const id = str(granted.file_id);
    if (!uploadUrl || !/^https?:\/\//.test(uploadUrl) || !id || !FILE_ID.test(id))
      throw new ChannelApiError('files.getUploadURLExternal: no upload URL in the answer', 502);
    const res = await reach('the Slack file upload', uploadUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/octet-stream' },
      body: file.data,
      signal: AbortSignal.timeout(300_000),
    });
    await res.body?.cancel().catch(() => undefined);
    if (!res.ok) throw new ChannelApiError(`the Slack file upload: HTTP ${res.status}`, res.status);
    await deps.call('files.completeUploadExternal', {
      files: JSON.stringify([{ id, title: file.name }]),
      channel_id: where.channel,
      ...(where.thread_ts ? { thread_ts: where.thread_ts } : {}),
      ...(caption !== '' ? { initial_comment: caption } : {}),
    });
  }

  return { fetchAttachment, sendFile };
}
