import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { appDepsFrom, createApp } from '../../src/api/app.js';
import { unitHome, type TestHome } from '../helpers.js';

/**
 * The HTTP API in memory: createApp on a berth with the in-memory launcher, called with
 * app.request (no port, no engine). Runs, the admin token, and refusals that name the field at fault.
 */
const TOKEN = 'api-app-unit-admin-token-0123456789';
const auth = { authorization: `Bearer ${TOKEN}` };
const json = { ...auth, 'content-type': 'application/json' };
const appOf = (h: TestHome) => createApp(appDepsFrom(h.berth, { token: TOKEN, logger: pino({ level: 'silent' }) }));

describe('the HTTP app (app.request, in-memory launcher)', () => {
  it('POST /api/projects/:name/runs runs the agent and answers with the run; GET .../runs lists it', async () => {
    await using h = unitHome();
    h.create({ name: 'bot', agent: 'shell' });
    const app = appOf(h);
    const res = await app.request('/api/projects/bot/runs', {
      method: 'POST',
      headers: json,
      body: JSON.stringify({ user: 'web:ann', message: 'echo over http' }),
    });
    expect(res.status).toBe(200);
    const run = (await res.json()) as { run: string; stdout: string; exit_code: number; project: string };
    expect(run).toMatchObject({ project: 'bot', exit_code: 0, stdout: 'over http\n', timed_out: false, truncated: false });
    const listed = await app.request('/api/projects/bot/runs?user=web:ann', { headers: auth });
    expect(listed.status).toBe(200);
    expect(((await listed.json()) as { runs: Array<{ run: string }> }).runs.map((r) => r.run)).toEqual([run.run]);
  });

  it('without the admin token (or with a wrong one) every API route is 401 UNAUTHORIZED, naming the Bearer scheme; nothing runs', async () => {
    await using h = unitHome();
    h.create({ name: 'bot', agent: 'shell' });
    const app = appOf(h);
    for (const headers of [{}, { authorization: 'Bearer not-the-token' }, { authorization: TOKEN }]) {
      const res = await app.request('/api/projects/bot/runs', {
        method: 'POST',
        headers: { ...headers, 'content-type': 'application/json' },
        body: JSON.stringify({ user: 'web:ann', message: 'echo no' }),
      });
      expect(res.status).toBe(401);
      expect(res.headers.get('www-authenticate')).toBe('Bearer realm="berth"');
      expect(await res.json()).toMatchObject({ error: { code: 'UNAUTHORIZED', message: 'missing or wrong admin token' } });
    }
    expect(h.berth.admin.listRuns('bot', { limit: 10 }).runs).toEqual([]);
    expect((await app.request('/healthz')).status).toBe(200); // the open path stays open
  });

  it('a body that fails the schema is 400 CONFIG_INVALID with the field at fault; an unknown project is 404', async () => {
    await using h = unitHome();
    h.create({ name: 'bot', agent: 'shell' });
    const app = appOf(h);
    const empty = await app.request('/api/projects/bot/runs', {
      method: 'POST',
      headers: json,
      body: JSON.stringify({ user: 'web:ann', message: '' }),
    });
    expect(empty.status).toBe(400);
    expect(await empty.json()).toMatchObject({
      error: { code: 'CONFIG_INVALID', issues: [{ field: 'message', reason: 'must not be empty' }] },
    });
    const extra = await app.request('/api/projects/bot/runs', {
      method: 'POST',
      headers: json,
      body: JSON.stringify({ user: 'web:ann', message: 'echo x', sudo: true }),
    });
    expect(extra.status).toBe(400);
    expect(await extra.json()).toMatchObject({ error: { code: 'CONFIG_INVALID', issues: [expect.objectContaining({ field: 'sudo' })] } });
    const none = await app.request('/api/projects/nope/runs', {
      method: 'POST',
      headers: json,
      body: JSON.stringify({ user: 'web:ann', message: 'echo x' }),
    });
    expect(none.status).toBe(404);
    expect(await none.json()).toMatchObject({ error: { code: 'PROJECT_NOT_FOUND' } });
    expect(h.berth.admin.listRuns('bot', { limit: 10 }).runs).toEqual([]);
  });

  it('POST /api/projects creates a project the store then has; a bad name is 400 naming "name"', async () => {
    await using h = unitHome();
    const app = appOf(h);
    const made = await app.request('/api/projects', {
      method: 'POST',
      headers: json,
      body: JSON.stringify({ name: 'made', agent: 'shell' }),
    });
    expect(made.status).toBe(201);
    expect(h.berth.store.get('made').metadata.agent).toBe('shell');
    const bad = await app.request('/api/projects', { method: 'POST', headers: json, body: JSON.stringify({ name: '../evil' }) });
    expect(bad.status).toBe(400);
    expect(await bad.json()).toMatchObject({ error: { code: 'CONFIG_INVALID', issues: [expect.objectContaining({ field: 'name' })] } });
  });

  it('a "%" in the path that starts no escape is refused naming the path, not passed on as a tenant key; %25 is a "%"', async () => {
    await using h = unitHome();
    h.create({ name: 'bot', agent: 'shell' });
    const app = appOf(h);
    const bad = await app.request('/api/projects/bot/tenants/%', { headers: auth });
    expect(bad.status).toBe(400);
    expect(await bad.json()).toMatchObject({ error: { code: 'CONFIG_INVALID', issues: [{ field: 'path' }] } });
    expect((await app.request('/api/projects/bot/tenants/%ff%fe', { headers: auth })).status).toBe(400); // not UTF-8
    expect((await app.request('/api/projects/bot/tenants/web%3Aa%25b', { headers: auth })).status).toBe(200);
  });
});
