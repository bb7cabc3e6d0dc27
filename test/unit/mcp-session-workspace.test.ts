import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serveApp, unitHome, type TestHome } from '../helpers.js';

/**
 * /mcp/session's file tools act on the session's own workspace. A session in workspace mode
 * "session" has a workspace of its own (the one its runs mount at /workspace); the tenant's
 * default workspace, which its other sessions share, is not this session's and stays out of reach.
 * A real MCP client (the SDK's Streamable HTTP transport) against the app on loopback, with the
 * in-memory launcher writing the files as the agent would.
 */
const TOKEN = 'mcp-session-ws-admin-token-0123456789';
let h: TestHome;
let base: string;
let close: () => void;

beforeAll(async () => {
  h = unitHome();
  ({ base, close } = await serveApp(h.berth, TOKEN));
}, 30_000);
afterAll(async () => {
  close();
  await h[Symbol.asyncDispose]();
});

type Result = Awaited<ReturnType<Client['callTool']>>;
const textOf = (r: Result) => (r.content as Array<{ text: string }>)[0]?.text;
const errorOf = (r: Result) => JSON.parse(textOf(r) ?? '{}').error;

async function sessionClient(project: string, session: string): Promise<Client> {
  const { token } = h.berth.admin.mintSessionToken(project, session);
  const client = new Client({ name: 'berth-test', version: '1' });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`${base}/mcp/session`), { requestInit: { headers: { authorization: `Bearer ${token}` } } }),
  );
  return client;
}

describe('/mcp/session file tools in workspace mode "session"', () => {
  it("read the session's own workspace (what its agent wrote there), never the tenant's default one", async () => {
    h.create({ name: 'wsm', agent: 'shell', workspace_isolation: true });
    // The tenant's default workspace, written by the agent of another session of the same tenant.
    const shared = await h.berth.runner.run({
      project: 'wsm',
      tenantKey: 'web:ann',
      sessionId: 'plain',
      message: 'write tenant.txt tenant-default-data',
    });
    expect(shared.exitCode).toBe(0);
    // A session with a workspace of its own: its agent writes there.
    h.berth.admin.openSession('wsm', 'own', 'web:ann');
    h.berth.admin.updateSession('wsm', 'own', { workspace: { mode: 'session' } });
    const own = await h.berth.runner.run({
      project: 'wsm',
      tenantKey: 'web:ann',
      sessionId: 'own',
      message: 'write notes.txt session-data',
    });
    expect(own.exitCode).toBe(0);
    expect(own.workspaceId).not.toBe(shared.workspaceId);

    const client = await sessionClient('wsm', 'own');
    try {
      // Its "own" folder is the session's workspace, the one its runs use.
      const mine = await client.callTool({ name: 'list_folders', arguments: { scope: 'my_private' } });
      expect(mine.structuredContent).toMatchObject({ folders: [{ uuid: own.workspaceId, scope: 'private' }] });
      const read = await client.callTool({
        name: 'read_file_by_id',
        arguments: { folderId: own.workspaceId, scope: 'private', path: 'notes.txt' },
      });
      expect([read.isError, textOf(read)]).toEqual([undefined, 'session-data']);
      // A write lands there too, where the session's next run sees it.
      const wrote = await client.callTool({
        name: 'write_file_by_id',
        arguments: { folderId: own.workspaceId, scope: 'private', path: 'from-tool.txt', content: 'via-mcp' },
      });
      expect(wrote.isError).toBeFalsy();
      expect(
        (await h.berth.runner.run({ project: 'wsm', tenantKey: 'web:ann', sessionId: 'own', message: 'cat from-tool.txt' })).stdout,
      ).toBe('via-mcp');

      // The tenant's default workspace is another session's, not this one's: refused, in either scope.
      for (const scope of ['private', 'shared'] as const) {
        const theirs = await client.callTool({
          name: 'read_file_by_id',
          arguments: { folderId: shared.workspaceId, scope, path: 'tenant.txt' },
        });
        expect(theirs.isError, scope).toBe(true);
        expect(errorOf(theirs).code, scope).toBe('PERMISSION_DENIED');
      }
      const info = await client.callTool({
        name: 'get_file_info_by_id',
        arguments: { folderId: shared.workspaceId, scope: 'private', path: 'tenant.txt' },
      });
      expect(errorOf(info).code).toBe('PERMISSION_DENIED');
      const overwrite = await client.callTool({
        name: 'write_file_by_id',
        arguments: { folderId: shared.workspaceId, scope: 'private', path: 'tenant.txt', content: 'x' },
      });
      expect(errorOf(overwrite).code).toBe('PERMISSION_DENIED');
      expect(
        (await h.berth.runner.run({ project: 'wsm', tenantKey: 'web:ann', sessionId: 'plain', message: 'cat tenant.txt' })).stdout,
      ).toBe('tenant-default-data');
      // And no listing names it.
      for (const scope of ['my_private', 'my_shared', 'team_private', 'team_shared', 'org_shared']) {
        const listed = await client.callTool({ name: 'list_folders', arguments: { scope } });
        expect(JSON.stringify(listed.structuredContent), scope).not.toContain(shared.workspaceId);
      }
    } finally {
      await client.close();
    }

    // The tenant-mode session's token still works on the tenant's default workspace (unchanged).
    const plain = await sessionClient('wsm', 'plain');
    try {
      const read = await plain.callTool({
        name: 'read_file_by_id',
        arguments: { folderId: shared.workspaceId, scope: 'private', path: 'tenant.txt' },
      });
      expect(textOf(read)).toBe('tenant-default-data');
      const other = await plain.callTool({
        name: 'read_file_by_id',
        arguments: { folderId: own.workspaceId, scope: 'private', path: 'notes.txt' },
      });
      expect(errorOf(other).code).toBe('PERMISSION_DENIED');
    } finally {
      await plain.close();
    }
  });

  it('a session switched to mode "session" before any run: a file the tool writes is in the workspace its first run mounts', async () => {
    h.create({ name: 'wsm2', agent: 'shell', workspace_isolation: true });
    h.berth.admin.openSession('wsm2', 'fresh', 'web:bea');
    h.berth.admin.updateSession('wsm2', 'fresh', { workspace: { mode: 'session' } });
    const client = await sessionClient('wsm2', 'fresh');
    try {
      const mine = await client.callTool({ name: 'list_folders', arguments: { scope: 'my_private' } });
      const folderId = (mine.structuredContent as { folders: Array<{ uuid: string }> }).folders[0]?.uuid;
      const wrote = await client.callTool({
        name: 'write_file_by_id',
        arguments: { folderId, scope: 'private', path: 'plan.md', content: 'first' },
      });
      expect(wrote.isError).toBeFalsy();
    } finally {
      await client.close();
    }
    const run = await h.berth.runner.run({ project: 'wsm2', tenantKey: 'web:bea', sessionId: 'fresh', message: 'cat plan.md' });
    expect(run.stdout).toBe('first');
    // The workspace the tool made is the session's, not one more of the tenant's (the admin's list tells them apart).
    expect(h.berth.admin.listWorkspaces('wsm2')).toEqual([expect.objectContaining({ id: run.workspaceId, session: 'fresh' })]);
  });
});
