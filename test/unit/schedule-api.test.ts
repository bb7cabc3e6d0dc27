import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { appDepsFrom, createApp } from '../../src/api/app.js';
import { unitHome, type TestHome } from '../helpers.js';

/** The schedules' HTTP API in memory (app.request, no port), and its place in /openapi.json. */
const TOKEN = 'schedule-api-test-token-0123456789';
let h: TestHome;
let app: ReturnType<typeof createApp>;
beforeAll(() => {
  h = unitHome();
  h.create({ name: 'api' });
  app = createApp(appDepsFrom(h.berth, { token: TOKEN, logger: pino({ level: 'silent' }) }));
});
afterAll(async () => {
  await h?.[Symbol.asyncDispose]();
});
const call = async (method: string, path: string, body?: unknown) => {
  const res = await app.request(path, {
    method,
    headers: { authorization: `Bearer ${TOKEN}`, ...(body ? { 'content-type': 'application/json' } : {}) },
    ...(body ? { body: JSON.stringify(body) } : {}),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
};

describe('schedules API', () => {
  it('adds, lists (per project, per tenant, all) and cancels', async () => {
    const made = await call('POST', '/api/projects/api/schedules', {
      user: 'signal:+1',
      every: 'mon,fri 18:30 Europe/Berlin',
      task: 'weekly report',
      chat: { channel: 'signal', chat: '+1' },
    });
    expect(made.status).toBe(201);
    expect(made.body).toMatchObject({
      project: 'api',
      tenant: 'signal:+1',
      description: 'every Mon and Fri at 18:30 Europe/Berlin',
      chat: { channel: 'signal', chat: '+1', sender: 'signal:+1' },
      created_by: 'operator',
    });
    const id = made.body.id as string;
    expect((await call('GET', '/api/projects/api/schedules')).body.schedules).toEqual([made.body]);
    expect((await call('GET', '/api/projects/api/schedules?user=signal:+2')).body.schedules).toEqual([]);
    expect((await call('GET', '/api/schedules')).body.schedules).toHaveLength(1);
    expect(await call('DELETE', `/api/schedules/${id}`)).toMatchObject({ status: 200, body: { id } });
    expect(await call('DELETE', `/api/schedules/${id}`)).toMatchObject({ status: 404, body: { error: { code: 'NOT_FOUND' } } });
  });

  it('bad input: 400 with the field at fault; an unknown project 404; stopping a run not going on 404', async () => {
    const both = await call('POST', '/api/projects/api/schedules', { user: 'u', every: '2h', at: '+1h', task: 'x' });
    expect(both.status).toBe(400);
    expect(JSON.stringify(both.body)).toContain('give exactly one of every or at');
    const tooOften = await call('POST', '/api/projects/api/schedules', { user: 'u', every: '1m', task: 'x' });
    expect(tooOften).toMatchObject({ status: 400, body: { error: { code: 'CONFIG_INVALID', issues: [{ field: 'every' }] } } });
    expect((await call('GET', '/api/projects/nope/schedules')).status).toBe(404);
    expect(await call('POST', '/api/projects/api/runs/r123/stop')).toMatchObject({ status: 404, body: { error: { code: 'NOT_FOUND' } } });
  });

  it('is in the OpenAPI document', async () => {
    const doc = await call('GET', '/openapi.json');
    const paths = doc.body.paths as Record<string, Record<string, unknown>>;
    expect(Object.keys(paths['/api/projects/{name}/schedules'] ?? {})).toEqual(['post', 'get']);
    expect(Object.keys(paths['/api/schedules/{id}'] ?? {})).toEqual(['delete']);
    expect(paths['/api/projects/{name}/runs/{run}/stop']).toBeDefined();
  });
});
