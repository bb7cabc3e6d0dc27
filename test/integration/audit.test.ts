import fs from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import NodeWebSocket from 'ws';
import { homePaths } from '../../src/config/home.js';
import { listenHttp, type HttpSurface } from '../../src/cli/serve.js';
import { appendAudit } from '../../src/store/audit.js';
import { cli, serveApp, testHome, type TestHome } from '../helpers.js';

/** The audit log through every surface: who did what (or was refused), a chain that shows a cut. */
const TOKEN = 'admin-token-for-the-audit-test';
let h: TestHome;
let base: string;
let close: () => void;
let auditPath: string;

beforeAll(async () => {
  h = testHome();
  auditPath = join(homePaths(h.home).stateDir, 'audit.jsonl');
  ({ base, close } = await serveApp(h.berth, TOKEN));
});
afterAll(async () => {
  close();
  await h[Symbol.asyncDispose]();
});

const api = async (method: string, path: string, body?: unknown, token = TOKEN, requestId = 'req-audit-1') => {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', 'x-request-id': requestId },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as any };
};
/** The lines on disk (current file only: these tests stay far below the rotation size). */
const onDisk = (): any[] =>
  fs.existsSync(auditPath)
    ? fs
        .readFileSync(auditPath, 'utf8')
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l))
    : [];
/** Write the counted refusals now (a summary is otherwise written once a minute). */
const flush = () => (h.berth.audit as { flush?: () => void }).flush?.();

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
    flush();

    const log = (await api('GET', '/api/audit?limit=50')).body;
    expect(log.chain).toMatchObject({ ok: true, lines: expect.any(Number) });
    const actions = log.entries.map((e: any) => [e.kind, e.action, e.actor, e.outcome]);
    expect(actions).toEqual(
      expect.arrayContaining([
        ['admin', 'project.create', 'admin', 'ok'],
        ['admin', 'project.update', 'admin', 'ok'],
        ['auth_failure', 'unauthenticated api', 'anonymous', 'refused'],
        ['admin', 'session.token.mint', 'admin', 'ok'],
        ['permission_denied', 'tool memory_write', 'session:au/eve-1', 'refused'],
      ]),
    );
    expect(log.entries.find((e: any) => e.action === 'unauthenticated api')).toMatchObject({
      count: 1,
      samples: ['GET /api/projects'],
      code: 'UNAUTHORIZED',
    });
    expect(log.entries.find((e: any) => e.action === 'project.create')).toMatchObject({ project: 'au', request_id: 'req-audit-1' });
    const raw = fs.readFileSync(auditPath, 'utf8');
    expect(raw).not.toContain(session);
    expect(raw).not.toContain(TOKEN);
    expect(raw).not.toContain('wrong-token-xyz');
    // Filters, and a bad filter is a 400 naming its field.
    const denied = (await api('GET', '/api/audit?kind=permission_denied')).body.entries;
    expect(denied.every((e: any) => e.kind === 'permission_denied')).toBe(true);
    expect((await api('GET', '/api/audit?since=yesterday')).body.error).toMatchObject({
      code: 'CONFIG_INVALID',
      issues: [{ field: 'since' }],
    });
  });

  it('a request id the client chose is kept only when short and plain; otherwise berth makes one', async () => {
    for (const given of ['a'.repeat(65), 'x<script>', 'ok\u00e9']) {
      expect((await api('PATCH', '/api/projects/au', { limits: { timeout_seconds: 61 } }, TOKEN, given)).status).toBe(200);
      const last = onDisk().at(-1);
      expect(last).toMatchObject({ action: 'project.update' });
      expect(last.request_id).toMatch(/^[0-9a-f-]{36}$/);
    }
  });

  it('300 unauthenticated requests leave a few summary lines that hold the count, not a line each (M6)', async () => {
    flush();
    const before = onDisk().length;
    const long = 'Z'.repeat(300);
    for (let i = 0; i < 300; i++) {
      const res = await fetch(`${base}/api/projects/${long}${i}`);
      expect(res.status).toBe(401);
    }
    for (const path of ['/metrics', '/mcp', '/docs', '/openapi.json'])
      expect((await fetch(`${base}${path}`, { headers: { authorization: 'Bearer nope' } })).status).toBe(401);
    const unflushed = onDisk().length - before;
    flush();
    const added = onDisk().slice(before);
    expect(unflushed).toBe(0); // nothing fsynced per request
    // One line per surface that saw refusals (api, metrics, mcp, docs), each with its count and a few printable samples.
    expect(added.length).toBeLessThanOrEqual(5);
    expect(added.every((e) => e.kind === 'auth_failure' && e.actor === 'anonymous')).toBe(true);
    const countOf = (surface: string) => added.filter((e) => e.action === `unauthenticated ${surface}`).reduce((n, e) => n + e.count, 0);
    expect([countOf('api'), countOf('metrics'), countOf('mcp'), countOf('docs')]).toEqual([300, 1, 1, 2]);
    for (const e of added) {
      expect(e.samples.length).toBeLessThanOrEqual(5);
      for (const s of e.samples) expect(s.length).toBeLessThanOrEqual(128);
    }
    expect(cli(['--home', h.home, 'audit', 'verify']).code).toBe(0);
    // Counted in Prometheus by surface as well.
    const metrics = await (await fetch(`${base}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } })).text();
    expect(metrics).toMatch(/^berth_auth_failures_total\{surface="api"\} 30\d$/m);
    expect(metrics).toMatch(/^berth_auth_failures_total\{surface="metrics"\} 1$/m);
  }, 60_000);

  it('what a browser asks for by itself (/favicon.ico, /robots.txt, touch icons) is no auth failure and is not audited', async () => {
    flush();
    const before = onDisk().length;
    for (const path of [
      '/favicon.ico',
      '/robots.txt',
      '/apple-touch-icon.png',
      '/apple-touch-icon-precomposed.png',
      '/apple-touch-icon-180x180.png',
    ]) {
      const res = await fetch(`${base}${path}`);
      expect([204, 404], path).toContain(res.status);
    }
    flush();
    expect(onDisk().slice(before)).toEqual([]);
  });

  it('the CLI lists it, and "audit verify" finds where a line was edited (exit 1)', () => {
    cli(['--home', h.home, 'project', 'update', 'au', '--timeout', '30']);
    const listed = cli(['--home', h.home, 'audit', '--project', 'au']);
    expect(listed.code).toBe(0);
    expect(listed.stdout).toMatch(/admin {2}project\.update {2}operator {2}au {2}ok/);
    expect(cli(['--home', h.home, 'audit', 'verify'])).toMatchObject({ code: 0, stdout: expect.stringContaining('audit log intact') });
    const lines = fs.readFileSync(auditPath, 'utf8').split('\n');
    lines[1] = (lines[1] as string).replace('"outcome":"ok"', '"outcome":"refused"'); // still valid JSON, still the schema: only the hash tells
    fs.writeFileSync(auditPath, lines.join('\n'));
    const broken = cli(['--home', h.home, 'audit', 'verify']);
    expect(broken.code).toBe(1);
    expect(broken.stdout).toMatch(/BROKEN at audit\.jsonl line 2: its content does not match its hash \(edited\)/);
  });
});

describe('audit log files: rotation and the head kept outside the log', () => {
  const event = (i: number) => ({
    kind: 'admin' as const,
    action: 'project.update',
    actor: 'operator',
    project: 'rot',
    target: `t${i}-${'x'.repeat(100)}`,
    outcome: 'ok' as const,
  });

  it('a rotated log verifies end to end and lists across its files; an edit in an older file is found (M6)', async () => {
    await using r = testHome();
    const file = join(homePaths(r.home).stateDir, 'audit.jsonl');
    fs.mkdirSync(join(homePaths(r.home).stateDir), { recursive: true });
    for (let i = 0; i < 40; i++) appendAudit(file, event(i), { rotateBytes: 1024, keep: 20 } as never);
    const rotated = fs
      .readdirSync(homePaths(r.home).stateDir)
      .filter((n) => /^audit\.jsonl\.\d+$/.test(n))
      .sort((a, b) => Number(a.split('.').pop()) - Number(b.split('.').pop()));
    expect(rotated.length).toBeGreaterThan(3);
    const ok = cli(['--home', r.home, 'audit', 'verify']);
    expect(ok).toMatchObject({ code: 0, stdout: expect.stringMatching(/audit log intact: 40 line\(s\) in \d+ file\(s\)/) });
    const listed = cli(['--home', r.home, 'audit', '--project', 'rot', '--limit', '1000', '--json']);
    expect(JSON.parse(listed.stdout).map((e: any) => e.seq)).toEqual(Array.from({ length: 40 }, (_, i) => 40 - i));
    // The oldest file's second line edited: verify names that file and line.
    const oldest = join(homePaths(r.home).stateDir, rotated[0] as string);
    const lines = fs.readFileSync(oldest, 'utf8').split('\n');
    lines[1] = (lines[1] as string).replace('"t1-', '"t9-');
    fs.writeFileSync(oldest, lines.join('\n'));
    const broken = cli(['--home', r.home, 'audit', 'verify']);
    expect(broken.code).toBe(1);
    expect(broken.stdout).toContain(`BROKEN at ${rotated[0]} line 2: its content does not match its hash (edited)`);
  });

  it('lines cut off the end are found: the head (seq and hash of the last line) is kept outside the log (L5)', async () => {
    await using r = testHome();
    expect(cli(['--home', r.home, 'project', 'create', 'cut'])).toMatchObject({ code: 0 });
    for (let i = 0; i < 5; i++) expect(cli(['--home', r.home, 'project', 'update', 'cut', '--timeout', String(30 + i)]).code).toBe(0);
    const file = join(homePaths(r.home).stateDir, 'audit.jsonl');
    expect(cli(['--home', r.home, 'audit', 'verify']).code).toBe(0);
    const lines = fs.readFileSync(file, 'utf8').trimEnd().split('\n');
    fs.writeFileSync(file, `${lines.slice(0, -3).join('\n')}\n`); // `head -n -3`: still a whole, valid chain
    const cut = cli(['--home', r.home, 'audit', 'verify']);
    expect(cut.code).toBe(1);
    expect(cut.stdout).toMatch(
      /BROKEN: the log ends at #3 but berth last wrote #6 \(recorded in audit\.jsonl\.head\): 3 line\(s\) were cut from the end/,
    );
    // The next event does not paper over it: it chains on from the recorded head, so the gap stays visible.
    expect(cli(['--home', r.home, 'project', 'update', 'cut', '--timeout', '99']).code).toBe(0);
    const after = cli(['--home', r.home, 'audit', 'verify']);
    expect(after.code).toBe(1);
    expect(after.stdout).toMatch(/BROKEN at audit\.jsonl line 4: does not follow the line before it/);
  });
});

describe('audit log: chat users are named', () => {
  it("a chat user's session.open and level change are recorded as tenant:web:<user>, over HTTP and over the socket (M6)", async () => {
    await using c = testHome();
    c.create({ name: 'chat-au', workspace_isolation: true, chat: { raise_level: 'anyone' } });
    c.create({ name: 'chat-strict', workspace_isolation: true });
    const http: HttpSurface = await listenHttp(
      c.berth,
      { host: '127.0.0.1', port: 0, token: TOKEN },
      { out: () => undefined, err: () => undefined },
    );
    try {
      // Logged in as opening the link does (the login page's own flow is tested in web-chat.test.ts).
      const link = c.berth.admin.mintChatLink('chat-au', 'carol');
      const cookie = `berth_chat=${c.berth.admin.openChatLink(new URL(link.path, http.url).searchParams.get('token') as string).credential}`;
      const opened = await fetch(`${http.url}/chat/api/sessions`, { method: 'POST', headers: { cookie } });
      expect(opened.status).toBe(201);
      const session = ((await opened.json()) as any).session as { id: string; permission_level: string };
      const level = session.permission_level === 'low' ? 'medium' : 'low';
      const done = await new Promise<Array<Record<string, unknown>>>((resolve, reject) => {
        const ws = new NodeWebSocket(`${http.url.replace('http', 'ws')}/chat/ws`, { headers: { cookie } });
        const got: Array<Record<string, unknown>> = [];
        ws.on('open', () =>
          ws.send(JSON.stringify({ type: 'run', id: crypto.randomUUID(), session_id: session.id, permission_level: level, input: 'true' })),
        );
        ws.on('message', (d) => {
          const m = JSON.parse(String(d)) as Record<string, unknown>;
          got.push(m);
          if (m.type === 'done' || m.type === 'error') (ws.close(), resolve(got));
        });
        ws.on('error', reject);
      });
      expect(done.at(-1)).toMatchObject({ type: 'done' });
      const entries = JSON.parse(cli(['--home', c.home, 'audit', '--project', 'chat-au', '--json']).stdout) as any[];
      // The socket's level change opens (idempotently) and sets the session: a session.open and a session.settings of its own.
      const actors = (action: string) => [...new Set(entries.filter((e) => e.action === action).map((e) => e.actor))];
      expect([actors('session.open'), actors('session.settings')]).toEqual([['tenant:web:carol'], ['tenant:web:carol']]);
      expect(entries.filter((e) => e.action !== 'chat_link.mint').map((e) => e.actor)).not.toContain('operator'); // the link was minted by the operator (this test), nothing else
      // A refusal answered over HTTP names the user too: raising a level where only an admin may.
      const strict = c.berth.admin.mintChatLink('chat-strict', 'carol');
      const strictCookie = `berth_chat=${c.berth.admin.openChatLink(new URL(strict.path, http.url).searchParams.get('token') as string).credential}`;
      const own = (
        (await (await fetch(`${http.url}/chat/api/sessions`, { method: 'POST', headers: { cookie: strictCookie } })).json()) as any
      ).session.id as string;
      const raise = await fetch(`${http.url}/chat/api/sessions/${own}/settings`, {
        method: 'PUT',
        headers: { cookie: strictCookie, 'content-type': 'application/json' },
        body: JSON.stringify({ permission_level: 'high' }),
      });
      expect(raise.status).toBe(403);
      const refused = JSON.parse(cli(['--home', c.home, 'audit', '--actor', 'tenant:web:carol', '--json']).stdout) as any[];
      expect(refused.map((e) => [e.kind, e.actor])).toEqual(
        expect.arrayContaining([
          ['admin', 'tenant:web:carol'],
          ['permission_denied', 'tenant:web:carol'],
        ]),
      );
    } finally {
      await http.close();
    }
  }, 90_000);
});
