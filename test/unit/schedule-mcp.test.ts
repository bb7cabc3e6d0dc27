import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serveApp, unitHome, type TestHome } from '../helpers.js';

/**
 * The agent's schedule tool at /mcp/session (a real MCP client on loopback): it schedules as its
 * session's tenant, in its conversation, bounded by berth.yaml's count and minimum interval.
 */
const TOKEN = 'mcp-schedule-admin-token-0123456789';
let h: TestHome;
let base: string;
let close: () => void;

beforeAll(async () => {
  h = unitHome({ config: 'schedules:\n  per_tenant: 2\n  min_interval_seconds: 3600\n' });
  h.create({ name: 'sch' });
  ({ base, close } = await serveApp(h.berth, TOKEN));
}, 30_000);
afterAll(async () => {
  close();
  await h[Symbol.asyncDispose]();
});

type Result = Awaited<ReturnType<Client['callTool']>>;
const textOf = (r: Result) => (r.content as Array<{ text: string }>)[0]?.text ?? '';

async function sessionClient(project: string, session: string): Promise<Client> {
  h.berth.admin.openSession(project, session, 'signal:+49');
  const { token } = h.berth.admin.mintSessionToken(project, session);
  const client = new Client({ name: 'berth-test', version: '1' });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`${base}/mcp/session`), { requestInit: { headers: { authorization: `Bearer ${token}` } } }),
  );
  return client;
}

describe('MCP schedule tool', () => {
  it("schedules in the agent's own conversation as its tenant; refused past the count and under the minimum interval", async () => {
    const client = await sessionClient('sch', 'conv1');
    try {
      const tools = (await client.listTools()).tools.map((t) => t.name);
      expect(tools).toContain('schedule');
      const made = await client.callTool({ name: 'schedule', arguments: { at: '+2h', task: 'check the deploy' } });
      expect(made.isError).toBeFalsy();
      const [schedule] = (made.structuredContent as { schedules: Array<Record<string, unknown>> }).schedules;
      expect(schedule).toMatchObject({
        project: 'sch',
        tenant: 'signal:+49',
        session: 'conv1',
        created_by: 'agent:conv1',
        task: 'check the deploy',
      });
      expect((made.structuredContent as { message: string }).message).toMatch(/^once, .*: check the deploy \(schedule s[0-9a-f]{8}\)$/);

      const tooOften = await client.callTool({ name: 'schedule', arguments: { every: '10m', task: 'poll' } });
      expect(tooOften.isError).toBe(true);
      expect(JSON.parse(textOf(tooOften)).error).toMatchObject({ code: 'CONFIG_INVALID', issues: [{ field: 'every' }] });

      await client.callTool({ name: 'schedule', arguments: { every: 'day at 08:00', task: 'morning summary' } });
      const third = await client.callTool({ name: 'schedule', arguments: { at: '+3h', task: 'one more' } });
      expect(JSON.parse(textOf(third)).error.code).toBe('LIMIT_REACHED');

      const listed = await client.callTool({ name: 'schedule', arguments: { action: 'list' } });
      expect((listed.structuredContent as { schedules: unknown[] }).schedules).toHaveLength(2);
      const cancelled = await client.callTool({ name: 'schedule', arguments: { action: 'cancel', id: schedule?.id } });
      expect(cancelled.isError).toBeFalsy();
      expect(h.berth.schedules.list({ project: 'sch' })).toHaveLength(1);
    } finally {
      await client.close();
    }
  });

  it("another tenant's agent cannot see or cancel them", async () => {
    const [theirs] = h.berth.schedules.list({ project: 'sch' });
    h.berth.admin.openSession('sch', 'other', 'signal:+1');
    const { token } = h.berth.admin.mintSessionToken('sch', 'other');
    const client = new Client({ name: 'berth-test', version: '1' });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${base}/mcp/session`), { requestInit: { headers: { authorization: `Bearer ${token}` } } }),
    );
    try {
      expect(
        ((await client.callTool({ name: 'schedule', arguments: { action: 'list' } })).structuredContent as { schedules: unknown[] })
          .schedules,
      ).toEqual([]);
      const cancel = await client.callTool({ name: 'schedule', arguments: { action: 'cancel', id: theirs?.id } });
      expect(JSON.parse(textOf(cancel)).error.code).toBe('NOT_FOUND');
    } finally {
      await client.close();
    }
  });
});
