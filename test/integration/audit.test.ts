import fs from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { homePaths } from '../../src/config/home.js';
import { cli, serveApp, testHome, type TestHome } from '../helpers.js';

/** The audit log through every surface: who did what (or was refused), a chain that shows a cut. */
const TOKEN = 'admin-token-for-the-audit-test';
let h: TestHome;
let base: string;
let close: () => void;

beforeAll(async () => {
  h = testHome();
  ({ base, close } = await serveApp(h.berth, TOKEN));
});
afterAll(async () => {
  close();
  await h[Symbol.asyncDispose]();
});

const api = async (method: string, path: string, body?: unknown, token = TOKEN) => {
  const res = await fetch(`${base}${path}`, { method, headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', 'x-request-id': 'req-audit-1' }, body: body === undefined ? undefined : JSON.stringify(body) });
  return { status: res.status, body: (await res.json()) as any };
};

describe('audit log', () => {
  it('records admin actions with actor and request id, failed logins, and denials by a session; never a token', async () => {
    expect((await api('POST', '/api/projects', { name: 'au', workspace_isolation: true })).status).toBe(201);
    expect((await api('PATCH', '/api/projects/au', { limits: { timeout_seconds: 60 } })).status).toBe(200);
    expect((await api('GET', '/api/projects', undefined, 'wrong-token-xyz')).status).toBe(401);
    await h.berth.runner.run({ project: 'au', tenantKey: 'web:eve', message: 'true', sessionId: 'eve-1', level: 'low' });
    const minted = await api('POST', '/api/projects/au/sessions/eve-1/token', {});
    const session = minted.body.token as string;
    const mcp = await fetch(`${base}/mcp/session`, {
      method: 'POST',
      headers: { authorization: `Bearer ${session}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'memory_write', arguments: { text: 'x' } } }),
    });
    expect(mcp.status).toBe(200);

    const log = (await api('GET', '/api/audit?limit=50')).body;
    expect(log.chain).toEqual({ ok: true, lines: expect.any(Number) });
    const actions = log.entries.map((e: any) => [e.kind, e.action, e.actor, e.outcome]);
    expect(actions).toEqual(
      expect.arrayContaining([
        ['admin', 'project.create', 'admin', 'ok'],
        ['admin', 'project.update', 'admin', 'ok'],
        ['auth_failure', 'GET /api/projects', 'anonymous', 'refused'],
        ['admin', 'session.token.mint', 'admin', 'ok'],
        ['permission_denied', 'tool memory_write', 'session:au/eve-1', 'refused'],
      ]),
    );
    expect(log.entries.find((e: any) => e.action === 'project.create')).toMatchObject({ project: 'au', request_id: 'req-audit-1' });
    const raw = fs.readFileSync(join(homePaths(h.home).stateDir, 'audit.jsonl'), 'utf8');
    expect(raw).not.toContain(session);
    expect(raw).not.toContain(TOKEN);
    expect(raw).not.toContain('wrong-token-xyz');
    // Filters, and a bad filter is a 400 naming its field.
    const denied = (await api('GET', '/api/audit?kind=permission_denied')).body.entries;
    expect(denied.every((e: any) => e.kind === 'permission_denied')).toBe(true);
    expect((await api('GET', '/api/audit?since=yesterday')).body.error).toMatchObject({ code: 'CONFIG_INVALID', issues: [{ field: 'since' }] });
  });

  it('the CLI lists it, and "audit verify" finds where a line was edited (exit 1)', () => {
    cli(['--home', h.home, 'project', 'update', 'au', '--timeout', '30']);
    const listed = cli(['--home', h.home, 'audit', '--project', 'au']);
    expect(listed.code).toBe(0);
    expect(listed.stdout).toMatch(/admin {2}project\.update {2}operator {2}au {2}ok/);
    expect(cli(['--home', h.home, 'audit', 'verify'])).toMatchObject({ code: 0, stdout: expect.stringContaining('audit log intact') });
    const file = join(homePaths(h.home).stateDir, 'audit.jsonl');
    const lines = fs.readFileSync(file, 'utf8').split('\n');
    lines[1] = (lines[1] as string).replace('"outcome":"ok"', '"outcome":"refused"'); // still valid JSON, still the schema: only the hash tells
    fs.writeFileSync(file, lines.join('\n'));
    const broken = cli(['--home', h.home, 'audit', 'verify']);
    expect(broken.code).toBe(1);
    expect(broken.stdout).toMatch(/BROKEN at line 2 of \d+: its content does not match its hash \(edited\)/);
  });
});
