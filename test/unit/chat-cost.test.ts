import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import type { ChatTransport } from '../../src/bridges/chat-transport.js';
import { createChatCost } from '../../src/bridges/chat-cost.js';
import { createBridgeCore } from '../../src/bridges/core.js';
import { BerthConfigSchema } from '../../src/config/berth-config-schema.js';
import { ProjectMetadataSchema } from '../../src/config/metadata.js';
import { createApprovals } from '../../src/outbound/approvals.js';
import { openApprovalStore } from '../../src/store/approvals.js';
import type { AuditEvent } from '../../src/store/audit.js';
import { openBridgeState } from '../../src/store/bridge-state.js';
import { openBudgetDays } from '../../src/store/budget-days.js';
import { openInbox } from '../../src/store/inbox.js';
import type { ModelCall } from '../../src/store/outbound-log.js';
import { fakeCoreAdmin, runViewOf } from '../fakes/core-admin.js';

/**
 * The cost in the chat, through the bridge core with a fake transport: each "run" spends tokens
 * (model calls as the gateway logs them), and the real approvals, budget-day marks and inbox
 * decide what the person reads.
 */
const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});

function rig(chat: Record<string, unknown> = {}, spend: (message: string) => [number, number] = () => [500, 300]) {
  const dir = fs.mkdtempSync(join(os.tmpdir(), 'berth-cost-'));
  dirs.push(dir);
  const sent: string[] = [];
  const transport: ChatTransport = {
    name: 'test',
    send: async (_chat, text) => void sent.push(text),
    typing: async () => undefined,
    acknowledge: async () => undefined,
    projectOf: () => 'p',
  };
  const config = BerthConfigSchema.parse({
    models: {
      anthropic: { api: 'anthropic', url: 'https://api.anthropic.com', api_key: 'k', prices: { 'claude-*': { input: 3, output: 15 } } },
    },
  });
  const metadata = ProjectMetadataSchema.parse({
    name: 'p',
    agent: 'claude',
    models: { upstreams: ['anthropic'], budget: { tokens_per_day: 1000 } },
    chat,
  });
  const calls: ModelCall[] = [];
  let n = 0;
  const ran: string[] = [];
  const admin = {
    ...fakeCoreAdmin({
      getProjectMetadata: () => metadata,
      async runMessage(_p, request) {
        await request.whenReady?.();
        const run = `r${++n}`;
        ran.push(request.message);
        const [input, output] = spend(request.message);
        calls.unshift({
          kind: 'model',
          at: new Date().toISOString(),
          run,
          tenant: request.user,
          session: 's',
          status: 200,
          upstream: 'anthropic',
          model: 'claude-sonnet-4',
          input_tokens: input,
          output_tokens: output,
          ms: 1,
        });
        return runViewOf({ run, stdout: `done ${request.message}` });
      },
    }),
    modelCalls: (_p: string, f: { since: string; tenant?: string; run?: string }) =>
      calls.filter((c) => c.at >= f.since && (f.tenant === undefined || c.tenant === f.tenant) && (f.run === undefined || c.run === f.run)),
  };
  const audit: Array<Omit<AuditEvent, 'request_id'>> = [];
  const approvals = createApprovals({
    store: openApprovalStore(dir),
    logger: pino({ level: 'silent' }),
    audit: (e) => audit.push(e),
    sessionHosts: () => [],
    approveForSession: () => undefined,
    raiseLevel: () => undefined,
  });
  const cost = createChatCost({ admin, config: () => config, approvals, days: openBudgetDays(dir) });
  const core = createBridgeCore({
    transport,
    inbox: openInbox(dir, 'test'),
    state: openBridgeState(dir, 'test'),
    admin,
    config: () => config,
    logger: pino({ level: 'silent' }),
    senderAllowed: () => true,
    approvals,
    cost,
  });
  let m = 0;
  const say = (text: string) => core.receive({ id: `m${m++}`, chat: 'c', tenant: 'test:ann', sender: 'test:ann', text });
  const until = async (cond: () => boolean) => {
    while (!cond()) await new Promise((r) => setTimeout(r, 5));
  };
  return { core, sent, say, ran, audit, approvals, until };
}

describe('the cost in the chat', () => {
  it("each answer ends with its cost and the day's rest; at 80% the person is warned once; /usage sums the day", async () => {
    const t = rig();
    t.say('one');
    await t.core.idle();
    expect(t.sent).toEqual([
      "done one\n\n[cost: 500 tokens in, 300 out · $0.006 · 200 tokens left today]\nberth: you have used 80% of today's model budget (800 of 1,000 tokens).",
    ]);
    t.say('/usage');
    await t.core.idle();
    expect(t.sent[1]?.split('\n').slice(0, 2)).toEqual([
      'berth: your model use',
      'today: 800 tokens (500 in, 300 out) in 1 model call, $0.006',
    ]);
  });

  it('at the limit the message waits; the person allows going past it with /yes (audited), and the day goes on without asking again', async () => {
    const t = rig({}, () => [600, 500]);
    t.say('one');
    await t.core.idle();
    expect(t.sent.at(-1)).toMatch(
      /none left today\]\nberth: you have used today's model budget \(1,100 of 1,000 tokens\)\. Your next message will wait/,
    );
    t.say('two');
    await t.until(() => t.sent.length === 2);
    expect(t.sent[1]).toBe(
      "berth: your message waits: you have used today's model budget of 1,000 tokens. Reply /yes to go past it for the rest of today (UTC), or /no. (No answer within 2 min: no.)",
    );
    expect(t.ran).toEqual(['one']);
    t.say('/yes');
    await t.core.idle();
    expect(t.ran).toEqual(['one', 'two']);
    expect(t.sent.slice(2)).toEqual([
      "berth: allowed going past today's model budget of 1,000 tokens for today; your message runs now.",
      'done two\n\n[cost: 600 tokens in, 500 out · $0.0093 · none left today]',
    ]);
    expect(t.audit.map((e) => [e.action, e.actor])).toEqual([['approval.allow_past_budget', 'tenant:test:ann']]);
    expect(t.audit[0]?.target).toMatch(/^today's model budget of 1,000 tokens for test:ann \(session chat-/);
    t.say('three');
    await t.core.idle();
    expect(t.ran).toEqual(['one', 'two', 'three']);
  });

  it('/no leaves the message unrun, said in plain words', async () => {
    const t = rig({}, () => [900, 200]);
    t.say('one');
    await t.core.idle();
    t.say('two');
    await t.until(() => t.sent.length === 2);
    t.say('/no');
    await t.core.idle();
    expect(t.ran).toEqual(['one']);
    expect(t.sent.at(-1)).toBe(
      "berth: not run: you have used today's model budget (1,000 tokens), and going past it was not allowed. It starts again at 00:00 UTC; /usage shows where you stand.",
    );
    expect(t.audit.map((e) => e.action)).toEqual(['approval.deny']);
  });

  it('with chat.approvals "operator" only the operator may let it past; with "off" it is refused at once', async () => {
    const t = rig({ approvals: 'operator' }, () => [900, 200]);
    t.say('one');
    await t.core.idle();
    t.say('two');
    await t.until(() => t.sent.length === 2);
    expect(t.sent[1]).toMatch(/^berth: your message waits: .* The operator has been asked to allow going past it for today/);
    const [waiting] = t.approvals.pending({ project: 'p' });
    expect(waiting?.kind).toBe('budget');
    expect(() => t.approvals.answer(waiting?.id ?? '', 'once', { actor: 'tenant:test:ann', project: 'p', tenant: 'test:ann' })).toThrow(
      /only the operator/,
    );
    t.approvals.answer(waiting?.id ?? '', 'once', { operator: true, actor: 'operator' });
    await t.core.idle();
    expect(t.ran).toEqual(['one', 'two']);

    const off = rig({ approvals: 'off' }, () => [900, 200]);
    off.say('one');
    await off.core.idle();
    off.say('two');
    await off.core.idle();
    expect(off.ran).toEqual(['one']);
    expect(off.sent.at(-1)).toMatch(/^berth: not run: you have used today's model budget \(1,000 tokens\)\. It starts again/);
  });

  it('chat.show_cost false: no cost line, the warning still comes', async () => {
    const t = rig({ show_cost: false });
    t.say('one');
    await t.core.idle();
    expect(t.sent).toEqual(["done one\n\nberth: you have used 80% of today's model budget (800 of 1,000 tokens)."]);
  });
});
