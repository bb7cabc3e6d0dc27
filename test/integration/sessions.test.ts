import fs from 'node:fs';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MEMORY_SOP } from '../../src/store/memory.js';
import { serveApp, testHome, type TestHome } from '../helpers.js';

const TOKEN = 'admin-token-for-sessions-test';
let h: TestHome;
let base: string;
let close: () => void;

beforeAll(async () => {
  h = testHome();
  h.create({ name: 'lv', workspace_isolation: true });
  ({ base, close } = await serveApp(h.berth, TOKEN));
});
afterAll(async () => {
  close();
  await h[Symbol.asyncDispose]();
});

async function api(method: string, path: string, body?: unknown) {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as any };
}

/** A session of `user` at `level`, created by a first run, and an MCP client holding its token. */
async function sessionAt(user: string, level: 'low' | 'medium' | 'high', sessionId: string) {
  const run = await h.berth.runner.run({ project: 'lv', tenantKey: user, message: 'true', sessionId, level });
  expect(run.permissionLevel).toBe(level);
  const minted = await api('POST', `/api/projects/lv/sessions/${sessionId}/token`, {});
  expect(minted.status).toBe(201);
  const client = new Client({ name: 'agent-loop', version: '1' });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`${base}/mcp/session`), {
      requestInit: { headers: { authorization: `Bearer ${minted.body.token}` } },
    }),
  );
  return { client, token: minted.body.token as string };
}

type Result = Awaited<ReturnType<Client['callTool']>>;
const errorOf = (r: Result) => JSON.parse((r.content as Array<{ text: string }>)[0]?.text ?? '{}').error;
const shell = (c: Client, command: string) => c.callTool({ name: 'shell_run', arguments: { command } });

describe('session settings API', () => {
  it('a new session is medium; invalid settings are 400 with a code; valid ones persist', async () => {
    await h.berth.runner.run({ project: 'lv', tenantKey: 'web:set', message: 'true', sessionId: 'set-1' });
    const got = await api('GET', '/api/projects/lv/sessions/set-1/settings');
    expect(got).toMatchObject({
      status: 200,
      body: {
        settings: {
          permission_level: 'medium',
          workspace: { mode: 'tenant', root_dir: expect.stringContaining('/projects/lv/workspaces/') },
        },
      },
    });
    for (const bad of [
      { settings: { permission_level: 'root' } },
      { settings: 'high' },
      { settings: { workspace: 'session' } },
      { permission_level: 'low' },
      { settings: { workspace: { root_dir: '/etc' } } },
      '{broken',
    ]) {
      const r = await api('PUT', '/api/projects/lv/sessions/set-1/settings', bad);
      expect(r.status, JSON.stringify(bad)).toBe(400);
      expect(r.body.error.code).toBe('CONFIG_INVALID');
    }
    const put = await api('PUT', '/api/projects/lv/sessions/set-1/settings', { settings: { permission_level: 'low' } });
    expect(put).toMatchObject({ status: 200, body: { settings: { permission_level: 'low' } } });
    expect((await api('GET', '/api/projects/lv/sessions/set-1/settings')).body.settings.permission_level).toBe('low');
    expect((await api('GET', '/api/projects/lv/sessions/nope/settings')).body.error.code).toBe('SESSION_NOT_FOUND');
    expect((await api('GET', '/api/projects/lv/sessions')).body.sessions.map((s: { id: string }) => s.id)).toContain('set-1');
  });
});

describe('levels → what the container gets (real containers)', () => {
  it('no level has a network (only lo, no route); low: no memory, no proxy; medium/high: memory read-only and the egress proxy on loopback', async () => {
    const probe =
      'ls /sys/class/net | sort | tr "\\n" " "; echo; ip route | grep -c ^default; ls /memory >/dev/null 2>&1 && echo memory-visible || echo no-memory; touch /memory/x 2>&1 | grep -c "Read-only"; echo "proxy=${HTTPS_PROXY:-none}"';
    const low = await h.berth.runner.run({ project: 'lv', tenantKey: 'web:net', message: probe, sessionId: 'net-low', level: 'low' });
    expect(low.stdout).toBe('lo \n0\nno-memory\n0\nproxy=none\n');
    for (const level of ['medium', 'high'] as const) {
      const o = await h.berth.runner.run({ project: 'lv', tenantKey: 'web:net', message: probe, sessionId: `net-${level}`, level });
      expect(o.stdout).toBe('lo \n0\nmemory-visible\n1\nproxy=http://127.0.0.1:41401\n');
    }
  });

  it('every run record carries its permission level and workspace root', async () => {
    const runs = (await api('GET', `/api/projects/lv/runs?user=${encodeURIComponent('web:net')}`)).body.runs;
    expect(runs.map((r: { permission_level: string }) => r.permission_level).sort()).toEqual(['high', 'low', 'medium']);
    for (const r of runs) expect(r.workspace_root).toContain('/projects/lv/workspaces/');
  });

  it('workspace mode "session" gives each session its own directory; "tenant" shares one', async () => {
    await h.berth.runner.run({ project: 'lv', tenantKey: 'web:ws', message: 'echo shared > t.txt', sessionId: 'ws-a' });
    const b = await h.berth.runner.run({ project: 'lv', tenantKey: 'web:ws', message: 'cat t.txt', sessionId: 'ws-b' });
    expect(b.stdout).toBe('shared\n');
    expect((await api('PUT', '/api/projects/lv/sessions/ws-b/settings', { settings: { workspace: { mode: 'session' } } })).status).toBe(
      200,
    );
    const own = await h.berth.runner.run({ project: 'lv', tenantKey: 'web:ws', message: 'ls; echo mine > s.txt', sessionId: 'ws-b' });
    expect(own.stdout).not.toContain('t.txt');
    expect(own.workspaceId).not.toBe(b.workspaceId);
    const settings = (await api('GET', '/api/projects/lv/sessions/ws-b/settings')).body.settings;
    expect(settings.workspace).toEqual({ mode: 'session', id: own.workspaceId, root_dir: own.workspaceRoot });
    expect(fs.existsSync(join(b.workspaceRoot, 's.txt'))).toBe(false);
  });

  it('a session belongs to one tenant', async () => {
    await expect(
      h.berth.runner.run({ project: 'lv', tenantKey: 'web:intruder', message: 'true', sessionId: 'ws-a' }),
    ).rejects.toMatchObject({ code: 'PERMISSION_DENIED' });
  });
});

describe('levels → tools (MCP at /mcp/session with a session token, commands run in real containers)', () => {
  it('low: denies memory_search and curl; allows workspace file management', async () => {
    const { client } = await sessionAt('web:low', 'low', 'tool-low');
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual([
      'delete_file_by_id',
      'get_file_info_by_id',
      'list_folders',
      'memory_search',
      'memory_write',
      'read_file_by_id',
      'schedule',
      'send_file',
      'shell_run',
      'workspace_profile',
      'write_file_by_id',
    ]);
    const mine = await client.callTool({ name: 'list_folders', arguments: { scope: 'my_private' } });
    expect(mine.structuredContent).toMatchObject({ folders: [{ name: 'web:low' }] });
    for (const t of tools) {
      expect(Object.keys((t.inputSchema as { properties?: object }).properties ?? {})).not.toContain('session');
      expect(t.annotations, t.name).toEqual({
        readOnlyHint: expect.any(Boolean),
        destructiveHint: expect.any(Boolean),
        idempotentHint: expect.any(Boolean),
      });
      for (const [field, schema] of Object.entries((t.inputSchema.properties ?? {}) as Record<string, { description?: string }>))
        expect(schema.description, `${t.name}.${field}`).toBeTruthy();
    }
    const search = await client.callTool({ name: 'memory_search', arguments: { query: 'anything' } });
    expect(errorOf(search)).toMatchObject({ code: 'PERMISSION_DENIED', rule: 'tool_not_allowed' });
    expect(errorOf(await shell(client, 'curl --version'))).toMatchObject({ code: 'PERMISSION_DENIED', rule: 'binary_not_allowed' });
    const ok = await shell(client, 'mkdir -p notes');
    expect(ok.isError).toBeFalsy();
    expect((await shell(client, 'ls')).structuredContent).toMatchObject({
      run: { exit_code: 0, stdout: expect.stringContaining('notes') },
    });
    await client.close();
  });

  it('high: allows whoami, memory_write and copying an outside file in; denies writes outside the workspace', async () => {
    const { client } = await sessionAt('web:high', 'high', 'tool-high');
    expect((await shell(client, 'whoami')).structuredContent).toMatchObject({
      run: { exit_code: 0, stdout: 'agent\n', permission_level: 'high' },
    });
    const wrote = await client.callTool({ name: 'memory_write', arguments: { text: 'The deploy key rotates on Mondays', tags: ['ops'] } });
    expect(wrote.structuredContent).toMatchObject({
      entry: { text: 'The deploy key rotates on Mondays', author: expect.stringMatching(/^a-[0-9a-f]{16}$/) },
    });
    const cp = await shell(client, 'cp /etc/hostname ./copied-hostname');
    expect(cp.structuredContent).toMatchObject({ run: { exit_code: 0 } });
    expect((await shell(client, 'ls')).structuredContent).toMatchObject({ run: { stdout: expect.stringContaining('copied-hostname') } });
    expect(errorOf(await shell(client, 'touch /tmp/x'))).toMatchObject({ code: 'PERMISSION_DENIED', rule: 'write_outside_workspace' });
    expect(errorOf(await shell(client, 'cp copied-hostname /outside/'))).toMatchObject({
      code: 'PERMISSION_DENIED',
      rule: 'write_outside_workspace',
    });
    expect(errorOf(await shell(client, 'ls; cat /etc/shadow'))).toMatchObject({ code: 'PERMISSION_DENIED', rule: 'shell_operator' });
    await client.close();
  });

  it('medium: allows memory_search and curl --version; denies memory_write and reads outside the workspace', async () => {
    const { client } = await sessionAt('web:medium', 'medium', 'tool-medium');
    const found = await client.callTool({ name: 'memory_search', arguments: { query: 'when does the deploy key rotate' } });
    expect(found.structuredContent).toMatchObject({ entries: [{ text: 'The deploy key rotates on Mondays' }] });
    const curl = await shell(client, 'curl --version');
    // Allowed by the policy and run in the container (busybox has no curl: 127 = not found there).
    expect(curl.isError).toBeFalsy();
    expect((curl.structuredContent as { run: { exit_code: number } }).run.exit_code).toBe(127);
    expect(errorOf(await client.callTool({ name: 'memory_write', arguments: { text: 'x' } }))).toMatchObject({
      code: 'PERMISSION_DENIED',
      rule: 'tool_not_allowed',
    });
    expect(errorOf(await shell(client, 'cat /etc/passwd'))).toMatchObject({ code: 'PERMISSION_DENIED', rule: 'read_outside_workspace' });
    const bad = await client.callTool({ name: 'shell_run', arguments: { argv: ['id'], session: 'tool-high', level: 'high' } });
    expect(errorOf(bad)).toMatchObject({ code: 'CONFIG_INVALID' });
    await client.close();
  });

  it('shell_run runs "the tests" by the command the workspace profile detected', async () => {
    const { client } = await sessionAt('web:tasks', 'high', 'tool-tasks');
    expect(errorOf(await client.callTool({ name: 'shell_run', arguments: { task: 'test' } }))).toMatchObject({ code: 'CONFIG_INVALID' });
    const ws = (await api('GET', '/api/projects/lv/sessions/tool-tasks/settings')).body.settings.workspace.root_dir as string;
    fs.writeFileSync(join(ws, 'package.json'), '{"scripts":{"test":"node --test"}}');
    const run = await client.callTool({ name: 'shell_run', arguments: { task: 'test' } });
    // npm is allowed at high and runs in the container (busybox has none: 127 = not found there).
    expect(run.structuredContent).toMatchObject({ run: { exit_code: 127, stderr: 'npm: not found in this image\n' } });
    await api('PUT', '/api/projects/lv/sessions/tool-tasks/settings', { settings: { permission_level: 'low' } });
    expect(errorOf(await client.callTool({ name: 'shell_run', arguments: { task: 'test' } }))).toMatchObject({
      code: 'PERMISSION_DENIED',
      rule: 'binary_not_allowed',
    });
    await client.close();
  });

  it('a level change applies to the same token at once; a revoked token is refused', async () => {
    const { client, token } = await sessionAt('web:flip', 'medium', 'tool-flip');
    expect((await client.callTool({ name: 'memory_search', arguments: { query: 'deploy' } })).isError).toBeFalsy();
    await api('PUT', '/api/projects/lv/sessions/tool-flip/settings', { settings: { permission_level: 'low' } });
    expect(errorOf(await client.callTool({ name: 'memory_search', arguments: { query: 'deploy' } })).code).toBe('PERMISSION_DENIED');
    expect((await api('DELETE', '/api/projects/lv/sessions/tool-flip/token')).body).toEqual({ session: 'tool-flip', revoked: 1 });
    const res = await fetch(`${base}/mcp/session`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: '{}',
    });
    expect(res.status).toBe(401);
    expect((await fetch(`${base}/mcp/session`, { method: 'POST', headers: { authorization: `Bearer ${TOKEN}` }, body: '{}' })).status).toBe(
      401,
    );
    await client.close();
  });
});

describe('attacks on session identity', () => {
  const mcpList = (token: string) =>
    fetch(`${base}/mcp/session`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
    });

  it('a token does not outlive its project, nor follow a reused session id to another tenant', async () => {
    h.create({ name: 'tok1', workspace_isolation: true });
    await h.berth.runner.run({ project: 'tok1', tenantKey: 'web:first', message: 'echo first > f.txt', sessionId: 'conv-1' });
    const minted = await api('POST', '/api/projects/tok1/sessions/conv-1/token', {});
    expect((await mcpList(minted.body.token)).status).toBe(200);
    expect((await api('DELETE', '/api/projects/tok1?confirm=tok1')).status).toBe(200);
    expect((await mcpList(minted.body.token)).status).toBe(401);
    h.create({ name: 'tok1', workspace_isolation: true });
    await h.berth.runner.run({ project: 'tok1', tenantKey: 'web:second', message: 'echo second-tenant-data > s.txt', sessionId: 'conv-1' });
    const res = await mcpList(minted.body.token);
    expect(res.status).toBe(401);
    expect(await res.text()).not.toContain('second-tenant-data');
  });

  it('a token minted for a session stops working when the session is made again (same id, same project)', async () => {
    h.create({ name: 'tok2' });
    await h.berth.runner.run({ project: 'tok2', tenantKey: 'web:a', message: 'true', sessionId: 'conv-2' });
    const minted = await api('POST', '/api/projects/tok2/sessions/conv-2/token', {});
    fs.rmSync(join(h.home, 'projects/tok2/sessions/conv-2.json'));
    await h.berth.runner.run({ project: 'tok2', tenantKey: 'web:b', message: 'true', sessionId: 'conv-2' });
    expect((await mcpList(minted.body.token)).status).toBe(401);
  });

  it("session ids are per project: one project's tenant cannot claim or block another's (nor berth's own ids)", async () => {
    h.create({ name: 'other' });
    await expect(
      h.berth.runner.run({ project: 'lv', tenantKey: 'web:squat', message: 'true', sessionId: 'wf.answer' }),
    ).rejects.toMatchObject({
      code: 'CONFIG_INVALID',
      details: { issues: [{ field: 'session' }] },
    });
    await expect(h.berth.runner.run({ project: 'lv', tenantKey: 'web:squat', message: 'true', sessionId: 't-0123' })).rejects.toMatchObject(
      { code: 'CONFIG_INVALID' },
    );
    // Its own default session, made by a message without an id (the API, the CLI), is the tenant's
    // to name: the web chat lists it and sends to it, and changes its level (first hour: alice).
    const made = await h.berth.runner.run({ project: 'lv', tenantKey: 'web:alice', message: 'true' });
    expect(made.sessionId).toMatch(/^t-/);
    const again = await h.berth.runner.run({ project: 'lv', tenantKey: 'web:alice', message: 'true', sessionId: made.sessionId });
    expect(again.sessionId).toBe(made.sessionId);
    expect(h.berth.admin.openSession('lv', made.sessionId, 'web:alice').id).toBe(made.sessionId);
    // Another tenant naming it is refused as a made-up berth id is: its existence is not told.
    for (const id of [made.sessionId, 't-0123']) {
      await expect(h.berth.runner.run({ project: 'lv', tenantKey: 'web:squat', message: 'true', sessionId: id })).rejects.toMatchObject({
        code: 'CONFIG_INVALID',
        details: { issues: [{ field: 'session' }] },
      });
    }
    await h.berth.runner.run({ project: 'lv', tenantKey: 'web:squat', message: 'true', sessionId: 'shared-name' });
    const theirs = await h.berth.runner.run({ project: 'other', tenantKey: 'web:owner', message: 'true', sessionId: 'shared-name' });
    expect(theirs.sessionId).toBe('shared-name');
    expect((await api('GET', '/api/projects/other/sessions/shared-name/settings')).status).toBe(200);
    expect((await api('GET', '/api/projects/lv/sessions/shared-name/settings')).status).toBe(200);
    expect((await api('GET', '/api/projects/lv/sessions/nope/settings')).body.error.code).toBe('SESSION_NOT_FOUND');
  });
});

describe('memory bootstrap in the first prompt', () => {
  it('medium and high sessions get the SOP and entries at their first run only; low gets neither', async () => {
    // An agent that prints its prompt: a custom argv, run in the shell image.
    h.create({ name: 'echo-agent', workspace_isolation: true, agent: ['echo', '{message}'] });
    await h.berth.runner.run({ project: 'echo-agent', tenantKey: 'web:boot', message: 'hi', sessionId: 'boot-h', level: 'high' });
    h.berth.sessionTools.memoryWrite(
      { project: 'echo-agent', session: 'boot-h' },
      { text: 'Customers prefer short answers', tags: ['style'] },
    );
    const first = await h.berth.runner.run({
      project: 'echo-agent',
      tenantKey: 'web:m',
      message: 'hello',
      sessionId: 'boot-m',
      level: 'medium',
    });
    expect(first.stdout).toContain(MEMORY_SOP.split('\n')[0]);
    expect(first.stdout).toContain('Customers prefer short answers');
    expect(first.stdout.trimEnd().endsWith('hello')).toBe(true);
    const second = await h.berth.runner.run({ project: 'echo-agent', tenantKey: 'web:m', message: 'hello again', sessionId: 'boot-m' });
    expect(second.stdout).toBe('hello again\n');
    const low = await h.berth.runner.run({
      project: 'echo-agent',
      tenantKey: 'web:l',
      message: 'hello',
      sessionId: 'boot-l',
      level: 'low',
    });
    expect(low.stdout).toBe('hello\n');
  });
});
