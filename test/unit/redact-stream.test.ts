import { Readable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { maskText, redactStream } from '../../src/outbound/redact-stream.js';

/** Random bodies with the needles planted anywhere, cut into random chunks: the output is the body with every needle masked, byte for byte. */
async function through(needles: string[], chunks: Buffer[]): Promise<string> {
  const out: Buffer[] = [];
  await new Promise<void>((resolve, reject) =>
    Readable.from(chunks)
      .pipe(redactStream(needles))
      .on('data', (c: Buffer) => out.push(c))
      .on('end', resolve)
      .on('error', reject),
  );
  return Buffer.concat(out).toString('latin1');
}

const rand = (n: number) => Math.floor(Math.random() * n);

describe('redactStream', () => {
  it('masks every occurrence, wherever the chunks are cut (400 random cases)', async () => {
    for (let round = 0; round < 400; round++) {
      const needles = ['ghp_SECRET123', 'eC1hY2Nlc3MtdG9rZW46Z2hw', 'ab'].slice(0, 1 + rand(3));
      let body = '';
      for (let i = 0; i < 20; i++) body += Math.random() < 0.3 ? needles[rand(needles.length)] : 'xyzghp_SECRE'.slice(0, rand(13));
      const bytes = Buffer.from(body, 'latin1');
      const chunks: Buffer[] = [];
      for (let at = 0; at < bytes.length; ) {
        const n = 1 + rand(Math.random() < 0.5 ? 4 : 40);
        chunks.push(Buffer.from(bytes.subarray(at, at + n)));
        at += n;
      }
      expect(await through(needles, chunks)).toBe(maskText(body, [...needles].sort((a, b) => b.length - a.length)));
    }
  });

  it('keeps the length, so a Content-Length still holds', async () => {
    const body = `{"echo":"Bearer ghp_SECRET123"}`;
    const out = await through(['ghp_SECRET123'], [Buffer.from(body.slice(0, 20)), Buffer.from(body.slice(20))]);
    expect(out).toBe(`{"echo":"Bearer *************"}`);
    expect(out.length).toBe(body.length);
  });
});
