import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import type { RunView } from '../../src/admin/views.js';
import type { ChatTransport, InboundMessage } from '../../src/bridges/chat-transport.js';
import { HELP, NOTHING_ASKED } from '../../src/bridges/commands.js';
import { createBridgeCore, type BridgeDeps } from '../../src/bridges/core.js';
import { CHAT_PENDING_MAX, TENANT_PENDING_MAX } from '../../src/bridges/lanes.js';
import { STRANGER_HELD_CHARS, STRANGER_HELD_NOTICE, STRANGER_NOTICE } from '../../src/bridges/strangers.js';
import { processIdentity } from '../../src/fs/process-identity.js';
import type { RunRequest } from '../../src/runs/runner.js';
import type { ApprovalDecision, ApprovalEvent, ApprovalView } from '../../src/store/approvals.js';
import { BerthConfigSchema } from '../../src/config/berth-config-schema.js';
import { openBridgeState } from '../../src/store/bridge-state.js';
import { openInbox } from '../../src/store/inbox.js';
import { fakeCoreAdmin, runViewOf } from '../fakes/core-admin.js';
import { unitHome } from '../helpers.js';
import { eventually, until } from '../helpers/until.js';

/**
 * The bridge core's queue bounds, in memory: the runs are a fake admin service that waits until
 * the test lets it finish; the inbox and state are real files in a temporary directory.
 */
const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});

function setup(
  result: (message: string) => Partial<RunView> = (message) => ({ stdout: `done ${message}` }),
  opts: {
    progressAfter?: number;
    during?: (request: Pick<RunRequest, 'onProgress' | 'onApproval'>) => void;
    allowed?: Set<string>;
    approvals?: BridgeDeps['approvals'];
  } = {},
) {
  const dir = fs.mkdtempSync(join(os.tmpdir(), 'berth-core-'));
  dirs.push(dir);
  const sent: Array<{ chat: string; text: string }> = [];
  const transport: ChatTransport = {
    name: 'test',
    send: async (chat, text) => void sent.push({ chat, text }),
    typing: async () => undefined,
    acknowledge: async () => undefined,
    projectOf: () => 'p',
  };
  const gates: Array<() => void> = [];
  let ran = 0;
  const admin = fakeCoreAdmin({
    async runMessage(_project, request) {
      await request.whenReady?.();
      ran++;
      opts.during?.(request);
      await new Promise<void>((r) => gates.push(r));
      return runViewOf(result(request.message));
    },
  });
  const inbox = openInbox(dir, 'test');
  const config = BerthConfigSchema.parse({
    bridges: {
      max_concurrent_runs: 4,
      ...(opts.progressAfter !== undefined ? { progress_message_after_seconds: opts.progressAfter } : {}),
    },
  });
  const senderAllowed = (sender: string) => opts.allowed?.has(sender) ?? true;
  const coreOn = () =>
    createBridgeCore({
      transport,
      inbox,
      state: openBridgeState(dir, 'test'),
      admin,
      config: () => config,
      logger: pino({ level: 'silent' }),
      senderAllowed,
      approvals: opts.approvals,
    });
  const core = coreOn();
  let n = 0;
  const message = (tenant: string, chat: string, text: string): InboundMessage => ({ id: `m${n++}`, chat, tenant, sender: tenant, text });
  /** Let every run end until nothing but `left` (ids) is open. */
  const releaseAll = (left: string[] = []) =>
    until(() => {
      gates.splice(0).forEach((g) => g());
      return gates.length === 0 && !inbox.open().some((e) => !left.includes(e.id));
    }, 'every run to end');
  return {
    core,
    coreOn,
    inbox,
    sent,
    message,
    releaseAll,
    ran: () => ran,
    to: (chat: string) => sent.filter((s) => s.chat === chat).map((s) => s.text),
  };
}

describe('bridge core: a run berth stopped', () => {
  it('the reply says why, in words (an unreachable model service, a disk limit), after what the agent printed', async () => {
    const reason =
      'its model service cannot be reached ("anthropic": connect ECONNREFUSED 127.0.0.1:9). The operator must fix it (berth doctor); send the message again later.';
    const t = setup(() => ({
      exit_code: 137,
      stdout: 'thinking…\n',
      stderr: 'API Error: 502',
      timed_out: false,
      warnings: ['env "X" is allowed but berth.yaml gives it no value', `stopped: ${reason}`],
    }));
    t.core.receive(t.message('signal:a', 'a', 'fix the bug'));
    await t.releaseAll();
    expect(t.to('a')).toEqual([`thinking…\n\n[berth stopped the agent: ${reason}]`]);
    await t.core.idle();
  });
});

describe('bridge core: a run whose container ended under it', () => {
  it('the reply says why in words (out of memory), not a bare "[exit 137]"', async () => {
    const t = setup(() => ({
      exit_code: 137,
      stdout: '',
      stderr: '',
      timed_out: false,
      warnings: ['container lost: it ran out of memory (limits.memory_mb)'],
    }));
    t.core.receive(t.message('signal:a', 'a', 'build it'));
    await t.releaseAll();
    expect(t.to('a')).toEqual(["[the agent's container ended before it finished: it ran out of memory (limits.memory_mb)]"]);
    await t.core.idle();
  });
});

describe('bridge core: a chat that cannot show the agent at work (Signal)', () => {
  const step = (id: string, detail: string, state: 'running' | 'ok') => ({
    type: 'step' as const,
    step: { id, tool: 'Bash', detail, state, at: 0 },
  });

  it('a run past progress_message_after_seconds gets one short progress message, never more; then the answer', async () => {
    const t = setup(undefined, {
      progressAfter: 1,
      during: ({ onProgress }) => {
        for (const u of [step('a', 'npm ci', 'running'), step('a', 'npm ci', 'ok'), step('b', 'npm test', 'running')]) onProgress?.(u);
      },
    });
    t.core.receive(t.message('signal:a', 'a', 'fix it'));
    await eventually(() => expect(t.to('a')).toEqual(['berth: still working (ran 2 commands; now: npm test)']));
    // The behaviour under test is an absence: past the threshold again, still that one message.
    await new Promise((r) => setTimeout(r, 1100));
    expect(t.to('a')).toEqual(['berth: still working (ran 2 commands; now: npm test)']);
    await t.releaseAll();
    expect(t.to('a')).toEqual(['berth: still working (ran 2 commands; now: npm test)', 'done fix it']);
    await t.core.idle();
  });

  it('a run that ends before the threshold sends no progress message; 0 turns them off', async () => {
    for (const progressAfter of [30, 0]) {
      const t = setup(undefined, { progressAfter, during: ({ onProgress }) => onProgress?.(step('a', 'ls', 'running')) });
      t.core.receive(t.message('signal:a', 'a', 'quick'));
      await t.releaseAll();
      expect(t.to('a')).toEqual(['done quick']);
      await t.core.idle();
    }
  });
});

describe('bridge core: a stranger (pairing)', () => {
  it('the first message is kept over a restart and answered once the sender is approved; longer ones and later ones are not kept', async () => {
    const allowed = new Set<string>();
    const t = setup(undefined, { allowed });
    t.core.receive(t.message('signal:s', 's', 'echo kept'));
    t.core.receive(t.message('signal:s', 's', 'echo later'));
    t.core.receive(t.message('signal:long', 'long', 'x'.repeat(STRANGER_HELD_CHARS + 1)));
    await eventually(() => {
      expect(t.inbox.all().map((e) => [e.sender, e.phase])).toEqual([
        ['signal:s', 'held'],
        ['signal:s', 'failed'],
        ['signal:long', 'failed'],
      ]);
      expect(t.to('s')).toEqual([STRANGER_HELD_NOTICE]);
    });
    expect(t.ran()).toBe(0);
    // berth restarts: the held message is held again, and runs once they are approved.
    t.core.close();
    const again = t.coreOn();
    again.recover();
    allowed.add('signal:s');
    await t.releaseAll(); // the held message runs at the next held check (every HELD_CHECK_MS) once approved
    expect(t.ran()).toBe(1);
    expect(t.to('s')).toEqual([STRANGER_HELD_NOTICE, 'done echo kept']);
    await again.idle();
  });
});

describe('bridge core: the queued notice', () => {
  it('a message behind one that ends at once is answered with no "queued" notice; one still waiting after a moment is told', async () => {
    const t = setup();
    t.core.receive(t.message('signal:a', 'a', 'echo first'));
    t.core.receive(t.message('signal:a', 'a', 'echo second'));
    await t.releaseAll(); // the first ends within milliseconds: the second never waited long
    expect(t.to('a')).toEqual(['done echo first', 'done echo second']);
    t.core.receive(t.message('signal:a', 'a', 'echo slow'));
    t.core.receive(t.message('signal:a', 'a', 'echo behind'));
    // Told once it has waited QUEUED_NOTICE_AFTER_MS (behind a run the test has not let end).
    await eventually(() =>
      expect(t.to('a').slice(2)).toEqual(['berth: queued (1 of your messages in this chat ahead of it); I will answer in order.']),
    );
    await t.releaseAll();
    expect(t.to('a').slice(3)).toEqual(['done echo slow', 'done echo behind']);
  });
});

describe('bridge core: bounded queues, with a clear answer', () => {
  it(`a chat's messages past ${CHAT_PENDING_MAX} are not run: the sender is told, the journal ends them failed`, async () => {
    const t = setup();
    const ids = Array.from({ length: CHAT_PENDING_MAX + 3 }, (_, i) => {
      const m = t.message('signal:a', 'a', `echo ${i}`);
      t.core.receive(m);
      return m.id;
    });
    // The waiting ones are told they are queued once they have waited QUEUED_NOTICE_AFTER_MS.
    await eventually(() => expect(t.to('a').filter((s) => s.startsWith('berth: queued ('))).toHaveLength(CHAT_PENDING_MAX - 1));
    const refused = t.to('a').filter((s) => s.includes('was not run'));
    expect(refused).toHaveLength(3);
    expect(refused[0]).toBe(
      `berth: ${CHAT_PENDING_MAX} of your messages in this chat are waiting already, so "echo ${CHAT_PENDING_MAX}" was not run. Send it again once I have answered the others.`,
    );
    // What they are told about their queue counts their own messages only.
    expect(
      t
        .to('a')
        .filter((s) => s.startsWith('berth: queued ('))
        .at(-1),
    ).toBe(`berth: queued (${CHAT_PENDING_MAX - 1} of your messages in this chat ahead of it); I will answer in order.`);
    for (const id of ids.slice(CHAT_PENDING_MAX))
      expect(t.inbox.all().find((e) => e.id === id)).toMatchObject({ phase: 'failed', reason: 'too many messages waiting (chat)' });
    // Another person is neither refused nor told about a's queue.
    t.core.receive(t.message('signal:b', 'b', 'echo b'));
    await t.releaseAll();
    expect(t.to('b')).toEqual(['done echo b']);
    expect(t.to('a').filter((s) => s.startsWith('done'))).toEqual(Array.from({ length: CHAT_PENDING_MAX }, (_, i) => `done echo ${i}`));
    await t.core.idle();
  });

  it(`one tenant's chats together hold at most ${TENANT_PENDING_MAX} waiting messages`, async () => {
    const t = setup();
    for (let i = 0; i < TENANT_PENDING_MAX + 1; i++) t.core.receive(t.message('web:alice', `p/alice/s${i}`, `echo ${i}`));
    await eventually(() =>
      expect(t.to(`p/alice/s${TENANT_PENDING_MAX}`)).toEqual([
        `berth: ${TENANT_PENDING_MAX} of your messages are waiting already, so "echo ${TENANT_PENDING_MAX}" was not run. Send it again once I have answered the others.`,
      ]),
    );
    // Four slots, one tenant: it holds at most runs.per_tenant (2 by default) of them.
    await eventually(() => expect(t.ran()).toBe(2));
    await t.releaseAll();
    await t.core.idle();
  });
});

describe('bridge core: recovery after a restart', () => {
  it("each open phase a dead berth left is ended its own way; a live berth's messages are left to it", async () => {
    const t = setup(undefined, { allowed: new Set(['signal:a']) });
    const put = (
      id: string,
      sender: string,
      text: string,
      phase?: 'started' | 'answered',
      extra: { reply?: string; owner?: string } = {},
    ) => {
      t.inbox.receive({ id, chat: sender.slice(7), sender, tenant: sender, text, owner: extra.owner });
      if (phase) t.inbox.mark(id, phase, { reply: extra.reply });
    };
    put('r-received', 'signal:a', 'echo again');
    put('r-stranger', 'signal:s', 'echo stranger');
    put('r-answered', 'signal:b', 'echo b', 'answered', { reply: 'the kept answer' });
    put('r-started', 'signal:c', 'echo c', 'started');
    put('r-live', 'signal:d', 'echo d', undefined, { owner: processIdentity() });
    t.core.recover();
    await t.releaseAll(['r-live']);
    await t.core.idle();
    expect(t.ran()).toBe(1);
    expect([t.to('a'), t.to('s'), t.to('b'), t.to('c'), t.to('d')]).toEqual([
      ['done echo again'],
      [STRANGER_NOTICE],
      ['the kept answer'],
      ['berth: I restarted while working on your message "echo c". It was not finished; please send it again.'],
      [],
    ]);
    expect(Object.fromEntries(t.inbox.all().map((e) => [e.id, [e.phase, e.reason]]))).toEqual({
      'r-received': ['replied', undefined],
      'r-stranger': ['failed', 'sender not approved'],
      'r-answered': ['replied', undefined],
      'r-started': ['failed', 'berth restarted while this message was running'],
      'r-live': ['received', undefined],
    });
  });
});

describe('bridge core: a run asks in a chat without cards (Signal)', () => {
  it('the question is said; /yes is answered at once, past the lane the run holds; an answer by timeout is told; a /yes with nothing asked is a command', async () => {
    const question = (id: string): ApprovalView => ({
      id,
      kind: 'egress',
      project: 'p',
      tenant: 'signal:a',
      session: 's',
      target: 'example.com:443',
      approver: 'person',
      asked_at: '2026-01-01T00:00:00.000Z',
      expires_at: '2026-01-01T00:01:00.000Z',
    });
    const answers: Array<[string, ApprovalDecision, unknown]> = [];
    let ask: ((e: ApprovalEvent) => void) | undefined;
    const t = setup(undefined, {
      during: ({ onApproval }) => {
        ask = onApproval;
        onApproval?.({ type: 'asked', approval: question('q1') });
      },
      approvals: {
        answer: (id, decision, by) => {
          answers.push([id, decision, by]);
          return question(id);
        },
        requestLevel: () => {
          throw new Error('not asked in this test');
        },
      },
    });
    t.core.receive(t.message('signal:a', 'a', 'fetch it'));
    await eventually(() =>
      expect(t.to('a')).toEqual([
        'berth: your agent wants to reach example.com:443, which this project does not allow. Reply /yes to allow it for this message, /yes session for this conversation, or /no. (No answer within 1 min: no.)',
      ]),
    );
    t.core.receive(t.message('signal:a', 'a', '/yes'));
    await eventually(() => expect(t.to('a').at(-1)).toBe('berth: allowed example.com:443 for this message.'));
    expect(answers).toEqual([['q1', 'once', { actor: 'tenant:signal:a', project: 'p', tenant: 'signal:a' }]]);
    // Its own answer comes back from the broker: nothing more is said. One answered by timeout is told.
    const at = { target: 'example.com:443', asked_at: '2026-01-01T00:00:00.000Z', at: '2026-01-01T00:00:01.000Z' };
    ask?.({ type: 'answered', id: 'q1', decision: 'once', by: 'tenant:signal:a', ...at });
    // Allowed, and the host still fails: the chat hears why, in one line.
    ask?.({ type: 'unreachable', target: 'example.com:443', reason: 'example.com does not resolve' });
    ask?.({ type: 'asked', approval: question('q2') });
    ask?.({ type: 'answered', id: 'q2', decision: 'deny', by: 'timeout', ...at });
    await eventually(() =>
      expect(t.to('a').slice(2)).toEqual([
        'berth: example.com:443 was allowed, but your agent could not reach it: example.com does not resolve.',
        expect.stringContaining('berth: your agent wants to reach'),
        'berth: nobody answered in time: your agent was not let through to example.com:443.',
      ]),
    );
    t.core.receive(t.message('signal:a', 'a', '/yes'));
    await t.releaseAll();
    await t.core.idle();
    expect(t.to('a').slice(5)).toEqual(['done fetch it', NOTHING_ASKED]);
    expect(answers).toHaveLength(1);
  });
});

describe("bridge core: a group chat's writers join its team", () => {
  it("a new writer is recorded once; a member's message reads the settings only, never the workspace records", async () => {
    await using h = unitHome();
    h.create({ name: 'groups' });
    const dir = fs.mkdtempSync(join(os.tmpdir(), 'berth-core-'));
    dirs.push(dir);
    const warnings: string[] = [];
    const sent: string[] = [];
    const core = createBridgeCore({
      transport: {
        name: 'test',
        send: async (_chat, text) => void sent.push(text),
        typing: async () => undefined,
        acknowledge: async () => undefined,
        projectOf: () => 'groups',
      },
      inbox: openInbox(dir, 'test'),
      state: openBridgeState(dir, 'test'),
      admin: h.berth.admin,
      config: () => h.berth.config,
      logger: pino({ level: 'warn' }, { write: (line: string) => void warnings.push(line) }),
      senderAllowed: () => true,
    });
    const say = (id: string) => core.receive({ id, chat: 'g1', tenant: 'test-group:g1', sender: 'test:bob', text: '/help' });
    say('m1');
    await core.idle();
    expect(h.berth.admin.getProjectMetadata('groups').teams).toEqual({ 'test-group:g1': { members: ['test:bob'] } });
    // A workspace record nobody can parse: a member's next message is answered all the same, with nothing to warn about.
    const records = join(h.berth.store.get('groups').paths.stateDir, 'workspaces');
    fs.mkdirSync(records, { recursive: true });
    fs.writeFileSync(join(records, 'broken.json'), '{');
    say('m2');
    await core.idle();
    expect(sent).toEqual([HELP, HELP]);
    expect(warnings).toEqual([]);
  });
});

describe('bridge core: a chat that changes hands (a direct chat that became a group)', () => {
  it("the group gets a conversation of its own (so never the person's home): its messages are answered, never refused as another tenant's", async () => {
    await using h = unitHome();
    h.create({ name: 'hands', workspace_isolation: true });
    const dir = fs.mkdtempSync(join(os.tmpdir(), 'berth-core-'));
    dirs.push(dir);
    const sent: string[] = [];
    const core = createBridgeCore({
      transport: {
        name: 'test',
        send: async (_chat, text) => void sent.push(text),
        typing: async () => undefined,
        acknowledge: async () => undefined,
        projectOf: () => 'hands',
      },
      inbox: openInbox(dir, 'test'),
      state: openBridgeState(dir, 'test'),
      admin: h.berth.admin,
      config: () => h.berth.config,
      logger: pino({ level: 'silent' }),
      senderAllowed: () => true,
    });
    // The room is alice's direct chat: her tenant, her session, her home.
    core.receive({ id: 'm1', chat: 'room1', tenant: 'test:alice', sender: 'test:alice', text: 'echo saved' });
    await core.idle();
    expect(sent.at(-1)).toContain('saved');
    const alices = h.berth.admin.listSessions('hands').filter((s) => s.tenant_key === 'test:alice');
    expect(alices).toHaveLength(1);
    // Bob joins: the same room is a group now, a tenant of its own.
    const before = sent.length;
    core.receive({ id: 'm2', chat: 'room1', tenant: 'test-group:room1', sender: 'test:bob', text: 'echo group-answer' });
    await core.idle();
    expect(sent.at(-1)).toContain('group-answer');
    expect(sent.slice(before).join('\n')).not.toMatch(/another tenant/);
    const groups = h.berth.admin.listSessions('hands').filter((s) => s.tenant_key === 'test-group:room1');
    expect(groups).toHaveLength(1);
    expect(groups[0]?.id).not.toBe(alices[0]?.id);
    // Alice's conversation is still hers.
    expect(h.berth.admin.getSession('hands', alices[0]?.id as string).tenant_key).toBe('test:alice');
  });
});

describe("bridge core: /level, by the project's rule", () => {
  it('a person may lower it, only an admin raise it; else the operator is asked (for as long as the project says); the settings alone are read', async () => {
    await using h = unitHome();
    h.create({ name: 'lv', admins: ['test:boss'] });
    // A workspace record nobody can parse: /level reads the project's settings, not its view.
    const records = join(h.berth.store.get('lv').paths.stateDir, 'workspaces');
    fs.mkdirSync(records, { recursive: true });
    fs.writeFileSync(join(records, 'broken.json'), '{');
    const dir = fs.mkdtempSync(join(os.tmpdir(), 'berth-core-'));
    dirs.push(dir);
    const sent: Array<{ chat: string; text: string }> = [];
    const asked: Array<{ level: string; timeoutSeconds: number }> = [];
    const core = createBridgeCore({
      transport: {
        name: 'test',
        send: async (chat, text) => void sent.push({ chat, text }),
        typing: async () => undefined,
        acknowledge: async () => undefined,
        projectOf: () => 'lv',
      },
      inbox: openInbox(dir, 'test'),
      state: openBridgeState(dir, 'test'),
      admin: h.berth.admin,
      config: () => h.berth.config,
      logger: pino({ level: 'silent' }),
      senderAllowed: () => true,
      approvals: {
        answer: () => {
          throw new Error('not answered in this test');
        },
        requestLevel: (request) => {
          asked.push({ level: request.level, timeoutSeconds: request.timeoutSeconds });
          return {
            id: 'a1',
            kind: 'level',
            project: 'lv',
            tenant: request.tenant,
            session: request.session,
            target: request.level,
            approver: 'operator',
            asked_at: '2026-01-01T00:00:00.000Z',
            expires_at: '2026-01-01T00:02:00.000Z',
          };
        },
      },
    });
    let n = 0;
    const say = async (sender: string, text: string) => {
      core.receive({ id: `l${n++}`, chat: sender, tenant: sender, sender, text });
      await core.idle();
      return sent.at(-1)?.text;
    };
    expect(await say('test:ann', '/level low')).toBe('berth: level is now low.');
    expect(await say('test:ann', '/level high')).toBe(
      "berth: only this project's admins may raise the level (it stays low). I asked the operator to allow high; you will hear here when they answer (it waits up to 2 min).",
    );
    expect(asked).toEqual([{ level: 'high', timeoutSeconds: 120 }]);
    expect(await say('test:boss', '/level high')).toBe('berth: level is now high.');
    expect(await say('test:boss', '/level')).toBe('berth: level is high (/level low|medium|high changes it)');
  });
});
