import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningBridges } from '../../src/bridges/start.js';
import { startFakeSignalCli, type FakeSignalCli } from '../fakes/signal-cli.js';
import { cliAsync, testHome, type TestHome } from '../helpers.js';
import { startSignalBridges, stopBridgeRig } from '../helpers/bridge-rig.js';
import { startLoopbackSite } from '../helpers/loopback-site.js';

/**
 * Signal has no cards: a run that wants a host outside its project's allowlist asks its person
 * with a short question, answered by /yes, /yes session or /no — at once, while the run that
 * asked holds the chat's lane — through the real wire (the signal-cli fake) and the real proxy.
 */
const ALICE = '77777777-7777-4777-8777-777777777701';
let fake: FakeSignalCli;
let h: TestHome;
let bridges: RunningBridges;
let web: Awaited<ReturnType<typeof startLoopbackSite>>;
let port: number;

beforeAll(async () => {
  web = await startLoopbackSite();
  port = web.port;
  fake = await startFakeSignalCli({ keepaliveMs: 200, receiveMode: 'on-connection' });
  h = testHome({
    config: [
      'bridges:',
      '  progress_message_after_seconds: 0',
      '  signal:',
      `    url: ${fake.url}`,
      `    account: '${fake.account}'`,
      '    senders: open',
      'routes:',
      '  signal: { project: sig }',
      'egress:',
      `  private_hosts: ['localhost:${port}']`,
      '',
    ].join('\n'),
  });
  h.create({ name: 'sig', workspace_isolation: true });
  bridges = await startSignalBridges(h, fake);
});
afterAll(async () => {
  await stopBridgeRig({ bridges, h, fake });
  web.close();
});

const said = (from: number) =>
  fake
    .repliesTo(ALICE)
    .slice(from)
    .map((m) => m.message);
const fetchOf = (path: string) => `wget -q -O - http://localhost:${port}/${path} 2>&1; echo rc=$?`;
const QUESTION = (p: number) =>
  `berth: your agent wants to reach localhost:${p}, which this project does not allow. Reply /yes to allow it for this message, /yes session for this conversation, or /no. (No answer within 2 min: no.)`;

describe('Signal: the agent asks before it reaches a host outside the allowlist', () => {
  it('/yes lets the waiting request through; the answer is confirmed, then the run answers', async () => {
    const from = fake.repliesTo(ALICE).length;
    fake.deliverText({ fromUuid: ALICE, fromNumber: null, text: fetchOf('yes') });
    await fake.waitFor(() => said(from).includes(QUESTION(port)), 30_000);
    expect(web.hits()).toBe(0);
    fake.deliverText({ fromUuid: ALICE, fromNumber: null, text: '/yes' });
    await fake.waitFor(() => said(from).includes('fetched /yes\nrc=0'), 30_000);
    expect(said(from)).toEqual([QUESTION(port), `berth: allowed localhost:${port} for this message.`, 'fetched /yes\nrc=0']);
    expect(web.hits()).toBe(1);
  });

  it('/no refuses it: the agent gets 403, the host is never reached', async () => {
    const from = fake.repliesTo(ALICE).length;
    fake.deliverText({ fromUuid: ALICE, fromNumber: null, text: fetchOf('no') });
    await fake.waitFor(() => said(from).includes(QUESTION(port)), 30_000);
    fake.deliverText({ fromUuid: ALICE, fromNumber: null, text: '/no' });
    await fake.waitFor(() => said(from).length >= 3, 30_000);
    const [question, confirmed, answer] = said(from);
    expect([question, confirmed]).toEqual([QUESTION(port), `berth: denied: your agent was not let through to localhost:${port}.`]);
    expect(answer).toMatch(/403/);
    expect(answer).toMatch(/rc=1/);
    expect(web.hits()).toBe(1);
  });

  it('/yes with nothing waiting says so, and runs nothing', async () => {
    const from = fake.repliesTo(ALICE).length;
    fake.deliverText({ fromUuid: ALICE, fromNumber: null, text: '/yes' });
    await fake.waitFor(() => said(from).length >= 1, 30_000);
    expect(said(from)).toEqual(['berth: nothing is waiting for your answer.']);
    expect(h.berth.audit.list({ project: 'sig', limit: 10 }).map((e) => [e.action, e.actor])).toEqual(
      expect.arrayContaining([
        ['approval.allow_once', `tenant:signal:${ALICE}`],
        ['approval.deny', `tenant:signal:${ALICE}`],
      ]),
    );
  });

  it('/level high beyond what the project lets its person take: the operator is asked, and their answer (the CLI) raises it and is told', async () => {
    const from = fake.repliesTo(ALICE).length;
    fake.deliverText({ fromUuid: ALICE, fromNumber: null, text: '/level high' });
    await fake.waitFor(() => said(from).length >= 1, 30_000);
    expect(said(from)).toEqual([
      "berth: only this project's admins may raise the level (it stays medium). I asked the operator to allow high; you will hear here when they answer (it waits up to 2 min).",
    ]);
    const listed = JSON.parse((await cliAsync(['--home', h.home, 'approvals', 'list', '--json'])).stdout) as Array<{
      id: string;
      kind: string;
      target: string;
      tenant: string;
    }>;
    expect(listed).toEqual([expect.objectContaining({ kind: 'level', target: 'high', tenant: `signal:${ALICE}` })]);
    const allowed = await cliAsync(['--home', h.home, 'approvals', 'allow', listed[0]!.id]);
    expect(allowed).toMatchObject({ code: 0, stdout: expect.stringMatching(/^allowed: level high \(the session is raised\) for signal:/) });
    await fake.waitFor(() => said(from).length >= 2, 30_000);
    expect(said(from)[1]).toBe("berth: the operator raised this conversation's level to high.");
    const sessions = h.berth.admin.listSessions('sig', `signal:${ALICE}`);
    expect(sessions.map((s) => s.settings.permission_level)).toEqual(['high']);
    expect(h.berth.audit.list({ project: 'sig', limit: 5 }).map((e) => [e.action, e.actor])).toContainEqual([
      'approval.raise_level',
      'operator',
    ]);
  });
});
