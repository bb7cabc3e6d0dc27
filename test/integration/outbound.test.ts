import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import { join, relative } from 'node:path';
import type { AddressInfo } from 'node:net';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ProjectMetadataSchema } from '../../src/config/metadata.js';
import { BerthConfigSchema } from '../../src/config/berth-config-schema.js';
import { MODEL_GATEWAY_BOUNDS } from '../../src/config/bounds.js';
import { createModelGateway } from '../../src/outbound/model-gateway.js';
import { readOutbound, type ModelCall } from '../../src/store/outbound-log.js';
import type { ApprovalDecision, ApprovalEvent, ApprovalView } from '../../src/store/approvals.js';
import { startFakeAnthropic, type FakeAnthropic } from '../fakes/anthropic-api.js';
import { BERTH_BIN, REPO_ROOT, cli, removeContainersOf, testHome, type TestHome } from '../helpers.js';
import { until } from '../helpers/until.js';

/**
 * How containers reach outside, end to end on the real engine: the model gateway (a run's
 * model.sock, reached through berth-bridge on the container's loopback, key added by berth)
 * and the egress proxy (allowlist, 403 with a reason, every decision logged). The containers
 * are busybox (the shell preset): these claims do not depend on which agent is calling.
 */
const KEY = `sk-ant-real-${Math.random().toString(36).slice(2)}-key`;
const b64 = (s: string) => Buffer.from(s).toString('base64');
const MiB = 1024 * 1024;

let fake: FakeAnthropic;
let web: http.Server;
let gonePort: number;
let webPort: number;
let webHits = 0;
let h: TestHome;
/** A loopback upstream that records every request byte for byte and answers 200 (a usage-shaped JSON). */
const ECHO_KEY = `sk-ECHO-${Math.random().toString(36).slice(2)}`;
interface Seen {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: string;
}
const echoSeen: Seen[] = [];
let echo: http.Server;

beforeAll(async () => {
  fake = await startFakeAnthropic({ apiKey: KEY });
  web = http.createServer((req, res) => {
    webHits++;
    res.end(`hello from loopback ${req.url}\n`);
  });
  await new Promise<void>((r) => web.listen(0, '127.0.0.1', r));
  webPort = (web.address() as AddressInfo).port;
  echo = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      echoSeen.push({
        method: req.method ?? '',
        url: req.url ?? '',
        headers: req.headers,
        body: body.length > MiB ? `<${body.length} bytes>` : body.toString(),
      });
      // As the real APIs do, the answer says whose account it billed: that stays with berth.
      res.writeHead(200, {
        'content-type': 'application/json',
        'openai-organization': 'org-operator',
        'openai-project': 'proj_operator',
        'anthropic-organization-id': 'org-uuid-operator',
      });
      res.end(JSON.stringify({ id: 'x', usage: { prompt_tokens: 3, completion_tokens: 2, input_tokens: 3, output_tokens: 2 } }));
    });
  });
  await new Promise<void>((r) => echo.listen(0, '127.0.0.1', r));
  const echoUrl = `http://127.0.0.1:${(echo.address() as AddressInfo).port}/base`;
  // A loopback port nothing listens on: a model service that cannot be reached.
  const closed = http.createServer();
  await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r));
  gonePort = (closed.address() as AddressInfo).port;
  await new Promise<void>((r) => closed.close(() => r()));
  h = testHome({
    config: [
      'models:',
      '  anthropic:',
      '    api: anthropic',
      `    url: ${fake.url}`,
      `    api_key: ${KEY}`,
      '  echo:',
      '    api: openai',
      `    url: ${echoUrl}`,
      `    api_key: ${ECHO_KEY}`,
      '  echoa:',
      '    api: anthropic',
      `    url: ${echoUrl}`,
      `    api_key: ${ECHO_KEY}`,
      '  gone:',
      '    api: anthropic',
      `    url: http://127.0.0.1:${gonePort}`,
      `    api_key: ${KEY}`,
      'egress:',
      `  private_hosts: ['localhost:${webPort}', 'localhost:${gonePort}']`,
      '',
    ].join('\n'),
  });
  h.create({
    name: 'ob',
    workspace_isolation: true,
    models: { upstreams: ['anthropic'], allow: ['claude-*'], budget: { requests_per_hour: 4 } },
    egress: { allow: [`localhost:${webPort}`, 'localhost'] },
  });
  h.create({ name: 'nomodel', workspace_isolation: true });
  h.create({ name: 'ask', workspace_isolation: true });
  h.create({ name: 'askop', workspace_isolation: true, chat: { approvals: 'operator', approval_timeout_seconds: 60 } });
  h.create({ name: 'obgone', workspace_isolation: true, models: { upstreams: ['gone'], allow: ['claude-*'] } });
  h.create({
    name: 'ob3',
    workspace_isolation: true,
    models: { upstreams: ['echo', 'echoa'], allow: ['gpt-cheap*', 'claude-*'], budget: { requests_per_hour: 1000 } },
  });
});
afterAll(async () => {
  await h[Symbol.asyncDispose]();
  await fake.close();
  web.close();
  echo.close();
});

const messagesCall = (model: string) =>
  `wget -q -S -O - --header 'content-type: application/json' --header 'anthropic-version: 2023-06-01' --post-data '{"model":"${model}","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"hi"}]}' "$ANTHROPIC_BASE_URL/v1/messages" 2>&1`;

describe('model gateway: keys never enter a container', () => {
  it('at level low (no network) the agent reaches its model on loopback; berth adds the real key; the container holds only the placeholder', async () => {
    fake.reset();
    const o = await h.run(
      'ob',
      'sig:+100',
      `echo "base=$ANTHROPIC_BASE_URL key=$ANTHROPIC_API_KEY"; ${messagesCall('claude-test-1')}`,
      'low',
    );
    expect(o.exitCode, o.stderr).toBe(0);
    expect(o.stdout).toContain('base=http://127.0.0.1:41400/anthropic key=berth-model-gateway-holds-the-key');
    expect(o.stdout).toContain('event: message_start');
    expect(o.stdout).toContain('event: message_stop');
    const seen = fake.messageRequests();
    expect(seen).toHaveLength(1);
    expect(seen[0]?.headers['x-api-key']).toBe(KEY);
    expect(seen[0]?.path).toBe('/v1/messages');
  });

  it('a tenant that reads its environment, every process, the socket directory and the filesystem finds no key', async () => {
    const hunt = [
      `echo ${b64(KEY)} | base64 -d > /tmp/k.pat`,
      'env; cat /proc/[0-9]*/environ /proc/[0-9]*/cmdline 2>/dev/null | tr "\\0" "\\n"; ls -la /run/berth',
      'echo "--- files holding the key:"',
      'grep -rlsF -f /tmp/k.pat /etc /usr /bin /run /home /workspace /tmp /memory 2>/dev/null',
      'echo "--- end"',
    ].join('; ');
    const o = await h.run('ob', 'sig:+100', hunt, 'low');
    expect(o.stdout).not.toContain(KEY);
    expect(o.stdout).toContain('ANTHROPIC_API_KEY=berth-model-gateway-holds-the-key');
    expect(o.stdout.split('--- files holding the key:\n')[1]).toBe('/tmp/k.pat\n--- end\n');
    // The run's socket directory holds sockets only, and the project without models gets none.
    expect(o.stdout).toMatch(/model\.sock/);
    const none = await h.run('nomodel', 'sig:+100', 'ls /run/berth; echo "key=${ANTHROPIC_API_KEY:-none}"', 'low');
    expect(none.stdout).toBe('gateway.sock\nkey=none\n');
  });

  it("a model the project does not allow is refused with berth's reason, never forwarded", async () => {
    fake.reset();
    const o = await h.run('ob', 'sig:+101', messagesCall('gpt-5'), 'low');
    expect(o.stdout).toContain('403');
    expect(fake.requests).toHaveLength(0);
    const log = readOutbound(h.berth.store.get('ob').paths.sessionsDir, { limit: 1 })[0];
    expect(log).toMatchObject({
      kind: 'model',
      tenant: 'sig:+101',
      status: 403,
      model: 'gpt-5',
      reason: expect.stringContaining('model "gpt-5" is not allowed'),
    });
  });

  it('a tenant past its hourly budget gets 429 (not to be retried) while another tenant still gets through; every call is logged without key or prompt', async () => {
    fake.reset();
    const o = await h.run(
      'ob',
      'sig:+102',
      Array.from({ length: 5 }, () => `${messagesCall('claude-test-1')} | grep -E "HTTP/1.1|x-should-retry|retry-after"`).join(
        '; echo ---; ',
      ),
      'low',
    );
    const answers = o.stdout.split('---\n');
    expect(answers.slice(0, 4).every((a) => a.includes('200 OK'))).toBe(true);
    expect(answers[4]).toContain('429');
    expect(fake.messageRequests()).toHaveLength(4);
    const other = await h.run('ob', 'sig:+103', messagesCall('claude-test-1'), 'low');
    expect(other.stdout).toContain('event: message_stop');
    const sessionsDir = h.berth.store.get('ob').paths.sessionsDir;
    const mine = readOutbound(sessionsDir, { limit: 100, keep: (r) => r.tenant === 'sig:+102' }) as ModelCall[];
    expect(mine.map((r) => r.status)).toEqual([429, 200, 200, 200, 200]);
    expect(mine[0]?.reason).toMatch(/model budget \(4 model calls per hour\) is spent/);
    expect(mine[1]).toMatchObject({
      kind: 'model',
      upstream: 'anthropic',
      model: 'claude-test-1',
      session: expect.any(String),
      input_tokens: expect.any(Number),
      output_tokens: expect.any(Number),
    });
    expect(mine[1]!.input_tokens + mine[1]!.output_tokens).toBeGreaterThan(0);
    const raw = fs.readFileSync(join(sessionsDir, 'outbound.jsonl'), 'utf8');
    expect(raw).not.toContain(KEY);
    expect(raw).not.toContain('"hi"');
  });
});

describe('model gateway: a model service that cannot be reached', () => {
  it('stops the run at the second call in a row that reaches nothing, and its record says why in words (not minutes of CLI retries)', async () => {
    // As an agent CLI does: call, get 502, call again. The loop never ends by itself: not timed
    // out, and two calls made, means berth stopped it at the second (no wall-clock bound).
    const o = await h.run('obgone', 'sig:+300', `while true; do ${messagesCall('claude-test-1')} >/dev/null; sleep 0.2; done`, 'low');
    expect(o.timedOut).toBe(false);
    expect(o.exitCode).not.toBe(0);
    expect(o.warnings.at(-1)).toMatch(
      /^stopped: its model service cannot be reached \("gone": connect ECONNREFUSED 127\.0\.0\.1:\d+\)\. The operator must fix it \(berth doctor\); send the message again later\.$/,
    );
    expect(o.record.run).toBe(o.runId);
    const calls = readOutbound(h.berth.store.get('obgone').paths.sessionsDir, { limit: 10 });
    expect(calls.filter((c) => c.kind === 'model').map((c) => (c as { status: number }).status)).toEqual([502, 502]);
  });
});

describe('model gateway: streaming', () => {
  it('forwards each event as it arrives, and concurrent streams do not wait for each other', async () => {
    const slow = await startFakeAnthropic({ apiKey: KEY, eventDelayMs: 150 });
    const dir = fs.mkdtempSync(join(os.tmpdir(), 'berth-mg-'));
    const config = BerthConfigSchema.parse({ models: { up: { api: 'anthropic', url: slow.url, api_key: KEY } } });
    const gateway = createModelGateway({ config: () => config, logger: pino({ level: 'silent' }) });
    const sessionsDir = join(dir, 'sessions');
    const metadata = ProjectMetadataSchema.parse({ name: 'p', models: { upstreams: ['up'], budget: { requests_per_hour: 100 } } });
    const server = await gateway.open({
      path: join(dir, 'model.sock'),
      run: { runId: 'r1', project: 'p', metadata, tenantKey: 't', session: 's', workspaceId: 'w1', sessionsDir },
      logger: pino({ level: 'silent' }),
      stopRun: () => undefined,
    });
    const stream = () =>
      new Promise<{ events: number[]; total: number; status: number }>((resolve, reject) => {
        const t0 = performance.now();
        const events: number[] = [];
        const req = http.request(
          {
            socketPath: join(dir, 'model.sock'),
            path: '/up/v1/messages',
            method: 'POST',
            headers: { 'content-type': 'application/json', 'x-api-key': 'placeholder' },
          },
          (res) => {
            res.on('data', (chunk: Buffer) => {
              for (const _ of chunk.toString().matchAll(/^event: /gm)) events.push(performance.now() - t0);
            });
            res.on('end', () => resolve({ events, total: performance.now() - t0, status: res.statusCode ?? 0 }));
          },
        );
        req.on('error', reject);
        req.end(
          JSON.stringify({
            model: 'm',
            max_tokens: 32,
            stream: true,
            messages: [{ role: 'user', content: 'REPLY: a reply long enough to need several text deltas of the stream' }],
          }),
        );
      });
    try {
      const one = await stream();
      expect(one.status).toBe(200);
      expect(one.events.length).toBeGreaterThanOrEqual(6);
      // The first event reaches the client long before the last one is even sent.
      expect(one.events[0]!).toBeLessThan(one.total - 4 * 150);
      const gaps = one.events.slice(1).map((t, i) => t - one.events[i]!);
      expect(Math.min(...gaps)).toBeGreaterThan(50);
      const t0 = performance.now();
      const many = await Promise.all(Array.from({ length: 6 }, stream));
      expect(many.every((s) => s.status === 200 && s.events.length === one.events.length)).toBe(true);
      expect(performance.now() - t0).toBeLessThan(one.total * 2.5);
      expect(slow.messageRequests().every((r) => r.headers['x-api-key'] === KEY)).toBe(true);
    } finally {
      await server.close();
      await slow.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('model gateway: what a tenant sends it directly', () => {
  it('forwards model calls only (no batches, no compressed or model-less bodies), counts a call the tenant cut short, bounds its connections', async () => {
    const up = await startFakeAnthropic({ apiKey: KEY, eventDelayMs: 100 });
    const dir = fs.mkdtempSync(join(os.tmpdir(), 'berth-mg2-'));
    const config = BerthConfigSchema.parse({ models: { up: { api: 'anthropic', url: up.url, api_key: KEY } } });
    const gateway = createModelGateway({ config: () => config, logger: pino({ level: 'silent' }) });
    const sessionsDir = join(dir, 'sessions');
    const metadata = ProjectMetadataSchema.parse({ name: 'p', models: { upstreams: ['up'] } });
    const socketPath = join(dir, 'model.sock');
    const server = await gateway.open({
      path: socketPath,
      run: { runId: 'r2', project: 'p', metadata, tenantKey: 't', session: 's', workspaceId: 'w1', sessionsDir },
      logger: pino({ level: 'silent' }),
      stopRun: () => undefined,
    });
    const call = (path: string, body: string, headers: Record<string, string> = {}) =>
      new Promise<number>((resolve, reject) => {
        const req = http.request(
          { socketPath, path, method: 'POST', headers: { 'content-type': 'application/json', ...headers } },
          (res) => {
            res.resume();
            res.on('end', () => resolve(res.statusCode ?? 0));
          },
        );
        req.on('error', reject);
        req.end(body);
      });
    try {
      expect(await call('/up/v1/messages/batches', JSON.stringify({ requests: [] }))).toBe(404);
      expect(await call('/up/v1/files', '{}')).toBe(404);
      expect(await call('/up/v1/messages', JSON.stringify({ max_tokens: 5, messages: [] }))).toBe(400);
      expect(await call('/up/v1/messages', JSON.stringify({ model: 'm', messages: [] }), { 'content-encoding': 'gzip' })).toBe(415);
      expect(up.requests).toHaveLength(0);
      // A stream the container drops after its first event is still paid for.
      await new Promise<void>((resolve) => {
        const req = http.request(
          { socketPath, path: '/up/v1/messages', method: 'POST', headers: { 'content-type': 'application/json' } },
          (res) => {
            res.once('data', () => {
              req.destroy();
              resolve();
            });
          },
        );
        req.end(
          JSON.stringify({
            model: 'm',
            max_tokens: 64,
            stream: true,
            messages: [{ role: 'user', content: 'REPLY: a long enough answer to stream in pieces' }],
          }),
        );
      });
      const last = await until(
        () => (readOutbound(sessionsDir, { limit: 1 }) as ModelCall[]).find((r) => r.status === 499),
        'the abandoned call to be recorded',
      );
      expect(last).toMatchObject({ status: 499, reason: 'the container closed the connection' });
      expect(last.input_tokens).toBeGreaterThan(0);
      // Connections past the per-run bound are closed at once, whoever opens them.
      const sockets = await Promise.all(
        Array.from(
          { length: 24 },
          () =>
            new Promise<net.Socket>((resolve) => {
              const s = net.connect(socketPath, () => resolve(s));
              s.on('error', () => undefined);
            }),
        ),
      );
      // Closed at once by berth; seen here when the close arrives (22 still open after 200 ms once, under a fresh run's load).
      await expect
        .poll(() => sockets.filter((s) => !s.destroyed && s.readyState === 'open').length, { timeout: 5000 })
        .toBeLessThanOrEqual(16);
      for (const s of sockets) s.destroy();
    } finally {
      await server.close();
      await up.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

/** One raw HTTP/1.1 request, as a tenant types it (no client normalizes its path). */
const rawRequest = (method: string, path: string, opts: { headers?: Record<string, string>; body?: string } = {}) =>
  [
    `${method} ${path} HTTP/1.1`,
    'Host: 127.0.0.1',
    'Connection: close',
    ...Object.entries(opts.headers ?? {}).map(([k, v]) => `${k}: ${v}`),
    ...(opts.body !== undefined && !opts.headers?.['Transfer-Encoding'] ? [`Content-Length: ${Buffer.byteLength(opts.body)}`] : []),
    '',
    opts.body ?? '',
  ].join('\r\n');
const JSON_TYPE = { 'Content-Type': 'application/json' };
const statusOf = (answer: string) => Number(/^HTTP\/1\.1 (\d{3})/m.exec(answer)?.[1] ?? 0);

/** Send raw requests one after another from inside a container of project ob3, byte for byte, to its model gateway (41400). */
async function rawCalls(requests: string[], tenant = 'web:mallory'): Promise<string[]> {
  const script = requests
    .map((r) => `echo ${b64(r)} | base64 -d > /tmp/req; (cat /tmp/req; sleep 0.3) | nc 127.0.0.1 41400; echo; echo ---`)
    .join('; ');
  const o = await h.run('ob3', tenant, script, 'low');
  expect(o.exitCode, o.stderr).toBe(0);
  return o.stdout.split('---\n').slice(0, requests.length);
}

describe("model gateway: a tenant's raw requests (outside attack 3, L3)", () => {
  it('dot segments (also %2e-encoded) and empty segments are refused with 400 before any matching and never forwarded; a plain path goes out as itself', async () => {
    echoSeen.length = 0;
    const bad = [
      '/echo/v1/models/..',
      '/echo/v1/models/.',
      '/echo/v1/models/%2e%2e',
      '/echo/v1/models/%2E%2e',
      '/echo/v1/models/.%2e',
      '/echo/v1/models/%2e',
      '/echo/./v1/models',
      '/echo/v1/models/../models',
      '/echo/v1/models/..%2f..%2fadmin',
      '/echo/v1/models/%2e%2e%2fadmin',
      '/echo//v1/models',
      '/echo/v1//models',
      '/echo/v1/models/',
      '/echo/v1/models/x%5c..',
    ];
    const answers = await rawCalls([
      ...bad.map((p) => rawRequest('GET', p)),
      rawRequest('GET', '/echo/v1/models'),
      rawRequest('GET', '/echo/v1/models/gpt-cheap-1.5?x=1'),
    ]);
    expect(answers.map(statusOf)).toEqual([...bad.map(() => 400), 200, 200]);
    expect(answers[0]).toContain('berth:');
    expect(echoSeen.map((s) => `${s.method} ${s.url}`)).toEqual(['GET /base/v1/models', 'GET /base/v1/models/gpt-cheap-1.5?x=1']);
    expect(echoSeen[0]?.headers.authorization).toBe(`Bearer ${ECHO_KEY}`);
  });

  it('the model allowlist holds whatever the method: a body on GET, a model call by GET/PUT/PATCH, a listing by POST are refused and never forwarded', async () => {
    echoSeen.length = 0;
    const expensive = '{"model":"gpt-expensive","messages":[]}';
    const answers = await rawCalls([
      rawRequest('GET', '/echo/v1/chat/completions', { headers: JSON_TYPE, body: '{"messages":[],"Model":"gpt-expensive"}' }),
      rawRequest('GET', '/echo/v1/chat/completions', { headers: JSON_TYPE, body: expensive }),
      rawRequest('GET', '/echo/v1/chat/completions'),
      rawRequest('PUT', '/echo/v1/chat/completions', { headers: JSON_TYPE, body: expensive }),
      rawRequest('PATCH', '/echoa/v1/messages', { headers: JSON_TYPE, body: '{"model":"claude-opus-x","messages":[]}' }),
      rawRequest('DELETE', '/echo/v1/models/gpt-expensive'),
      rawRequest('POST', '/echo/v1/models', { headers: JSON_TYPE, body: '{"model":"gpt-cheap"}' }),
      rawRequest('GET', '/echo/v1/models', { headers: JSON_TYPE, body: '{"model":"gpt-expensive"}' }),
      rawRequest('GET', '/echo/v1/models', { headers: { ...JSON_TYPE, 'Transfer-Encoding': 'chunked' }, body: '0\r\n\r\n' }),
      rawRequest('POST', '/echo/v1/chat/completions', { headers: JSON_TYPE, body: '{"model":"gpt-cheap-1","messages":[]}' }),
    ]);
    expect(answers.map(statusOf)).toEqual([405, 405, 405, 405, 405, 405, 405, 400, 400, 200]);
    expect(answers[0]).toMatch(/allow: POST/i);
    expect(echoSeen.map((s) => `${s.method} ${s.url} ${s.body}`)).toEqual([
      'POST /base/v1/chat/completions {"model":"gpt-cheap-1","messages":[]}',
    ]);
  });

  it('only the headers a model call needs reach the upstream (no organization, project, cookie or other client-chosen headers), per API kind', async () => {
    echoSeen.length = 0;
    const sent = {
      ...JSON_TYPE,
      Accept: 'application/json',
      'User-Agent': 'agent/1.0',
      'OpenAI-Organization': 'org-victim',
      'OpenAI-Project': 'proj_victim',
      'OpenAI-Beta': 'assistants=v2',
      'Anthropic-Version': '2023-06-01',
      'Anthropic-Beta': 'interleaved-thinking-2025-05-14',
      'Anthropic-Dangerous-Direct-Browser-Access': 'true',
      'X-Stainless-Lang': 'js',
      'Idempotency-Key': 'k1',
      'Helicone-Auth': 'Bearer other',
      Cookie: 'session=victim',
      'X-Forwarded-For': '10.0.0.1',
      Forwarded: 'for=10.0.0.1',
      Authorization: 'Bearer tenant-chosen',
      'X-Api-Key': 'tenant-chosen',
    };
    const answers = await rawCalls([
      rawRequest('POST', '/echo/v1/chat/completions', { headers: sent, body: '{"model":"gpt-cheap-1","messages":[]}' }),
      rawRequest('POST', '/echoa/v1/messages', { headers: sent, body: '{"model":"claude-x","max_tokens":1,"messages":[]}' }),
    ]);
    expect(answers.map(statusOf)).toEqual([200, 200]);
    const names = (s: Seen | undefined) =>
      Object.keys(s?.headers ?? {})
        .filter((n) => n !== 'host' && n !== 'connection')
        .sort();
    expect(names(echoSeen[0])).toEqual(['accept', 'accept-encoding', 'authorization', 'content-length', 'content-type', 'user-agent']);
    expect(echoSeen[0]?.headers.authorization).toBe(`Bearer ${ECHO_KEY}`);
    expect(names(echoSeen[1])).toEqual([
      'accept',
      'accept-encoding',
      'anthropic-beta',
      'anthropic-version',
      'content-length',
      'content-type',
      'user-agent',
      'x-api-key',
    ]);
    expect(echoSeen[1]?.headers).toMatchObject({
      'x-api-key': ECHO_KEY,
      'anthropic-version': '2023-06-01',
      'anthropic-beta': 'interleaved-thinking-2025-05-14',
    });
  });

  it('the upstream gets the body berth checked: a duplicate "model" key cannot name a second model; a body that is not one JSON object is refused', async () => {
    echoSeen.length = 0;
    const answers = await rawCalls([
      rawRequest('POST', '/echo/v1/chat/completions', {
        headers: JSON_TYPE,
        body: '{"model":"gpt-expensive","messages":[],"model":"gpt-cheap"}',
      }),
      rawRequest('POST', '/echo/v1/chat/completions', {
        headers: JSON_TYPE,
        body: '{"model":"gpt-cheap","messages":[],"model":"gpt-expensive"}',
      }),
      rawRequest('POST', '/echo/v1/chat/completions', { headers: JSON_TYPE, body: '[{"model":"gpt-cheap"}]' }),
      rawRequest('POST', '/echo/v1/chat/completions', { headers: JSON_TYPE, body: '{"model":"gpt-cheap"} {"model":"gpt-expensive"}' }),
    ]);
    expect(answers.map(statusOf)).toEqual([200, 403, 400, 400]);
    expect(echoSeen.map((s) => s.body)).toEqual(['{"model":"gpt-cheap","messages":[]}']);
  });
});

describe("model gateway: what the provider would run outside the sandbox (a tenant's raw requests)", () => {
  it('an mcp tool, a web search tool, mcp_servers and background: true are refused with the field named and never reach the upstream; a Claude Code-shaped call passes, its betas filtered, its answer without the operator organization headers', async () => {
    echoSeen.length = 0;
    const betas =
      'claude-code-20250219,interleaved-thinking-2025-05-14,context-management-2025-06-27,mcp-client-2025-11-20,files-api-2025-04-14';
    const claudeHeaders = { ...JSON_TYPE, 'Anthropic-Version': '2023-06-01', 'Anthropic-Beta': betas };
    const claudeCode = {
      model: 'claude-x',
      max_tokens: 64,
      system: [{ type: 'text', text: 'You are Claude Code' }],
      thinking: { type: 'adaptive' },
      context_management: { edits: [{ type: 'clear_thinking_20251015', keep: 'all' }] },
      tools: [
        { name: 'Bash', description: 'Run a command', input_schema: { type: 'object', properties: { command: { type: 'string' } } } },
      ],
      messages: [{ role: 'user', content: [{ type: 'text', text: 'hi' }] }],
    };
    const answers = await rawCalls([
      rawRequest('POST', '/echo/v1/responses', {
        headers: JSON_TYPE,
        body: JSON.stringify({
          model: 'gpt-cheap-1',
          input: 'hi',
          tools: [
            { type: 'function', name: 'f' },
            { type: 'mcp', server_label: 'x', server_url: 'https://attacker.example/mcp', require_approval: 'never' },
          ],
        }),
      }),
      rawRequest('POST', '/echo/v1/responses', {
        headers: JSON_TYPE,
        body: JSON.stringify({ model: 'gpt-cheap-1', input: 'hi', background: true }),
      }),
      rawRequest('POST', '/echoa/v1/messages', {
        headers: claudeHeaders,
        body: JSON.stringify({ ...claudeCode, tools: [...claudeCode.tools, { type: 'web_search_20250305', name: 'web_search' }] }),
      }),
      rawRequest('POST', '/echoa/v1/messages', {
        headers: claudeHeaders,
        body: JSON.stringify({ ...claudeCode, mcp_servers: [{ type: 'url', url: 'https://attacker.example/mcp', name: 'x' }] }),
      }),
      rawRequest('POST', '/echoa/v1/messages', { headers: claudeHeaders, body: JSON.stringify(claudeCode) }),
    ]);
    expect(answers.map(statusOf)).toEqual([400, 400, 400, 400, 200]);
    expect(answers[0]).toContain(
      '"message":"berth: tools[1].type \\"mcp\\" is not one berth forwards: berth allows only tools the agent runs in its sandbox',
    );
    expect(answers[1]).toContain('"message":"berth: background: a background response is fetched later');
    expect(answers[2]).toContain('"message":"berth: tools[1].type \\"web_search_20250305\\" is not one berth forwards');
    expect(answers[3]).toContain('"message":"berth: mcp_servers: ');
    expect(echoSeen.map((s) => `${s.method} ${s.url}`)).toEqual(['POST /base/v1/messages']);
    expect(JSON.parse(echoSeen[0]!.body)).toEqual(claudeCode);
    expect(echoSeen[0]?.headers['anthropic-beta']).toBe(
      'claude-code-20250219,interleaved-thinking-2025-05-14,context-management-2025-06-27',
    );
    expect(answers[4]).toMatch(/^content-type: application\/json\r$/im);
    expect(answers[4]).not.toMatch(/organization|openai-project|operator/i);
    const refused = (readOutbound(h.berth.store.get('ob3').paths.sessionsDir, { limit: 5 }) as ModelCall[])
      .filter((r) => r.status === 400)
      .map((r) => r.reason);
    expect(refused).toHaveLength(4);
  });
});

/** A raw request to a run's model.sock that declares `declared` body bytes and sends `sent` of them; its answer as it comes. */
function partialBody(socketPath: string, declared: number, sent: number, path = '/up/v1/messages') {
  const sock = net.connect(socketPath);
  let answer = '';
  sock.on('data', (d: Buffer) => (answer += d.toString('latin1')));
  sock.on('error', () => undefined);
  sock.write(`POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${declared}\r\n\r\n`);
  if (sent > 0) sock.write(Buffer.alloc(sent, 0x20));
  const closed = new Promise<void>((r) => sock.once('close', () => r()));
  return {
    sock,
    /** The status line's code once an answer came within `ms`, else 0 (the body is still being waited for): for "not answered yet" only, which a busy host never makes false. */
    async status(ms: number): Promise<number> {
      await Promise.race([closed, new Promise((r) => setTimeout(r, ms))]);
      return Number(/^HTTP\/1\.1 (\d{3})/.exec(answer)?.[1] ?? 0);
    },
    /** The status line's code, waited for (no wall-clock bound on how soon berth answers). */
    answered: async (): Promise<number> =>
      Number((await until(() => /^HTTP\/1\.1 (\d{3})/.exec(answer)?.[1] ?? (sock.destroyed && 'closed'), 'an answer')) || 0),
    answer: () => answer,
  };
}

describe('model gateway: buffered request bodies (outside attack 3, L4)', () => {
  it('bodies being received share one byte budget (per tenant and per process): past it a call gets 429 to retry, the budget comes back when a body leaves, and a stalled body is cut off', async () => {
    const up = await startFakeAnthropic({ apiKey: KEY });
    const dir = fs.mkdtempSync(join(os.tmpdir(), 'berth-mg4-'));
    const config = BerthConfigSchema.parse({ models: { up: { api: 'anthropic', url: up.url, api_key: KEY } } });
    const gateway = createModelGateway({ config: () => config, logger: pino({ level: 'silent' }) });
    const metadata = ProjectMetadataSchema.parse({ name: 'p', models: { upstreams: ['up'], budget: { requests_per_hour: 100 } } });
    const sessionsDir = join(dir, 'sessions');
    const open = (tenant: string) =>
      gateway.open({
        path: join(dir, `${tenant}.sock`),
        run: { runId: `r-${tenant}`, project: 'p', metadata, tenantKey: tenant, session: 's', workspaceId: 'w1', sessionsDir },
        logger: pino({ level: 'silent' }),
        stopRun: () => undefined,
      });
    const servers = [await open('a'), await open('b'), await open('c')];
    const sock = (tenant: string) => join(dir, `${tenant}.sock`);
    try {
      // The bounds: 32 MiB per tenant, 64 MiB per process (MODEL_GATEWAY_BOUNDS).
      const a1 = partialBody(sock('a'), 20 * MiB, 64 * 1024);
      expect(await a1.status(300)).toBe(0); // accepted: berth waits for the rest
      const a2 = partialBody(sock('a'), 20 * MiB, 0);
      expect(await a2.answered()).toBe(429); // a's 32 MiB would be passed
      expect(a2.answer()).toMatch(/retry-after: 1\r\n/i);
      expect(a2.answer()).toMatch(/x-should-retry: true\r\n/i);
      const b1 = partialBody(sock('b'), 20 * MiB, 64 * 1024);
      expect(await b1.status(300)).toBe(0); // another tenant still gets in
      const c1 = partialBody(sock('c'), 30 * MiB, 0);
      expect(await c1.answered()).toBe(429); // 20 + 20 + 30 MiB would pass the process's 64
      // A body sent in chunks (no length up front) is counted as it arrives.
      const chunked = net.connect(sock('b'));
      let chunkedAnswer = '';
      chunked.on('data', (d: Buffer) => (chunkedAnswer += d.toString('latin1')));
      chunked.on('error', () => undefined);
      chunked.write('POST /up/v1/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n');
      for (let i = 0; i < 16 && !chunked.destroyed && !chunkedAnswer; i++) {
        chunked.write(`${MiB.toString(16)}\r\n`);
        chunked.write(Buffer.alloc(MiB, 0x20));
        chunked.write('\r\n');
        await new Promise((r) => setTimeout(r, 20));
      }
      await until(() => /^HTTP\/1\.1 \d{3}/.test(chunkedAnswer), 'an answer to the chunked body');
      expect(/^HTTP\/1\.1 (\d{3})/.exec(chunkedAnswer)?.[1]).toBe('429');
      chunked.destroy();
      // The first body leaves (its sender gave up): its bytes are free again, and c's call goes through whole.
      a1.sock.destroy();
      await new Promise((r) => setTimeout(r, 200));
      const big = JSON.stringify({ model: 'm', max_tokens: 8, messages: [{ role: 'user', content: 'x'.repeat(30 * MiB) }] });
      const status = await new Promise<number>((resolve, reject) => {
        const req = http.request(
          { socketPath: sock('c'), path: '/up/v1/messages', method: 'POST', headers: { 'content-type': 'application/json' } },
          (res) => {
            res.resume();
            res.on('end', () => resolve(res.statusCode ?? 0));
          },
        );
        req.on('error', reject);
        req.end(big);
      });
      expect(status).toBe(200);
      expect(up.messageRequests()).toHaveLength(1);
      b1.sock.destroy();
      const refused = (readOutbound(sessionsDir, { limit: 10 }) as ModelCall[]).filter((r) => r.status === 429);
      expect(refused.map((r) => r.tenant).sort()).toEqual(['a', 'b', 'c']);
      expect(refused[0]?.reason).toMatch(/request bodies/);

      // A body that stops arriving is cut off (408) and its bytes freed: bodies come whole within bodyTimeoutMs.
      const quick = createModelGateway({
        config: () => config,
        logger: pino({ level: 'silent' }),
        bounds: { ...MODEL_GATEWAY_BOUNDS, bodyTimeoutMs: 300 },
      });
      const q = await quick.open({
        path: join(dir, 'q.sock'),
        run: { runId: 'r-q', project: 'p', metadata, tenantKey: 'q', session: 's', workspaceId: 'w1', sessionsDir },
        logger: pino({ level: 'silent' }),
        stopRun: () => undefined,
      });
      servers.push(q);
      const stalled = partialBody(join(dir, 'q.sock'), 30 * MiB, 1024);
      expect(await stalled.answered()).toBe(408); // cut off by bodyTimeoutMs: no other path answers 408
      const next = partialBody(join(dir, 'q.sock'), 30 * MiB, 1024);
      expect(await next.status(100)).toBe(0); // the stalled one's 30 MiB were given back
      next.sock.destroy();
    } finally {
      for (const s of servers) await s.close();
      await up.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('the attack as it was run: one run, 8 connections × 33 MB bodies; berth buffers one and refuses the rest (429, retryable), so its RSS grows by about one body; two tenants still get their largest calls through', async () => {
    assertDistFresh();
    const dir = fs.realpathSync(fs.mkdtempSync(join(os.tmpdir(), 'berth-l4-')));
    fs.writeFileSync(
      join(dir, 'berth.yaml'),
      [
        'models:',
        '  echo:',
        '    api: openai',
        `    url: http://127.0.0.1:${(echo.address() as AddressInfo).port}/base`,
        `    api_key: ${ECHO_KEY}`,
        '',
      ].join('\n'),
    );
    const created = cli(['--home', dir, 'project', 'create', 'mem', '--isolation', '--model', 'echo']);
    expect(created.code, created.stderr).toBe(0);
    // A 31 MB call counts as ~8M tokens until its answer says otherwise: this test is about memory, not budgets.
    const metadataFile = join(
      dir,
      fs.readdirSync(dir, { recursive: true, encoding: 'utf8' }).find((f) => f.endsWith('mem/metadata.json')) as string,
    );
    const metadata = JSON.parse(fs.readFileSync(metadataFile, 'utf8'));
    fs.writeFileSync(
      metadataFile,
      JSON.stringify({ ...metadata, models: { ...metadata.models, budget: { requests_per_hour: 1000, tokens_per_hour: 1_000_000_000 } } }),
    );
    const serve = await startServe(dir);
    try {
      const run = async (message: string) => {
        const r = await fetch(`${serve.url}/api/projects/mem/runs`, {
          method: 'POST',
          headers: { authorization: `Bearer ${serve.token}`, 'content-type': 'application/json' },
          body: JSON.stringify({ user: 'web:dave', message }),
        });
        return (await r.json()) as { exit_code: number; stdout: string; stderr: string };
      };
      const run2 = async (message: string) => {
        const r = await fetch(`${serve.url}/api/projects/mem/runs`, {
          method: 'POST',
          headers: { authorization: `Bearer ${serve.token}`, 'content-type': 'application/json' },
          body: JSON.stringify({ user: 'web:erin', message }),
        });
        return (await r.json()) as { exit_code: number; stdout: string; stderr: string };
      };
      expect((await run('echo warm-up')).stdout).toBe('warm-up\n'); // what every run loads is loaded before measuring
      await new Promise((r) => setTimeout(r, 500));
      const before = rssMiB(serve.pid);
      let peak = before;
      const sampler = setInterval(() => (peak = Math.max(peak, rssMiB(serve.pid))), 25);
      const attack = [
        'for i in 1 2 3 4 5 6 7 8; do',
        "  ( printf 'POST /echo/v1/chat/completions HTTP/1.1\\r\\nHost: x\\r\\nContent-Type: application/json\\r\\nContent-Length: 33000000\\r\\n\\r\\n'; head -c 32900000 /dev/zero | tr '\\0' a; sleep 8 ) | nc 127.0.0.1 41400 > /tmp/o$i 2>&1 &",
        'done; sleep 11; cat /tmp/o* | grep -c "^HTTP/1.1 429"; kill $(pidof nc) 2>/dev/null; true',
      ].join('\n');
      const out = await run(attack);
      clearInterval(sampler);
      const after = rssMiB(serve.pid);
      console.log(
        `[outbound L4] 8 × 33 MB stalled bodies, one run: berth serve RSS ${before.toFixed(0)} MiB before, peak ${peak.toFixed(0)} MiB (+${(peak - before).toFixed(0)}), ${after.toFixed(0)} MiB after; 429 answers the container read: ${out.stdout.trim()}`,
      );
      expect(out.exit_code, out.stderr).toBe(0);
      expect(peak - before).toBeLessThan(96);
      const log = fs.readdirSync(dir, { recursive: true, encoding: 'utf8' }).find((f) => f.endsWith('sessions/outbound.jsonl'));
      const records = () => readOutbound(join(dir, log ?? 'missing', '..'), { limit: 100 }) as ModelCall[];
      expect(records().filter((r) => r.status === 429 && /request bodies/.test(r.reason ?? ''))).toHaveLength(7);

      // The worst that passes: two tenants at once, each sending whole 31 MB calls (parsed and re-serialized).
      await new Promise((r) => setTimeout(r, 500)); // the stalled body's connection is gone: its bytes are free
      echoSeen.length = 0;
      const whole = [
        `printf '{"model":"gpt-x","messages":[{"role":"user","content":"' > /tmp/b; head -c 32000000 /dev/zero | tr '\\0' a >> /tmp/b; printf '"}]}' >> /tmp/b`,
        'for i in 1 2 3; do ( printf "POST /echo/v1/chat/completions HTTP/1.1\\r\\nHost: x\\r\\nContent-Type: application/json\\r\\nContent-Length: %d\\r\\nConnection: close\\r\\n\\r\\n" $(wc -c < /tmp/b); cat /tmp/b; sleep 3 ) | nc 127.0.0.1 41400 | head -1; done',
      ].join('\n');
      const base = rssMiB(serve.pid);
      let top = base;
      const sampler2 = setInterval(() => (top = Math.max(top, rssMiB(serve.pid))), 25);
      const both = await Promise.all([run(whole), run2(whole)]);
      clearInterval(sampler2);
      console.log(
        `[outbound L4] 2 tenants × 3 whole 31 MB calls at once: berth serve RSS ${base.toFixed(0)} MiB before, peak ${top.toFixed(0)} MiB (+${(top - base).toFixed(0)}), ${rssMiB(serve.pid).toFixed(0)} MiB after; answers ${JSON.stringify(both.map((b) => b.stdout.trim().split('\n')))}`,
      );
      // Both tenants' largest calls fit at once. Their RSS is printed, not bounded: it is V8 garbage
      // (each call's text, parse and re-serialization) that the next major GC takes back.
      expect(both.map((b) => b.stdout)).toEqual(Array(2).fill('HTTP/1.1 200 OK\r\n'.repeat(3)));
      expect(echoSeen.filter((s) => /^<320000\d\d bytes>$/.test(s.body))).toHaveLength(6);
    } finally {
      serve.proc.kill('SIGTERM');
      await Promise.race([serve.exited, new Promise((r) => setTimeout(r, 10_000))]);
      await removeContainersOf(dir);
      fs.rmSync(dir, { recursive: true, force: true });
    }
  }, 180_000);
});

function rssMiB(pid: number): number {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0) / 1024;
}

/** bin/berth.js runs dist/: a dist older than src/outbound would measure yesterday's gateway. */
function assertDistFresh(): void {
  for (const name of fs.readdirSync(join(REPO_ROOT, 'src', 'outbound'))) {
    const src = join(REPO_ROOT, 'src', 'outbound', name);
    const built = join(REPO_ROOT, 'dist', 'outbound', name.replace(/\.ts$/, '.js'));
    if (!fs.existsSync(built) || fs.statSync(built).mtimeMs < fs.statSync(src).mtimeMs)
      throw new Error(`dist/ is older than ${relative(REPO_ROOT, src)}: run "npm run build" first (bin/berth.js runs dist/)`);
  }
}

/** `berth serve` of a home as its own process (its RSS is berth's alone), once it says ready. */
function startServe(
  dir: string,
): Promise<{ proc: ReturnType<typeof spawn>; pid: number; url: string; token: string; exited: Promise<void> }> {
  const proc = spawn(process.execPath, [BERTH_BIN, '--home', dir, 'serve', '--port', '0'], {
    env: { PATH: process.env.PATH ?? '', ...(process.env.DOCKER_HOST ? { DOCKER_HOST: process.env.DOCKER_HOST } : {}) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let err = '';
  proc.stderr?.on('data', (d: Buffer) => (err = (err + d.toString()).slice(-8192)));
  const exited = new Promise<void>((r) => proc.once('exit', () => r()));
  return new Promise((resolve, reject) => {
    let out = '';
    proc.stdout?.on('data', (d: Buffer) => {
      out += d.toString();
      if (out.includes('ready\n'))
        resolve({
          proc,
          pid: proc.pid as number,
          url: /serving (\S+)/.exec(out)?.[1] as string,
          token: fs.readFileSync(join(dir, '.berth/admin-token'), 'utf8').trim(),
          exited,
        });
    });
    proc.once('exit', (code) => reject(new Error(`berth serve exited ${code} before ready: ${out}\n${err}`)));
  });
}

describe('egress proxy (medium and high)', () => {
  it('an allowlisted host is reached through the proxy; any other host gets 403 with the reason, logged; low has no proxy at all', async () => {
    webHits = 0;
    const allowed = await h.run('ob', 'sig:+200', `wget -q -O - http://localhost:${webPort}/via-proxy 2>&1`, 'medium');
    expect(allowed.stdout).toBe('hello from loopback /via-proxy\n');
    expect(webHits).toBe(1);
    const denied = await h.run('ob', 'sig:+200', 'wget -S -O - http://example.com/ 2>&1; echo rc=$?', 'high');
    expect(denied.stdout).toContain('403');
    expect(denied.stdout).not.toContain('rc=0');
    const log = readOutbound(h.berth.store.get('ob').paths.sessionsDir, { limit: 5, keep: (r) => r.kind === 'egress' });
    expect(log[0]).toMatchObject({
      kind: 'egress',
      host: 'example.com',
      port: 80,
      status: 403,
      tenant: 'sig:+200',
      reason: expect.stringContaining('not in project "ob"\'s egress allowlist'),
    });
    expect(log[1]).toMatchObject({ kind: 'egress', host: 'localhost', port: webPort, status: 200 });
    const low = await h.run('ob', 'sig:+200', `wget -q -O - http://localhost:${webPort}/low 2>&1; echo rc=$?`, 'low');
    expect(low.stdout).toMatch(/rc=1/);
    expect(webHits).toBe(1);
  });

  it('CONNECT tunnels to an allowlisted host only; a host on the list that resolves to a private address is refused unless the operator named it', async () => {
    webHits = 0;
    const tunnel = await h.run(
      'ob',
      'sig:+201',
      `printf 'CONNECT localhost:${webPort} HTTP/1.1\\r\\nHost: localhost\\r\\n\\r\\nGET /tunnel HTTP/1.0\\r\\n\\r\\n' | nc 127.0.0.1 41401`,
      'medium',
    );
    expect(tunnel.stdout).toContain('200 Connection Established');
    expect(tunnel.stdout).toContain('hello from loopback /tunnel');
    // "localhost" (ports 80/443) is on the list, but only localhost:<port> is a private host the operator allowed.
    const privateName = await h.run('ob', 'sig:+201', `printf 'CONNECT localhost:443 HTTP/1.1\\r\\n\\r\\n' | nc 127.0.0.1 41401`, 'medium');
    expect(privateName.stdout).toContain('403 Forbidden');
    expect(privateName.stdout).toContain('resolves to a private or loopback address');
    expect(webHits).toBe(1);
  });
});

describe('egress approvals: a host outside the allowlist is asked for, the connection waits in the proxy', () => {
  /** A run watched as a chat watches it: each question is answered by `answer` (a person's chat). */
  const watched = (project: string, tenant: string, message: string, answer: (a: ApprovalView) => ApprovalDecision) => {
    const events: ApprovalEvent[] = [];
    const run = h.berth.runner.run({
      project,
      tenantKey: tenant,
      message,
      level: 'medium',
      onApproval: (e) => {
        events.push(e);
        if (e.type === 'asked') h.berth.approvals.answer(e.approval.id, answer(e.approval), { actor: `tenant:${tenant}`, project, tenant });
      },
    });
    return { run, events };
  };
  const fetch = (path: string) => `wget -q -O - http://localhost:${webPort}/${path} 2>&1; echo rc=$?`;

  it('denied: the agent gets 403 with the reason and the host is never reached; allowed once: the same request goes through', async () => {
    webHits = 0;
    const denied = watched('ask', 'web:ann', fetch('denied'), () => 'deny');
    const d = await denied.run;
    expect(d.stdout).toMatch(/403/);
    expect(d.stdout).toMatch(/rc=1/);
    expect(denied.events.map((e) => e.type)).toEqual(['asked', 'answered']);
    expect(denied.events[0]).toMatchObject({
      approval: { target: `localhost:${webPort}`, tenant: 'web:ann', project: 'ask', approver: 'person' },
    });
    expect(webHits).toBe(0);
    const allowed = watched('ask', 'web:ann', fetch('allowed'), () => 'once');
    expect((await allowed.run).stdout).toBe(`hello from loopback /allowed\nrc=0\n`);
    expect(webHits).toBe(1);
    const log = readOutbound(h.berth.store.get('ask').paths.sessionsDir, { limit: 2, keep: (r) => r.kind === 'egress' });
    expect(log.map((r) => (r.kind === 'egress' ? r.status : 0))).toEqual([200, 403]);
    // "once" is this message's: a run that nobody watches is refused again, at once.
    const api = await h.run('ask', 'web:ann', fetch('api'), 'medium');
    expect(api.stdout).toMatch(/403/);
    expect(webHits).toBe(1);
    const actions = h.berth.audit.list({ project: 'ask', limit: 10 }).map((e) => [e.action, e.actor]);
    expect(actions).toEqual(
      expect.arrayContaining([
        ['approval.deny', 'tenant:web:ann'],
        ['approval.allow_once', 'tenant:web:ann'],
      ]),
    );
  });

  it('allowed, and the connection still fails (the name does not resolve, nothing listens): the chat is told why, once per host', async () => {
    const nowhere = watched(
      'ask',
      'web:nia',
      `wget -q -O - http://nowhere.invalid/x 2>&1; wget -q -O - http://nowhere.invalid/y 2>&1; ${fetch('z').replace(`${webPort}`, `${gonePort}`)}`,
      () => 'once',
    );
    const o = await nowhere.run;
    expect(o.stdout).toMatch(/rc=1/);
    const told = nowhere.events.filter((e) => e.type === 'unreachable');
    expect(told).toEqual([
      { type: 'unreachable', target: 'nowhere.invalid:80', reason: 'nowhere.invalid does not resolve' },
      { type: 'unreachable', target: `localhost:${gonePort}`, reason: 'it refused the connection (ECONNREFUSED)' },
    ]);
    // Denied is the answer itself: nothing more to tell.
    const denied = watched('ask', 'web:nia', 'wget -q -O - http://nowhere.invalid/d 2>&1; echo rc=$?', () => 'deny');
    await denied.run;
    expect(denied.events.map((e) => e.type)).toEqual(['asked', 'answered']);
  });

  it('allowed for the session: the conversation keeps it, so its next run reaches the host with nobody asked', async () => {
    webHits = 0;
    const first = watched('ask', 'web:sam', fetch('one'), () => 'session');
    expect((await first.run).stdout).toContain('hello from loopback /one');
    expect(h.berth.sessions.list(h.berth.store.get('ask'), { tenantKey: 'web:sam' })[0]?.approved_hosts).toEqual([`localhost:${webPort}`]);
    const next = await h.run('ask', 'web:sam', fetch('two'), 'medium');
    expect(next.stdout).toContain('hello from loopback /two');
    expect(webHits).toBe(2);
  });

  it('approvals "operator": the run waits for "berth approvals allow" from another process (the CLI)', async () => {
    webHits = 0;
    // Nobody watches this run (an API run): the operator is asked all the same.
    const run = h.run('askop', 'sig:+300', fetch('operator'), 'medium');
    let id = '';
    await expect
      .poll(
        () => {
          const listed = cli(['--home', h.home, 'approvals', 'list', '--json']);
          id = (JSON.parse(listed.stdout || '[]') as ApprovalView[])[0]?.id ?? '';
          return id;
        },
        { timeout: 20_000, interval: 300 },
      )
      .not.toBe('');
    expect(cli(['--home', h.home, 'approvals', 'list']).stdout).toMatch(
      new RegExp(`^${id}  askop  sig:\\+300  session \\S+  wants localhost:${webPort}  \\(operator only;`),
    );
    const bogus = cli(['--home', h.home, 'approvals', 'allow', 'ffffffffff']);
    expect(bogus).toMatchObject({ code: 30, stderr: expect.stringMatching(/^APPROVAL_NOT_FOUND: /) });
    const allowed = cli(['--home', h.home, 'approvals', 'allow', id]);
    expect(allowed).toMatchObject({ code: 0, stdout: expect.stringMatching(/^allowed once: localhost:\d+ for sig:\+300 in askop/) });
    expect((await run).stdout).toContain('hello from loopback /operator');
    expect(cli(['--home', h.home, 'approvals', 'deny', id])).toMatchObject({ code: 30 });
    expect(h.berth.audit.list({ project: 'askop', limit: 5 })).toEqual(
      expect.arrayContaining([expect.objectContaining({ action: 'approval.allow_once', actor: 'operator' })]),
    );
  });
});
