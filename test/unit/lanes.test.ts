import { describe, expect, it } from 'vitest';
import { createLanes, type LaneKey, type LaneLimits, type Queued } from '../../src/bridges/lanes.js';

/**
 * The bridge lanes as a scheduler: per-chat order, run slots taken only when asked for,
 * bounded per tenant and per sender and handed out round-robin by tenant, bounded queues.
 */
const limits = (over: Partial<LaneLimits> = {}): LaneLimits => ({
  slots: 2,
  perTenant: 1,
  chatPending: 3,
  tenantPending: 5,
  totalPending: 8,
  ...over,
});
const key = (tenant: string, chat = tenant, sender = tenant): LaneKey => ({ chat, tenant, sender });
const tick = () => new Promise((r) => setTimeout(r, 0));

/** A message whose run takes a slot, then waits until the test ends it. */
function runner(lanes: ReturnType<typeof createLanes>) {
  const log: string[] = [];
  const ends = new Map<string, () => void>();
  const waited = new Set<string>();
  const send = (name: string, k: LaneKey): Queued =>
    lanes.run(k, async (slot) => {
      log.push(`turn ${name}`);
      await slot.take(() => waited.add(name));
      log.push(`run ${name}`);
      await new Promise<void>((r) => ends.set(name, r));
    });
  const end = async (name: string) => {
    ends.get(name)?.();
    await tick();
    await tick();
  };
  return { log, send, end, waited, running: () => log.filter((l) => l.startsWith('run ')).map((l) => l.slice(4)) };
}

describe('bridge lanes', () => {
  it("a chat's messages go one at a time, in order; a message waiting its turn takes no slot", async () => {
    const lanes = createLanes(() => limits({ slots: 2, perTenant: 2 }));
    const r = runner(lanes);
    expect(r.send('a1', key('a'))).toEqual({ accepted: true, ahead: 0 });
    expect(r.send('a2', key('a'))).toEqual({ accepted: true, ahead: 1 });
    r.send('b1', key('b'));
    await tick();
    expect(r.running()).toEqual(['a1', 'b1']);
    expect(lanes.stats()).toEqual({ pending: 3, running: 2, waiting: 0 });
    await r.end('a1');
    expect(r.running()).toEqual(['a1', 'b1', 'a2']);
  });

  it('a tenant with many chats holds at most its per-tenant slots; another tenant is served next (round-robin)', async () => {
    const lanes = createLanes(() => limits({ slots: 3, perTenant: 2, chatPending: 10, tenantPending: 20, totalPending: 40 }));
    const r = runner(lanes);
    for (let i = 0; i < 8; i++) r.send(`alice${i}`, key('alice', `alice/s${i}`));
    await tick();
    expect(r.running()).toEqual(['alice0', 'alice1']);
    // Bob arrives after alice's eight: he gets the free slot, not FIFO behind them.
    r.send('bob', key('bob'));
    await tick();
    expect(r.running()).toEqual(['alice0', 'alice1', 'bob']);
    expect(r.waited.has('bob')).toBe(false);
    r.send('carol', key('carol'));
    await tick();
    expect(r.waited.has('carol')).toBe(true);
    // The next free slot goes round the waiting tenants: carol (waiting) before alice's third.
    await r.end('bob');
    expect(r.running().at(-1)).toBe('carol');
    await r.end('alice0');
    expect(r.running().at(-1)).toBe('alice2');
  });

  it('one sender in several groups (several tenants) holds at most the per-tenant slots too', async () => {
    const lanes = createLanes(() => limits({ slots: 4, perTenant: 2, chatPending: 10, tenantPending: 20, totalPending: 40 }));
    const r = runner(lanes);
    for (let g = 0; g < 4; g++) r.send(`g${g}`, key(`group-${g}`, `group-${g}`, 'alice'));
    r.send('bob', key('bob'));
    await tick();
    expect(r.running()).toEqual(['g0', 'g1', 'bob']);
  });

  it('queues are bounded per chat, per tenant and in all; what a chat is told counts only its own messages', async () => {
    const lanes = createLanes(() => limits({ slots: 1, perTenant: 1, chatPending: 3, tenantPending: 4, totalPending: 6 }));
    const r = runner(lanes);
    expect([1, 2, 3, 4].map((i) => r.send(`a${i}`, key('a')))).toEqual([
      { accepted: true, ahead: 0 },
      { accepted: true, ahead: 1 },
      { accepted: true, ahead: 2 },
      { accepted: false, full: 'chat' },
    ]);
    expect(r.send('a-other-chat', key('a', 'a/2'))).toEqual({ accepted: true, ahead: 0 });
    expect(r.send('a-third-chat', key('a', 'a/3'))).toEqual({ accepted: false, full: 'tenant' });
    // Others' messages never show in "ahead": b's first message has nothing ahead of it.
    expect(r.send('b1', key('b'))).toEqual({ accepted: true, ahead: 0 });
    expect(r.send('c1', key('c'))).toEqual({ accepted: true, ahead: 0 });
    expect(r.send('d1', key('d'))).toEqual({ accepted: false, full: 'bridge' });
    // An answer that must go out (journaled before a restart) is never refused.
    expect(lanes.run(key('d'), async () => undefined, { bounded: false })).toEqual({ accepted: true, ahead: 0 });
  });

  it('a slot is freed when its work ends, also by a throw, and by release() before that', async () => {
    const lanes = createLanes(() => limits({ slots: 1, perTenant: 1 }));
    const order: string[] = [];
    lanes.run(key('a'), async (slot) => {
      await slot.take();
      order.push('a');
      throw new Error('boom');
    });
    let freeB!: () => void;
    lanes.run(key('b'), async (slot) => {
      await slot.take();
      order.push('b');
      slot.release();
      await new Promise<void>((r) => (freeB = r));
    });
    lanes.run(key('c'), async (slot) => {
      await slot.take();
      order.push('c');
    });
    await tick();
    await tick();
    expect(order).toEqual(['a', 'b', 'c']);
    freeB();
    await lanes.idle();
    expect(lanes.stats()).toEqual({ pending: 0, running: 0, waiting: 0 });
  });
});
