import { afterAll, describe, expect, it } from 'vitest';
import { SessionTitleUpdateSchema, titleFrom } from '../../src/config/session.js';
import { unitHome } from '../helpers.js';

/** Conversations with names: titled from the first message, renamed by their person, bounded like any input. */
describe('a session title', () => {
  it('comes from the first line with text, whitespace collapsed, cut at 60 characters', () => {
    expect(titleFrom('  fix the\tlogin   bug  \nand the rest')).toBe('fix the login bug');
    expect(titleFrom('\n\n   \nsecond line wins')).toBe('second line wins');
    expect(titleFrom('x'.repeat(100))).toBe(`${'x'.repeat(59)}…`);
    expect(titleFrom('bell\u0007 and \u001b[31mcolour')).toBe('bell and [31mcolour');
    expect(titleFrom(' \n\t ')).toBeUndefined();
  });

  it('a name its person gives is one line of 1-80 characters; anything else is refused naming the field', () => {
    expect(SessionTitleUpdateSchema.parse({ title: '  Release notes  ' })).toEqual({ title: 'Release notes' });
    for (const title of ['', '   ', 'x'.repeat(81), 'two\nlines', 'tab\there']) {
      const r = SessionTitleUpdateSchema.safeParse({ title });
      expect(r.success, JSON.stringify(title)).toBe(false);
      expect(r.error?.issues[0]?.path).toEqual(['title']);
    }
    expect(SessionTitleUpdateSchema.safeParse({ title: 'ok', extra: 1 }).success).toBe(false);
  });
});

describe('the session store names sessions', () => {
  const h = unitHome();
  afterAll(async () => h[Symbol.asyncDispose]());

  it('the first counted message titles an untitled session; later ones and renamed ones keep their name', () => {
    h.berth.store.create({ name: 'named' });
    const project = h.berth.store.get('named');
    const s = h.berth.sessions.open(project, { sessionId: 'conv', tenantKey: 'web:a' });
    expect(s.title).toBeUndefined();
    expect(h.berth.sessions.countRun(project, 'conv', 'deploy the staging site\nplease').title).toBe('deploy the staging site');
    expect(h.berth.sessions.countRun(project, 'conv', 'something else').title).toBe('deploy the staging site');
    expect(h.berth.sessions.setTitle('named', 'conv', ' Staging ').title).toBe('Staging');
    expect(h.berth.sessions.countRun(project, 'conv', 'more').title).toBe('Staging');
    expect(() => h.berth.sessions.setTitle('named', 'conv', 'a\nb')).toThrow(
      expect.objectContaining({
        code: 'CONFIG_INVALID',
        details: expect.objectContaining({ issues: [expect.objectContaining({ field: 'title' })] }),
      }),
    );
    expect(h.berth.sessions.get('named', 'conv').session.title).toBe('Staging'); // the refused name changed nothing
  });
});
