import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { approvalForWeb, openWebHistory } from '../../src/bridges/web-history.js';
import type { ApprovalView } from '../../src/store/approvals.js';

/**
 * Issue 42 item 3 (the page's part): an approval card and its answer (who, when) are kept in the
 * web chat's history, so a reload shows them where they were asked.
 */
const asked: ApprovalView = {
  id: 'a0b1c2d3e4',
  kind: 'egress',
  project: 'demo',
  tenant: 'web:alice',
  session: 'web-abc',
  target: 'example.com:443',
  approver: 'person',
  asked_at: '2026-11-27T23:00:00.000Z',
  expires_at: '2026-11-27T23:02:00.000Z',
};
const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});

describe('the web chat keeps approval cards in the history', () => {
  it('the card and its answer, as kept and as pushed', () => {
    expect(approvalForWeb({ type: 'asked', approval: asked }, 'web-abc', 'now')).toEqual({
      entry: {
        role: 'approval',
        text: 'asked to reach example.com:443',
        approval: {
          id: asked.id,
          kind: 'egress',
          target: 'example.com:443',
          approver: 'person',
          asked_at: asked.asked_at,
          expires_at: asked.expires_at,
        },
      },
      message: { type: 'approval', session_id: 'web-abc', approval: asked },
    });
    const answer = { id: asked.id, decision: 'once' as const, by: 'tenant:web:alice', at: '2026-11-27T23:00:09.000Z' };
    expect(approvalForWeb({ type: 'answered', ...answer, target: 'example.com:443', asked_at: asked.asked_at }, 'web-abc', 'now')).toEqual({
      entry: { role: 'answer', text: 'berth: you allowed example.com:443 for this message.', answer },
      message: { type: 'approval_answered', session_id: 'web-abc', ...answer },
    });
    // Allowed, and still not reached: one line for the person, kept as berth's reply.
    const text = 'berth: example.com:443 was allowed, but your agent could not reach it: example.com does not resolve.';
    expect(
      approvalForWeb({ type: 'unreachable', target: 'example.com:443', reason: 'example.com does not resolve' }, 'web-abc', 'now'),
    ).toEqual({
      entry: { role: 'reply', text },
      message: { type: 'note', session_id: 'web-abc', text },
    });
  });

  it('read back in order after the message and before the reply; a deleted session keeps nothing and nothing throws', () => {
    const stateDir = fs.mkdtempSync(join(os.tmpdir(), 'berth-web-history-'));
    dirs.push(stateDir);
    let there = true;
    const admin = {
      getSession: () =>
        there
          ? ({} as never)
          : (() => {
              throw new Error('SESSION_NOT_FOUND');
            })(),
    };
    const history = openWebHistory({ stateDir, admin, log: pino({ level: 'silent' }) });
    const where = { project: 'demo', session: 'web-abc' };
    history.sent(where, { role: 'user', text: 'wget example.com', id: 'm1', level: 'medium' });
    history.keepQuietly(where, approvalForWeb({ type: 'asked', approval: asked }, where.session, 'now').entry);
    history.keepQuietly(
      where,
      approvalForWeb(
        {
          type: 'answered',
          id: asked.id,
          decision: 'once',
          by: 'tenant:web:alice',
          target: 'example.com:443',
          asked_at: asked.asked_at,
          at: '2026-11-27T23:00:09.000Z',
        },
        where.session,
        'now',
      ).entry,
    );
    history.keep(where, { role: 'reply', text: 'fetched', format: 'text' });
    expect(history.read(where).map((e) => [e.role, e.approval?.target ?? e.answer?.by ?? e.text])).toEqual([
      ['user', 'wget example.com'],
      ['approval', 'example.com:443'],
      ['answer', 'tenant:web:alice'],
      ['reply', 'fetched'],
    ]);
    there = false;
    expect(() =>
      history.keepQuietly(where, { role: 'answer', text: 'late', answer: { id: asked.id, decision: 'deny', by: 'berth', at: 'now' } }),
    ).not.toThrow();
    expect(history.read(where)).toHaveLength(4);
  });
});
