import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { bridgeHealth, createLiveView } from '../../src/admin/live-view.js';
import { fileStopRequest, STOP_REQUEST_TTL_MS, watchStopRequests } from '../../src/admin/stop-requests.js';
import { appDepsFrom, createApp } from '../../src/api/app.js';
import { EVENTS_PER_CALLER } from '../../src/api/console/events.js';
import { statsOf } from '../../src/launch/docker/stats.js';
import { FIRST_MESSAGE_CHARS, pendingSenders } from '../../src/bridges/senders.js';
import { bridgeDir } from '../../src/bridges/start.js';
import { openBridgeState } from '../../src/store/bridge-state.js';
import { openInbox } from '../../src/store/inbox.js';
import { BerthConfigSchema } from '../../src/config/berth-config-schema.js';
import { unitHome, type TestHome } from '../helpers.js';
import { until } from '../helpers/until.js';

/**
 * The console's own routes for its views and actions (in memory): signed in by its form, each
 * action is a JSON POST from its own page, through canAct, to the admin service (so audited);
 * its live events are bounded per login. Also the pieces under them: a stop asked of another
 * process of the home, Docker's cgroup figures as `docker stats` computes them, a bridge's health.
 */
const TOKEN = 'console-actions-admin-token-0123456789';
const HOST = 'berth.test';
const appOf = (h: TestHome) => createApp(appDepsFrom(h.berth, { token: TOKEN, logger: pino({ level: 'silent' }) }));

async function cookieOf(app: ReturnType<typeof appOf>): Promise<string> {
  const res = await app.request(`http://${HOST}/docs/login`, {
    method: 'POST',
    headers: { host: HOST },
    body: new URLSearchParams({ token: TOKEN, next: '/console' }),
  });
  return (res.headers.getSetCookie()[0] ?? '').split(';')[0] as string;
}

describe('the console routes', () => {
  it('act from the page only: a POST from another origin is 403, a form 415; a signed-in JSON POST pauses (audited) and a run is refused', async () => {
    await using h = unitHome();
    h.create({ name: 'bot', agent: 'shell' });
    const app = appOf(h);
    const cookie = await cookieOf(app);
    const pause = (headers: Record<string, string>, body = '{"reason":"lunch"}') =>
      app.request(`http://${HOST}/console/api/projects/bot/pause`, { method: 'POST', headers: { host: HOST, cookie, ...headers }, body });
    expect((await pause({ 'content-type': 'application/json', origin: 'http://evil.example' })).status).toBe(403);
    expect((await pause({ 'content-type': 'application/x-www-form-urlencoded' }, 'reason=x')).status).toBe(415);
    expect((await app.request(`http://${HOST}/console/api/projects/bot/pause`, { method: 'POST', headers: { host: HOST } })).status).toBe(
      401,
    );
    expect(h.berth.admin.getProject('bot').paused).toBeUndefined();
    const ok = await pause({ 'content-type': 'application/json', origin: `http://${HOST}` });
    expect(await ok.json()).toMatchObject({ project: 'bot', paused: true, reason: 'lunch' });
    await expect(h.run('bot', 'web:ann', 'echo no')).rejects.toMatchObject({ code: 'PROJECT_PAUSED' });
    expect(h.berth.audit.list({ limit: 5 }).map((e) => e.action)).toContain('project.pause');
    // The state the page shows says so.
    const state = (await (await app.request(`http://${HOST}/console/api/state`, { headers: { host: HOST, cookie } })).json()) as {
      projects: Array<{ name: string; paused: { reason?: string } | null }>;
    };
    expect(state.projects[0]).toMatchObject({ name: 'bot', paused: { reason: 'lunch' } });
  });

  it('its views: a run (with its audit lines), a session (audited: transcript.open), a tenant; an unknown run 404 NOT_FOUND; a level that is none 400', async () => {
    await using h = unitHome();
    h.create({ name: 'bot', agent: 'shell' });
    const app = appOf(h);
    const cookie = await cookieOf(app);
    const get = (path: string) => app.request(`http://${HOST}${path}`, { headers: { host: HOST, cookie } });
    const o = await h.run('bot', 'web:ann', 'echo viewed');
    expect(await (await get(`/console/api/runs/bot/${o.runId}`)).json()).toMatchObject({
      tenant: 'web:ann',
      record: { answer: 'viewed\n' },
      audit: [{ kind: 'run_receipt', target: o.runId }],
    });
    expect(await (await get(`/console/api/sessions/bot/${o.sessionId}`)).json()).toMatchObject({ session: { id: o.sessionId } });
    // An operator reading a person's conversation is on the record: who, whose, which — never what.
    const opened = h.berth.audit.list({ limit: 10 }).find((e) => e.action === 'transcript.open');
    expect(opened).toMatchObject({
      kind: 'admin',
      actor: 'admin',
      project: 'bot',
      target: `web:ann session ${o.sessionId}`,
      outcome: 'ok',
    });
    expect(JSON.stringify(opened)).not.toContain('viewed');
    expect(await (await get('/console/api/tenants/bot/web%3Aann')).json()).toMatchObject({
      tenant: 'web:ann',
      chat_user: 'ann',
      access: { links: [], logins: [] },
      waiting: [],
    });
    expect(await (await get('/console/api/runs/bot/rnothere')).json()).toMatchObject({ error: { code: 'NOT_FOUND' } });
    const level = await app.request(`http://${HOST}/console/api/sessions/bot/${o.sessionId}/level`, {
      method: 'POST',
      headers: { host: HOST, cookie, 'content-type': 'application/json' },
      body: '{"level":"root"}',
    });
    expect(level.status).toBe(400);
  });

  it('frozen tenants are listed under "Waiting for you" with where it was seen; Unfreeze (from the page) lets them run again, audited', async () => {
    await using h = unitHome();
    h.create({ name: 'bot', agent: 'shell' });
    const app = appOf(h);
    const cookie = await cookieOf(app);
    h.berth.honeytokens.trip({ project: 'bot', tenantKey: 'web:ann', runId: 'r1' }, 'egress GET example.com');
    await expect(h.run('bot', 'web:ann', 'echo no')).rejects.toMatchObject({ code: 'PERMISSION_DENIED' });
    const state = (await (await app.request(`http://${HOST}/console/api/state`, { headers: { host: HOST, cookie } })).json()) as {
      waiting: { frozen: unknown[] };
    };
    expect(state.waiting.frozen).toEqual([
      expect.objectContaining({ project: 'bot', tenant: 'web:ann', where: 'egress GET example.com', run: 'r1' }),
    ]);
    const lift = await app.request(`http://${HOST}/console/api/tenants/bot/web%3Aann/unfreeze`, {
      method: 'POST',
      headers: { host: HOST, cookie, 'content-type': 'application/json', origin: `http://${HOST}` },
      body: '{}',
    });
    expect(await lift.json()).toEqual({ project: 'bot', tenant: 'web:ann', unfrozen: true });
    expect((await h.run('bot', 'web:ann', 'echo back')).stdout).toBe('back\n');
    expect(h.berth.audit.list({ limit: 10 }).map((e) => e.action)).toContain('tenant.unfreeze');
  });

  it(`live events: a text/event-stream of the state; past ${EVENTS_PER_CALLER} at once per login, 429 BUSY`, async () => {
    await using h = unitHome();
    h.create({ name: 'bot', agent: 'shell' });
    const app = appOf(h);
    const cookie = await cookieOf(app);
    const streams = await Promise.all(
      Array.from({ length: EVENTS_PER_CALLER }, () =>
        app.request(`http://${HOST}/console/api/events`, { headers: { host: HOST, cookie } }),
      ),
    );
    for (const s of streams) expect(s.headers.get('content-type')).toContain('text/event-stream');
    const reader = (streams[0]?.body as ReadableStream<Uint8Array>).getReader();
    const first = new TextDecoder().decode((await reader.read()).value);
    expect(first).toMatch(/^event: state\ndata: \{"at":/);
    const over = await app.request(`http://${HOST}/console/api/events`, { headers: { host: HOST, cookie } });
    expect(over.status).toBe(429);
    expect(await over.json()).toMatchObject({ error: { code: 'BUSY' } });
    await reader.cancel();
    for (const s of streams.slice(1)) await s.body?.cancel();
    // Gone: their places are free again.
    const again = await until(async () => {
      const r = await app.request(`http://${HOST}/console/api/events`, { headers: { host: HOST, cookie } });
      return r.status === 200 ? r : (await r.body?.cancel(), undefined);
    }, 'a place free again');
    await again.body?.cancel();
    expect((await app.request(`http://${HOST}/console/api/events`, { headers: { host: HOST } })).status).toBe(401);
  });
});

describe('what the console stands on', () => {
  it('a stop asked of another process: the process holding the run stops it and removes the request; others leave it; a lapsed one goes', async () => {
    const dir = fs.mkdtempSync(join(os.tmpdir(), 'berth-stops-'));
    try {
      fileStopRequest(dir, 'bot', 'rabc123', 'the operator stopped it');
      fileStopRequest(dir, 'bot', '../evil', 'x'); // not a run id: never filed
      const asked: string[] = [];
      const other = watchStopRequests(dir, () => false);
      const mine = watchStopRequests(dir, (_p, run, reason) => (asked.push(`${run}: ${reason}`), true));
      await until(() => asked.length === 1, 'the stop was taken');
      expect(asked).toEqual(['rabc123: the operator stopped it']);
      await until(() => fs.readdirSync(join(dir, 'stop-requests')).length === 0, 'the request removed');
      mine();
      fileStopRequest(dir, 'bot', 'rold', 'x');
      const file = join(dir, 'stop-requests', 'rold.json');
      const old = JSON.parse(fs.readFileSync(file, 'utf8')) as { at: number };
      fs.writeFileSync(file, JSON.stringify({ ...old, at: old.at - STOP_REQUEST_TTL_MS - 1 }));
      await until(() => !fs.existsSync(file), 'the lapsed request removed');
      other();
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it("Docker's figures as docker stats computes them: memory without the page cache (v2 and v1), CPU of one core", () => {
    const v2 = statsOf('c1', {
      memory_stats: { usage: 300 * 1048576, limit: 512 * 1048576, stats: { inactive_file: 100 * 1048576 } },
      cpu_stats: { cpu_usage: { total_usage: 2_000_000_000 }, system_cpu_usage: 20_000_000_000, online_cpus: 4 },
      precpu_stats: { cpu_usage: { total_usage: 1_000_000_000 }, system_cpu_usage: 16_000_000_000 },
      pids_stats: { current: 7 },
    });
    expect(v2).toEqual({ id: 'c1', memory_bytes: 200 * 1048576, memory_limit_bytes: 512 * 1048576, cpu_percent: 100, pids: 7 });
    expect(statsOf('c2', { memory_stats: { usage: 10, stats: { total_inactive_file: 4 } } })).toEqual({
      id: 'c2',
      memory_bytes: 6,
      memory_limit_bytes: null,
      cpu_percent: 0,
      pids: null,
    });
  });

  it('the live view: figures when the launcher has them, "not available" with why when not; a bridge counts its failures of the last hour', async () => {
    const containers = async () => [{ id: 'c1', project: 'bot', workspace: 'w', run: 'r1', state: 'running' }];
    const withStats = await createLiveView({
      containers,
      stats: async (ids) => ids.map((id) => ({ id, memory_bytes: 5, memory_limit_bytes: 10, cpu_percent: 1.5, pids: 2 })),
    })();
    expect(withStats).toMatchObject({
      stats: 'engine',
      stats_missing: null,
      containers: [{ id: 'c1', memory_bytes: 5, cpu_percent: 1.5 }],
    });
    const without = await createLiveView({ containers, statsMissing: 'the kubernetes launcher gives no container figures' })();
    expect(without).toMatchObject({ stats: null, stats_missing: 'the kubernetes launcher gives no container figures' });
    expect(without.containers[0]?.memory_bytes).toBeNull();
    const now = Date.parse('2026-11-28T10:00:00Z');
    const health = bridgeHealth(
      {
        name: 'telegram',
        connected: () => true,
        inbox: {
          all: () => [
            { at: '2026-11-28T08:00:00Z', phase: 'failed' },
            { at: '2026-11-28T09:30:00Z', phase: 'failed' },
            { at: '2026-11-28T09:59:00Z', phase: 'received' },
          ],
        },
      },
      now,
    );
    expect(health).toEqual({ name: 'telegram', connected: true, last_event: '2026-11-28T09:59:00Z', errors_last_hour: 1, waiting: 1 });
  });
});

describe("a stranger's first message", () => {
  it('is shown with their key while they wait (cut at 500 characters); none when nothing of theirs was kept', () => {
    const stateDir = fs.mkdtempSync(join(os.tmpdir(), 'berth-strangers-'));
    try {
      const config = BerthConfigSchema.parse({ bridges: { telegram: { api_url: 'http://127.0.0.1:9', token: '1:x' } } });
      const dir = bridgeDir(stateDir);
      const state = openBridgeState(dir, 'telegram');
      state.noteStranger('telegram:42', 'Sam', new Date(), 3600_000);
      state.noteStranger('telegram:43', 'Kim', new Date(), 3600_000);
      const inbox = openInbox(dir, 'telegram');
      inbox.receive({
        id: 'm1',
        chat: '42',
        sender: 'telegram:42',
        tenant: 'telegram:42',
        text: `hello, can I use the bot? ${'x'.repeat(600)}`,
      });
      inbox.mark('m1', 'held');
      const pending = pendingSenders(config, stateDir);
      expect(pending.map((p) => [p.sender, p.first_message?.length, p.first_message?.slice(0, 25)])).toEqual([
        ['telegram:42', FIRST_MESSAGE_CHARS, 'hello, can I use the bot?'],
        ['telegram:43', undefined, undefined],
      ]);
    } finally {
      fs.rmSync(stateDir, { recursive: true, force: true });
    }
  });
});
