import { describe, expect, it } from 'vitest';
import { base64Length, boundOf, decodeBase64Capped, readCapped } from '../../src/channels/attachment-bytes.js';

/**
 * The bounded reads every channel's fetchAttachment uses: a download refused by its declared
 * length before a byte is read, or cut once it passes the bound (what came after is never
 * pulled); base64 refused by its length before it is decoded.
 */
function streamOf(chunks: number[], pulled: number[]): ReadableStream<Uint8Array> {
  let i = 0;
  return new ReadableStream({
    pull(controller) {
      if (i === chunks.length) return controller.close();
      pulled.push(i);
      controller.enqueue(new Uint8Array(chunks[i++]!));
    },
  });
}

describe('readCapped', () => {
  it('reads a body up to the bound, whole', async () => {
    const pulled: number[] = [];
    expect((await readCapped(new Response(streamOf([40, 60], pulled)), 100, 'x')).byteLength).toBe(100);
  });

  it('cuts a body without a length once it passes the bound: the chunks after it are never pulled', async () => {
    const pulled: number[] = [];
    await expect(readCapped(new Response(streamOf([60, 60, 60, 60], pulled)), 100, 'x', 'Example')).rejects.toMatchObject({
      code: 'TOO_LARGE',
      message: "the file is larger than 100 bytes (Example's limit)",
    });
    expect(pulled.length).toBeLessThan(4);
  });

  it('refuses a declared length over the bound before reading', async () => {
    const pulled: number[] = [];
    await expect(
      readCapped(new Response(streamOf([10], pulled), { headers: { 'content-length': '101' } }), 100, 'x'),
    ).rejects.toMatchObject({ code: 'TOO_LARGE' });
    expect(pulled).toEqual([]);
  });

  it("a non-2xx answer is the service's error, its body unread", async () => {
    await expect(readCapped(new Response('nope', { status: 404 }), 100, 'the download')).rejects.toMatchObject({
      status: 404,
      message: 'the download: HTTP 404',
    });
  });
});

describe('decodeBase64Capped', () => {
  it('decodes what fits, exactly to the bound; one byte more is TOO_LARGE before decoding', () => {
    const three = Buffer.from('abc').toString('base64');
    expect(Buffer.from(decodeBase64Capped(three, 3)).toString()).toBe('abc');
    expect(() => decodeBase64Capped(three, 2)).toThrow(expect.objectContaining({ code: 'TOO_LARGE' }));
    expect(Buffer.from(decodeBase64Capped('aGk=', 2)).toString()).toBe('hi');
    expect(() => decodeBase64Capped('aGk=', 1)).toThrow(expect.objectContaining({ code: 'TOO_LARGE' }));
    expect(base64Length(3)).toBe(4);
  });

  it('refuses what is not base64', () => {
    // Node's decoder skips what is not in the alphabet (and takes base64url): berth does not.
    for (const bad of ['a', 'ab$d', 'aGk=aGk=', '====', 'aG k=', 'aGk-', 'aGk_', 'YWJj\u0000'])
      expect(() => decodeBase64Capped(bad, 100)).toThrow(expect.objectContaining({ code: 'CONFIG_INVALID' }));
  });

  it('line breaks and missing padding are taken', () => {
    expect(Buffer.from(decodeBase64Capped('YW\r\nJj\nZA', 100)).toString()).toBe('abcd');
  });
});

describe('boundOf', () => {
  it('the smaller bound, naming the service when its limit is the one that binds', () => {
    expect(boundOf(100, 50, 'Telegram bots')).toEqual({ max: 50, service: 'Telegram bots' });
    expect(boundOf(10, 50, 'Telegram bots')).toEqual({ max: 10, service: undefined });
  });
});
