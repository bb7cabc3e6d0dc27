import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it } from 'vitest';
import { ADMIN_TOOLS } from '../../src/mcp/admin-tools.js';
import { createToolServer } from '../../src/mcp/server.js';
import { unitHome, type TestHome } from '../helpers.js';
import { connectInMemory, errorBodyOf, textOf } from '../helpers/mcp-memory.js';

/**
 * The admin MCP tools (what `berth mcp` and /mcp serve), client and server in memory on the
 * in-memory launcher: the listing a client sees, real calls, and errors as berth's body.
 */
const adminClient = (h: TestHome) =>
  connectInMemory(createToolServer('berth', ADMIN_TOOLS, () => ({ admin: h.berth.admin, operator: h.berth.operator })));

describe('admin tools over MCP (in memory)', () => {
  it('tools/list names every tool in order, each with an object input schema, hints and an output schema', async () => {
    await using h = unitHome();
    await using client = await adminClient(h);
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name)).toEqual([
      'project_create',
      'project_get',
      'project_list',
      'project_update',
      'workspace_list',
      'run_message',
      'session_get',
      'session_update',
      'project_grant',
      'project_revoke',
      'workflow_run',
    ]);
    for (const t of tools) {
      expect(t.description?.length).toBeGreaterThan(0);
      expect(t.inputSchema.type).toBe('object');
      expect(t.outputSchema?.type).toBe('object');
      expect(Object.keys(t.annotations ?? {}).sort()).toEqual(['destructiveHint', 'idempotentHint', 'readOnlyHint']);
    }
    const get = tools.find((t) => t.name === 'project_get');
    expect(get?.annotations).toEqual({ readOnlyHint: true, destructiveHint: false, idempotentHint: true });
    expect(get?.inputSchema).toMatchObject({
      type: 'object',
      required: ['name'],
      additionalProperties: false,
      properties: { name: { type: 'string' } },
    });
    expect(tools.find((t) => t.name === 'run_message')?.inputSchema).toMatchObject({
      required: expect.arrayContaining(['project', 'user', 'message']),
    });
  });

  it('project_create then run_message: the project is made and the agent answers, as structuredContent and the same JSON as text', async () => {
    await using h = unitHome();
    await using client = await adminClient(h);
    const created = await client.callTool({ name: 'project_create', arguments: { name: 'bot', agent: 'shell' } });
    expect(created.isError).toBeUndefined();
    expect(created.structuredContent).toMatchObject({ project: { name: 'bot', workspace_isolation: false } });
    expect(JSON.parse(textOf(created))).toEqual(created.structuredContent);
    expect(h.berth.store.get('bot').metadata.agent).toBe('shell');

    const ran = await client.callTool({
      name: 'run_message',
      arguments: { project: 'bot', user: 'web:ann', message: 'echo hello from mcp' },
    });
    expect(ran.isError).toBeUndefined();
    expect(ran.structuredContent).toMatchObject({ run: { project: 'bot', exit_code: 0, stdout: 'hello from mcp\n', timed_out: false } });
    const listed = await client.callTool({ name: 'project_list', arguments: {} });
    expect((listed.structuredContent as { projects: Array<{ name: string }> }).projects.map((p) => p.name)).toEqual(['bot']);
  });

  it("a tool's failure is a result with isError and berth's error body (code, message, the field at fault)", async () => {
    await using h = unitHome();
    await using client = await adminClient(h);
    const missing = await client.callTool({ name: 'project_get', arguments: { name: 'nope' } });
    expect(missing.isError).toBe(true);
    expect(missing.structuredContent).toBeUndefined();
    expect(errorBodyOf(missing).error).toMatchObject({ code: 'PROJECT_NOT_FOUND' });

    const bad = await client.callTool({ name: 'project_create', arguments: { name: 'bot', bogus: 1 } });
    expect(bad.isError).toBe(true);
    expect(errorBodyOf(bad).error).toMatchObject({ code: 'CONFIG_INVALID', issues: [expect.objectContaining({ field: 'bogus' })] });
    expect(() => h.berth.store.get('bot')).toThrow(expect.objectContaining({ code: 'PROJECT_NOT_FOUND' }));
  });

  it('an unknown tool is a protocol error (-32602 "Unknown tool: <name>"), not a result', async () => {
    await using h = unitHome();
    await using client = await adminClient(h);
    const refused = await client.callTool({ name: 'project_frob', arguments: {} }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(McpError);
    expect(refused).toMatchObject({ code: -32602, message: 'MCP error -32602: Unknown tool: project_frob' });
  });
});
