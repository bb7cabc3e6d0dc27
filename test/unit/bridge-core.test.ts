import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import type { AdminService } from '../../src/admin/service.js';
import { CHAT_PENDING_MAX, createBridgeCore, HELD_CHECK_MS, QUEUED_NOTICE_AFTER_MS, STRANGER_HELD_CHARS, STRANGER_HELD_NOTICE, TENANT_PENDING_MAX, type ChatTransport, type InboundMessage } from '../../src/bridges/core.js';
import { BerthConfigSchema } from '../../src/config/berth-config-schema.js';
import { openBridgeState } from '../../src/store/bridge-state.js';
import { openInbox } from '../../src/store/inbox.js';
import type { ProgressUpdate } from '../../src/runs/agent-progress.js';

/**
 * The bridge core's queue bounds, in memory: the runs are a fake admin service that waits until
 * the test lets it finish; the inbox and state are real files in a temporary directory.
 */
const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});

function setup(
  result: (message: string) => Record<string, unknown> = (message) => ({ exit_code: 0, stdout: `done ${message}`, stderr: '', timed_out: false, warnings: [] }),
  opts: { progressAfter?: number; during?: (onProgress: ((u: ProgressUpdate) => void) | undefined) => void; allowed?: Set<string> } = {},
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
  const admin = {
    async runMessage(_project: string, request: { message: string; whenReady?: () => Promise<void>; onProgress?: (u: ProgressUpdate) => void }) {
      await request.whenReady?.();
      ran++;
      opts.during?.(request.onProgress);
      await new Promise<void>((r) => gates.push(r));
      return result(request.message);
    },
  } as unknown as AdminService;
  const inbox = openInbox(dir, 'test');
  const config = BerthConfigSchema.parse({ bridges: { max_concurrent_runs: 4, ...(opts.progressAfter !== undefined ? { progress_message_after_seconds: opts.progressAfter } : {}) } });
  const senderAllowed = (sender: string) => opts.allowed?.has(sender) ?? true;
  const coreOn = () => createBridgeCore({ transport, inbox, state: openBridgeState(dir, 'test'), admin, config: () => config, logger: pino({ level: 'silent' }), senderAllowed });
  const core = coreOn();
  let n = 0;
  const message = (tenant: string, chat: string, text: string): InboundMessage => ({ id: `m${n++}`, chat, tenant, sender: tenant, text });
  const releaseAll = async () => {
    while (core && (gates.length > 0 || inbox.open().length > 0)) {
      gates.splice(0).forEach((g) => g());
      await new Promise((r) => setTimeout(r, 5));
    }
  };
  return { core, coreOn, inbox, sent, message, releaseAll, ran: () => ran, to: (chat: string) => sent.filter((s) => s.chat === chat).map((s) => s.text) };
}

describe('bridge core: a run berth stopped', () => {
  it('the reply says why, in words (an unreachable model service, a disk limit), after what the agent printed', async () => {
    const reason = 'its model service cannot be reached ("anthropic": connect ECONNREFUSED 127.0.0.1:9). The operator must fix it (berth doctor); send the message again later.';
    const t = setup(() => ({ exit_code: 137, stdout: 'thinking…\n', stderr: 'API Error: 502', timed_out: false, warnings: ['env "X" is allowed but berth.yaml gives it no value', `stopped: ${reason}`] }));
    t.core.receive(t.message('signal:a', 'a', 'fix the bug'));
    await t.releaseAll();
    expect(t.to('a')).toEqual([`thinking…\n\n[berth stopped the agent: ${reason}]`]);
    await t.core.idle();
  });
});

describe('bridge core: a run whose container ended under it', () => {
  it('the reply says why in words (out of memory), not a bare "[exit 137]"', async () => {
    const t = setup(() => ({ exit_code: 137, stdout: '', stderr: '', timed_out: false, warnings: ['container lost: it ran out of memory (limits.memory_mb)'] }));
    t.core.receive(t.message('signal:a', 'a', 'build it'));
    await t.releaseAll();
    expect(t.to('a')).toEqual(["[the agent's container ended before it finished: it ran out of memory (limits.memory_mb)]"]);
    await t.core.idle();
  });
});

describe('bridge core: a chat that cannot show the agent at work (Signal)', () => {
  const step = (id: string, detail: string, state: 'running' | 'ok') => ({ type: 'step' as const, step: { id, tool: 'Bash', detail, state, at: 0 } });

  it('a run past progress_message_after_seconds gets one short progress message, never more; then the answer', async () => {
    const t = setup(undefined, {
      progressAfter: 1,
      during: (onProgress) => {
        for (const u of [step('a', 'npm ci', 'running'), step('a', 'npm ci', 'ok'), step('b', 'npm test', 'running')]) onProgress?.(u);
      },
    });
    t.core.receive(t.message('signal:a', 'a', 'fix it'));
    await new Promise((r) => setTimeout(r, 2600)); // past the threshold twice over: still one message
    expect(t.to('a')).toEqual(['berth: still working (ran 2 commands; now: npm test)']);
    await t.releaseAll();
    expect(t.to('a')).toEqual(['berth: still working (ran 2 commands; now: npm test)', 'done fix it']);
    await t.core.idle();
  });

  it('a run that ends before the threshold sends no progress message; 0 turns them off', async () => {
    for (const progressAfter of [30, 0]) {
      const t = setup(undefined, { progressAfter, during: (onProgress) => onProgress?.(step('a', 'ls', 'running')) });
      t.core.receive(t.message('signal:a', 'a', 'quick'));
      await t.releaseAll();
      expect(t.to('a')).toEqual(['done quick']);
      await t.core.idle();
    }
  });
});

describe('bridge core: a stranger (pairing)', () => {
  it("the first message is kept over a restart and answered once the sender is approved; longer ones and later ones are not kept", async () => {
    const allowed = new Set<string>();
    const t = setup(undefined, { allowed });
    t.core.receive(t.message('signal:s', 's', 'echo kept'));
    t.core.receive(t.message('signal:s', 's', 'echo later'));
    t.core.receive(t.message('signal:long', 'long', 'x'.repeat(STRANGER_HELD_CHARS + 1)));
    await new Promise((r) => setTimeout(r, 50));
    expect(t.inbox.all().map((e) => [e.sender, e.phase])).toEqual([
      ['signal:s', 'held'],
      ['signal:s', 'failed'],
      ['signal:long', 'failed'],
    ]);
    expect(t.to('s')).toEqual([STRANGER_HELD_NOTICE]);
    expect(t.ran()).toBe(0);
    // berth restarts: the held message is held again, and runs once they are approved.
    t.core.close();
    const again = t.coreOn();
    again.recover();
    allowed.add('signal:s');
    await new Promise((r) => setTimeout(r, HELD_CHECK_MS + 500));
    await t.releaseAll();
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
    await new Promise((r) => setTimeout(r, QUEUED_NOTICE_AFTER_MS + 100));
    expect(t.to('a').slice(2)).toEqual(['berth: queued (1 of your messages in this chat ahead of it); I will answer in order.']);
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
    await new Promise((r) => setTimeout(r, QUEUED_NOTICE_AFTER_MS + 100));
    const refused = t.to('a').filter((s) => s.includes('was not run'));
    expect(refused).toHaveLength(3);
    expect(refused[0]).toBe(`berth: ${CHAT_PENDING_MAX} of your messages in this chat are waiting already, so "echo ${CHAT_PENDING_MAX}" was not run. Send it again once I have answered the others.`);
    // What they are told about their queue counts their own messages only.
    expect(t.to('a').filter((s) => s.startsWith('berth: queued (')).at(-1)).toBe(`berth: queued (${CHAT_PENDING_MAX - 1} of your messages in this chat ahead of it); I will answer in order.`);
    for (const id of ids.slice(CHAT_PENDING_MAX)) expect(t.inbox.all().find((e) => e.id === id)).toMatchObject({ phase: 'failed', reason: 'too many messages waiting (chat)' });
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
    await new Promise((r) => setTimeout(r, 20));
    expect(t.to(`p/alice/s${TENANT_PENDING_MAX}`)).toEqual([`berth: ${TENANT_PENDING_MAX} of your messages are waiting already, so "echo ${TENANT_PENDING_MAX}" was not run. Send it again once I have answered the others.`]);
    // Four slots, one tenant: it holds at most runs.per_tenant (2 by default) of them.
    expect(t.ran()).toBe(2);
    await t.releaseAll();
    await t.core.idle();
  });
});
