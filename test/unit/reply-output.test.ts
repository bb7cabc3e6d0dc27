import { describe, expect, it } from 'vitest';
import { collectOutput } from '../../src/bridges/reply-output.js';
import { REPLY_OUTPUT_CHARS, REPLY_OUTPUT_SEGMENTS } from '../../src/store/chat-transcripts.js';

describe("a reply's output in order (stdout and stderr apart)", () => {
  it('joins consecutive chunks of one stream and keeps the order of the streams', () => {
    const o = collectOutput();
    for (const [stream, text] of [
      ['stdout', 'a'],
      ['stdout', 'b\n'],
      ['stderr', 'oops\n'],
      ['stdout', 'c\n'],
      ['stderr', ''],
    ] as const)
      o.push(stream, text);
    expect(o.segments()).toEqual([
      { stream: 'stdout', text: 'ab\n' },
      { stream: 'stderr', text: 'oops\n' },
      { stream: 'stdout', text: 'c\n' },
    ]);
  });

  it('is bounded in characters and in segments, and says where it was cut', () => {
    const big = collectOutput();
    big.push('stdout', 'x'.repeat(REPLY_OUTPUT_CHARS - 10));
    big.push('stderr', 'y'.repeat(100));
    big.push('stdout', 'never kept');
    expect(big.segments().map((s) => [s.stream, s.text.length])).toEqual([
      ['stdout', REPLY_OUTPUT_CHARS - 10],
      ['stderr', 10],
      ['stdout', '\n[… the rest of the output is cut]'.length],
    ]);
    const many = collectOutput();
    for (let i = 0; i < REPLY_OUTPUT_SEGMENTS * 2; i++) many.push(i % 2 ? 'stderr' : 'stdout', `${i}\n`);
    expect(many.segments()).toHaveLength(REPLY_OUTPUT_SEGMENTS);
    expect(many.segments().at(-1)?.text).toMatch(/the rest of the output is cut/);
  });
});
