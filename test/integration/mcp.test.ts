import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createBerth } from '../../src/main.js';
import { BERTH_BIN } from '../helpers.js';

const TOOLS = [
  'project_create',
  'project_get',
  'project_grant',
  'project_list',
  'project_revoke',
  'project_update',
  'run_message',
  'session_get',
  'session_update',
  'workflow_run',
  'workspace_list',
];
const TOKEN = 'mcp-test-token-0123456789';

let home: string;
beforeAll(() => {
  home = fs.mkdtempSync(join(os.tmpdir(), 'berth-mcp-'));
});
afterAll(async () => {
  await createBerth({ home, logLevel: 'silent' }).runner.reapLeftovers();
  fs.rmSync(home, { recursive: true, force: true });
});

type Result = Awaited<ReturnType<Client['callTool']>>;
const errorOf = (r: Result) => JSON.parse((r.content as Array<{ text: string }>)[0]?.text ?? '{}').error;

/** The same conversation over any transport: berth's admin tools, end to end. */
async function exercise(client: Client, project: string): Promise<void> {
  const { tools } = await client.listTools();
  expect(tools.map((t) => t.name).sort()).toEqual(TOOLS);
  const create = tools.find((t) => t.name === 'project_create');
  expect(create?.inputSchema.properties).toHaveProperty('workspace_isolation');
  expect(create?.inputSchema.properties).toHaveProperty('protected_paths');
  // Every tool says what it may do, and every input field says what it is.
  for (const t of tools) {
    expect(t.annotations, t.name).toEqual({
      readOnlyHint: expect.any(Boolean),
      destructiveHint: expect.any(Boolean),
      idempotentHint: expect.any(Boolean),
    });
    for (const [field, schema] of Object.entries((t.inputSchema.properties ?? {}) as Record<string, { description?: string }>))
      expect(schema.description, `${t.name}.${field}`).toBeTruthy();
  }
  expect(tools.find((t) => t.name === 'project_get')?.annotations?.readOnlyHint).toBe(true);
  expect(tools.find((t) => t.name === 'workflow_run')?.annotations).toMatchObject({ readOnlyHint: false, destructiveHint: true });

  const created = await client.callTool({
    name: 'project_create',
    arguments: { name: project, workspace_isolation: true, protected_paths: ['AGENTS.md'] },
  });
  expect(created.isError).toBeFalsy();
  expect(created.structuredContent).toMatchObject({
    project: { name: project, workspace_isolation: true, protected_paths: ['AGENTS.md'] },
  });

  const dup = await client.callTool({ name: 'project_create', arguments: { name: project } });
  expect(dup.isError).toBe(true);
  expect(errorOf(dup).code).toBe('PROJECT_EXISTS');

  const bad = await client.callTool({ name: 'project_update', arguments: { name: project, protected_paths: ['../escape'], bogus: 1 } });
  expect(bad.isError).toBe(true);
  expect(errorOf(bad)).toMatchObject({ code: 'CONFIG_INVALID' });
  expect(
    errorOf(bad)
      .issues.map((i: { field: string }) => i.field)
      .sort(),
  ).toEqual(['bogus', 'protected_paths.0']);

  const updated = await client.callTool({
    name: 'project_update',
    arguments: { name: project, workspace_isolation: false, protected_paths: ['AGENTS.md', '.factory/'] },
  });
  expect(updated.structuredContent).toMatchObject({ project: { workspace_isolation: false, protected_paths: ['AGENTS.md', '.factory/'] } });
  expect((await client.callTool({ name: 'project_get', arguments: { name: project } })).structuredContent).toMatchObject({
    project: { name: project, workspace_isolation: false },
  });
  expect(errorOf(await client.callTool({ name: 'project_get', arguments: { name: 'missing' } })).code).toBe('PROJECT_NOT_FOUND');

  const run = await client.callTool({
    name: 'run_message',
    arguments: { project, user: 'signal:+491', message: 'echo from-mcp; touch /workspace/AGENTS.md' },
  });
  expect(run.isError).toBeFalsy();
  expect(run.structuredContent).toMatchObject({
    run: { project, exit_code: 1, stdout: 'from-mcp\n', stderr: expect.stringContaining('Read-only file system') },
  });

  const ws = await client.callTool({ name: 'workspace_list', arguments: { project } });
  expect(ws.structuredContent).toMatchObject({ workspaces: [{ tenant_key: 'signal:+491' }] });
  const list = await client.callTool({ name: 'project_list', arguments: {} });
  expect((list.structuredContent as { projects: Array<{ name: string }> }).projects.map((p) => p.name)).toContain(project);
}

describe('MCP server with the SDK Client', () => {
  it('over stdio: a spawned `berth mcp`', async () => {
    const client = new Client({ name: 'berth-test', version: '1' });
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [BERTH_BIN, '--home', home, 'mcp'],
      env: { PATH: process.env.PATH ?? '' },
      stderr: 'pipe',
    });
    await client.connect(transport);
    try {
      await exercise(client, 'via-stdio');
    } finally {
      await client.close();
    }
  });

  describe('over Streamable HTTP: a live `berth serve`', () => {
    let server: ChildProcess;
    let url: string;
    beforeAll(async () => {
      server = spawn(process.execPath, [BERTH_BIN, '--home', home, 'serve', '--port', '0'], {
        env: { PATH: process.env.PATH ?? '', BERTH_ADMIN_TOKEN: TOKEN, BERTH_LOG_LEVEL: 'warn' },
        stdio: ['ignore', 'pipe', 'inherit'],
      });
      url = await new Promise<string>((resolve, reject) => {
        let out = '';
        server.stdout?.on('data', (d: Buffer) => {
          out += d.toString();
          const m = /serving (http:\/\/\S+)/.exec(out);
          if (m && out.includes('ready')) resolve(m[1] as string);
        });
        server.once('exit', (code) => reject(new Error(`berth serve exited with ${code}: ${out}`)));
      });
    });
    afterAll(async () => {
      // Waited for: a stopping serve still writes (the audit's last summary) into the home removed next.
      const exited = new Promise((r) => server.once('exit', r));
      server.kill('SIGTERM');
      await exited;
    });

    it('needs the admin token', async () => {
      const res = await fetch(`${url}/mcp`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
      expect(res.status).toBe(401);
      const client = new Client({ name: 'berth-test', version: '1' });
      await expect(client.connect(new StreamableHTTPClientTransport(new URL(`${url}/mcp`)))).rejects.toThrow();
    });

    it('runs the same tools', async () => {
      const client = new Client({ name: 'berth-test', version: '1' });
      await client.connect(
        new StreamableHTTPClientTransport(new URL(`${url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${TOKEN}` } } }),
      );
      try {
        await exercise(client, 'via-http');
      } finally {
        await client.close();
      }
    });

    it('the same server answers the HTTP API (token printed nowhere: it came from the environment)', async () => {
      const res = await fetch(`${url}/api/projects/via-http`, { headers: { authorization: `Bearer ${TOKEN}` } });
      expect(res.status).toBe(200);
      expect(fs.existsSync(join(home, '.berth/admin-token'))).toBe(false);
    });
  });
});
