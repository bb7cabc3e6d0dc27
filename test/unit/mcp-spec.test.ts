import { createHmac } from 'node:crypto';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_TOOLS } from '../../src/mcp/admin-tools.js';
import { createToolServer } from '../../src/mcp/server.js';
import { listenHttp, type HttpSurface } from '../../src/cli/serve.js';
import { unitHome, type TestHome } from '../helpers.js';

/**
 * berth's MCP endpoints as the official SDK's Client and the specs see them (defects MCP1 and
 * MCP2 of channels-real-4): an unknown tool is the protocol error the MCP spec shows (JSON-RPC
 * -32602 "Unknown tool: <name>"), not a tool result; and a 401 names its scheme in
 * WWW-Authenticate (RFC 6750 §3), so a client knows a bearer token is wanted.
 */
const TOKEN = 'mcp-spec-admin-token-0123456789abcdef';
const HOOK_SECRET = 'mcp-spec-hook-secret-0123456789abcdef';
const CHALLENGE = 'Bearer realm="berth"';
const quiet = { out: () => undefined, err: () => undefined };
let h: TestHome;
let server: HttpSurface;

beforeAll(async () => {
  h = unitHome({
    config: [
      'bridges:',
      '  webhook:',
      '    hooks:',
      '      ci:',
      `        secret: ${HOOK_SECRET}`,
      'routes:',
      '  webhook: { project: spec }',
      '',
    ].join('\n'),
  });
  h.create({ name: 'spec' });
  server = await listenHttp(h.berth, { host: '127.0.0.1', port: 0, token: TOKEN }, quiet);
}, 60_000);
afterAll(async () => {
  await server?.close();
  await h?.[Symbol.asyncDispose]();
});

/** The SDK's answer to an unknown tool: the error it throws, or what it resolved to. */
async function callUnknown(client: Client): Promise<unknown> {
  try {
    return { resolved: await client.callTool({ name: 'no_such_tool', arguments: {} }) };
  } catch (err) {
    return err;
  }
}

describe('MCP1: an unknown tool is JSON-RPC -32602 "Unknown tool: …", as the MCP spec shows', () => {
  it('in memory: the SDK Client gets an McpError, not an isError result', async () => {
    const tools = createToolServer('berth', ADMIN_TOOLS, () => {
      throw new Error('no tool runs: the name is unknown');
    });
    const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
    await tools.connect(serverSide);
    const client = new Client({ name: 'spec-test', version: '1' });
    await client.connect(clientSide);
    try {
      const err = await callUnknown(client);
      expect(err).toBeInstanceOf(McpError);
      expect((err as McpError).code).toBe(ErrorCode.InvalidParams);
      expect((err as McpError).message).toContain('Unknown tool: no_such_tool');
      // berth's own body rides along as data, like every -32602 it answers.
      expect((err as McpError).data).toMatchObject({ error: { code: 'USAGE' } });
      // A known tool still answers (the error is for the unknown name only).
      const listed = await client.listTools();
      expect(listed.tools.map((t) => t.name)).toContain('project_list');
    } finally {
      await client.close();
    }
  });

  it("over Streamable HTTP (/mcp with the admin token): the same error, and the raw answer is exactly the spec's shape", async () => {
    const client = new Client({ name: 'spec-test', version: '1' });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${server.url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${TOKEN}` } } }),
    );
    try {
      const err = await callUnknown(client);
      expect(err).toBeInstanceOf(McpError);
      expect((err as McpError).code).toBe(-32602);
    } finally {
      await client.close();
    }
    const res = await fetch(`${server.url}/mcp`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'invalid_tool_name', arguments: {} } }),
    });
    const answer = (await res.json()) as { id: number; error: { code: number; message: string } };
    expect([res.status, answer.id, answer.error.code, answer.error.message]).toEqual([200, 3, -32602, 'Unknown tool: invalid_tool_name']);
  });
});

describe('MCP2: a 401 says which scheme it wants (WWW-Authenticate: Bearer realm="berth")', () => {
  const rpc = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' });
  const mcpHeaders = (auth?: string) => ({
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    ...(auth ? { authorization: auth } : {}),
  });

  it.each([
    ['/mcp without a token', '/mcp', undefined],
    ['/mcp with a wrong token', '/mcp', 'Bearer not-the-admin-token'],
    ['/mcp/session without a token', '/mcp/session', undefined],
    ['/mcp/session with an unknown session token', '/mcp/session', 'Bearer bst_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA'],
    ['/mcp/session with the admin token (not a session token)', '/mcp/session', `Bearer ${TOKEN}`],
  ])('%s', async (_label, path, auth) => {
    const res = await fetch(`${server.url}${path}`, { method: 'POST', headers: mcpHeaders(auth), body: rpc });
    const body = (await res.json()) as { error: { code: string } };
    expect([res.status, res.headers.get('www-authenticate'), body.error.code]).toEqual([401, CHALLENGE, 'UNAUTHORIZED']);
  });

  it('the other bearer 401s of the API share it: /api, /metrics, /openapi.json', async () => {
    for (const path of ['/api/projects', '/metrics', '/openapi.json']) {
      const res = await fetch(`${server.url}${path}`, { headers: { authorization: 'Bearer wrong' } });
      expect([path, res.status, res.headers.get('www-authenticate')]).toEqual([path, 401, CHALLENGE]);
    }
  });

  it("a 401 that does not ask for a bearer token has no bearer challenge: a webhook's wrong signature, the chat and the console (cookies)", async () => {
    const ts = String(Math.floor(Date.now() / 1000));
    const hook = await fetch(`${server.url}/hooks/ci`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'x-berth-timestamp': ts,
        'x-berth-signature': `v1=${createHmac('sha256', 'wrong').update('x').digest('hex')}`,
      },
      body: '{}',
    });
    expect([hook.status, hook.headers.get('www-authenticate')]).toEqual([401, null]);
    const console = await fetch(`${server.url}/console/api/state`);
    expect([console.status, console.headers.get('www-authenticate')]).toEqual([401, null]);
  });

  it('the SDK Client without the token is refused, and with it connects', async () => {
    const refused = new Client({ name: 'spec-test', version: '1' });
    await expect(refused.connect(new StreamableHTTPClientTransport(new URL(`${server.url}/mcp`)))).rejects.toThrow(/401|Unauthorized/i);
    const client = new Client({ name: 'spec-test', version: '1' });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${server.url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${TOKEN}` } } }),
    );
    expect((await client.listTools()).tools.length).toBeGreaterThan(0);
    await client.close();
  });
});
