import { describe, expect, it } from 'vitest';
import { createObserver } from '../../src/launch/observer.js';
import type { Observed } from '../../src/plan/receipt.js';

describe('a container is observed once: its warm messages carry the first reading', () => {
  it('reads a container once, again after forget, and again after a reading that failed', async () => {
    const reads: string[] = [];
    let fail = false;
    const observer = createObserver(async (id): Promise<Observed> => {
      reads.push(id);
      if (fail) throw new Error('engine gone');
      return { runtime: 'runc', seen_from: { runtime: 'engine' } } as Observed;
    });
    const first = await observer.observe('c1');
    expect(await observer.observe('c1')).toBe(first);
    await observer.observe('c2');
    expect(reads).toEqual(['c1', 'c2']);
    observer.forget('c1');
    await observer.observe('c1');
    expect(reads).toEqual(['c1', 'c2', 'c1']);
    fail = true;
    await expect(observer.observe('c3')).rejects.toThrow('engine gone');
    fail = false;
    await expect(observer.observe('c3')).resolves.toMatchObject({ runtime: 'runc' });
    expect(reads).toEqual(['c1', 'c2', 'c1', 'c3', 'c3']);
  });
});
