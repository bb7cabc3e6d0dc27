import { describe, expect, it } from 'vitest';
import { nodeSupport } from '../../src/base/node-support.js';

describe('the Node berth runs on', () => {
  const today = new Date('2026-11-24T12:00:00Z');
  it('an end-of-life line is named, with what to run instead; a supported one says until when', () => {
    expect(nodeSupport('v20.20.2', today)).toEqual({
      ok: false,
      detail: 'Node v20.20.2 is end-of-life since 2026-04-30 (no more security fixes): run berth on Node 22 or 24 LTS',
    });
    expect(nodeSupport('v22.19.0', today)).toEqual({ ok: true, detail: 'Node v22.19.0 (supported until 2027-04-30)' });
    expect(nodeSupport('v24.21.0', today)).toEqual({ ok: true, detail: 'Node v24.21.0 (supported until 2028-04-30)' });
    expect(nodeSupport('v20.20.2', new Date('2026-01-01T00:00:00Z')).ok).toBe(true);
    expect(nodeSupport('v26.0.0', today).ok).toBe(true);
    expect(nodeSupport('v19.9.0', today).ok).toBe(false);
  });
});
