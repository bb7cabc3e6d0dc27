import { describe, expect, it } from 'vitest';
import { askedStream } from '../../src/launch/asked-stream.js';

/** One question at a time, a framed answer, bounded and timed (the IPC reader's and the keep-alive's reports' channel). */
function channel(opts: { maxBytes?: number; timeoutMs?: number } = {}) {
  const asked: number[] = [];
  let stops = 0;
  const c = askedStream({
    question: () => asked.push(asked.length),
    stop: () => stops++,
    take: (p) => {
      const end = p.indexOf('|');
      return end < 0 ? undefined : { text: p.slice(0, end), rest: p.slice(end + 1) };
    },
    maxBytes: opts.maxBytes ?? 100,
    timeoutMs: opts.timeoutMs ?? 1000,
  });
  return { c, asked, stops: () => stops };
}

describe('askedStream', () => {
  it('answers each question with the next framed answer, across chunks; one question open at a time', async () => {
    const { c, asked } = channel();
    const first = c.ask();
    expect(await c.ask()).toBeUndefined(); // a second question while one is open
    c.feed('ab');
    c.feed('c|de');
    expect(await first).toBe('abc');
    const second = c.ask();
    c.feed('f|');
    expect(await second).toBe('def');
    expect(asked).toEqual([0, 1]);
  });

  it('closes (stop once, undefined from then on) on an answer nobody asked for, past its bound, or with no answer in time', async () => {
    const unasked = channel();
    unasked.c.feed('x|');
    expect(unasked.stops()).toBe(1);
    expect(await unasked.c.ask()).toBeUndefined();
    const flood = channel({ maxBytes: 5 });
    const q = flood.c.ask();
    flood.c.feed('123456');
    expect(await q).toBeUndefined();
    const slow = channel({ timeoutMs: 20 });
    expect(await slow.c.ask()).toBeUndefined();
    slow.c.close();
    expect([flood.stops(), slow.stops()]).toEqual([1, 1]);
  });
});
