import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { isBerthError } from '../../src/base/errors.js';
import { loadOrCreateEgressCa, MAX_CERT_NAMES } from '../../src/outbound/egress-ca.js';

/**
 * berth's egress CA keeps the certificates it signed by recent use (a name in use is never the
 * one dropped), signs a new one off the event loop (the loop goes on meanwhile), signs a name
 * once however many connections ask for it at once, and asks its caller's budget before it
 * signs at all (report round 4, L1).
 */
const dir = fs.mkdtempSync(join(os.tmpdir(), 'berth-egress-ca-'));
const ca = loadOrCreateEgressCa(join(dir, 'state'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

describe('egress CA certificates', () => {
  it('signs off the event loop: callbacks queued after the request run before the certificate is ready', async () => {
    const pending = ca.contextFor('off-loop.example');
    let ranMeanwhile = false;
    setImmediate(() => {
      ranMeanwhile = true;
    });
    await pending;
    expect(ranMeanwhile).toBe(true);
  });

  it('signs a name once for many callers at once, and asks the budget once', async () => {
    let asked = 0;
    const budget = () => ++asked > 0;
    const all = await Promise.all(Array.from({ length: 8 }, () => ca.contextFor('once.example', budget)));
    expect(new Set(all).size).toBe(1);
    expect(asked).toBe(1);
    // Known now: the budget is not asked again.
    expect(await ca.contextFor('once.example', () => false)).toBe(all[0]);
  });

  it('refuses a new name when the budget says no (BUSY), never a known one', async () => {
    const known = await ca.contextFor('known.example');
    await expect(ca.contextFor('new-and-refused.example', () => false)).rejects.toSatisfy((err) => isBerthError(err, 'BUSY'));
    expect(await ca.contextFor('known.example', () => false)).toBe(known);
  });

  it('drops the least recently used name when full, not the oldest made', async () => {
    const kept = await ca.contextFor('kept.example');
    const dropped = await ca.contextFor('dropped.example');
    for (let i = 0; i < MAX_CERT_NAMES; i++) {
      await ca.contextFor(`filler${i}.example`);
      // kept.example is in use all along: it stays.
      if (i % 64 === 0) expect(await ca.contextFor('kept.example', () => false)).toBe(kept);
    }
    expect(await ca.contextFor('kept.example', () => false)).toBe(kept);
    const remade = await ca.contextFor('dropped.example');
    expect(remade).not.toBe(dropped);
  });
});
