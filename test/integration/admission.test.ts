import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readJsonLines } from '../../src/fs/json-file.js';
import Docker from 'dockerode';
import { pino } from 'pino';
import { createBerth, installationId } from '../../src/main.js';
import type { ChatTransport } from '../../src/bridges/chat-transport.js';
import { createBridgeCore } from '../../src/bridges/core.js';
import { openInbox } from '../../src/store/inbox.js';
import { openBridgeState } from '../../src/store/bridge-state.js';
import { BERTH_BIN, cli, removeContainersOf, serveApp, testHome, type TestHome } from '../helpers.js';
import { until } from '../helpers/until.js';

/** Admission control on the real API and engine: limits, the fair queue, 429 BUSY, and the SIGTERM drain. */
const TOKEN = 'admission-test-token-0123456789';
let h: TestHome;
let server: Awaited<ReturnType<typeof serveApp>>;

const post = (user: string, message: string) =>
  fetch(`${server.base}/api/projects/adm/runs`, {
    method: 'POST',
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify({ user, message }),
  });

beforeAll(async () => {
  // One run at a time in all, a queue of 8: one tenant may hold 2 of it.
  h = testHome({ config: 'runs: { max_concurrent: 1, per_tenant: 1, queue: 8 }\n' });
  h.create({ name: 'adm', workspace_isolation: true });
  server = await serveApp(h.berth, TOKEN);
});
afterAll(async () => {
  server.close();
  await h[Symbol.asyncDispose]();
});

describe('admission control (HTTP API, real containers)', () => {
  it("one tenant's burst gets 429 BUSY past its share, and another tenant's first message is next", async () => {
    const t0 = Date.now();
    const burst = Array.from({ length: 3 }, () => post('web:noisy', 'sleep 1; echo noisy'));
    await until(() => {
      const { inFlight, queued } = h.berth.admission.stats();
      return inFlight === 1 && queued === 2;
    }, 'the burst to be in: 1 running, 2 waiting');
    const refused = await post('web:noisy', 'echo one too many');
    expect(refused.status).toBe(429);
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    const body = (await refused.json()) as { error: unknown };
    expect(body.error).toMatchObject({ code: 'BUSY', hint: expect.stringContaining('try again in') });

    const quiet = post('web:quiet', 'echo quiet');
    const doneAt: Record<string, number> = {};
    const quietDone = quiet.then(async (r) => {
      doneAt.quiet = Date.now() - t0;
      return (await r.json()) as { stdout: string };
    });
    const noisy = await Promise.all(
      burst.map((p) => p.then(async (r) => ({ at: Date.now() - t0, body: await r.json(), status: r.status }))),
    );
    expect(noisy.map((n) => n.status)).toEqual([200, 200, 200]);
    expect((await quietDone).stdout).toBe('quiet\n');
    // Round-robin: the quiet tenant went after the noisy run in flight, before the noisy ones waiting.
    const noisyTimes = noisy.map((n) => n.at).sort((a, b) => a - b);
    expect(doneAt.quiet).toBeLessThan(noisyTimes[1] as number);
    // Nothing piled up: at most one container at any time means no leftover now.
    expect(await h.berth.runner.listContainers('adm')).toEqual([]);
  });

  it('GET /metrics counts runs by outcome, the refused one as busy', async () => {
    const r = await fetch(`${server.base}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } });
    const text = await r.text();
    expect(text).toMatch(/berth_runs_total\{project="adm",level="medium",kind="message",outcome="ok",warm="false"\} 4/);
    expect(text).toMatch(/berth_runs_total\{project="adm",level="medium",kind="message",outcome="busy",warm="false"\} 1/);
    expect(text).toMatch(/berth_run_queue_wait_seconds_count 4/);
    expect(text).toMatch(/berth_run_queue_depth 0/);
    expect(text).toMatch(/berth_runs_in_flight 0/);
  });
});

describe('SIGTERM drains berth serve', () => {
  const home = fs.realpathSync(fs.mkdtempSync(join(os.tmpdir(), 'berth-drain-')));
  let proc: ChildProcess | undefined;
  afterAll(async () => {
    proc?.kill('SIGKILL');
    await removeContainersOf(home);
    fs.rmSync(home, { recursive: true, force: true });
  });

  async function startServe(): Promise<{ url: string; token: string; output: () => string; exited: Promise<number | null> }> {
    const p = spawn(process.execPath, [BERTH_BIN, '--home', home, 'serve', '--port', '0'], {
      env: { PATH: process.env.PATH ?? '', BERTH_LOG_LEVEL: 'warn' },
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    proc = p;
    let out = '';
    const exited = new Promise<number | null>((r) => p.once('exit', (code) => r(code)));
    return new Promise((resolve, reject) => {
      p.stdout?.on('data', (d: Buffer) => {
        out += d.toString();
        if (out.includes('ready\n'))
          resolve({
            url: /serving (\S+)/.exec(out)?.[1] as string,
            token: fs.readFileSync(join(home, '.berth/admin-token'), 'utf8').trim(),
            output: () => out,
            exited,
          });
      });
      void exited.then((code) => reject(new Error(`berth serve exited ${code} before ready: ${out}`)));
    });
  }
  /** A run of that serve is in flight: its container runs. */
  const runningContainer = async () =>
    (await new Docker().listContainers({ filters: { label: [`berth.installation=${installationId(home)}`], status: ['running'] } }))
      .length > 0;
  const run = (s: { url: string; token: string }, message: string) =>
    fetch(`${s.url}/api/projects/dr/runs`, {
      method: 'POST',
      headers: { authorization: `Bearer ${s.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ user: 'web:a', message }),
    });

  it('a run in flight finishes and answers; a new one gets 503 SHUTTING_DOWN; serve exits 0', async () => {
    expect(cli(['--home', home, 'project', 'create', 'dr', '--isolation']).code).toBe(0);
    const s = await startServe();
    const inFlight = run(s, 'sleep 2; echo finished');
    await until(runningContainer, 'the run to be in flight');
    proc?.kill('SIGTERM');
    await until(() => s.output().includes('SIGTERM: draining'), 'serve to start draining');
    const late = await run(s, 'echo too late');
    expect(late.status).toBe(503);
    expect(((await late.json()) as { error: { code: string } }).error.code).toBe('SHUTTING_DOWN');
    const answer = await inFlight;
    expect(answer.status).toBe(200);
    expect(((await answer.json()) as { stdout: string }).stdout).toBe('finished\n');
    expect(await s.exited).toBe(0);
    expect(s.output()).toContain('SIGTERM: draining (1 run(s) in flight');
  });

  it('past runs.drain_seconds the run is stopped and journaled as interrupted; no container is left', async () => {
    fs.writeFileSync(join(home, 'berth.yaml'), 'runs: { drain_seconds: 1 }\n');
    const s = await startServe();
    const RUN_SECONDS = 60;
    const inFlight = run(s, `sleep ${RUN_SECONDS}`).catch((err: unknown) => err);
    await until(runningContainer, 'the run to be in flight');
    const t0 = Date.now();
    proc?.kill('SIGTERM');
    expect(await s.exited).toBe(0);
    expect(Date.now() - t0).toBeLessThan(RUN_SECONDS * 1000); // it did not wait for the run (a comparison, not a speed)
    await inFlight;
    expect(s.output()).toContain('1 run(s) interrupted');
    const journal = readJsonLines(join(home, 'projects', 'dr', 'sessions', 'journal.jsonl')).map(
      (l) => JSON.parse(l) as { run: string; phase: string; reason?: string },
    );
    const last = journal.filter((e) => e.phase === 'interrupted');
    expect(last).toHaveLength(1);
    expect(last[0]?.reason).toContain('drain deadline');
    const docker = new Docker();
    expect(await docker.listContainers({ all: true, filters: { label: [`berth.installation=${installationId(home)}`] } })).toEqual([]);
  });
});

describe('chat bridges under admission (bridge core, real runs)', () => {
  let c: TestHome;
  const sent: Array<{ chat: string; text: string }> = [];
  const transport: ChatTransport = {
    name: 'test',
    send: async (chat, text) => void sent.push({ chat, text }),
    typing: async () => undefined,
    acknowledge: async () => undefined,
    projectOf: () => 'chat',
  };
  const coreOf = (berth: TestHome['berth']) => {
    const dir = join(c.home, '.berth', 'bridges');
    return createBridgeCore({
      transport,
      inbox: openInbox(dir, 'test'),
      state: openBridgeState(dir, 'test'),
      admin: berth.admin,
      config: () => berth.config,
      logger: pino({ level: 'silent' }),
      senderAllowed: () => true,
    });
  };
  const message = (id: string, text: string) => ({ id, chat: `c-${id}`, tenant: `test:${id}`, sender: `test:${id}`, text });
  beforeAll(() => {
    c = testHome({ config: 'runs: { max_concurrent: 1, per_tenant: 1, queue: 0 }\n' });
    c.create({ name: 'chat', workspace_isolation: true });
  });
  afterAll(async () => {
    await c[Symbol.asyncDispose]();
  });

  it('a BUSY chat message waits its Retry-After and is answered, not bounced to the person', async () => {
    const core = coreOf(c.berth);
    const hog = c.berth.runner.run({ project: 'chat', tenantKey: 'api:hog', message: 'sleep 2' }); // holds the one slot
    await until(() => c.berth.admission.stats().inFlight === 1, 'the hog to hold the slot');
    expect(core.receive(message('m1', 'echo answered'))).toBe('accepted');
    await hog;
    await core.idle();
    expect(sent.filter((s) => s.chat === 'c-m1').map((s) => s.text)).toEqual(['answered']);
  });

  it('a message refused because berth is stopping goes back to its inbox and is answered after the restart', async () => {
    const core = coreOf(c.berth);
    c.berth.admission.drain();
    core.receive(message('m2', 'echo after restart'));
    await core.idle();
    expect(sent.filter((s) => s.chat === 'c-m2')).toEqual([]);
    const inbox = openInbox(join(c.home, '.berth', 'bridges'), 'test');
    expect(inbox.all().find((e) => e.id === 'm2')?.phase).toBe('received');
    // The next berth of this home answers it.
    const next = createBerth({ home: c.home, logLevel: 'silent' });
    const again = coreOf(next);
    again.recover();
    await again.idle();
    expect(sent.filter((s) => s.chat === 'c-m2').map((s) => s.text)).toEqual(['after restart']);
  });
});
