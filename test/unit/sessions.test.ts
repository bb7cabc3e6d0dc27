import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { LEVEL_PROFILES, toolAllowed } from '../../src/plan/levels.js';
import { memoryBootstrap, memorySearch, memoryWrite, MEMORY_SOP } from '../../src/store/memory.js';
import { createSessionTokens } from '../../src/store/session-tokens.js';

const dirs: string[] = [];
const tmp = () => {
  const d = fs.mkdtempSync(join(os.tmpdir(), 'berth-unit-'));
  dirs.push(d);
  return d;
};
afterEach(() => {
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});

describe('level profiles (the table in the README)', () => {
  it('maps each level to egress, memory and tools', () => {
    expect(
      Object.fromEntries(Object.entries(LEVEL_PROFILES).map(([l, p]) => [l, [p.egress, p.memoryRead, p.memoryWrite, p.memoryBootstrap]])),
    ).toEqual({
      low: [false, false, false, false],
      medium: [true, true, false, true],
      high: [true, true, true, true],
    });
    expect(['low', 'medium', 'high'].map((l) => toolAllowed(l as 'low', 'memory_search'))).toEqual([false, true, true]);
    expect(['low', 'medium', 'high'].map((l) => toolAllowed(l as 'low', 'memory_write'))).toEqual([false, false, true]);
  });
});

describe('memory adapter (second gate)', () => {
  it('refuses by level even when called directly, whatever the caller checked', () => {
    const dir = tmp();
    expect(() => memoryWrite(dir, 'medium', 'web:a', { text: 'x' })).toThrow(
      expect.objectContaining({ code: 'PERMISSION_DENIED', details: { rule: 'memory_write_denied' } }),
    );
    expect(() => memorySearch(dir, 'low', { query: 'x' })).toThrow(
      expect.objectContaining({ code: 'PERMISSION_DENIED', details: { rule: 'memory_read_denied' } }),
    );
    expect(fs.existsSync(join(dir, 'entries.jsonl'))).toBe(false);
  });

  it('ranks by matching words, bounds results, skips a corrupt line', () => {
    const dir = tmp();
    memoryWrite(dir, 'high', 'web:a', { text: 'deploys happen on Friday', tags: ['ops'] });
    memoryWrite(dir, 'high', 'web:a', { text: 'the deploy key rotates on Mondays; deploy carefully', tags: ['ops', 'deploy'] });
    fs.appendFileSync(join(dir, 'entries.jsonl'), '{"half": \n');
    memoryWrite(dir, 'high', 'web:b', { text: 'lunch is at noon' });
    const hits = memorySearch(dir, 'medium', { query: 'deploy key', limit: 5 });
    expect(hits.map((e) => e.text)).toEqual(['the deploy key rotates on Mondays; deploy carefully']);
    expect(memorySearch(dir, 'medium', { query: 'ops', limit: 1 })).toHaveLength(1);
  });

  it('bootstrap: SOP + newest entries within budget; nothing below medium', () => {
    const dir = tmp();
    for (let i = 0; i < 8; i++) memoryWrite(dir, 'high', 'web:a', { text: `fact number ${i}` });
    const boot = memoryBootstrap(dir, 'medium', { entries: 3, chars: 1000 }) as string;
    expect(boot.startsWith(MEMORY_SOP)).toBe(true);
    expect(boot.match(/fact number/g)).toHaveLength(3);
    expect(boot).toContain('fact number 7');
    expect(memoryBootstrap(dir, 'low')).toBeUndefined();
    expect((memoryBootstrap(dir, 'high', { entries: 8, chars: 40 }) as string).match(/fact number/g)).toHaveLength(2);
  });
});

describe('session tokens', () => {
  const BOUND = { project: 'p1', session: 's1', tenant_key: 'web:a', session_created_at: '2026-11-23T00:00:00.000Z' };
  it('verify → session; unknown, malformed, expired and revoked tokens are UNAUTHORIZED', () => {
    const tokens = createSessionTokens(tmp());
    const { token } = tokens.mint(BOUND, 60);
    expect(token).toMatch(/^bst_[A-Za-z0-9_-]{32}$/);
    expect(tokens.verify(token)).toMatchObject(BOUND);
    const altered = `${token.slice(0, -1)}${token.endsWith('A') ? 'B' : 'A'}`; // one character off
    expect(() => tokens.verify(altered)).toThrow(expect.objectContaining({ code: 'UNAUTHORIZED' }));
    expect(() => tokens.verify('admin-token')).toThrow(expect.objectContaining({ code: 'UNAUTHORIZED' }));
    const expired = tokens.mint(BOUND, 0).token;
    expect(() => tokens.verify(expired)).toThrow(/expired/);
    const other = tokens.mint({ ...BOUND, project: 'p2' }).token;
    expect(tokens.revokeSession('p1', 's1')).toBe(1);
    expect(() => tokens.verify(token)).toThrow(/unknown or revoked/);
    expect(tokens.verify(other).project).toBe('p2'); // the same session id in another project is another session
    expect(tokens.revokeProject('p2')).toBe(1);
    expect(() => tokens.verify(other)).toThrow(/unknown or revoked/);
  });

  it('stores only a digest of the token', () => {
    const dir = tmp();
    const { token } = createSessionTokens(dir).mint(BOUND);
    const stored =
      fs
        .readdirSync(dir)
        .map((n) => fs.readFileSync(join(dir, n), 'utf8'))
        .join('') + fs.readdirSync(dir).join('');
    expect(stored).not.toContain(token.slice(4));
  });
});
