/**
 * A run's file as an HTTP answer (the admin route and the chat login's). Only raster images are
 * shown inline (the web chat's <img>); every other type is a download of bytes, never rendered on
 * berth's origin: an agent's HTML or SVG must not run script there.
 */
const INLINE_TYPES = new Set(['image/png', 'image/jpeg', 'image/gif', 'image/webp']);

export function fileResponse(file: { data: Buffer; type: string; name: string }): Response {
  const inline = INLINE_TYPES.has(file.type);
  const ascii = file.name.replace(/[^\x20-\x7e]|["\\]/g, '_');
  // The bytes as read, not a copy: a download holds its file once.
  return new Response(file.data as Uint8Array<ArrayBuffer>, {
    status: 200,
    headers: {
      'content-type': inline ? file.type : 'application/octet-stream',
      'content-length': String(file.data.byteLength),
      'content-disposition': `${inline ? 'inline' : 'attachment'}; filename="${ascii}"; filename*=UTF-8''${encodeURIComponent(file.name)}`,
      'x-content-type-options': 'nosniff',
      'content-security-policy': "default-src 'none'; sandbox",
      'cache-control': 'private, no-store',
    },
  });
}
