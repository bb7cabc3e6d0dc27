import { describe, expect, it } from 'vitest';
import { ownerAlive, processIdentity } from '../../src/fs/process-identity.js';

describe('process identity: who owns a run, a lock, a bridge', () => {
  const mine = processIdentity() ?? '';
  const [pid, start, boot] = mine.split('.');

  it('names the pid, its start time and this boot', () => {
    expect(mine).toMatch(/^\d+\.\d+\.[0-9a-f]{8}$/);
    expect(ownerAlive(mine)).toBe(true);
  });

  it('a process of another boot with the same pid and start time is not this one (a service started at boot)', () => {
    const otherBoot = boot === '00000000' ? '11111111' : '00000000';
    expect(ownerAlive(`${pid}.${start}.${otherBoot}`)).toBe(false);
  });

  it("an older berth's identity (no boot) is still judged by pid and start time", () => {
    expect(ownerAlive(`${pid}.${start}`)).toBe(true);
    expect(ownerAlive(`${pid}.${Number(start) + 1}`)).toBe(false);
  });

  it('nothing, garbage and a dead pid own nothing', () => {
    for (const owner of [undefined, '', 'x.y.z', '0.1.2', `${pid}.unknown`, '4194304.1.abcdef12'])
      expect(ownerAlive(owner), String(owner)).toBe(false);
  });
});
