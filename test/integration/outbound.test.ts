import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ProjectMetadataSchema } from '../../src/config/metadata.js';
import { BerthConfigSchema } from '../../src/config/berth-config-schema.js';
import { createModelGateway } from '../../src/outbound/model-gateway.js';
import { readOutbound, type ModelCall } from '../../src/store/outbound-log.js';
import { startFakeAnthropic, type FakeAnthropic } from '../fakes/anthropic-api.js';
import { testHome, type TestHome } from '../helpers.js';

/**
 * How containers reach outside, end to end on the real engine: the model gateway (a run's
 * model.sock, reached through berth-bridge on the container's loopback, key added by berth)
 * and the egress proxy (allowlist, 403 with a reason, every decision logged). The containers
 * are busybox (the shell preset): these claims do not depend on which agent is calling.
 */
const KEY = `sk-ant-real-${Math.random().toString(36).slice(2)}-key`;
const b64 = (s: string) => Buffer.from(s).toString('base64');

let fake: FakeAnthropic;
let web: http.Server;
let webPort: number;
let webHits = 0;
let h: TestHome;

beforeAll(async () => {
  fake = await startFakeAnthropic({ apiKey: KEY });
  web = http.createServer((req, res) => {
    webHits++;
    res.end(`hello from loopback ${req.url}\n`);
  });
  await new Promise<void>((r) => web.listen(0, '127.0.0.1', r));
  webPort = (web.address() as AddressInfo).port;
  h = testHome({
    config: [
      'models:',
      '  anthropic:',
      '    api: anthropic',
      `    url: ${fake.url}`,
      `    api_key: ${KEY}`,
      'egress:',
      `  private_hosts: ['localhost:${webPort}']`,
      '',
    ].join('\n'),
  });
  h.create({ name: 'ob', workspace_isolation: true, models: { upstreams: ['anthropic'], allow: ['claude-*'], budget: { requests_per_hour: 4 } }, egress: { allow: [`localhost:${webPort}`, 'localhost'] } });
  h.create({ name: 'nomodel', workspace_isolation: true });
});
afterAll(async () => {
  await h[Symbol.asyncDispose]();
  await fake.close();
  web.close();
});

const messagesCall = (model: string) =>
  `wget -q -S -O - --header 'content-type: application/json' --header 'anthropic-version: 2023-06-01' --post-data '{"model":"${model}","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"hi"}]}' "$ANTHROPIC_BASE_URL/v1/messages" 2>&1`;

describe('model gateway: keys never enter a container', () => {
  it('at level low (no network) the agent reaches its model on loopback; berth adds the real key; the container holds only the placeholder', async () => {
    fake.reset();
    const o = await h.run('ob', 'sig:+100', `echo "base=$ANTHROPIC_BASE_URL key=$ANTHROPIC_API_KEY"; ${messagesCall('claude-test-1')}`, 'low');
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
    expect(log).toMatchObject({ kind: 'model', tenant: 'sig:+101', status: 403, model: 'gpt-5', reason: expect.stringContaining('model "gpt-5" is not allowed') });
  });

  it('a tenant past its hourly budget gets 429 (not to be retried) while another tenant still gets through; every call is logged without key or prompt', async () => {
    fake.reset();
    const o = await h.run('ob', 'sig:+102', Array.from({ length: 5 }, () => `${messagesCall('claude-test-1')} | grep -E "HTTP/1.1|x-should-retry|retry-after"`).join('; echo ---; '), 'low');
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
    expect(mine[1]).toMatchObject({ kind: 'model', upstream: 'anthropic', model: 'claude-test-1', session: expect.any(String), input_tokens: expect.any(Number), output_tokens: expect.any(Number) });
    expect(mine[1]!.input_tokens + mine[1]!.output_tokens).toBeGreaterThan(0);
    const raw = fs.readFileSync(join(sessionsDir, 'outbound.jsonl'), 'utf8');
    expect(raw).not.toContain(KEY);
    expect(raw).not.toContain('"hi"');
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
    const server = await gateway.open({ path: join(dir, 'model.sock'), run: { runId: 'r1', project: 'p', metadata, tenantKey: 't', session: 's', sessionsDir }, logger: pino({ level: 'silent' }) });
    const stream = () =>
      new Promise<{ events: number[]; total: number; status: number }>((resolve, reject) => {
        const t0 = performance.now();
        const events: number[] = [];
        const req = http.request({ socketPath: join(dir, 'model.sock'), path: '/up/v1/messages', method: 'POST', headers: { 'content-type': 'application/json', 'x-api-key': 'placeholder' } }, (res) => {
          res.on('data', (chunk: Buffer) => {
            for (const _ of chunk.toString().matchAll(/^event: /gm)) events.push(performance.now() - t0);
          });
          res.on('end', () => resolve({ events, total: performance.now() - t0, status: res.statusCode ?? 0 }));
        });
        req.on('error', reject);
        req.end(JSON.stringify({ model: 'm', max_tokens: 32, stream: true, messages: [{ role: 'user', content: 'REPLY: a reply long enough to need several text deltas of the stream' }] }));
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
    const server = await gateway.open({ path: socketPath, run: { runId: 'r2', project: 'p', metadata, tenantKey: 't', session: 's', sessionsDir }, logger: pino({ level: 'silent' }) });
    const call = (path: string, body: string, headers: Record<string, string> = {}) =>
      new Promise<number>((resolve, reject) => {
        const req = http.request({ socketPath, path, method: 'POST', headers: { 'content-type': 'application/json', ...headers } }, (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode ?? 0));
        });
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
        const req = http.request({ socketPath, path: '/up/v1/messages', method: 'POST', headers: { 'content-type': 'application/json' } }, (res) => {
          res.once('data', () => {
            req.destroy();
            resolve();
          });
        });
        req.end(JSON.stringify({ model: 'm', max_tokens: 64, stream: true, messages: [{ role: 'user', content: 'REPLY: a long enough answer to stream in pieces' }] }));
      });
      await new Promise((r) => setTimeout(r, 300));
      const last = readOutbound(sessionsDir, { limit: 1 })[0] as ModelCall;
      expect(last).toMatchObject({ status: 499, reason: 'the container closed the connection' });
      expect(last.input_tokens).toBeGreaterThan(0);
      // Connections past the per-run bound are closed at once, whoever opens them.
      const sockets = await Promise.all(Array.from({ length: 24 }, () => new Promise<net.Socket>((resolve) => {
        const s = net.connect(socketPath, () => resolve(s));
        s.on('error', () => undefined);
      })));
      await new Promise((r) => setTimeout(r, 200));
      expect(sockets.filter((s) => !s.destroyed && s.readyState === 'open').length).toBeLessThanOrEqual(16);
      for (const s of sockets) s.destroy();
    } finally {
      await server.close();
      await up.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

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
    expect(log[0]).toMatchObject({ kind: 'egress', host: 'example.com', port: 80, status: 403, tenant: 'sig:+200', reason: expect.stringContaining('not in project "ob"\'s egress allowlist') });
    expect(log[1]).toMatchObject({ kind: 'egress', host: 'localhost', port: webPort, status: 200 });
    const low = await h.run('ob', 'sig:+200', `wget -q -O - http://localhost:${webPort}/low 2>&1; echo rc=$?`, 'low');
    expect(low.stdout).toMatch(/rc=1/);
    expect(webHits).toBe(1);
  });

  it('CONNECT tunnels to an allowlisted host only; a host on the list that resolves to a private address is refused unless the operator named it', async () => {
    webHits = 0;
    const tunnel = await h.run('ob', 'sig:+201', `printf 'CONNECT localhost:${webPort} HTTP/1.1\\r\\nHost: localhost\\r\\n\\r\\nGET /tunnel HTTP/1.0\\r\\n\\r\\n' | nc 127.0.0.1 41401`, 'medium');
    expect(tunnel.stdout).toContain('200 Connection Established');
    expect(tunnel.stdout).toContain('hello from loopback /tunnel');
    // "localhost" (ports 80/443) is on the list, but only localhost:<port> is a private host the operator allowed.
    const privateName = await h.run('ob', 'sig:+201', `printf 'CONNECT localhost:443 HTTP/1.1\\r\\n\\r\\n' | nc 127.0.0.1 41401`, 'medium');
    expect(privateName.stdout).toContain('403 Forbidden');
    expect(privateName.stdout).toContain('resolves to a private or loopback address');
    expect(webHits).toBe(1);
  });
});
