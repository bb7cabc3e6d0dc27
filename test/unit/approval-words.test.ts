import { describe, expect, it } from 'vitest';
import { approvalOutcome, approvalQuestion } from '../../src/bridges/approval-words.js';
import type { ApprovalView } from '../../src/store/approvals.js';

/** How a chat without cards asks for a secret whose grant asks first, and tells what was decided. */
const secret = (approver: 'person' | 'operator'): ApprovalView => ({
  id: 'a1b2c3d4e5',
  kind: 'secret',
  project: 'p',
  tenant: 'signal:+1',
  session: 's1',
  target: 'GITHUB_TOKEN for api.github.com:443',
  approver,
  asked_at: '2026-11-28T10:00:00.000Z',
  expires_at: '2026-11-28T10:02:00.000Z',
});

describe('a secret asked for before its first use, in chat words', () => {
  it('names the secret and the host (the default port left out), never a value, and how to answer', () => {
    expect(approvalQuestion(secret('person'))).toBe(
      'berth: your agent wants to use the secret GITHUB_TOKEN for api.github.com (berth adds it; your agent never sees it). Reply /yes to allow it for this message, /yes session for this conversation, or /no. (No answer within 2 min: no.)',
    );
    expect(approvalQuestion(secret('operator'))).toBe(
      'berth: your agent wants to use the secret GITHUB_TOKEN for api.github.com (berth adds it; your agent never sees it). The operator has been asked; it waits up to 2 min.',
    );
  });

  it('says what was decided, by whom', () => {
    const a = secret('person');
    expect(approvalOutcome(a, { decision: 'session', by: 'tenant:signal:+1' })).toBe(
      'berth: you allowed the secret GITHUB_TOKEN for api.github.com for this conversation.',
    );
    expect(approvalOutcome(a, { decision: 'deny', by: 'operator' })).toBe(
      'berth: the operator denied: the secret GITHUB_TOKEN for api.github.com was not added.',
    );
    expect(approvalOutcome(a, { decision: 'deny', by: 'timeout' })).toBe(
      'berth: nobody answered in time: the secret GITHUB_TOKEN for api.github.com was not added.',
    );
    // A host's words are unchanged.
    expect(approvalOutcome({ kind: 'egress', target: 'example.com:443' }, { decision: 'once' })).toBe(
      'berth: allowed example.com:443 for this message.',
    );
  });
});
