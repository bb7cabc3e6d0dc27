import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { DOWNLOAD_CHUNK_BYTES, fileResponse } from '../../src/api/file-response.js';
import { FILE_REQUESTS_IN_FLIGHT, inFlight } from '../../src/api/in-flight.js';
import { openRunFile, runFileKeyMatches, runFilesDirOf } from '../../src/store/run-files.js';
import { bytesOf } from '../helpers/sample-files.js';

/**
 * A run's file downloaded: streamed from the descriptor opened when it was found, a chunk at a
 * time as the client reads (a 20 MiB file is never held whole), with its Content-Length; a file
 * swapped for a link is never followed; the in-flight slot is held until the body ends or the
 * client goes.
 */
const RUN = 'rabc0123456789a';
const MiB = 1024 * 1024;
const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});

function stored(files: Record<string, Buffer>): { state: string; dir: string } {
  const state = fs.mkdtempSync(join(os.tmpdir(), 'berth-download-'));
  dirs.push(state);
  const dir = runFilesDirOf(state, RUN);
  fs.mkdirSync(dir, { recursive: true });
  for (const [name, data] of Object.entries(files)) fs.writeFileSync(join(dir, name), data);
  const list = Object.entries(files).map(([name, data]) => ({ name, size: data.length, type: 'application/octet-stream' }));
  fs.writeFileSync(join(dir, '.run.json'), JSON.stringify({ tenant_key: 'signal:x', session: 's', files: list, key: 'k'.repeat(22) }));
  return { state, dir };
}

const sha = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');

describe('a run file download', () => {
  it('20 MiB: streamed in chunks of at most DOWNLOAD_CHUNK_BYTES as they are read, the bytes and Content-Length right', async () => {
    const big = randomBytes(20 * MiB);
    const { state } = stored({ 'big.bin': big });
    let done = 0;
    const res = fileResponse(openRunFile(state, RUN, 'big.bin'), () => done++);
    expect(res.headers.get('content-length')).toBe(String(20 * MiB));
    expect(res.headers.get('content-disposition')).toMatch(/^attachment;/);
    const reader = res.body!.getReader();
    const hash = createHash('sha256');
    let chunks = 0;
    let largest = 0;
    let total = 0;
    for (let r = await reader.read(); !r.done; r = await reader.read()) {
      chunks++;
      largest = Math.max(largest, r.value.byteLength);
      total += r.value.byteLength;
      hash.update(r.value);
    }
    expect(total).toBe(20 * MiB);
    expect(hash.digest('hex')).toBe(sha(big));
    expect(largest).toBeLessThanOrEqual(DOWNLOAD_CHUNK_BYTES);
    expect(chunks).toBeGreaterThanOrEqual((20 * MiB) / DOWNLOAD_CHUNK_BYTES);
    expect(done).toBe(1);
  });

  it('nothing is read ahead of the client: a file cut after the first chunk ends the stream in an error, not its old bytes', async () => {
    const { state, dir } = stored({ 'big.bin': randomBytes(20 * MiB) });
    let done = 0;
    const reader = fileResponse(openRunFile(state, RUN, 'big.bin'), () => done++).body!.getReader();
    expect((await reader.read()).value!.byteLength).toBe(DOWNLOAD_CHUNK_BYTES);
    fs.truncateSync(join(dir, 'big.bin'), MiB);
    let got = DOWNLOAD_CHUNK_BYTES;
    await expect(
      (async () => {
        for (let r = await reader.read(); !r.done; r = await reader.read()) got += r.value.byteLength;
      })(),
    ).rejects.toThrow(/shrank/);
    expect(got).toBe(MiB);
    expect(done).toBe(1);
  });

  it('a file swapped for a link before it is opened is not followed; one swapped after is served from what was opened', async () => {
    const { state, dir } = stored({ 'a.txt': Buffer.from('the agent wrote this'), 'b.txt': Buffer.from('second') });
    const secret = join(state, 'host-secret');
    fs.writeFileSync(secret, 'not for the tenant');
    fs.rmSync(join(dir, 'a.txt'));
    fs.symlinkSync(secret, join(dir, 'a.txt'));
    expect(() => openRunFile(state, RUN, 'a.txt')).toThrow(expect.objectContaining({ code: 'NOT_FOUND' }));

    const opened = openRunFile(state, RUN, 'b.txt');
    fs.rmSync(join(dir, 'b.txt'));
    fs.symlinkSync(secret, join(dir, 'b.txt'));
    expect(await fileResponse(opened).text()).toBe('second');
  });

  it("the run's link key: matched whole, in constant time; a run stored before keys opens with none", () => {
    const { state } = stored({ 'a.txt': Buffer.from('x') });
    const f = openRunFile(state, RUN, 'a.txt');
    fs.closeSync(f.fd);
    expect(runFileKeyMatches(f, 'k'.repeat(22))).toBe(true);
    for (const wrong of ['', 'k', 'k'.repeat(21), 'k'.repeat(23), 'K'.repeat(22)]) expect(runFileKeyMatches(f, wrong)).toBe(false);
    expect(runFileKeyMatches({}, '')).toBe(false);
  });

  it('the in-flight slot is held while the body streams and given back at its end or when the client goes', async () => {
    const { state } = stored({ 'a.bin': bytesOf(3 * DOWNLOAD_CHUNK_BYTES) });
    const downloads = inFlight({ perKey: 1, total: FILE_REQUESTS_IN_FLIGHT.total }, 'downloads');
    const first = fileResponse(openRunFile(state, RUN, 'a.bin'), downloads.acquire('alice'));
    expect(() => downloads.acquire('alice')).toThrow(expect.objectContaining({ code: 'BUSY' }));
    await first.arrayBuffer();
    const second = fileResponse(openRunFile(state, RUN, 'a.bin'), downloads.acquire('alice'));
    const reader = second.body!.getReader();
    await reader.read();
    expect(() => downloads.acquire('alice')).toThrow(expect.objectContaining({ code: 'BUSY' }));
    await reader.cancel();
    downloads.acquire('alice')();
  });
});
