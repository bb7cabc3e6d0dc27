import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import type { ChatTransport } from '../../src/bridges/chat-transport.js';
import { createBridgeCore } from '../../src/bridges/core.js';
import { BerthConfigSchema } from '../../src/config/berth-config-schema.js';
import { plannedBoundary, receiptOf, type CredentialUse, type Observed, type Policy } from '../../src/plan/receipt.js';
import type { RunPlan } from '../../src/plan/run-plan.js';
import { openBridgeState } from '../../src/store/bridge-state.js';
import { openInbox } from '../../src/store/inbox.js';
import type { RunRecord } from '../../src/store/run-log.js';
import { fakeCoreAdmin } from '../fakes/core-admin.js';

/** /boundary through the bridge core, on a fake transport: the person's last run, in plain words. */
const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});

const plan = {
  runtime: 'runsc',
  readOnlyRootfs: true,
  mounts: [
    { type: 'bind', source: '/h/w', target: '/workspace', readOnly: false },
    { type: 'bind', source: '/h/m', target: '/memory', readOnly: true },
    { type: 'tmpfs', target: '/tmp', readOnly: false, sizeBytes: 1, mode: 0o1777 },
  ],
  limits: { memoryBytes: 512 << 20, nanoCpus: 1e9, pids: 256 },
} as unknown as RunPlan;

function recordWith(
  policy: Policy,
  observed: (asPlanned: Observed) => Observed,
  uses?: { kept: CredentialUse[]; more: number },
): RunRecord {
  const planned = plannedBoundary(plan);
  const asPlanned: Observed = { ...structuredClone(planned), seen_from: { mounts: 'inside', capabilities: 'inside' } };
  return {
    run: 'r1abc',
    kind: 'message',
    session: 's1',
    workspace: 'w1',
    permission_level: 'medium',
    workspace_root: '/h/w',
    exit_code: 0,
    timed_out: false,
    truncated: false,
    output_bytes: 0,
    timings_ms: { create: 0, start: 0, run: 0, total: 0 },
    finished_at: '2026-11-27T23:10:05.000Z',
    receipt: receiptOf(planned, observed(asPlanned), policy, uses),
  };
}

async function ask(records: RunRecord[], text = '/boundary', limit = 1): Promise<string[]> {
  const dir = fs.mkdtempSync(join(os.tmpdir(), 'berth-boundary-'));
  dirs.push(dir);
  const sent: string[] = [];
  const asked: Array<{ user?: string; limit?: number }> = [];
  const transport: ChatTransport = {
    name: 'test',
    send: async (_chat, text) => void sent.push(text),
    typing: async () => undefined,
    acknowledge: async () => undefined,
    projectOf: () => 'p',
  };
  const admin = fakeCoreAdmin({
    listRuns: (_project, filter) => {
      asked.push(filter);
      return { runs: records.slice(0, filter.limit), corrupt_lines: 0, interrupted: [] };
    },
  });
  const config = BerthConfigSchema.parse({});
  const core = createBridgeCore({
    transport,
    inbox: openInbox(dir, 'test'),
    state: openBridgeState(dir, 'test'),
    admin,
    config: () => config,
    logger: pino({ level: 'silent' }),
    senderAllowed: () => true,
  });
  core.receive({ id: 'm1', chat: 'c', tenant: 'signal:alice', sender: 'signal:alice', text });
  await core.idle();
  expect(asked).toEqual([{ user: 'signal:alice', limit }]);
  return sent;
}

describe('/boundary', () => {
  it('tells where the last run ran, what it saw and could reach, and that it matched the plan', async () => {
    const policy: Policy = { start: 'warm', folder: 'own', egress: true, allow: ['github.com'], secrets: ['GITHUB_TOKEN'] };
    // As under gVisor: its namespaces are its own kernel's, which the host cannot read.
    const uses = {
      kept: [
        {
          secret: 'GITHUB_TOKEN',
          method: 'POST',
          host: 'api.github.com',
          path: '/repos/alice/a-rather-long-project-name/pulls',
          status: 201,
        },
        {
          secret: 'GITHUB_TOKEN',
          method: 'GET',
          host: 'api.github.com',
          path: '/user',
          status: 502,
          note: 'api.github.com:443 could not be reached',
        },
      ],
      more: 0,
    };
    const gvisor = recordWith(policy, ({ namespaces: _ns, ...o }) => o, uses);
    expect(await ask([gvisor])).toEqual([
      [
        'berth: your last run, at 2026-11-27 23:10 UTC (run r1abc):',
        "- ran: in gVisor, a sandbox with its own kernel (not this server's), in your conversation's kept container",
        "- saw: only your folder, and the project's memory (read-only)",
        '- could reach: github.com, and no other network',
        '- secrets: berth adds GITHUB_TOKEN to requests for the hosts meant for it; your agent never sees it',
        'berth added a secret to 2 requests:',
        '- GITHUB_TOKEN → POST api.github.com/repos/alice/a-rathe…ject-name/pulls, 201',
        '- GITHUB_TOKEN → GET api.github.com/user, not sent (502)',
        '✓ Checked as it started: what berth could read matched its plan (not checked: namespaces).',
      ].join('\n'),
    ]);
  });

  it('a run that did not match its plan says so, each difference on a line of its own', async () => {
    const policy: Policy = { start: 'cold', folder: 'own', egress: false, allow: [], secrets: [] };
    const dropped = recordWith(policy, (o) => ({ ...o, mounts: o.mounts!.map((m) => ({ ...m, read_only: false })) }));
    expect(await ask([dropped])).toEqual([
      [
        'berth: your last run, at 2026-11-27 23:10 UTC (run r1abc):',
        "- ran: in gVisor, a sandbox with its own kernel (not this server's), in a new container",
        "- saw: only your folder, and the project's memory (read-only)",
        '- could reach: no network at all (only your model, through berth)',
        "⚠ It did NOT match berth's plan (1 difference; the operator is told):",
        '- mount /memory is writable (planned read-only) [inside]',
      ].join('\n'),
    ]);
  });

  it('long lists stay short: ten hosts, three differences, then how many more', async () => {
    const allow = Array.from({ length: 13 }, (_, i) => `h${i}.example`);
    const policy: Policy = { start: 'pool', folder: 'own', egress: true, allow, secrets: ['A_TOKEN', 'B_TOKEN'] };
    const off = recordWith(policy, (o) => ({ ...o, mounts: [], read_only_root: false }));
    const [reply] = await ask([off]);
    expect(reply!.split('\n').slice(1)).toEqual([
      "- ran: in gVisor, a sandbox with its own kernel (not this server's), in a container berth had ready",
      "- saw: only your folder, and the project's memory (read-only)",
      `- could reach: ${allow.slice(0, 10).join(', ')} and 3 more, and no other network`,
      '- secrets: berth adds A_TOKEN and B_TOKEN to requests for the hosts meant for them; your agent never sees them',
      "⚠ It did NOT match berth's plan (4 differences; the operator is told):",
      ...off.receipt!.violations.slice(0, 3).map((v) => `- ${v}`),
      '- and 1 more',
    ]);
  });

  it('a container nothing could be read of (a launcher that cannot observe) is never called a match', async () => {
    const policy: Policy = { start: 'cold', folder: 'project', egress: true, allow: [], secrets: [] };
    const [reply] = await ask([recordWith(policy, () => ({ seen_from: {} }))]);
    expect(reply!.split('\n').slice(1)).toEqual([
      "- ran: in gVisor, a sandbox with its own kernel (not this server's), in a new container",
      "- saw: the project's whole folder (this project does not give each person their own), and the project's memory (read-only)",
      '- could reach: no website (only your model, through berth)',
      'berth could not look into this container as it started, so none of this was checked this time.',
    ]);
  });

  it('no run yet', async () => {
    expect(await ask([])).toEqual(['berth: no run of yours yet. Send a message, then ask /boundary again.']);
  });
});

describe('/secrets', () => {
  const policy: Policy = { start: 'cold', folder: 'own', egress: true, allow: ['api.github.com'], secrets: ['GITHUB_TOKEN'] };
  const use = (path: string, status: number, note?: string): CredentialUse => ({
    secret: 'GITHUB_TOKEN',
    method: 'GET',
    host: 'api.github.com',
    path,
    status,
    ...(note ? { note } : {}),
  });
  const at = (r: RunRecord, finished_at: string): RunRecord => ({ ...r, finished_at });

  it("lists each request berth added a secret to, newest run first, with the run's time and what came back", async () => {
    const newer = at(
      recordWith(policy, (o) => o, { kept: [use('/user', 200), use('/orgs', 403, 'GET is not granted')], more: 0 }),
      '2026-11-28T09:30:00.000Z',
    );
    const none = at(
      recordWith(policy, (o) => o),
      '2026-11-28T09:00:00.000Z',
    );
    const older = at(
      recordWith(policy, (o) => o, { kept: [use('/repos/a/b', 201)], more: 2 }),
      '2026-11-27T18:00:00.000Z',
    );
    expect(await ask([newer, none, older], '/secrets', 20)).toEqual([
      [
        'berth: requests berth added a secret to (UTC, newest run first):',
        '- 2026-11-28 09:30 GITHUB_TOKEN → GET api.github.com/user, 200',
        '- 2026-11-28 09:30 GITHUB_TOKEN → GET api.github.com/orgs, not sent (403)',
        '- 2026-11-27 18:00 GITHUB_TOKEN → GET api.github.com/repos/a/b, 201',
        '- 2026-11-27 18:00 and 2 more',
        "berth adds GITHUB_TOKEN to your agent's requests for the hosts it is meant for; your agent never sees the value.",
      ].join('\n'),
    ]);
  });

  it('at most ten lines, then how many more', async () => {
    const many = recordWith(policy, (o) => o, { kept: Array.from({ length: 14 }, (_, i) => use(`/p${i}`, 200)), more: 0 });
    const [reply] = await ask([many], '/secrets', 20);
    const lines = reply!.split('\n');
    expect(lines.filter((l) => l.startsWith('- 2026'))).toHaveLength(10);
    expect(lines).toContain("- and 4 more lines (the operator's berth runs --receipt shows them)");
  });

  it('none used, or no grant at all, said so', async () => {
    expect(await ask([recordWith(policy, (o) => o)], '/secrets', 20)).toEqual([
      "berth: no request of yours got a secret in your last run.\nberth adds GITHUB_TOKEN to your agent's requests for the hosts it is meant for; your agent never sees the value.",
    ]);
    expect(await ask([], '/secrets', 20)).toEqual([
      'berth: no request of yours got a secret in your last 20 runs.\nYour last run had no secret that berth adds for it.',
    ]);
  });
});
