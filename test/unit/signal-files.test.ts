import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { isBerthError } from '../../src/base/errors.js';
import type { ChannelMessage, ChannelTransport } from '../../src/channels/contract.js';
import { createSignalBridge } from '../../src/channels/signal.js';
import { SIGNAL_FILE_LIMIT_BYTES } from '../../src/channels/signal-files.js';
import { startFakeSignalCli, type FakeSignalCli } from '../fakes/signal-cli.js';
import { bytesOf, pdf, pdfBytes, png, pngBytes } from '../helpers/sample-files.js';

/**
 * Files through the Signal module against the fake signal-cli daemon: a data message's
 * attachments become attachments whose bytes come by getAttachment (base64, read no further than
 * the bound); what berth sends is an attachment as a data URI.
 */
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const ALICE = '0b7e7a4c-8d2e-4f61-9c3a-5a0e2f1b6c11';

async function setup(maxFileBytes?: number): Promise<{ fake: FakeSignalCli; signal: ChannelTransport; taken: ChannelMessage[] }> {
  const fake = await startFakeSignalCli({ keepaliveMs: 50 });
  cleanups.push(() => fake.close());
  const taken: ChannelMessage[] = [];
  const signal = createSignalBridge({
    url: fake.url,
    account: fake.account,
    logger: pino({ level: 'silent' }),
    onMessage: (m) => void taken.push(m),
    backoffMs: { min: 10, max: 50 },
    ...(maxFileBytes !== undefined ? { maxFileBytes } : {}),
  });
  signal.start();
  cleanups.push(() => signal.stop());
  await fake.waitForClients(1);
  return { fake, signal, taken };
}

const fetchOf = (t: ChannelTransport, ref: string, maxBytes = 1024 * 1024) =>
  t.fetchAttachment!(ref, { maxBytes, signal: AbortSignal.timeout(10_000) });
const codeOf = async (p: Promise<unknown>) =>
  p.then(
    () => 'resolved',
    (err: unknown) => (isBerthError(err) ? err.code : String(err)),
  );

describe('signal: files in', () => {
  it('a photo with words, a PDF and a voice note alone: attachments with name, type and size, their bytes by getAttachment', async () => {
    const { fake, signal, taken } = await setup();
    const photo = fake.addAttachment(pngBytes(), { contentType: 'image/png', filename: 'screen.png' });
    const report = fake.addAttachment(pdfBytes(), { contentType: 'application/pdf', filename: 'report.pdf' });
    const voice = fake.addAttachment(bytesOf(700), { contentType: 'audio/aac' });
    fake.deliverText({ fromUuid: ALICE, fromNumber: '+15551230001', text: 'look', attachments: [photo] });
    fake.deliverRaw({
      sourceUuid: ALICE,
      sourceNumber: '+15551230001',
      dataMessage: { timestamp: 1_700_000_000_001, message: null, expiresInSeconds: 0, attachments: [report, voice] },
    });
    await fake.waitFor(() => taken.length === 2);
    expect(taken[0]).toMatchObject({
      text: 'look',
      attachments: [{ ref: `signal:${photo.id}`, name: 'screen.png', mime: 'image/png', size: pngBytes().length }],
    });
    expect(taken[1]).toMatchObject({
      text: '',
      attachments: [
        { ref: `signal:${report.id}`, name: 'report.pdf', mime: 'application/pdf', size: pdfBytes().length },
        { ref: `signal:${voice.id}`, mime: 'audio/aac', size: 700, voice: true },
      ],
    });
    expect(Buffer.from(await fetchOf(signal, `signal:${photo.id}`))).toEqual(pngBytes());
    expect(Buffer.from(await fetchOf(signal, `signal:${report.id}`))).toEqual(pdfBytes());
    expect(fake.calls.filter((c) => c.method === 'getAttachment').map((c) => c.params)).toEqual([
      { id: photo.id, account: fake.account },
      { id: report.id, account: fake.account },
    ]);
  });

  it('over the bound: the answer is cut once it passes the base64 of the bound, whatever size the message claimed', async () => {
    const { fake, signal } = await setup();
    const big = fake.addAttachment(bytesOf(300_000), { contentType: 'application/octet-stream', filename: 'big.bin', size: 10 });
    expect(await codeOf(fetchOf(signal, `signal:${big.id}`, 100_000))).toBe('TOO_LARGE');
    const exact = fake.addAttachment(bytesOf(100_000), { contentType: 'application/octet-stream', filename: 'exact.bin' });
    expect((await fetchOf(signal, `signal:${exact.id}`, 100_000)).byteLength).toBe(100_000);
    const over = fake.addAttachment(bytesOf(100_001), { contentType: 'application/octet-stream', filename: 'over.bin' });
    expect(await codeOf(fetchOf(signal, `signal:${over.id}`, 100_000))).toBe('TOO_LARGE');
  });

  it("a ref Signal did not hand out (another channel's, a path) is refused without a call", async () => {
    const { fake, signal } = await setup();
    for (const ref of ['signal:../../../etc/passwd', 'signal:a/b', 'tg:AAAA', 'mxc://example.org/x', 'signal:'])
      expect(await codeOf(fetchOf(signal, ref))).toBe('NOT_FOUND');
    expect(fake.calls.filter((c) => c.method === 'getAttachment')).toEqual([]);
  });

  it('an attachment signal-cli no longer holds: its error, not bytes', async () => {
    const { signal } = await setup();
    await expect(fetchOf(signal, 'signal:gone123.png')).rejects.toMatchObject({ code: -32603 });
  });
});

describe('signal: files out', () => {
  it('a PNG and a PDF go as attachments (data URIs with their names and types) under their captions', async () => {
    const { fake, signal } = await setup();
    expect(signal.fileLimitBytes).toBe(SIGNAL_FILE_LIMIT_BYTES);
    await signal.sendFile!(ALICE, png(), 'the chart');
    await signal.sendFile!(ALICE, pdf(), 'the report');
    const [a, b] = fake.repliesTo(ALICE);
    expect(a).toMatchObject({
      message: 'the chart',
      files: [{ source: 'data-uri', contentType: 'image/png', filename: 'chart.png', data: pngBytes() }],
    });
    expect(b).toMatchObject({
      message: 'the report',
      files: [{ source: 'data-uri', contentType: 'application/pdf', filename: 'report.pdf', data: pdfBytes() }],
    });
  });

  it("the operator's max_file_bytes is the limit the core reads, and a send past it is refused without a call", async () => {
    const { fake, signal } = await setup(4096);
    expect(signal.fileLimitBytes).toBe(4096);
    await signal.sendFile!(ALICE, { name: 'fits.bin', mime: 'application/octet-stream', data: new Uint8Array(4096) }, 'fits');
    await expect(
      signal.sendFile!(ALICE, { name: 'over.bin', mime: 'application/octet-stream', data: new Uint8Array(4097) }, 'over'),
    ).rejects.toMatchObject({ code: 'TOO_LARGE' });
    expect(fake.repliesTo(ALICE).map((r) => r.files.map((f) => f.filename))).toEqual([['fits.bin']]);
  });
});
