import { deflateSync } from 'node:zlib';
import type { ReplyFile } from '../../src/channels/contract.js';

/**
 * Small real files for the channels' file tests: a PNG any decoder reads (a 2×1 image, its
 * chunks' CRCs right) and a PDF whose header and trailer are what readers look for.
 */
function crc32(bytes: Buffer): number {
  let c = 0xffffffff;
  for (const b of bytes) {
    c ^= b;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  }
  return (c ^ 0xffffffff) >>> 0;
}

function chunk(type: string, data: Buffer): Buffer {
  const head = Buffer.alloc(4);
  head.writeUInt32BE(data.length);
  const body = Buffer.concat([Buffer.from(type, 'latin1'), data]);
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(body));
  return Buffer.concat([head, body, crc]);
}

export function pngBytes(width = 2, height = 1): Buffer {
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width, 0);
  ihdr.writeUInt32BE(height, 4);
  ihdr.set([8, 2, 0, 0, 0], 8); // 8-bit RGB
  const rows = Buffer.concat(Array.from({ length: height }, () => Buffer.concat([Buffer.from([0]), Buffer.alloc(width * 3, 0x7f)])));
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', ihdr),
    chunk('IDAT', deflateSync(rows)),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}

export const pdfBytes = (): Buffer =>
  Buffer.from('%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF\n', 'latin1');

export const png = (name = 'chart.png'): ReplyFile => ({ name, mime: 'image/png', data: new Uint8Array(pngBytes()) });
export const pdf = (name = 'report.pdf'): ReplyFile => ({ name, mime: 'application/pdf', data: new Uint8Array(pdfBytes()) });

/** Bytes of a given length (a pattern, so a cut or a mix-up shows). */
export const bytesOf = (n: number): Buffer => Buffer.from(Array.from({ length: n }, (_, i) => i % 251));
