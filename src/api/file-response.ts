import fs from 'node:fs';
import type { OpenedRunFile } from '../store/run-files.js';

/**
 * A run's file as an HTTP answer (the admin route and the chat's). Only raster images are
 * shown inline (the web chat's <img>); every other type is a download of bytes, never rendered on
 * berth's origin: an agent's HTML or SVG must not run script there.
 */
const INLINE_TYPES = new Set(['image/png', 'image/jpeg', 'image/gif', 'image/webp']);

/** What a download reads at a time: the most it holds of a file, whatever the file's size. */
export const DOWNLOAD_CHUNK_BYTES = 256 * 1024;

/**
 * Streamed from the descriptor opened when the file was found (never opened again by path), a
 * chunk each time the client takes one; the size is the one fstat gave. The descriptor is closed
 * and `done` called (an in-flight slot) once: at the end, on a read error, or when the client goes.
 */
export function fileResponse(file: OpenedRunFile, done: () => void = () => undefined): Response {
  const inline = INLINE_TYPES.has(file.type);
  const ascii = file.name.replace(/[^\x20-\x7e]|["\\]/g, '_');
  return new Response(streamOf(file.fd, file.size, done), {
    status: 200,
    headers: {
      'content-type': inline ? file.type : 'application/octet-stream',
      'content-length': String(file.size),
      'content-disposition': `${inline ? 'inline' : 'attachment'}; filename="${ascii}"; filename*=UTF-8''${encodeURIComponent(file.name)}`,
      'x-content-type-options': 'nosniff',
      'content-security-policy': "default-src 'none'; sandbox",
      'cache-control': 'private, no-store',
    },
  });
}

function streamOf(fd: number, size: number, done: () => void): ReadableStream<Uint8Array> {
  let at = 0;
  let open = true;
  const finish = () => {
    if (!open) return;
    open = false;
    fs.close(fd, () => undefined);
    done();
  };
  const read = (buf: Buffer) =>
    new Promise<number>((resolve, reject) => fs.read(fd, buf, 0, buf.length, at, (err, n) => (err ? reject(err) : resolve(n))));
  return new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        if (at >= size) {
          finish();
          return controller.close();
        }
        try {
          const buf = Buffer.allocUnsafe(Math.min(DOWNLOAD_CHUNK_BYTES, size - at));
          const n = await read(buf);
          // Shorter than its Content-Length said: the answer is cut, not padded.
          if (n === 0) throw new Error('the file shrank while it was sent');
          at += n;
          controller.enqueue(buf.subarray(0, n));
        } catch (err) {
          finish();
          controller.error(err);
        }
      },
      cancel: finish,
    },
    { highWaterMark: 0 },
  );
}
