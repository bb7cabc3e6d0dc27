import { BerthError } from '../base/errors.js';
import { base64Length, decodeBase64Capped, foreignRef, readCapped } from './attachment-bytes.js';
import type { ChannelAttachment } from './contract.js';
import { int, list, num, obj, str, type Json } from './json.js';

/**
 * Files on Signal, through signal-cli's daemon:
 * - in: a data message's `attachments` (JsonAttachment: contentType, filename, id, size) become
 *   attachments, ref `signal:<id>`. signal-cli has already downloaded them into its attachments
 *   folder; `getAttachment {id}` answers the whole file as base64 in one JSON-RPC result, so the
 *   answer is read no further than the base64 of the bound. The id is a file name in that folder
 *   (signal-cli opens `<attachments>/<id>`): only ids of its own shape are asked for.
 * - out: an attachment as a data URI in `send` (signal.ts). Signal takes attachments up to 100 MiB.
 */
export const SIGNAL_FILE_LIMIT_BYTES = 100 * 1024 * 1024;
/** signal-cli names a stored attachment by a random id and the type's extension. */
const ATTACHMENT_ID = /^[A-Za-z0-9_-]{1,128}(\.[A-Za-z0-9]{1,16})?$/;
const REF = /^signal:(.+)$/;
const MIME = /^[\w.+-]{1,64}\/[\w.+-]{1,128}$/;
/** Signal sends at most 32 attachments with a message (its clients: 32); past that, not read. */
const MAX_ATTACHMENTS = 32;
/** The JSON-RPC envelope around the base64 (`{"jsonrpc":"2.0","result":{"data":"…"},"id":…}`). */
const ENVELOPE_BYTES = 1024;

/** A data message's attachments. A voice note is an audio attachment without a file name (what Signal's apps send). */
export function signalAttachments(data: Json): ChannelAttachment[] {
  return list(data.attachments)
    .slice(0, MAX_ATTACHMENTS)
    .flatMap((a) => {
      const att = obj(a);
      const id = str(att?.id);
      if (!att || !id || !ATTACHMENT_ID.test(id)) return [];
      const mime = str(att.contentType);
      const name = str(att.filename);
      const size = int(att.size);
      const voice = mime?.startsWith('audio/') === true && name === undefined;
      return [
        {
          ref: `signal:${id}`,
          ...(name ? { name } : {}),
          ...(mime && MIME.test(mime) ? { mime } : {}),
          ...(size !== undefined && size >= 0 ? { size } : {}),
          ...(voice ? { voice: true } : {}),
        },
      ];
    });
}

/** A JSON-RPC call's answer read within `maxBytes` (TOO_LARGE past it), parsed. */
export type BoundedRpc = (method: string, params: Json, maxBytes: number, signal: AbortSignal) => Promise<unknown>;

/** The bytes of an attachment signal-cli holds. */
export async function fetchSignalAttachment(
  rpc: BoundedRpc,
  ref: string,
  limits: { maxBytes: number; signal: AbortSignal },
): Promise<Uint8Array> {
  const id = REF.exec(ref)?.[1];
  if (id === undefined || !ATTACHMENT_ID.test(id)) throw foreignRef('signal');
  const result = obj(await rpc('getAttachment', { id }, base64Length(limits.maxBytes) + ENVELOPE_BYTES, limits.signal));
  const data = str(result?.data);
  if (data === undefined) throw new BerthError('INTERNAL', 'signal-cli answered getAttachment without data');
  return decodeBase64Capped(data, limits.maxBytes);
}

/** A JSON-RPC answer's body, bounded: the `result`, or the error's code and message thrown by `fail`. */
export async function boundedRpcResult(res: Response, maxBytes: number, fail: (code: number, message: string) => Error): Promise<unknown> {
  const ok = new Response(res.body, { status: 200, headers: res.headers });
  const text = Buffer.from(await readCapped(ok, maxBytes, 'signal-cli')).toString('utf8');
  let body: Json | undefined;
  try {
    body = obj(JSON.parse(text));
  } catch {
    body = undefined;
  }
  const error = obj(body?.error);
  if (error) throw fail(num(error.code) ?? -1, str(error.message) ?? 'signal-cli error');
  if (!res.ok || !body) throw fail(-1, `signal-cli answered HTTP ${res.status}`);
  return body.result;
}
