import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pino } from 'pino';
import { appDepsFrom, createApp } from '../../src/api/app.js';
import { testHome, type TestHome } from '../helpers.js';
import { until } from '../helpers/until.js';

const TOKEN = 'test-token-0123456789abcdef';
let h: TestHome;
let app: ReturnType<typeof createApp>;

beforeAll(() => {
  h = testHome();
  app = createApp(appDepsFrom(h.berth, { token: TOKEN, logger: pino({ level: 'silent' }) }));
});
afterAll(async () => {
  await h[Symbol.asyncDispose]();
});

function call(method: string, path: string, body?: unknown, token: string | null = TOKEN) {
  const headers: Record<string, string> = {};
  if (token) headers.authorization = `Bearer ${token}`;
  if (body !== undefined) headers['content-type'] = 'application/json';
  return app.request(path, {
    method,
    headers,
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
  });
}

async function json(method: string, path: string, body?: unknown, token: string | null = TOKEN) {
  const res = await call(method, path, body, token);
  return { status: res.status, body: (await res.json()) as Record<string, any>, headers: res.headers };
}

describe('HTTP admin API (in memory, real store and engine)', () => {
  it('healthz needs no token; everything else does', async () => {
    const health = await json('GET', '/healthz', undefined, null);
    expect(health).toMatchObject({ status: 200, body: { ok: true, engine: { reachable: true }, version: '0.1.0' } });
    for (const path of ['/api/projects', '/openapi.json', '/mcp']) {
      const res = await call('GET', path, undefined, null);
      expect(res.status, path).toBe(401);
      expect(((await res.json()) as any).error.code).toBe('UNAUTHORIZED');
    }
    // A browser cannot send the header: /docs answers with its sign-in form (test/integration/docs-browser.test.ts).
    const docs = await call('GET', '/docs', undefined, null);
    expect([docs.status, await docs.text()]).toEqual([401, expect.stringContaining('<form method="post" action="/docs/login">')]);
    expect((await call('GET', '/api/projects', undefined, 'wrong-token')).status).toBe(401);
    expect((await call('GET', '/api/projects', undefined, `${TOKEN}x`)).status).toBe(401);
  });

  it('creates (201), refuses duplicates (409) and bad bodies (400 with every field at fault)', async () => {
    const created = await json('POST', '/api/projects', { name: 'web', workspace_isolation: true, protected_paths: ['AGENTS.md'] });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ name: 'web', workspace_isolation: true, protected_paths: ['AGENTS.md'], workspace_count: 0 });
    expect(created.body.protection.entries).toEqual([{ path: 'AGENTS.md', kind: 'file', source: 'project', skipped: [] }]);
    expect(await json('POST', '/api/projects', { name: 'web' })).toMatchObject({
      status: 409,
      body: { error: { code: 'PROJECT_EXISTS' } },
    });
    const bad = await json('POST', '/api/projects', { name: 'Web!', isolation: true, protected_paths: ['/etc'], limits: { pids: 1 } });
    expect(bad.status).toBe(400);
    expect(bad.body.error.code).toBe('CONFIG_INVALID');
    expect(bad.body.error.issues.map((i: { field: string }) => i.field).sort()).toEqual([
      'isolation',
      'limits.pids',
      'name',
      'protected_paths.0',
    ]);
    expect(await json('POST', '/api/projects', '{not json')).toMatchObject({ status: 400, body: { error: { code: 'CONFIG_INVALID' } } });
  });

  it('gets, lists, patches; 404 for unknown projects', async () => {
    expect(await json('GET', '/api/projects/web')).toMatchObject({ status: 200, body: { name: 'web' } });
    expect((await json('GET', '/api/projects')).body.projects.map((p: { name: string }) => p.name)).toContain('web');
    expect(await json('GET', '/api/projects/nope')).toMatchObject({ status: 404, body: { error: { code: 'PROJECT_NOT_FOUND' } } });
    expect(await json('GET', '/api/projects/..%2F..%2Fetc')).toMatchObject({ status: 400, body: { error: { code: 'CONFIG_INVALID' } } });
    const patched = await json('PATCH', '/api/projects/web', {
      protected_paths: ['AGENTS.md', '.factory/'],
      limits: { timeout_seconds: 30 },
    });
    expect(patched.status).toBe(200);
    expect(patched.body).toMatchObject({ protected_paths: ['AGENTS.md', '.factory/'], limits: { timeout_seconds: 30, memory_mb: 512 } });
    expect(await json('PATCH', '/api/projects/web', { name: 'other' })).toMatchObject({
      status: 400,
      body: { error: { issues: [{ field: 'name', reason: 'unknown field' }] } },
    });
    expect(await json('PATCH', '/api/projects/nope', { workspace_isolation: true })).toMatchObject({ status: 404 });
  });

  it('runs the agent for a tenant, lists workspaces and run records', async () => {
    const run = await json('POST', '/api/projects/web/runs', { user: 'web:alice', message: 'echo hi > a.txt; cat a.txt; exit 4' });
    expect(run.status).toBe(200);
    expect(run.body).toMatchObject({ project: 'web', exit_code: 4, stdout: 'hi\n', truncated: false, timed_out: false });
    await json('POST', '/api/projects/web/runs', { user: 'web:bob', message: 'true' });
    const ws = await json('GET', '/api/projects/web/workspaces');
    expect(ws.body.workspaces).toEqual([
      { id: run.body.workspace, tenant_key: 'web:alice', created_at: expect.any(String), size_bytes: expect.any(Number) },
      { id: expect.any(String), tenant_key: 'web:bob', created_at: expect.any(String), size_bytes: expect.any(Number) },
    ]);
    expect(ws.body.workspaces[0].size_bytes).toBeGreaterThan(3);
    const runs = await json('GET', `/api/projects/web/runs?user=${encodeURIComponent('web:alice')}`);
    expect(runs.body.runs).toEqual([expect.objectContaining({ run: run.body.run, workspace: run.body.workspace, exit_code: 4 })]);
    expect((await json('GET', '/api/projects/web/runs')).body).toMatchObject({ runs: [{}, {}], corrupt_lines: 0 });
    const fs = await import('node:fs');
    fs.appendFileSync(`${h.home}/projects/web/sessions/runs.jsonl`, '{"run": "half-writ');
    expect((await json('GET', '/api/projects/web/runs')).body).toMatchObject({ runs: [{}, {}], corrupt_lines: 1 });
    expect(await json('POST', '/api/projects/web/runs', { user: '', message: 'x' })).toMatchObject({
      status: 400,
      body: { error: { issues: [{ field: 'user' }] } },
    });
    expect(await json('POST', '/api/projects/nope/runs', { user: 'a', message: 'x' })).toMatchObject({ status: 404 });
  });

  it('serves OpenAPI generated from the schemas and a readable reference page', async () => {
    const doc = await json('GET', '/openapi.json');
    expect(doc.status).toBe(200);
    expect(Object.keys(doc.body.paths).sort()).toEqual([
      '/api/audit',
      '/api/projects',
      '/api/projects/{name}',
      '/api/projects/{name}/access',
      '/api/projects/{name}/chat-links',
      '/api/projects/{name}/grants',
      '/api/projects/{name}/grants/{area}',
      '/api/projects/{name}/pause',
      '/api/projects/{name}/private-workspace',
      '/api/projects/{name}/resume',
      '/api/projects/{name}/runs',
      '/api/projects/{name}/runs/{run}',
      '/api/projects/{name}/runs/{run}/files/{file}',
      '/api/projects/{name}/runs/{run}/stop',
      '/api/projects/{name}/schedules',
      '/api/projects/{name}/sessions',
      '/api/projects/{name}/sessions/{sessionId}',
      '/api/projects/{name}/sessions/{sessionId}/checkpoints',
      '/api/projects/{name}/sessions/{sessionId}/end',
      '/api/projects/{name}/sessions/{sessionId}/fork',
      '/api/projects/{name}/sessions/{sessionId}/level',
      '/api/projects/{name}/sessions/{sessionId}/restore',
      '/api/projects/{name}/sessions/{sessionId}/settings',
      '/api/projects/{name}/sessions/{sessionId}/token',
      '/api/projects/{name}/shared/{area}',
      '/api/projects/{name}/tenants/{tenant}',
      '/api/projects/{name}/tenants/{tenant}/export',
      '/api/projects/{name}/tenants/{tenant}/forget',
      '/api/projects/{name}/tenants/{tenant}/unfreeze',
      '/api/projects/{name}/workflows',
      '/api/projects/{name}/workflows/{workflow}/runs',
      '/api/projects/{name}/workspaces',
      '/api/projects/{name}/workspaces/{id}/profile',
      '/api/schedules',
      '/api/schedules/{id}',
      '/api/strangers',
      '/api/strangers/{sender}/approve',
      '/api/strangers/{sender}/deny',
      '/api/tenants/frozen',
      '/healthz',
      '/metrics',
    ]);
    const createSchema = doc.body.paths['/api/projects'].post.requestBody.content['application/json'].schema;
    expect(createSchema.properties.workspace_isolation).toMatchObject({ type: 'boolean', default: false });
    expect(createSchema.additionalProperties).toBe(false);
    const page = await call('GET', '/docs');
    expect(page.headers.get('content-type')).toContain('text/html');
    const html = await page.text();
    expect(html).toContain('/api/projects/{name}/runs');
    expect(html).toContain('workspace_isolation');
  });

  it('echoes a request id', async () => {
    const res = await call('GET', '/healthz', undefined, null);
    expect(res.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
    const mine = await app.request('/healthz', { headers: { 'x-request-id': 'abc-123' } });
    expect(mine.headers.get('x-request-id')).toBe('abc-123');
  });

  it('delete needs ?confirm=<name>, stops containers and moves the project to the trash', async () => {
    expect(await json('DELETE', '/api/projects/web')).toMatchObject({ status: 400, body: { error: { issues: [{ field: 'confirm' }] } } });
    const del = await json('DELETE', '/api/projects/web?confirm=web');
    expect(del).toMatchObject({ status: 200, body: { name: 'web', containers_removed: 0 } });
    expect(del.body.trashed_to).toContain('/.berth/trash/web-');
    expect(await json('GET', '/api/projects/web')).toMatchObject({ status: 404 });
    const fs = await import('node:fs');
    expect(fs.readdirSync(`${del.body.trashed_to}/project/workspaces`)).toHaveLength(2);
    // The name is free again.
    expect((await json('POST', '/api/projects', { name: 'web' })).status).toBe(201);
  });
});

describe('correctness under concurrency', () => {
  it('two concurrent creates of one name: exactly one 201, the other 409', async () => {
    const results = await Promise.all([1, 2, 3, 4].map(() => call('POST', '/api/projects', { name: 'race' })));
    expect(results.map((r) => r.status).sort()).toEqual([201, 409, 409, 409]);
  });

  it('concurrent PATCHes never leave a corrupt or half-written metadata.json', async () => {
    const patches = Array.from({ length: 20 }, (_, i) =>
      call('PATCH', '/api/projects/race', { limits: { pids: 100 + i }, protected_paths: i % 2 ? ['AGENTS.md'] : [] }),
    );
    expect((await Promise.all(patches)).map((r) => r.status)).toEqual(Array(20).fill(200));
    const fs = await import('node:fs');
    const text = fs.readFileSync(`${h.home}/projects/race/metadata.json`, 'utf8');
    const meta = JSON.parse(text);
    expect(meta.limits.pids).toBeGreaterThanOrEqual(100);
    expect(meta.protected_paths.length === 0 || meta.protected_paths[0] === 'AGENTS.md').toBe(true);
    expect(fs.readdirSync(`${h.home}/projects/race`).filter((n) => n.includes('.tmp-'))).toEqual([]);
  });

  it('a settings change applies to the next run; isolation switched on retires a shared run in flight', async () => {
    const before = new Set((await h.berth.runner.listContainers('race')).map((c) => c.id));
    // Long enough that only the switch ends it: the run is in flight once its container runs.
    const inFlight = call('POST', '/api/projects/race/runs', { user: 'web:a', message: 'sleep 30; ls /workspace | grep -c workspaces' });
    await until(
      async () => (await h.berth.runner.listContainers('race')).some((c) => !before.has(c.id) && c.state === 'running'),
      'the run to be in flight',
    );
    expect((await call('PATCH', '/api/projects/race', { workspace_isolation: true })).status).toBe(200);
    const first = (await (await inFlight).json()) as any;
    // Its view of every workspace does not outlive the switch: its container is removed, it prints nothing.
    expect(first.stdout ?? '').toBe('');
    expect(first.exit_code).not.toBe(0);
    const next = (await json('POST', '/api/projects/race/runs', { user: 'web:a', message: 'ls /workspace | grep -c workspaces' })).body;
    expect(next.stdout).toBe('0\n'); // isolated now
  });
});
