import { foreignRef, readCapped, tooLarge } from './attachment-bytes.js';
import { ChannelApiError, reach, type ChannelAttachment, type ReplyFile } from './contract.js';
import { int, obj, str, type Json } from './json.js';

/**
 * Files on Matrix (client-server API, "Content repository" and the m.image / m.file / m.audio /
 * m.video msgtypes):
 * - in: a file message's `url` (mxc://) is the attachment's ref; its `filename` is the name and,
 *   when `body` differs from it, `body` is the caption (spec v1.10 "media captions"). The bytes come
 *   from the authenticated media API (`/_matrix/client/v1/media/download`, v1.11); a server that
 *   does not know it (404/405 M_UNRECOGNIZED, or no Matrix error at all) is asked at the legacy
 *   `/_matrix/media/v3/download`.
 *   An encrypted file (`file` instead of `url`) cannot be read without the room's keys: the
 *   bridge says so in the room.
 * - out: the bytes uploaded (`POST /_matrix/media/v3/upload`), then an m.image / m.audio /
 *   m.video / m.file event with info.mimetype and info.size, in the thread when the chat is one.
 *   The homeserver's upload limit is what `/_matrix/client/v1/media/config` says (`m.upload.size`);
 *   until it answers, Synapse's default (max_upload_size: 50M).
 */
export const MATRIX_FILE_LIMIT_BYTES = 50 * 1024 * 1024;
export const FILE_MSGTYPES = new Set(['m.image', 'm.file', 'm.audio', 'm.video']);
const MXC = /^mxc:\/\/([A-Za-z0-9.:[\]-]{1,255})\/([A-Za-z0-9_-]{1,255})$/;
const MIME = /^[\w.+-]{1,64}\/[\w.+-]{1,128}$/;

/** A file message's attachment and caption, or undefined for what is not one berth can fetch. */
export function matrixAttachment(content: Json): { attachment: ChannelAttachment; caption: string } | undefined {
  const msgtype = str(content.msgtype);
  const url = str(content.url);
  if (!msgtype || !FILE_MSGTYPES.has(msgtype) || !url || !MXC.test(url)) return undefined;
  const info = obj(content.info);
  const body = str(content.body) ?? '';
  const filename = str(content.filename);
  const mime = str(info?.mimetype);
  const size = int(info?.size);
  const name = filename ?? (body !== '' ? body : undefined);
  // MSC3245: a voice message is an m.audio with this marker.
  const voice = msgtype === 'm.audio' && content['org.matrix.msc3245.voice'] !== undefined;
  return {
    attachment: {
      ref: url,
      ...(name ? { name } : {}),
      ...(mime && MIME.test(mime) ? { mime } : {}),
      ...(size !== undefined && size >= 0 ? { size } : {}),
      ...(voice ? { voice: true } : {}),
    },
    caption: filename !== undefined && body !== filename ? body : '',
  };
}

/** A file message berth cannot read: it came encrypted (`file`, no `url`). Its name, to say which. */
export function encryptedFileName(content: Json): string | undefined {
  if (!FILE_MSGTYPES.has(str(content.msgtype) ?? '') || content.url !== undefined || obj(content.file) === undefined) return undefined;
  return str(content.filename) ?? str(content.body) ?? 'a file';
}

export const encryptedFileNotice = (name: string) =>
  `berth: "${name.slice(0, 100)}" came encrypted, and this bot cannot read encrypted files: nothing of it reaches the agent. Send it in a room without encryption.`;

/** The msgtype a file goes out as. */
export function msgtypeOf(mime: string): string {
  const type = mime.split('/')[0]?.toLowerCase();
  return type === 'image' ? 'm.image' : type === 'audio' ? 'm.audio' : type === 'video' ? 'm.video' : 'm.file';
}

export interface MatrixFileDeps {
  homeserver: string;
  token: string;
}

export function matrixFiles(deps: MatrixFileDeps) {
  const auth = { authorization: `Bearer ${deps.token}` };

  /** A media error's errcode, if its body (read no further than 64 KiB) is a Matrix error. */
  async function errcodeOf(res: Response): Promise<string | undefined> {
    const text = Buffer.from(
      await readCapped(new Response(res.body, { status: 200, headers: res.headers }), 64 * 1024, 'a media error').catch(
        () => new Uint8Array(0),
      ),
    ).toString('utf8');
    try {
      return str(obj(JSON.parse(text))?.errcode);
    } catch {
      return undefined;
    }
  }

  async function fetchAttachment(ref: string, limits: { maxBytes: number; signal: AbortSignal }): Promise<Uint8Array> {
    const m = MXC.exec(ref);
    if (!m) throw foreignRef('matrix');
    const path = `${encodeURIComponent(m[1]!)}/${encodeURIComponent(m[2]!)}`;
    let res = await reach('the homeserver', `${deps.homeserver}/_matrix/client/v1/media/download/${path}`, {
      headers: auth,
      redirect: 'error',
      signal: limits.signal,
    });
    if (res.status === 404 || res.status === 405) {
      const errcode = await errcodeOf(res);
      // The media is not there (M_NOT_FOUND…): asking elsewhere would not find it.
      if (errcode !== undefined && errcode !== 'M_UNRECOGNIZED') throw new ChannelApiError(`media download: ${errcode}`, res.status);
      // A homeserver before v1.11 (or a proxy in front that routes no v1 media: a bare 404): the
      // legacy endpoint, on the same server (the token may go with it).
      res = await reach('the homeserver', `${deps.homeserver}/_matrix/media/v3/download/${path}`, {
        headers: auth,
        redirect: 'error',
        signal: limits.signal,
      });
    }
    return readCapped(res, limits.maxBytes, 'media download');
  }

  /** The bytes into the content repository: their mxc:// URI. */
  async function upload(file: ReplyFile, limit: number): Promise<string> {
    if (file.data.byteLength > limit) throw tooLarge(limit, 'the homeserver');
    const res = await reach('the homeserver', `${deps.homeserver}/_matrix/media/v3/upload?filename=${encodeURIComponent(file.name)}`, {
      method: 'POST',
      headers: { ...auth, 'content-type': file.mime },
      body: file.data,
      signal: AbortSignal.timeout(300_000),
    });
    const json = obj(await res.json().catch(() => undefined));
    const uri = str(json?.content_uri);
    if (!res.ok || !uri || !MXC.test(uri)) {
      const retryMs = int(json?.retry_after_ms);
      throw new ChannelApiError(
        `media upload: ${str(json?.errcode) ?? `HTTP ${res.status}`}`,
        res.status,
        retryMs === undefined ? undefined : Math.ceil(retryMs / 1000),
      );
    }
    return uri;
  }

  /** The homeserver's upload limit, if it says (undefined: it does not, or cannot be asked). */
  async function uploadLimit(): Promise<number | undefined> {
    try {
      const res = await fetch(`${deps.homeserver}/_matrix/client/v1/media/config`, { headers: auth, signal: AbortSignal.timeout(10_000) });
      const size = int(obj(await res.json().catch(() => undefined))?.['m.upload.size']);
      return res.ok && size !== undefined && size > 0 ? size : undefined;
    } catch {
      return undefined;
    }
  }

  /** The event content for an uploaded file: its caption as body when there is one. */
  const content = (file: ReplyFile, url: string, caption: string): Json => ({
    msgtype: msgtypeOf(file.mime),
    body: caption !== '' ? caption : file.name,
    filename: file.name,
    url,
    info: { mimetype: file.mime.split(';')[0]!.trim(), size: file.data.byteLength },
  });

  return { fetchAttachment, upload, uploadLimit, content };
}
