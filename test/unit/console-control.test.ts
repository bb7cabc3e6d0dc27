import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { appDepsFrom, createApp } from '../../src/api/app.js';
import { chatFailure } from '../../src/bridges/chat-words.js';
import { unitHome, type TestHome } from '../helpers.js';
import { until } from '../helpers/until.js';
import { runCli } from '../helpers/cli-main.js';

/**
 * The operator's actions and views as the API and the CLI have them (issue 43: the console as a
 * control plane), in memory: pause and resume a project (every new run refused with
 * PROJECT_PAUSED, in words in a chat), stop a run, set a session's level, open a run, a session,
 * a tenant; each refusal with its stable code and the field at fault, each action audited.
 */
const TOKEN = 'console-control-unit-admin-token-0123';
const auth = { authorization: `Bearer ${TOKEN}` };
const json = { ...auth, 'content-type': 'application/json' };
const appOf = (h: TestHome) => createApp(appDepsFrom(h.berth, { token: TOKEN, logger: pino({ level: 'silent' }) }));
const post = (app: ReturnType<typeof appOf>, path: string, body?: unknown) =>
  app.request(path, { method: 'POST', headers: json, body: body === undefined ? undefined : JSON.stringify(body) });
const put = (app: ReturnType<typeof appOf>, path: string, body: unknown) =>
  app.request(path, { method: 'PUT', headers: json, body: JSON.stringify(body) });
const run = (app: ReturnType<typeof appOf>, message: string, user = 'web:ann') => post(app, '/api/projects/bot/runs', { user, message });

describe('pause and resume a project', () => {
  it('paused: every new run is 423 PROJECT_PAUSED (API), nothing runs; a chat gets words; resumed: runs again; both audited', async () => {
    await using h = unitHome();
    h.create({ name: 'bot', agent: 'shell' });
    const app = appOf(h);
    const paused = await post(app, '/api/projects/bot/pause', { reason: 'maintenance until 11:00' });
    expect(paused.status).toBe(200);
    expect(await paused.json()).toMatchObject({ project: 'bot', paused: true, by: 'operator', reason: 'maintenance until 11:00' });
    const refused = await run(app, 'echo hi');
    expect(refused.status).toBe(423);
    const body = (await refused.json()) as { error: { code: string; message: string } };
    expect(body.error).toMatchObject({ code: 'PROJECT_PAUSED' });
    expect(body.error.message).toContain('maintenance until 11:00');
    expect(h.berth.admin.listRuns('bot', { limit: 10 }).runs).toEqual([]);
    expect(h.berth.admin.openRuns('bot')).toEqual([]); // refused before it was accepted
    // The project's view says so, and the runner refuses a session's shell tool the same.
    expect(((await (await app.request('/api/projects/bot', { headers: auth })).json()) as { paused?: unknown }).paused).toMatchObject({
      reason: 'maintenance until 11:00',
    });
    await expect(h.run('bot', 'telegram:42', 'echo direct')).rejects.toMatchObject({ code: 'PROJECT_PAUSED' });
    // What a person in a chat reads.
    const words = chatFailure('echo hi', await h.run('bot', 'telegram:42', 'echo x').catch((e: unknown) => e));
    expect(words).toContain('the operator has paused this agent for now. Send it again once they resume it.');
    expect(words).toContain('(for the operator: PROJECT_PAUSED:');

    const resumed = await post(app, '/api/projects/bot/resume');
    expect(await resumed.json()).toMatchObject({ project: 'bot', paused: false, was_paused: true });
    expect((await run(app, 'echo again')).status).toBe(200);
    expect(await (await post(app, '/api/projects/bot/resume')).json()).toMatchObject({ was_paused: false });
    const audit = h.berth.audit.list({ limit: 20 }).map((e) => [e.action, e.outcome]);
    expect(audit).toContainEqual(['project.pause', 'ok']);
    expect(audit).toContainEqual(['project.resume', 'ok']);
  });

  it('refusals: unknown project 404 PROJECT_NOT_FOUND, an over-long reason 400 naming "reason", unknown fields 400', async () => {
    await using h = unitHome();
    h.create({ name: 'bot', agent: 'shell' });
    const app = appOf(h);
    expect(await (await post(app, '/api/projects/nope/pause')).json()).toMatchObject({ error: { code: 'PROJECT_NOT_FOUND' } });
    const long = await post(app, '/api/projects/bot/pause', { reason: 'x'.repeat(501) });
    expect(long.status).toBe(400);
    expect(await long.json()).toMatchObject({ error: { code: 'CONFIG_INVALID', issues: [expect.objectContaining({ field: 'reason' })] } });
    expect((await post(app, '/api/projects/bot/pause', { why: 'x' })).status).toBe(400);
    expect((await run(app, 'echo still open')).status).toBe(200);
  });
});

describe('stop a run', () => {
  it('a run going on stops at once: its record says it was stopped; unknown or ended runs are 404 NOT_FOUND naming "run"', async () => {
    await using h = unitHome();
    h.create({ name: 'bot', agent: 'shell' });
    const app = appOf(h);
    const going = h.run('bot', 'web:ann', 'sleep 60000');
    const open = await until(() => h.berth.admin.openRuns('bot').find((r) => r.phase === 'started'), 'the run started');
    const stopped = await post(app, `/api/projects/bot/runs/${open.run}/stop`);
    expect(await stopped.json()).toEqual({ run: open.run, stopped: true, here: true });
    const outcome = await going;
    expect(outcome.warnings).toContainEqual(expect.stringMatching(/^stopped: the operator stopped it/));
    expect(h.berth.admin.listRuns('bot', { limit: 1 }).runs[0]?.warnings).toContainEqual(expect.stringMatching(/^stopped: /));
    const again = await post(app, `/api/projects/bot/runs/${open.run}/stop`);
    expect(again.status).toBe(404);
    expect(await again.json()).toMatchObject({ error: { code: 'NOT_FOUND', issues: [{ field: 'run' }] } });
    expect((await post(app, '/api/projects/bot/runs/rnope/stop')).status).toBe(404);
    expect(h.berth.audit.list({ limit: 10 }).map((e) => [e.action, e.outcome])).toContainEqual(['run.stop', 'ok']);
  });
});

describe('end a session', () => {
  it('its run going on is stopped, its tokens revoked; the session and its history stay (audited session.end); unknown: 404', async () => {
    await using h = unitHome();
    h.create({ name: 'bot', agent: 'shell' });
    const app = appOf(h);
    const first = await h.run('bot', 'web:ann', 'echo before');
    h.berth.admin.mintSessionToken('bot', first.sessionId);
    const going = h.berth.runner.run({ project: 'bot', tenantKey: 'web:ann', sessionId: first.sessionId, message: 'sleep 60000' });
    await until(() => h.berth.admin.openRuns('bot').find((r) => r.phase === 'started'), 'the run started');
    const ended = await post(app, `/api/projects/bot/sessions/${first.sessionId}/end`);
    expect(await ended.json()).toEqual({ session: first.sessionId, runs_stopped: 1, revoked: 1 });
    expect((await going).warnings).toContain('stopped: the operator ended its session');
    expect(h.berth.admin.getSession('bot', first.sessionId).runs).toBe(2);
    expect(h.berth.audit.list({ limit: 10 }).map((e) => [e.action, e.outcome])).toContainEqual(['session.end', 'ok']);
    const none = await post(app, '/api/projects/bot/sessions/t-nope/end');
    expect([none.status, ((await none.json()) as { error: { code: string } }).error.code]).toEqual([404, 'SESSION_NOT_FOUND']);
  });
});

describe("a session's level", () => {
  it('PUT …/level sets it; a level that is none is 400 naming "level"; an unknown session 404 SESSION_NOT_FOUND', async () => {
    await using h = unitHome();
    h.create({ name: 'bot', agent: 'shell' });
    const app = appOf(h);
    const o = await h.run('bot', 'web:ann', 'echo hi');
    const set = await put(app, `/api/projects/bot/sessions/${o.sessionId}/level`, { level: 'low' });
    expect(await set.json()).toMatchObject({ settings: { permission_level: 'low' } });
    expect(h.berth.admin.getSession('bot', o.sessionId).settings.permission_level).toBe('low');
    const bad = await put(app, `/api/projects/bot/sessions/${o.sessionId}/level`, { level: 'root' });
    expect(bad.status).toBe(400);
    expect(await bad.json()).toMatchObject({ error: { code: 'CONFIG_INVALID', issues: [expect.objectContaining({ field: 'level' })] } });
    const none = await put(app, '/api/projects/bot/sessions/t-nope/level', { level: 'low' });
    expect(none.status).toBe(404);
    expect(await none.json()).toMatchObject({ error: { code: 'SESSION_NOT_FOUND' } });
  });
});

describe('the run, session and tenant views', () => {
  it('a run names who (tenant, channel, session), what (message, answer, stderr), how; its session and tenant list it; unknown is 404', async () => {
    await using h = unitHome();
    h.create({ name: 'bot', agent: 'shell' });
    const app = appOf(h);
    const ran = (await (await run(app, 'echo over http')).json()) as { run: string; session: string };
    const d = (await (await app.request(`/api/projects/bot/runs/${ran.run}`, { headers: auth })).json()) as Record<string, unknown>;
    expect(d).toMatchObject({
      project: 'bot',
      run: ran.run,
      state: 'ended',
      tenant: 'web:ann',
      channel: 'web',
      session: { id: ran.session, level: 'medium' },
      start: 'cold',
      record: { message: 'echo over http', answer: 'over http\n', tenant: 'web:ann', exit_code: 0 },
      egress: [],
      secrets: { granted: [], used: [] },
      files_out: [],
    });
    expect((d.audit as Array<{ kind: string; target: string }>).map((e) => [e.kind, e.target])).toContainEqual(['run_receipt', ran.run]);
    const s = (await (await app.request(`/api/projects/bot/sessions/${ran.session}`, { headers: auth })).json()) as {
      session: { tenant_key: string; channel: string };
      runs: Array<{ run: string; message: string; answer: string; channel: string }>;
      transcript: unknown[];
    };
    expect(s.session).toMatchObject({ tenant_key: 'web:ann', channel: 'web' });
    expect(s.runs).toEqual([expect.objectContaining({ run: ran.run, message: 'echo over http', answer: 'over http\n', channel: 'web' })]);
    expect(s.transcript).toEqual([]);
    const t = (await (await app.request(`/api/projects/bot/tenants/${encodeURIComponent('web:ann')}`, { headers: auth })).json()) as {
      sessions: Array<{ id: string }>;
      today: { runs: number };
      pause: { paused: boolean };
    };
    expect(t).toMatchObject({ tenant: 'web:ann', channel: 'web', today: { runs: 1 }, pause: { paused: false } });
    expect(t.sessions.map((x) => x.id)).toEqual([ran.session]);
    h.berth.schedules.addFor('bot', { user: 'web:ann', every: '1h', task: 'echo hourly' });
    const withSchedule = (await (
      await app.request(`/api/projects/bot/tenants/${encodeURIComponent('web:ann')}`, { headers: auth })
    ).json()) as {
      schedules: Array<{ task: string; runs: number }>;
    };
    expect(withSchedule.schedules).toEqual([expect.objectContaining({ task: 'echo hourly', runs: 0 })]);
    const none = await app.request('/api/projects/bot/runs/rnothere', { headers: auth });
    expect(none.status).toBe(404);
    expect(await none.json()).toMatchObject({ error: { code: 'NOT_FOUND', issues: [{ field: 'run' }] } });
    expect((await app.request('/api/projects/bot/sessions/t-nope', { headers: auth })).status).toBe(404);
  });

  it('a record keeps the message and the answer bounded, and the end of stderr; a key without a channel is "api"', async () => {
    await using h = unitHome();
    h.create({ name: 'bot', agent: 'shell' });
    const o = await h.run('bot', 'ann', `echo ${'a'.repeat(5000)}`);
    const r = o.record;
    expect(r.message?.length).toBe(2001);
    expect(r.message?.endsWith('…')).toBe(true);
    expect(r.answer?.length).toBe(4001);
    expect(h.berth.admin.runDetail('bot', o.runId)).toMatchObject({ tenant: 'ann', channel: 'api' });
  });
});

describe('the OpenAPI document names every action', () => {
  it('operationIds: stopRun, pauseProject, resumeProject, setSessionLevel, deleteSession, revokeChatLogins, approveStranger, denyStranger, getRun, getSession, getTenant', async () => {
    await using h = unitHome();
    const doc = (await (await appOf(h).request('/openapi.json', { headers: auth })).json()) as {
      paths: Record<string, Record<string, { operationId: string }>>;
    };
    const ids = Object.values(doc.paths).flatMap((ops) => Object.values(ops).map((o) => o.operationId));
    for (const id of [
      'stopRun',
      'pauseProject',
      'resumeProject',
      'setSessionLevel',
      'endSession',
      'deleteSession',
      'revokeChatLogins',
      'listStrangers',
      'approveStranger',
      'denyStranger',
      'getRun',
      'getSession',
      'getTenant',
    ])
      expect(ids).toContain(id);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('strangers: none waits without a bridge with pairing; answering one is 404 NOT_FOUND; a key that is none is 400 naming "sender"', async () => {
    await using h = unitHome();
    const app = appOf(h);
    expect(await (await app.request('/api/strangers', { headers: auth })).json()).toEqual({ strangers: [] });
    const none = await post(app, `/api/strangers/${encodeURIComponent('telegram:42')}/approve`);
    expect([none.status, ((await none.json()) as { error: { code: string } }).error.code]).toEqual([404, 'NOT_FOUND']);
    const bad = await post(app, '/api/strangers/nobody/deny');
    expect(bad.status).toBe(400);
    expect(await bad.json()).toMatchObject({ error: { code: 'CONFIG_INVALID', issues: [expect.objectContaining({ field: 'sender' })] } });
  });
});

describe('the CLI', () => {
  it('project pause|resume, runs stop (refused for an unknown run with NOT_FOUND, exit 23), runs show; a paused project refuses berth run (exit 34)', async () => {
    await using h = unitHome();
    h.create({ name: 'bot', agent: 'shell' });
    const o = await h.run('bot', 'web:ann', 'echo shown');
    const home = ['--home', h.home];
    const shown = await runCli([...home, 'runs', 'show', 'bot', o.runId]);
    expect(shown.code).toBe(0);
    expect(shown.stdout).toContain('web:ann via web');
    expect(shown.stdout).toContain('--- answer\nshown\n');
    const paused = await runCli([...home, 'project', 'pause', 'bot', '--reason', 'upgrade']);
    expect([paused.code, paused.stdout]).toEqual([
      0,
      expect.stringMatching(/^paused bot \(since .+\): new runs are refused until "berth project resume bot"\n$/),
    ]);
    const refused = await runCli([...home, 'run', 'bot', '--user', 'web:ann', '--', 'echo no']);
    expect(refused.code).toBe(34);
    expect(refused.stderr).toMatch(/^PROJECT_PAUSED: project bot is paused since .+: upgrade/);
    expect(await runCli([...home, 'project', 'resume', 'bot'])).toMatchObject({ code: 0, stdout: 'resumed bot\n' });
    const stop = await runCli([...home, 'runs', 'stop', 'bot', 'rnothere']);
    expect(stop.code).toBe(23);
    expect(stop.stderr).toMatch(/^NOT_FOUND: no run rnothere is going on in bot/);
    const tenant = await runCli([...home, 'tenant', 'show', 'bot', 'web:ann']);
    expect(tenant.stdout).toContain('today: 1 run(s)');
  });
});
