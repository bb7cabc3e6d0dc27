import { describe, expect, it } from 'vitest';
import { createToolServer } from '../../src/mcp/server.js';
import { SESSION_TOOLS } from '../../src/mcp/session-tools.js';
import { unitHome, type TestHome } from '../helpers.js';
import { connectInMemory, errorBodyOf, textOf } from '../helpers/mcp-memory.js';

/**
 * The session MCP tools (what /mcp/session serves an agent), client and server in memory on the
 * in-memory launcher. The session is the context's, as the token's is over HTTP: no argument names it.
 */
const USER = 'web:ann';

/** A project with one session of USER's at `level`, and a client whose every call is that session's. */
async function sessionClient(h: TestHome, level: 'low' | 'medium' | 'high') {
  h.create({ name: 'bot', agent: 'shell' });
  h.berth.admin.openSession('bot', 's1', USER);
  h.berth.admin.updateSession('bot', 's1', { permission_level: level });
  const context = () => ({
    tools: h.berth.sessionTools,
    session: { project: 'bot', session: 's1' },
    files: h.berth.fileTools.forCaller({ project: 'bot', tenantKey: USER }),
  });
  return connectInMemory(createToolServer('berth-session', SESSION_TOOLS, context));
}

describe('session tools over MCP (in memory)', () => {
  it('tools/list: shell, memory and the file tools; a file read answers with its text alone (no output schema)', async () => {
    await using h = unitHome();
    await using client = await sessionClient(h, 'low');
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name)).toEqual([
      'shell_run',
      'memory_search',
      'memory_write',
      'send_file',
      'schedule',
      'list_folders',
      'workspace_profile',
      'read_file_by_id',
      'write_file_by_id',
      'delete_file_by_id',
      'get_file_info_by_id',
    ]);
    expect(tools.find((t) => t.name === 'read_file_by_id')?.outputSchema).toBeUndefined();
    expect(tools.find((t) => t.name === 'shell_run')).toMatchObject({
      annotations: { readOnlyHint: false, destructiveHint: true },
      inputSchema: {
        type: 'object',
        properties: { argv: { type: 'array' }, command: { type: 'string' }, task: { enum: ['test', 'lint', 'format'] } },
      },
    });
    // No tool takes the session, project or tenant: the connection is the identity.
    for (const t of tools) expect(Object.keys(t.inputSchema.properties ?? {})).not.toEqual(expect.arrayContaining(['session']));
  });

  it("shell_run runs in the session's sandbox and answers with the run; the run is the context's session", async () => {
    await using h = unitHome();
    await using client = await sessionClient(h, 'low');
    const ran = await client.callTool({ name: 'shell_run', arguments: { argv: ['echo', 'from', 'the', 'session'] } });
    expect(ran.isError).toBeUndefined();
    expect(ran.structuredContent).toMatchObject({
      run: { project: 'bot', session: 's1', permission_level: 'low', exit_code: 0, stdout: 'from the session\n' },
    });
    expect(JSON.parse(textOf(ran))).toEqual(ran.structuredContent);
  });

  it('what the level does not allow is a tool error with PERMISSION_DENIED and its rule; nothing is written', async () => {
    await using h = unitHome();
    await using client = await sessionClient(h, 'low');
    const refused = await client.callTool({ name: 'memory_write', arguments: { text: 'remember this' } });
    expect(refused.isError).toBe(true);
    expect(errorBodyOf(refused).error).toMatchObject({
      code: 'PERMISSION_DENIED',
      rule: 'tool_not_allowed',
      message: 'memory_write is not allowed at permission level low',
    });
    const shell = await client.callTool({ name: 'shell_run', arguments: { command: 'echo hi; id' } });
    expect(shell.isError).toBe(true);
    expect(errorBodyOf(shell).error.code).toBe('PERMISSION_DENIED');
    const both = await client.callTool({ name: 'shell_run', arguments: { argv: ['echo'], command: 'echo' } });
    expect(errorBodyOf(both).error).toMatchObject({
      code: 'CONFIG_INVALID',
      issues: [expect.objectContaining({ reason: 'give exactly one of argv, command or task' })],
    });
  });

  it('at high, memory_write adds an entry that memory_search then finds', async () => {
    await using h = unitHome();
    await using client = await sessionClient(h, 'high');
    const written = await client.callTool({ name: 'memory_write', arguments: { text: 'the deploy key rotates on Mondays' } });
    expect(written.isError).toBeUndefined();
    const found = await client.callTool({ name: 'memory_search', arguments: { query: 'deploy' } });
    expect((found.structuredContent as { entries: Array<{ text: string }> }).entries.map((e) => e.text)).toEqual([
      'the deploy key rotates on Mondays',
    ]);
  });

  it("the file tools act on the session tenant's workspace: what its agent wrote is read back by folder id", async () => {
    await using h = unitHome();
    await using client = await sessionClient(h, 'low');
    expect(
      (await h.berth.runner.run({ project: 'bot', tenantKey: USER, sessionId: 's1', message: 'write notes.txt written-by-the-agent' }))
        .exitCode,
    ).toBe(0);
    const listed = await client.callTool({ name: 'list_folders', arguments: { scope: 'my_private' } });
    const [mine] = (listed.structuredContent as { folders: Array<{ uuid: string }> }).folders;
    const read = await client.callTool({
      name: 'read_file_by_id',
      arguments: { folderId: mine?.uuid, scope: 'private', path: 'notes.txt' },
    });
    expect(read.isError).toBeUndefined();
    expect(read.structuredContent).toBeUndefined();
    expect(textOf(read)).toBe('written-by-the-agent');
    const escape = await client.callTool({
      name: 'read_file_by_id',
      arguments: { folderId: mine?.uuid, scope: 'private', path: '../../metadata.json' },
    });
    expect(escape.isError).toBe(true);
    expect(errorBodyOf(escape).error).toMatchObject({ code: 'E_SANDBOX_VIOLATION', path: '../../metadata.json' });
  });
});
