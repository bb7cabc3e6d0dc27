import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { BerthConfigSchema } from '../../src/config/berth-config.js';
import { ProjectMetadataSchema } from '../../src/config/metadata.js';
import { createApprovals } from '../../src/outbound/approvals.js';
import { createEgressDecision, unreachableWhy } from '../../src/outbound/egress-decision.js';
import type { RunIdentity } from '../../src/outbound/run-identity.js';
import { openApprovalStore, type ApprovalEvent } from '../../src/store/approvals.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});

/** A chat-watched run of a project with `agent`, whose person answers every card with `answer`. */
function rig(agent: unknown, answer: 'once' | 'deny' = 'once') {
  const dir = fs.mkdtempSync(join(os.tmpdir(), 'berth-egress-decision-'));
  dirs.push(dir);
  const approvals = createApprovals({
    store: openApprovalStore(dir),
    logger: pino({ level: 'silent' }),
    audit: () => undefined,
    sessionHosts: () => [],
    approveForSession: () => undefined,
    raiseLevel: () => undefined,
  });
  const events: ApprovalEvent[] = [];
  const run: RunIdentity = {
    runId: 'r1',
    project: 'p',
    metadata: ProjectMetadataSchema.parse({ name: 'p', agent, egress: { allow: ['pypi.org'] } }),
    tenantKey: 'web:alice',
    session: 's1',
    workspaceId: 'w',
    sessionsDir: '/nonexistent',
    ask: (e) => {
      events.push(e);
      if (e.type === 'asked')
        queueMicrotask(() => approvals.answer(e.approval.id, answer, { actor: 'tenant:web:alice', project: 'p', tenant: 'web:alice' }));
    },
  };
  const lookup = vi.fn(async (host: string) => {
    if (host.endsWith('.invalid')) throw new Error('ENOTFOUND');
    return [{ address: host === 'inside.example' ? '10.0.0.7' : '93.184.215.14' }];
  });
  const decide = createEgressDecision({ config: () => BerthConfigSchema.parse({}), approvals, lookup });
  return { decide, run, events, lookup };
}

describe("egress decisions: a preset's own calls are refused quietly; an allowed host that fails says so", () => {
  it("Codex's own hosts (analytics, connectors): refused without a card, quiet, and never looked up", async () => {
    const { decide, run, events, lookup } = rig('codex');
    for (const host of ['ab.chatgpt.com', 'chatgpt.com']) {
      await expect(decide(run, host, 443)).resolves.toEqual({
        ok: false,
        reason: expect.stringContaining('the codex CLI calls it for itself, so nobody is asked'),
        quiet: true,
      });
    }
    expect(events).toEqual([]);
    expect(lookup).not.toHaveBeenCalled();
    // A host a task may need is still the person's to allow.
    await expect(decide(run, 'github.com', 443)).resolves.toMatchObject({ ok: true, asked: true });
    expect(events.map((e) => e.type)).toEqual(['asked', 'answered']);
  });

  it("the same host for the shell preset is the person's question as any other", async () => {
    const { decide, run, events } = rig('shell');
    await expect(decide(run, 'chatgpt.com', 443)).resolves.toMatchObject({ ok: true, asked: true });
    expect(events[0]).toMatchObject({ type: 'asked', approval: { target: 'chatgpt.com:443' } });
  });

  it('allowed, but the name does not resolve or is private: the refusal carries asked, so the person is told why', async () => {
    const { decide, run } = rig('shell');
    await expect(decide(run, 'example.invalid', 80)).resolves.toEqual({
      ok: false,
      reason: 'example.invalid does not resolve',
      asked: true,
    });
    await expect(decide(run, 'inside.example', 443)).resolves.toEqual({
      ok: false,
      reason: expect.stringContaining('resolves to a private or loopback address'),
      asked: true,
    });
    // On the allowlist nobody was asked: nothing to tell.
    await expect(decide(run, 'pypi.org', 443)).resolves.toEqual({ ok: true, address: '93.184.215.14', granted: false, asked: false });
  });

  it('denied: a refusal that was the answer itself, not a failure to tell about', async () => {
    const { decide, run } = rig('shell', 'deny');
    const d = await decide(run, 'example.com', 80);
    expect(d).toEqual({ ok: false, reason: expect.stringContaining('the request to reach it was denied') });
  });
});

describe('why an allowed host could not be reached, in words', () => {
  it('the common connection errors in words (the code kept); anything else as the error says it', () => {
    const err = (code: string, message = 'x') => Object.assign(new Error(message), { code });
    expect(unreachableWhy(err('ECONNREFUSED'))).toBe('it refused the connection (ECONNREFUSED)');
    expect(unreachableWhy(err('ETIMEDOUT'))).toBe('it did not answer in time (ETIMEDOUT)');
    expect(unreachableWhy(new Error('idle'))).toBe('it did not answer in time');
    expect(unreachableWhy(err('EPROTO', 'write EPROTO'))).toBe('write EPROTO');
  });
});
