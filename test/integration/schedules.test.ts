import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listenHttp, type HttpSurface } from '../../src/cli/serve.js';
import { webhookSignature } from '../../src/channels/webhook-signing.js';
import { testHome, type TestHome } from '../helpers.js';

/**
 * A schedule made in a chat runs on a real berth serve (Docker, the shell project) and its
 * answer arrives in that chat with no message to answer: a signed webhook whose answers go to a
 * callback. The run is recorded with the schedule's id.
 */
const TOKEN = 'schedules-admin-token-0123456789abcdef';
const SECRET = 'schedules-secret-0123456789abcdef012345';
const quiet = { out: () => undefined, err: () => undefined };
let h: TestHome;
let server: HttpSurface;
let receiver: http.Server;
const callbacks: Array<{ id: string; user: string; conversation?: string; reply: string }> = [];

beforeAll(async () => {
  receiver = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      callbacks.push(JSON.parse(body));
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
  const port = (receiver.address() as AddressInfo).port;
  h = testHome({
    config: [
      'bridges:',
      '  webhook:',
      '    hooks:',
      '      ops:',
      `        secret: ${SECRET}`,
      '        reply: callback',
      `        callback_url: http://127.0.0.1:${port}/answers`,
      'routes:',
      '  webhook: { project: sched }',
      'egress:',
      `  private_hosts: ['127.0.0.1:${port}']`,
      '',
    ].join('\n'),
  });
  h.create({ name: 'sched', workspace_isolation: true });
  server = await listenHttp(h.berth, { host: '127.0.0.1', port: 0, token: TOKEN }, quiet);
}, 60_000);
afterAll(async () => {
  await server?.close();
  await new Promise<void>((r) => receiver.close(() => r()));
  await h?.[Symbol.asyncDispose]();
});

const say = async (id: string, text: string) => {
  const raw = JSON.stringify({ id, user: 'ann', conversation: 'c1', text });
  const timestamp = String(Math.floor(Date.now() / 1000));
  const res = await fetch(`${server.url}/hooks/ops`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'x-berth-timestamp': timestamp,
      'x-berth-signature': webhookSignature(SECRET, timestamp, raw),
    },
    body: raw,
  });
  expect(res.status).toBe(202);
};
const until = async (what: () => boolean) => {
  for (let i = 0; i < 600 && !what(); i++) await new Promise((r) => setTimeout(r, 100));
  expect(what()).toBe(true);
};

describe('schedules on a real berth', () => {
  it('"/at +2s …" in a chat: confirmed, then the run\'s answer posted to that chat, marked scheduled, recorded with its schedule id', async () => {
    await say('m1', '/at +2s echo scheduled hello');
    await until(() => callbacks.length >= 1);
    const [schedule] = h.berth.schedules.list({ project: 'sched' });
    expect(schedule).toBeDefined();
    expect(callbacks[0]).toEqual({
      id: 'm1',
      user: 'ann',
      conversation: 'c1',
      reply: expect.stringMatching(
        new RegExp(`^berth: once, .*: echo scheduled hello \\(schedule ${schedule?.id}\\)\\. /cancel ${schedule?.id} ends it\\.$`),
      ),
    });
    await until(() => callbacks.length >= 2);
    expect(callbacks[1]).toMatchObject({
      user: 'ann',
      conversation: 'c1',
      reply: `[scheduled ${schedule?.id}: echo scheduled hello]\nscheduled hello`,
    });
    const runs = h.berth.admin.listRuns('sched', { user: 'hook:ops:ann' }).runs;
    expect(runs.filter((r) => r.schedule === schedule?.id)).toHaveLength(1);
    expect(h.berth.schedules.list({ project: 'sched' })).toEqual([]); // a once that ran is done
  }, 90_000);

  it('background jobs: /jobs lists a long run while it holds the chat, /stop ends it, and its answer still arrives, saying so', async () => {
    const seen = callbacks.length;
    await say('long', 'echo started; sleep 60; echo never');
    const runs = () => h.berth.admin.openRuns('sched').filter((r) => r.phase === 'started');
    await until(() => runs().length === 1);
    const [running] = runs();
    await say('jobs', '/jobs');
    await until(() => callbacks.some((c) => c.id === 'jobs'));
    expect(callbacks.find((c) => c.id === 'jobs')?.reply).toMatch(new RegExp(`^berth: running now:\n${running?.run} — running, `));
    await say('stop', '/stop');
    await until(() => callbacks.some((c) => c.id === 'long'));
    expect(callbacks.find((c) => c.id === 'stop')?.reply).toBe(`berth: stopping ${running?.run}; its answer follows.`);
    expect(callbacks.find((c) => c.id === 'long')?.reply).toBe(
      'started\n\n[berth stopped the agent: hook:ops:ann asked it to stop (/stop)]',
    );
    expect(callbacks.length).toBe(seen + 3);
    const [record] = h.berth.admin.listRuns('sched', { limit: 1 }).runs;
    expect(record?.run).toBe(running?.run);
    expect(record?.exit_code).toBe(137);
  }, 90_000);

  it('a time that came while berth was down runs once, late, at the next start; never again', async () => {
    await server.close();
    const made = h.berth.schedules.addFor('sched', {
      user: 'hook:ops:ann',
      at: '+1s',
      task: 'echo late but once',
      chat: { channel: 'webhook', chat: JSON.stringify(['ops', 'ann', 'c1']) },
    });
    await new Promise((r) => setTimeout(r, 1500)); // its time passes with no berth running
    const seen = callbacks.length;
    server = await listenHttp(h.berth, { host: '127.0.0.1', port: 0, token: TOKEN }, quiet);
    await until(() => callbacks.length > seen);
    expect(callbacks.slice(seen)).toEqual([
      {
        id: expect.stringMatching(new RegExp(`^schedule:${made.id}\\.`)),
        user: 'ann',
        conversation: 'c1',
        reply: `[scheduled ${made.id}: echo late but once]\nlate but once`,
      },
    ]);
    await new Promise((r) => setTimeout(r, 2500)); // a few ticks more: nothing is posted again
    expect(callbacks.length).toBe(seen + 1);
    expect(h.berth.schedules.list({ project: 'sched' })).toEqual([]);
  }, 90_000);
});
