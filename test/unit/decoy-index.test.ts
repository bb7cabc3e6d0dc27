import { describe, expect, it } from 'vitest';
import { ANCHOR, createDecoyIndex } from '../../src/outbound/decoy-index.js';

/** Every tenant's decoy values in one index (outbound/decoy-index.ts): found anywhere in a text, whole, by their owner. */
describe('the decoy index', () => {
  const a = 'AKIAABCDEFGHIJKLMNOP';
  const b = 'wJalrXUtnFEMIK7MDENGbPxRfiCYEXAMPLEKEY01';
  const c = 'b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW';

  it('finds a value at the start, the end, or inside a text, as written or in base64, and only whole', () => {
    const index = createDecoyIndex<string>();
    index.add('alice', 'alice', [a, c]);
    index.add('bob', 'bob', [b]);
    expect(index.find(a)).toBe('alice');
    expect(index.find(`x=${b}`)).toBe('bob');
    expect(index.find(`-----\n${c}\n-----`)).toBe('alice');
    expect(index.find(`{"k":"${Buffer.from(`secret = ${b}\n`).toString('base64')}"}`)).toBe('bob');
    expect(index.find(b.slice(0, -1))).toBeUndefined();
    expect(index.find(a.slice(1))).toBeUndefined();
    expect(index.find('')).toBeUndefined();
  });

  it('a removed owner is no longer found; one that shares nothing with it still is', () => {
    const index = createDecoyIndex<string>();
    index.add('alice', 'alice', [a]);
    index.add('bob', 'bob', [b]);
    index.remove('alice');
    expect(index.find(a)).toBeUndefined();
    expect(index.find(b)).toBe('bob');
    expect(index.size()).toBe(1);
  });

  it('two owners of the same value: the first one `accept` takes', () => {
    const index = createDecoyIndex<string>();
    index.add('p/alice', 'p/alice', [a]);
    index.add('q/alice', 'q/alice', [a]);
    expect(index.find(a, (o) => o.startsWith('q/'))).toBe('q/alice');
    expect(index.find(a, () => false)).toBeUndefined();
  });

  it(`a value shorter than ${ANCHOR} characters is not looked for (no decoy is)`, () => {
    const index = createDecoyIndex<string>();
    index.add('x', 'x', ['short-value']);
    expect(index.find('a short-value here')).toBeUndefined();
  });

  it('thousands of owners: each found, and a text with none of them is none', () => {
    const index = createDecoyIndex<number>();
    const value = (i: number) => `AKIA${i.toString(36).padStart(16, '0').toUpperCase()}`;
    for (let i = 0; i < 5000; i++) index.add(String(i), i, [value(i)]);
    expect([0, 1234, 4999].map((i) => index.find(`Bearer ${value(i)}`))).toEqual([0, 1234, 4999]);
    expect(index.find('AKIA'.repeat(10_000))).toBeUndefined();
  });
});
