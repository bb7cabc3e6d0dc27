import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { createApp } from '../../src/api/app.js';
import { loadBerthConfig } from '../../src/config/berth-config.js';
import { createBerth, type Berth } from '../../src/main.js';
import { spawnSync } from 'node:child_process';
import { cli, REPO_ROOT, serveApp } from '../helpers.js';

/**
 * What the fuzzer and the outside attack found, one test each: bad input gets a stable code
 * and a 4xx, and leaves every file as valid as it was.
 */
const TOKEN = 'bad-input-admin-token';
let root: string;
let home: string;
let berth: Berth;
let app: ReturnType<typeof createApp>;
let base: string;
let close: () => void;
const logs: string[] = [];

beforeAll(async () => {
  root = fs.realpathSync(fs.mkdtempSync(join(os.tmpdir(), 'berth-bad-')));
  home = join(root, 'home');
  fs.mkdirSync(home);
  berth = createBerth({ home, logLevel: 'info', logDestination: { write: (line) => void logs.push(line) } });
  for (const name of ['fz', 'other']) berth.store.create({ name });
  ({ app, base, close } = await serveApp(berth, TOKEN, berth.logger));
});
afterAll(async () => {
  close();
  await berth.runner.reapLeftovers();
  fs.rmSync(root, { recursive: true, force: true });
});

const auth = { authorization: `Bearer ${TOKEN}` };
async function call(
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = { 'content-type': 'application/json' },
) {
  const res = await app.request(path, {
    method,
    headers: { ...auth, ...headers },
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as any };
}

describe('berth.yaml edits never leave a file berth cannot read', () => {
  it('a revoke on a home without berth.yaml writes a mapping; grants keep working afterwards', async () => {
    expect(fs.existsSync(join(home, 'berth.yaml'))).toBe(false);
    expect((await call('DELETE', '/api/projects/fz/grants/kb')).status).toBe(200);
    const text = fs.readFileSync(join(home, 'berth.yaml'), 'utf8');
    expect(text.trim()).not.toBe('null');
    expect(loadBerthConfig(join(home, 'berth.yaml'), home).projects).toEqual({});
    expect((await call('DELETE', '/api/projects/fz/grants/kb')).status).toBe(200);
    expect((await call('PUT', '/api/projects/fz/private-workspace', { path: null })).status).toBe(200);
  });

  it('a berth.yaml holding `null` (as the bug wrote it) is edited as an empty mapping', async () => {
    fs.writeFileSync(join(home, 'berth.yaml'), 'null\n');
    expect((await call('DELETE', '/api/projects/fz/grants/kb')).status).toBe(200);
    expect(fs.readFileSync(join(home, 'berth.yaml'), 'utf8').trim()).toBe('{}');
  });
});

describe('private workspace paths', () => {
  const put = (path: string) => call('PUT', '/api/projects/fz/private-workspace', { path });
  const left = () => fs.readdirSync(root).sort();

  it.each([
    ['a NUL byte', () => join(root, 'x\0y/fz'), 'must not contain NUL'],
    ['a 256-byte component', () => join(root, 'a'.repeat(256), 'fz'), 'longer than 255 bytes'],
    ["the project's own subdirectory", () => join(home, 'projects/fz/sub/fz'), 'workspaces_path'],
    ["another project's workspaces", () => join(home, 'projects/other/workspaces/abc/fz'), 'workspaces_path'],
    ['inside workspaces_path', () => join(home, 'projects/elsewhere'), 'workspaces_path'],
    ["berth's state", () => join(home, '.berth/fz'), '.berth'],
  ])('%s is 400 CONFIG_INVALID naming the path, and creates nothing', async (_what, path, reason) => {
    const before = left();
    const r = await put(path());
    expect(r.status).toBe(400);
    expect(r.body.error.code).toBe('CONFIG_INVALID');
    expect(r.body.error.issues[0]).toMatchObject({ field: 'path', reason: expect.stringContaining(reason) });
    expect(left()).toEqual(before);
    expect(fs.existsSync(join(home, 'projects/fz/metadata.json'))).toBe(true);
  });

  it('below a symbolic link, or below a directory a tenant (the agent user) owns, is refused', async () => {
    fs.mkdirSync(join(root, 'real'));
    fs.symlinkSync(join(root, 'real'), join(root, 'link'));
    expect((await put(join(root, 'link/fz'))).body.error.issues[0].reason).toContain('symbolic link');
    fs.mkdirSync(join(root, 'tenantish'));
    fs.chownSync(join(root, 'tenantish'), 10001, 10001);
    expect((await put(join(root, 'tenantish/fz'))).body.error.issues[0].reason).toContain('agent user owns');
    expect(fs.existsSync(join(root, 'real/fz'))).toBe(false);
  });

  it('a valid move still works and leaves berth.yaml valid', async () => {
    const r = await put(join(root, 'placed/fz'));
    expect(r.status).toBe(200);
    expect(loadBerthConfig(join(home, 'berth.yaml'), home).projects.fz?.private_workspace).toBe(join(root, 'placed/fz'));
    expect((await call('PUT', '/api/projects/fz/private-workspace', { path: null })).status).toBe(200);
  });
});

describe('requests', () => {
  it.each([
    ['no content type', {}],
    ['text/plain', { 'content-type': 'text/plain' }],
    ['a form', { 'content-type': 'application/x-www-form-urlencoded' }],
    ['*/*', { 'content-type': '*/*' }],
  ])('a body sent as %s is 415 UNSUPPORTED_MEDIA_TYPE on every body route, never a 500', async (_what, headers) => {
    const routes: Array<[string, string]> = [
      ['POST', '/api/projects'],
      ['PATCH', '/api/projects/fz'],
      ['POST', '/api/projects/fz/runs'],
      ['POST', '/api/projects/fz/grants'],
      ['PUT', '/api/projects/fz/private-workspace'],
      ['POST', '/api/projects/fz/workflows/wf/runs'],
      ['PUT', '/api/projects/fz/sessions/s1/settings'],
      ['POST', '/api/projects/fz/sessions/s1/token'],
    ];
    for (const [method, path] of routes) {
      const r = await call(method, path, '{"name":"zz"}', headers as Record<string, string>);
      expect([r.status, r.body.error.code, `${method} ${path}`]).toEqual([415, 'UNSUPPORTED_MEDIA_TYPE', `${method} ${path}`]);
    }
  });

  it('"__proto__" anywhere in a body is refused with the field named (not dropped unvalidated)', async () => {
    const r = await call('PATCH', '/api/projects/fz', '{"teams": {"__proto__": {"members": [1, 2]}}}');
    expect(r.status).toBe(400);
    expect(r.body.error.issues).toEqual([{ field: 'teams.__proto__', reason: '"__proto__" is not allowed as a key' }]);
    const deep = await call('POST', '/api/projects', `{"name":"deep","teams":${'['.repeat(5000)}${']'.repeat(5000)}}`);
    expect(deep.status).toBe(400);
  });

  it('names like constructor and toString index nothing but their own entries', async () => {
    for (const area of ['constructor', 'tostring', 'hasownproperty']) {
      const r = await call('POST', '/api/projects/fz/grants', { area });
      expect([area, r.status, r.body.error.code]).toEqual([area, 400, 'CONFIG_INVALID']);
    }
    for (const name of ['constructor', 'toString', '__proto__']) {
      const r = cli(['--home', home, 'channel', 'run', name]);
      expect([name, r.code]).toEqual([name, 2]);
      expect(r.stderr).toMatch(/^CONFIG_INVALID: no route/);
      expect(cli(['--home', home, name]).stderr).toMatch(/^USAGE: unknown command/);
    }
  });

  it('".." in a URL is refused before routing: PATCH /api/projects/fz/../fz changes nothing', async () => {
    const before = fs.readFileSync(join(home, 'projects/fz/metadata.json'), 'utf8');
    for (const path of ['/api/projects/fz/../fz', '/api/projects/fz/%2e%2e/fz', '/api/projects/./fz']) {
      const res = await new Promise<{ status: number; body: string }>((resolve, reject) => {
        const { hostname, port } = new URL(base);
        // Not a URL string: node would resolve the dot segments before sending.
        const req = http.request(
          { hostname, port, path, method: 'PATCH', headers: { ...auth, 'content-type': 'application/json' } },
          (r) => {
            let body = '';
            r.on('data', (d) => (body += d));
            r.on('end', () => resolve({ status: r.statusCode ?? 0, body }));
          },
        );
        req.on('error', reject);
        req.end(JSON.stringify({ workspace_isolation: true }));
      });
      expect([path, res.status, JSON.parse(res.body).error.code]).toEqual([path, 400, 'CONFIG_INVALID']);
    }
    expect(fs.readFileSync(join(home, 'projects/fz/metadata.json'), 'utf8')).toBe(before);
  });
});

describe('MCP', () => {
  const rpc = (body: unknown) =>
    fetch(`${base}/mcp`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify(body),
    });

  it("a malformed tools/call is JSON-RPC -32602 with berth's error body, never -32603 or a zod dump", async () => {
    for (const params of [{ name: 'project_get', arguments: 'fz' }, { name: 5 }, {}, { name: 'project_get', arguments: [1] }]) {
      const res = await rpc({ jsonrpc: '2.0', id: 1, method: 'tools/call', params });
      expect(res.status).toBe(200);
      const body = (await res.json()) as any;
      expect(body.error.code).toBe(-32602);
      expect(body.error.data.error.code).toBe('CONFIG_INVALID');
      expect(body.error.message).not.toMatch(/"code":\s*"invalid_type"/);
    }
  });

  it('arguments that fail a tool schema are a tool error with CONFIG_INVALID and the fields at fault', async () => {
    const res = await rpc({
      jsonrpc: '2.0',
      id: 2,
      method: 'tools/call',
      params: { name: 'project_get', arguments: { name: 5, __proto__x: 1 } },
    });
    const body = (await res.json()) as any;
    expect(body.result.isError).toBe(true);
    expect(JSON.parse(body.result.content[0].text).error).toMatchObject({
      code: 'CONFIG_INVALID',
      issues: expect.arrayContaining([expect.objectContaining({ field: 'name' })]),
    });
  });

  it("transport-level refusals use berth's error body with a stable code", async () => {
    const busy = await fetch(`${base}/mcp`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'text/plain', accept: 'application/json, text/event-stream' },
      body: '{}',
    });
    expect([busy.status, ((await busy.json()) as any).error.code]).toEqual([415, 'UNSUPPORTED_MEDIA_TYPE']);
    const get = await fetch(`${base}/mcp`, { headers: { ...auth, accept: 'text/event-stream' } });
    expect([get.status, ((await get.json()) as any).error.code]).toEqual([405, 'METHOD_NOT_ALLOWED']);
    const batch = await rpc(Array.from({ length: 5 }, (_, i) => ({ jsonrpc: '2.0', id: i, method: 'tools/list' })));
    expect([batch.status, ((await batch.json()) as any).error.code]).toEqual([400, 'CONFIG_INVALID']);
    const notJson = await fetch(`${base}/mcp`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: '{',
    });
    expect([notJson.status, ((await notJson.json()) as any).error.code]).toEqual([400, 'CONFIG_INVALID']);
  });
});

describe('logs', () => {
  it('no log line carries two "level" keys: the permission level is logged as permission_level', async () => {
    await berth.runner.run({ project: 'fz', tenantKey: 'web:logs', message: 'true', sessionId: 'logs-1', level: 'low' });
    await expect(berth.sessionTools.shellRun({ project: 'fz', session: 'logs-1' }, { command: 'whoami' })).rejects.toMatchObject({
      code: 'PERMISSION_DENIED',
    });
    const lines = logs.join('').trim().split('\n');
    const refused = lines.find((l) => l.includes('shell_run refused'));
    expect(refused).toBeDefined();
    for (const line of lines) expect(line.match(/"level":/g)?.length ?? 0, line).toBe(1);
    expect(JSON.parse(refused as string)).toMatchObject({ level: 40, permission_level: 'low' });
  });
});

describe('what tenants choose, shown to others', () => {
  it('tenant keys with newlines, tabs and escape codes cannot forge rows or drive the terminal in `session list`', async () => {
    const evil = 'web:evil\nforged-row\tlevel=high\u001b]0;pwned\u0007\u001b[2J\u202e';
    await berth.runner.run({ project: 'other', tenantKey: evil, message: 'true', sessionId: 'evil-1' });
    await berth.runner.run({ project: 'other', tenantKey: 'web:plain', message: 'true', sessionId: 'plain-1' });
    const r = cli(['--home', home, 'session', 'list', 'other']);
    expect(r.code).toBe(0);
    const lines = r.stdout.trimEnd().split('\n');
    expect(lines).toHaveLength(2);
    expect(r.stdout).not.toMatch(/[\u0000-\u0008\u000b-\u001f\u007f\u202e]/);
    expect(lines.find((l) => l.startsWith('evil-1'))).toContain(
      'tenant=web:evil\\nforged-row\\tlevel=high\\u001b]0;pwned\\u0007\\u001b[2J\\u202e',
    );
    const err = cli(['--home', home, 'session', 'get', 'other', 'x\u001b[2J']);
    expect(err.stderr).not.toContain('\u001b');
  });

  it('memory entries show readers an opaque author id, never the tenant key', async () => {
    berth.store.create({ name: 'mem' });
    await berth.runner.run({ project: 'mem', tenantKey: 'signal:+4915550007', message: 'true', sessionId: 'writer', level: 'high' });
    const { entry } = berth.sessionTools.memoryWrite({ project: 'mem', session: 'writer' }, { text: 'the deploy key rotates on Mondays' });
    expect(entry.author).toMatch(/^a-[0-9a-f]{16}$/);
    const reader = await berth.runner.run({
      project: 'mem',
      tenantKey: 'web:reader',
      message: 'cat /memory/entries.jsonl',
      level: 'medium',
    });
    expect(reader.stdout).toContain('deploy key rotates');
    expect(reader.stdout).not.toContain('4915550007');
    const again = berth.sessionTools.memoryWrite({ project: 'mem', session: 'writer' }, { text: 'second' });
    expect(again.entry.author).toBe(entry.author);
  });

  it('a message that starts with "-" is never an option to the agent: it reaches it as the message', async () => {
    const o = await berth.runner.run({ project: 'other', tenantKey: 'web:dash', message: '--help' });
    expect(o.exitCode).toBe(127);
    expect(o.stderr).toContain('--help: not found');
  });
});

describe('HTTP conventions', () => {
  it('a known path with another method is 405 with Allow; an unknown path is 404 NOT_FOUND', async () => {
    const put = await app.request('/api/projects', { method: 'PUT', headers: auth });
    expect([put.status, put.headers.get('allow'), ((await put.json()) as any).error.code]).toEqual([
      405,
      'GET, POST',
      'METHOD_NOT_ALLOWED',
    ]);
    const del = await app.request('/api/projects/fz/runs', { method: 'DELETE', headers: auth });
    expect([del.status, del.headers.get('allow')]).toEqual([405, 'GET, POST']);
    const none = await app.request('/api/nothing-here', { headers: auth });
    expect([none.status, ((await none.json()) as any).error.code]).toEqual([404, 'NOT_FOUND']);
  });

  it('an optional body may be empty; an empty required body names the missing fields', async () => {
    await berth.runner.run({ project: 'fz', tenantKey: 'web:empty', message: 'true', sessionId: 'empty-body' });
    const token = await app.request('/api/projects/fz/sessions/empty-body/token', {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: '',
    });
    expect(token.status).toBe(201);
    const create = await call('POST', '/api/projects', '');
    expect([create.status, create.body.error.issues]).toEqual([400, [{ field: 'name', reason: expect.any(String) }]]);
  });

  it('OpenAPI: an operationId on every operation, a server, /healthz needs no token, every other operation lists 401', async () => {
    const doc = (await call('GET', '/openapi.json')).body;
    const ops = Object.entries(doc.paths as Record<string, Record<string, any>>).flatMap(([path, m]) =>
      Object.entries(m).map(([method, op]) => ({ path, method, op })),
    );
    const ids = ops.map((o) => o.op.operationId);
    expect(ids.every((id) => typeof id === 'string' && /^[a-z][A-Za-z]+$/.test(id))).toBe(true);
    expect(new Set(ids).size).toBe(ids.length);
    expect(doc.servers).toEqual([{ url: '/', description: expect.any(String) }]);
    for (const { path, op } of ops) {
      if (path === '/healthz') expect(op.security).toEqual([]);
      else expect(Object.keys(op.responses), path).toContain('401');
    }
    expect(ids).toContain('createProjectsRunsByName');
  });
});

describe('OpenAPI lint', () => {
  it('the served document lints clean with @redocly/cli (recommended rules, no warnings)', async () => {
    const file = join(root, 'openapi.json');
    fs.writeFileSync(file, JSON.stringify((await call('GET', '/openapi.json')).body));
    const r = spawnSync(join(REPO_ROOT, 'node_modules/.bin/redocly'), ['lint', file, '--format=summary'], {
      encoding: 'utf8',
      env: { PATH: process.env.PATH ?? '', REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true' },
    });
    expect(r.status, r.stdout + r.stderr).toBe(0);
    expect(r.stdout + r.stderr).not.toMatch(/^(warning|error)\s/m); // the summary lists each rule that fired
    expect(r.stdout + r.stderr).toContain('Your API description is valid');
  });
});
