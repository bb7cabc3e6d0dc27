import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ChatTransport } from '../../src/bridges/chat-transport.js';
import { createChatCost } from '../../src/bridges/chat-cost.js';
import { createBridgeCore } from '../../src/bridges/core.js';
import { homePaths } from '../../src/config/home.js';
import { openBridgeState } from '../../src/store/bridge-state.js';
import { openBudgetDays } from '../../src/store/budget-days.js';
import { openInbox } from '../../src/store/inbox.js';
import { startFakeAnthropic, type FakeAnthropic } from '../fakes/anthropic-api.js';
import { cli, testHome, type TestHome } from '../helpers.js';

/**
 * The cost in a chat with the real Claude Code CLI (agent image) behind a fake of the Anthropic
 * API, through berth's model gateway: the answer ends with what it cost (the tokens the fake
 * reported, priced as berth.yaml says), and once the day's budget is used the next message waits
 * for the person's /yes: /no leaves it unrun (the model hears nothing of it), /yes runs it.
 */
const KEY = `sk-ant-api03-cost-${Math.random().toString(36).slice(2)}`;
let fake: FakeAnthropic;
let h: TestHome;

beforeAll(async () => {
  fake = await startFakeAnthropic({ apiKey: KEY });
  h = testHome({
    config: [
      'models:',
      '  anthropic:',
      '    api: anthropic',
      `    url: ${fake.url}`,
      `    api_key: ${KEY}`,
      '    prices:',
      "      'claude-*': { input: 3, output: 15 }",
      '',
    ].join('\n'),
  });
  // One token a day: the first answer uses it up.
  h.create({ name: 'cc', workspace_isolation: true, agent: 'claude', models: { upstreams: ['anthropic'], budget: { tokens_per_day: 1 } } });
  h.create({
    name: 'co',
    workspace_isolation: true,
    agent: 'claude',
    models: { upstreams: ['anthropic'], budget: { tokens_per_day: 1 } },
    chat: { approvals: 'operator' },
  });
}, 120_000);
afterAll(async () => {
  await h?.[Symbol.asyncDispose]();
  await fake?.close();
});

describe('the cost in the chat, with the real Claude Code', () => {
  /** A chat of the project (a bridge core with a fake transport, as start.ts wires it). */
  function chatOf(project: string) {
    const sent: string[] = [];
    const transport: ChatTransport = {
      name: `t-${project}`,
      send: async (_c, text) => void sent.push(text),
      typing: async () => undefined,
      acknowledge: async () => undefined,
      projectOf: () => project,
    };
    const { stateDir } = homePaths(h.home);
    const dir = join(stateDir, 'bridges');
    const { berth } = h;
    const cost = createChatCost({
      admin: berth.admin,
      config: () => berth.config,
      approvals: berth.approvals,
      days: openBudgetDays(stateDir),
    });
    const core = createBridgeCore({
      transport,
      inbox: openInbox(dir, transport.name),
      state: openBridgeState(dir, transport.name),
      admin: berth.admin,
      config: () => berth.config,
      logger: pino({ level: 'silent' }),
      senderAllowed: () => true,
      approvals: berth.approvals,
      cost,
    });
    let n = 0;
    const say = (text: string) => core.receive({ id: `m${n++}`, chat: 'c', tenant: 'test:ann', sender: 'test:ann', text });
    const until = async (cond: () => boolean) => {
      while (!cond()) await new Promise((r) => setTimeout(r, 20));
    };
    return { sent, core, say, until, berth };
  }

  it('the answer shows its cost; at the limit the next message waits for /yes, and /no leaves it unrun', async () => {
    const { sent, core, say, until, berth } = chatOf('cc');

    say('REPLY: first answer');
    await core.idle();
    expect(sent).toHaveLength(1);
    expect(sent[0]).toMatch(
      /^first answer\n\n\[cost: [\d,.k]+ tokens in, [\d,.k]+ out · \$[\d.]+ · none left today\]\nberth: you have used today's model budget \([\d,.kM]+ of 1 token\)\. Your next message will wait/,
    );

    const calls = fake.requests.length;
    say('REPLY: second answer');
    await until(() => sent.length === 2);
    expect(sent[1]).toMatch(/^berth: your message waits: you have used today's model budget of 1 token\. Reply \/yes/);
    say('/no');
    await core.idle();
    expect(sent.at(-1)).toMatch(/^berth: not run: you have used today's model budget \(1 token\), and going past it was not allowed\./);
    expect(fake.requests.length).toBe(calls);

    say('REPLY: third answer');
    await until(() => sent.at(-1)?.startsWith('berth: your message waits') === true);
    say('/yes');
    await core.idle();
    expect(sent.at(-1)).toMatch(/^third answer\n\n\[cost: [\d,.k]+ tokens in, [\d,.k]+ out · \$[\d.]+ · none left today\]$/);
    expect(fake.requests.length).toBeGreaterThan(calls);
    const audited = berth.audit.list({ project: 'cc', limit: 100 }).map((e) => [e.action, e.actor]);
    expect(audited).toContainEqual(['approval.deny', 'tenant:test:ann']);
    expect(audited).toContainEqual(['approval.allow_past_budget', 'tenant:test:ann']);
  }, 240_000);

  it('chat.approvals "operator": the held message waits for "berth approvals allow" (another process, the CLI)', async () => {
    const { sent, core, say, until, berth } = chatOf('co');
    say('REPLY: first');
    await core.idle();
    say('REPLY: past the budget');
    await until(() => sent.length === 2);
    expect(sent[1]).toMatch(/^berth: your message waits: .* The operator has been asked to allow going past it for today/);
    const [waiting] = JSON.parse(cli(['--home', h.home, 'approvals', 'list', '--json']).stdout) as Array<{ id: string; kind: string }>;
    expect(waiting?.kind).toBe('budget');
    expect(cli(['--home', h.home, 'approvals', 'list']).stdout).toContain(
      "wants to go past today's model budget of 1 token (a chat message waits)  (operator only;",
    );
    expect(cli(['--home', h.home, 'approvals', 'allow', waiting?.id ?? ''])).toMatchObject({
      code: 0,
      stdout: expect.stringMatching(
        /^allowed: going past today's model budget of 1 token for the rest of the day \(UTC\) for test:ann in co/,
      ),
    });
    await core.idle();
    expect(sent.at(-1)).toMatch(/^past the budget\n\n\[cost: /);
    expect(berth.audit.list({ project: 'co', limit: 10 })).toEqual(
      expect.arrayContaining([expect.objectContaining({ action: 'approval.allow_past_budget', actor: 'operator' })]),
    );
  }, 240_000);
});
