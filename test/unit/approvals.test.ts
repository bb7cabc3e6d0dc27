import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ProjectMetadataSchema } from '../../src/config/metadata.js';
import { APPROVAL_BOUNDS, createApprovals } from '../../src/outbound/approvals.js';
import type { RunIdentity } from '../../src/outbound/run-identity.js';
import { openApprovalStore, type ApprovalEvent } from '../../src/store/approvals.js';
import type { AuditEvent } from '../../src/store/audit.js';

const dirs: string[] = [];
afterEach(() => {
  vi.useRealTimers();
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});

function rig(opts: { sessionHosts?: string[] } = {}) {
  const dir = fs.mkdtempSync(join(os.tmpdir(), 'berth-approvals-'));
  dirs.push(dir);
  const store = openApprovalStore(dir);
  const audit: Array<Omit<AuditEvent, 'request_id'>> = [];
  const granted: string[] = [...(opts.sessionHosts ?? [])];
  const raised: string[] = [];
  const approvals = createApprovals({
    store,
    logger: pino({ level: 'silent' }),
    audit: (e) => audit.push(e),
    sessionHosts: () => granted,
    approveForSession: (_p, _s, target) => void granted.push(target),
    raiseLevel: (_p, session, level) => void raised.push(`${session}:${level}`),
  });
  return { dir, store, approvals, audit, granted, raised };
}

/** A run of tenant `tenant` in project p, watched by a chat (its events collected) unless `watched` is false. */
function runOf(id: string, chat: Record<string, unknown> = {}, opts: { tenant?: string; watched?: boolean; answered?: AbortSignal } = {}) {
  const events: ApprovalEvent[] = [];
  const run: RunIdentity = {
    runId: id,
    project: 'p',
    metadata: ProjectMetadataSchema.parse({ name: 'p', chat }),
    tenantKey: opts.tenant ?? 'web:alice',
    session: 's1',
    workspaceId: 'w',
    sessionsDir: '/nonexistent',
    ...(opts.watched === false ? {} : { ask: (e: ApprovalEvent) => void events.push(e) }),
    ...(opts.answered ? { answered: opts.answered } : {}),
  };
  return { run, events };
}

const alice = { actor: 'tenant:web:alice', project: 'p', tenant: 'web:alice' };
const asked = async (events: ApprovalEvent[]) => {
  await vi.waitFor(() => expect(events.some((e) => e.type === 'asked')).toBe(true));
  return (events.find((e) => e.type === 'asked') as Extract<ApprovalEvent, { type: 'asked' }>).approval;
};

describe('egress approvals: a run asks before it reaches a host outside its allowlist', () => {
  it('the person allows once: this run reaches the host without asking again; another run asks anew', async () => {
    const { approvals, audit } = rig();
    const { run, events } = runOf('r1');
    const verdict = approvals.request(run, 'example.com:443');
    const a = await asked(events);
    expect(a).toMatchObject({
      kind: 'egress',
      project: 'p',
      tenant: 'web:alice',
      session: 's1',
      target: 'example.com:443',
      approver: 'person',
    });
    expect(approvals.pending({ project: 'p', tenant: 'web:alice' }).map((p) => p.id)).toEqual([a.id]);
    approvals.answer(a.id, 'once', alice);
    await expect(verdict).resolves.toEqual({ allowed: true });
    expect(events.at(-1)).toEqual({
      type: 'answered',
      id: a.id,
      kind: 'egress',
      decision: 'once',
      by: 'tenant:web:alice',
      target: 'example.com:443',
      asked_at: a.asked_at,
      at: expect.any(String),
    });
    expect(audit).toEqual([
      expect.objectContaining({
        action: 'approval.allow_once',
        actor: 'tenant:web:alice',
        project: 'p',
        target: expect.stringContaining('example.com:443'),
      }),
    ]);
    await expect(approvals.request(run, 'example.com:443')).resolves.toEqual({ allowed: true });
    expect(events.filter((e) => e.type === 'asked')).toHaveLength(1);
    expect(approvals.pending()).toEqual([]);
    const other = runOf('r2');
    void approvals.request(other.run, 'example.com:443');
    await asked(other.events);
    approvals.endRun('r2');
  });

  it("the agent answered: its card waits no longer (denied by berth), and its CLI's later calls are refused without a card", async () => {
    const { approvals, audit } = rig();
    const answered = new AbortController();
    const { run, events } = runOf('r1', {}, { answered: answered.signal });
    const waiting = approvals.request(run, 'ab.example.com:443');
    const a = await asked(events);
    answered.abort();
    await expect(waiting).resolves.toEqual({
      allowed: false,
      reason: expect.stringContaining('the agent answered before anyone allowed it'),
    });
    expect(events.at(-1)).toMatchObject({ type: 'answered', id: a.id, decision: 'deny', by: 'berth' });
    expect(approvals.pending()).toEqual([]);
    await expect(approvals.request(run, 'later.example.com:443')).resolves.toEqual({
      allowed: false,
      reason: expect.stringContaining('the agent had already answered'),
      quiet: true,
    });
    expect(events.filter((e) => e.type === 'asked')).toHaveLength(1);
    expect(audit.map((e) => [e.action, e.actor])).toEqual([['approval.deny', 'berth']]);
  });

  it('a denial holds for the rest of the run: the agent retrying is refused without a new question', async () => {
    const { approvals, audit } = rig();
    const { run, events } = runOf('r1');
    const verdict = approvals.request(run, 'evil.example:443');
    approvals.answer((await asked(events)).id, 'deny', alice);
    await expect(verdict).resolves.toEqual({
      allowed: false,
      reason: expect.stringMatching(/evil\.example:443 is not in project "p"'s egress allowlist, and the request to reach it was denied/),
    });
    await expect(approvals.request(run, 'evil.example:443')).resolves.toMatchObject({ allowed: false });
    expect(events.filter((e) => e.type === 'asked')).toHaveLength(1);
    expect(audit.map((e) => e.action)).toEqual(['approval.deny']);
  });

  it('"for this session": kept for the conversation, so its next run reaches the host without a question', async () => {
    const { approvals, granted, audit } = rig();
    const first = runOf('r1');
    const verdict = approvals.request(first.run, 'pypi.org:443');
    approvals.answer((await asked(first.events)).id, 'session', alice);
    await expect(verdict).resolves.toEqual({ allowed: true });
    expect(granted).toEqual(['pypi.org:443']);
    expect(audit.map((e) => e.action)).toEqual(['approval.allow_session']);
    const next = runOf('r2');
    await expect(approvals.request(next.run, 'pypi.org:443')).resolves.toEqual({ allowed: true });
    expect(next.events).toEqual([]);
  });

  it('nobody answers: denied at chat.approval_timeout_seconds, and the timeout is audited', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'Date'] });
    const { approvals, audit } = rig();
    const { run, events } = runOf('r1', { approval_timeout_seconds: 30 });
    const verdict = approvals.request(run, 'slow.example:443');
    await vi.advanceTimersByTimeAsync(10);
    const a = (events[0] as Extract<ApprovalEvent, { type: 'asked' }>).approval;
    expect(Date.parse(a.expires_at) - Date.parse(a.asked_at)).toBe(30_000);
    await vi.advanceTimersByTimeAsync(29_000);
    expect(approvals.pending()).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(1_100);
    await expect(verdict).resolves.toEqual({ allowed: false, reason: expect.stringMatching(/nobody allowed it within 30 s/) });
    expect(events.at(-1)).toMatchObject({ type: 'answered', decision: 'deny', by: 'timeout' });
    expect(audit).toEqual([expect.objectContaining({ action: 'approval.timeout', actor: 'berth' })]);
    expect(() => approvals.answer(a.id, 'once', alice)).toThrow(expect.objectContaining({ code: 'APPROVAL_NOT_FOUND' }));
  });

  it('with nobody to ask (an API run), or approvals off, the host is refused at once as before', async () => {
    const { approvals, store } = rig();
    await expect(approvals.request(runOf('r1', {}, { watched: false }).run, 'example.com:443')).resolves.toEqual({
      allowed: false,
      reason: expect.stringMatching(/nobody watches this run/),
    });
    const off = runOf('r2', { approvals: 'off' });
    await expect(approvals.request(off.run, 'example.com:443')).resolves.toEqual({
      allowed: false,
      reason: expect.stringMatching(/^example\.com:443 is not in project "p"'s egress allowlist$/),
    });
    expect(off.events).toEqual([]);
    expect(store.list()).toEqual([]);
  });

  it('approvals "operator": the person may not answer; the operator may, also an API run that nobody watches', async () => {
    const { approvals, audit } = rig();
    const { run, events } = runOf('r1', { approvals: 'operator' }, { watched: false });
    const verdict = approvals.request(run, 'example.com:443');
    await vi.waitFor(() => expect(approvals.pending()).toHaveLength(1));
    const [a] = approvals.pending();
    expect(a).toMatchObject({ approver: 'operator' });
    expect(events).toEqual([]);
    expect(() => approvals.answer(a!.id, 'once', alice)).toThrow(expect.objectContaining({ code: 'PERMISSION_DENIED' }));
    approvals.answer(a!.id, 'once', { operator: true, actor: 'operator' });
    await expect(verdict).resolves.toEqual({ allowed: true });
    expect(audit.map((e) => [e.action, e.actor])).toEqual([['approval.allow_once', 'operator']]);
  });

  it("a person cannot answer another tenant's request, nor a made-up id (each is as unknown as a missing one)", async () => {
    const { approvals } = rig();
    const { run, events } = runOf('r1');
    void approvals.request(run, 'example.com:443');
    const a = await asked(events);
    const bob = { actor: 'tenant:web:bob', project: 'p', tenant: 'web:bob' };
    expect(() => approvals.answer(a.id, 'once', bob)).toThrow(expect.objectContaining({ code: 'APPROVAL_NOT_FOUND' }));
    expect(() => approvals.answer(a.id, 'once', { ...alice, project: 'other' })).toThrow(
      expect.objectContaining({ code: 'APPROVAL_NOT_FOUND' }),
    );
    for (const forged of ['__proto__', 'constructor', '../../etc', `${a.id}/..`, '']) {
      expect(() => approvals.answer(forged, 'once', alice)).toThrow(expect.objectContaining({ code: 'APPROVAL_NOT_FOUND' }));
    }
    expect(approvals.pending({ tenant: 'web:bob' })).toEqual([]);
    expect(approvals.pending({ tenant: 'web:alice' })).toHaveLength(1);
    approvals.endRun('r1');
  });

  it('connections to one host wait on one question; a run asks at most asksPerRun times', async () => {
    const { approvals } = rig();
    const { run, events } = runOf('r1');
    const verdicts = [
      approvals.request(run, 'a.example:443'),
      approvals.request(run, 'a.example:443'),
      approvals.request(run, 'a.example:443'),
    ];
    const a = await asked(events);
    expect(events).toHaveLength(1);
    approvals.answer(a.id, 'once', alice);
    await expect(Promise.all(verdicts)).resolves.toEqual([{ allowed: true }, { allowed: true }, { allowed: true }]);
    const more = Array.from({ length: APPROVAL_BOUNDS.asksPerRun }, (_, i) => approvals.request(run, `h${i}.example:443`));
    await vi.waitFor(() => expect(events.filter((e) => e.type === 'asked')).toHaveLength(APPROVAL_BOUNDS.asksPerRun));
    await expect(more.at(-1)).resolves.toEqual({
      allowed: false,
      reason: expect.stringMatching(new RegExp(`asked ${APPROVAL_BOUNDS.asksPerRun} times already`)),
    });
    approvals.endRun('r1');
    const ended = await Promise.all(more.slice(0, -1));
    expect(ended.every((v) => !v.allowed)).toBe(true);
    expect(events.filter((e) => e.type === 'answered' && e.by === 'berth')).toHaveLength(APPROVAL_BOUNDS.asksPerRun - 1);
    expect(approvals.pending()).toEqual([]);
  });

  it("another process's answer (the CLI, through the store) reaches the waiting run; of two answers the first stands", async () => {
    const { approvals, dir } = rig();
    const { run, events } = runOf('r1');
    const verdict = approvals.request(run, 'example.com:443');
    const a = await asked(events);
    const cli = openApprovalStore(dir);
    expect(cli.list().map((r) => r.id)).toEqual([a.id]);
    expect(cli.answer(a.id, { decision: 'deny', by: 'operator', at: new Date().toISOString() })).toBe(true);
    expect(cli.answer(a.id, { decision: 'once', by: 'operator', at: new Date().toISOString() })).toBe(false);
    expect(() => approvals.answer(a.id, 'once', alice)).toThrow(
      expect.objectContaining({ code: 'APPROVAL_NOT_FOUND', message: expect.stringMatching(/answered already/) }),
    );
    await expect(verdict).resolves.toMatchObject({ allowed: false });
    expect(events.at(-1)).toMatchObject({ type: 'answered', decision: 'deny', by: 'operator' });
    expect(fs.readdirSync(join(dir, 'approvals'))).toEqual([]);
  });

  it("a request whose process is gone is nobody's: listed by no one, and removed", () => {
    const { store, dir } = rig();
    store.put({
      id: 'abcdef0123',
      kind: 'egress',
      project: 'p',
      tenant: 't',
      session: 's',
      run: 'r',
      target: 'x.example:443',
      approver: 'person',
      asked_at: new Date().toISOString(),
      expires_at: new Date().toISOString(),
      owner: '999999999.1.x',
    });
    expect(store.get('abcdef0123')).toBeUndefined();
    expect(store.list()).toEqual([]);
    expect(fs.readdirSync(join(dir, 'approvals'))).toEqual([]);
  });

  it("a person's level request: only the operator may allow it (the session's level is raised then), one waits per session, and the chat is told", async () => {
    const { approvals, audit, raised } = rig();
    const told: string[] = [];
    const ask = () =>
      approvals.requestLevel({ project: 'p', tenant: 'web:alice', session: 's1', level: 'high', timeoutSeconds: 60 }, (a) =>
        told.push(`${a.decision} by ${a.by}`),
      );
    const a = ask();
    expect(a).toMatchObject({ kind: 'level', target: 'high', approver: 'operator', tenant: 'web:alice' });
    expect(ask().id).toBe(a.id);
    expect(approvals.pending()).toHaveLength(1);
    expect(() => approvals.answer(a.id, 'once', alice)).toThrow(expect.objectContaining({ code: 'PERMISSION_DENIED' }));
    expect(raised).toEqual([]);
    approvals.answer(a.id, 'once', { operator: true, actor: 'operator' });
    expect(raised).toEqual(['s1:high']);
    expect(told).toEqual(['once by operator']);
    expect(audit.map((e) => [e.action, e.actor])).toEqual([['approval.raise_level', 'operator']]);
    const again = ask();
    expect(again.id).not.toBe(a.id);
    approvals.answer(again.id, 'deny', { operator: true, actor: 'operator' });
    expect(raised).toEqual(['s1:high']);
    expect(told).toEqual(['once by operator', 'deny by operator']);
  });
});
