import { describe, expect, it } from 'vitest';
import { createSseReader, type OversizedEvent } from '../../src/channels/sse-events.js';

/**
 * The bounded SSE reader under the Signal bridge (attack report L2): events come out whole
 * however the bytes are cut; an event over the bound is skipped and reported, and the events
 * after it still come out.
 */
function read(stream: string | Buffer, opts: { max?: number; cut?: number } = {}) {
  const events: string[] = [];
  const oversized: OversizedEvent[] = [];
  const reader = createSseReader({ maxEventBytes: opts.max ?? 100, onEvent: (d) => events.push(d), onOversized: (e) => oversized.push(e) });
  const bytes = Buffer.from(stream);
  const cut = opts.cut ?? bytes.length;
  for (let i = 0; i < bytes.length; i += cut) reader.push(bytes.subarray(i, i + cut));
  return { events, oversized };
}

describe('createSseReader', () => {
  it('joins data lines, ignores comments, event: and id: lines, handles CRLF, whatever the chunking', () => {
    const stream = ':\n:\nevent:receive\ndata:{"a":1}\n\nevent: receive\r\ndata: line one\r\ndata:é€😀\r\n\r\n:\n';
    for (const cut of [1, 2, 3, 7, 1000]) {
      expect(read(stream, { cut })).toEqual({ events: ['{"a":1}', 'line one\né€😀'], oversized: [] });
    }
  });

  it('skips an event over the bound up to the next blank line, reports its size and start, and reads the next one', () => {
    const big = `event:receive\ndata:{"envelope":{"sourceUuid":"u-1","text":"${'x'.repeat(500)}"}}\n\n`;
    const stream = `data:before\n\n${big}event:receive\ndata:after\n\n`;
    for (const cut of [1, 5, 64, 10_000]) {
      const { events, oversized } = read(stream, { max: 100, cut });
      expect(events).toEqual(['before', 'after']);
      expect(oversized).toHaveLength(1);
      expect(oversized[0]!.bytes).toBeGreaterThan(500);
      expect(oversized[0]!.head).toContain('"sourceUuid":"u-1"');
    }
  });

  it('an oversized event of many data lines, and one that is a single endless line, are both skipped', () => {
    const many = `${'data:0123456789\n'.repeat(50)}\n`;
    const endless = `data:${'y'.repeat(10_000)}\n\n`;
    expect(read(`${many}${endless}data:ok\n\n`, { max: 100, cut: 33 })).toMatchObject({ events: ['ok'], oversized: [{}, {}] });
  });

  it('keepalive comments between events never add up to the bound', () => {
    expect(read(`${':\n'.repeat(1000)}data:ok\n\n`, { max: 100 })).toEqual({ events: ['ok'], oversized: [] });
  });
});
