import { spawnSync } from 'node:child_process';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { sign as octokitSign, verify as octokitVerify } from '@octokit/webhooks-methods';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listenHttp, type HttpSurface } from '../../src/cli/serve.js';
import { unitHome, type TestHome } from '../helpers.js';
import { until } from '../helpers/until.js';

/**
 * Signed webhooks against signers berth did not write (channels-real-4 §4): berth's own scheme
 * signed by openssl (the docs' line) and by GitHub's @octokit/webhooks-methods, and the Standard
 * Webhooks format (standardwebhooks.com) signed and verified by its reference library
 * `standardwebhooks`, so an off-the-shelf sender works. Also W1: an unknown key is named as the
 * field. A real berth serve on loopback, on the in-memory launcher (`echo` answers).
 */
const TOKEN = 'webhook-signers-admin-token-0123456789';
const BERTH_SECRET = 'berth-scheme-secret-0123456789abcdef';
// A Standard Webhooks secret: "whsec_" and the base64 of the key (24 bytes here, as senders make them).
const STD_SECRET = `whsec_${Buffer.from('standard-webhooks-key-24').toString('base64')}`;
const OTHER_STD_SECRET = `whsec_${Buffer.from('another-webhooks-key-24!').toString('base64')}`;
const quiet = { out: () => undefined, err: () => undefined };
let h: TestHome;
let server: HttpSurface;
let receiver: http.Server;
const callbacks: Array<{ path: string; headers: http.IncomingHttpHeaders; body: string }> = [];

beforeAll(async () => {
  receiver = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      callbacks.push({ path: req.url ?? '', headers: req.headers, body });
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
  const port = (receiver.address() as AddressInfo).port;
  h = unitHome({
    config: [
      'bridges:',
      '  webhook:',
      '    hooks:',
      '      ci:',
      `        secret: ${BERTH_SECRET}`,
      '        reply_timeout_seconds: 20',
      '      cb:',
      `        secret: ${BERTH_SECRET}`,
      '        reply: callback',
      `        callback_url: http://127.0.0.1:${port}/berth`,
      '      std:',
      '        signing: standard-webhooks',
      `        secret: ${STD_SECRET}`,
      '        reply_timeout_seconds: 20',
      '      stdcb:',
      '        signing: standard-webhooks',
      `        secret: ${STD_SECRET}`,
      '        reply: callback',
      `        callback_url: http://127.0.0.1:${port}/standard`,
      'routes:',
      '  webhook: { project: hooks }',
      'egress:',
      `  private_hosts: ['127.0.0.1:${port}']`,
      '',
    ].join('\n'),
  });
  h.create({ name: 'hooks', workspace_isolation: true });
  server = await listenHttp(h.berth, { host: '127.0.0.1', port: 0, token: TOKEN }, quiet);
}, 60_000);
afterAll(async () => {
  await server?.close();
  await h?.[Symbol.asyncDispose]();
  receiver?.close();
});

const now = () => Math.floor(Date.now() / 1000);
async function send(hook: string, body: string, headers: Record<string, string>) {
  const res = await fetch(`${server.url}/hooks/${hook}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body,
  });
  return { status: res.status, body: (await res.json().catch(() => undefined)) as Record<string, any> };
}
/** berth's scheme, signed by openssl exactly as docs/webhooks.md says. */
function opensslSigned(body: string, ts = String(now()), secret = BERTH_SECRET): Record<string, string> {
  const r = spawnSync('openssl', ['dgst', '-sha256', '-hmac', secret, '-hex'], { input: `${ts}.${body}`, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`openssl failed: ${r.stderr}`);
  return { 'x-berth-timestamp': ts, 'x-berth-signature': `v1=${r.stdout.trim().replace(/^.*= /, '')}` };
}
/** The Standard Webhooks headers, signed by the reference library. */
function standardSigned(body: string, opts: { id?: string; at?: Date; secret?: string } = {}): Record<string, string> {
  const id = opts.id ?? `msg_${Math.random().toString(36).slice(2)}`;
  const at = opts.at ?? new Date();
  return {
    'webhook-id': id,
    'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
    'webhook-signature': new Webhook(opts.secret ?? STD_SECRET).sign(id, at, body),
  };
}
const callbackAt = (path: string) => until(() => callbacks.find((c) => c.path === path), `a callback at ${path}`);

describe("berth's own scheme, signed by independent signers", () => {
  it("openssl (the docs' line) and @octokit/webhooks-methods (GitHub's HMAC) both sign requests berth accepts", async () => {
    const a = JSON.stringify({ id: 'o-1', user: 'alice', text: 'echo signed by openssl' });
    expect(await send('ci', a, opensslSigned(a))).toEqual({
      status: 200,
      body: { id: 'o-1', status: 'answered', reply: 'signed by openssl', notices: [] },
    });
    const b = JSON.stringify({ id: 'g-1', user: 'alice', text: 'echo signed by octokit' });
    const ts = String(now());
    const gh = await octokitSign(BERTH_SECRET, `${ts}.${b}`); // "sha256=<hex>" over berth's string-to-sign
    expect(await send('ci', b, { 'x-berth-timestamp': ts, 'x-berth-signature': `v1=${gh.slice('sha256='.length)}` })).toEqual({
      status: 200,
      body: { id: 'g-1', status: 'answered', reply: 'signed by octokit', notices: [] },
    });
    // GitHub's own header form is not berth's scheme: refused before the body is read.
    expect((await send('ci', b, { 'x-berth-timestamp': ts, 'x-berth-signature': gh })).status).toBe(401);
  });

  it('a callback is verified as authentic by octokit and by openssl', async () => {
    const body = JSON.stringify({ id: 'cb-1', user: 'alice', text: 'echo back to you' });
    expect(await send('cb', body, opensslSigned(body))).toEqual({ status: 202, body: { id: 'cb-1', status: 'accepted' } });
    const got = await callbackAt('/berth');
    expect(JSON.parse(got.body)).toEqual({ id: 'cb-1', user: 'alice', reply: 'back to you' });
    const ts = String(got.headers['x-berth-timestamp']);
    const sig = String(got.headers['x-berth-signature']);
    expect(await octokitVerify(BERTH_SECRET, `${ts}.${got.body}`, `sha256=${sig.slice(3)}`)).toBe(true);
    expect(opensslSigned(got.body, ts)['x-berth-signature']).toBe(sig);
  });

  it('W1: an unknown key is reported with its own name as the field', async () => {
    const body = JSON.stringify({ id: 'w-1', user: 'alice', text: 'echo x', extra: 1 });
    const res = await send('ci', body, opensslSigned(body));
    expect(res).toMatchObject({
      status: 400,
      body: { error: { code: 'CONFIG_INVALID', issues: [{ field: 'extra', reason: expect.stringContaining('unknown field') }] } },
    });
    const proto = '{"id":"w-2","user":"alice","text":"echo x","__proto__":{"admin":true}}';
    const refused = await send('ci', proto, opensslSigned(proto));
    expect(refused).toMatchObject({ status: 400, body: { error: { code: 'CONFIG_INVALID', issues: [{ field: '__proto__' }] } } });
    // A body that is no object at all is still the body's fault.
    const list = '[]';
    expect((await send('ci', list, opensslSigned(list))).body.error.issues).toEqual([{ field: 'body', reason: expect.any(String) }]);
  });
});

describe('Standard Webhooks (signing: standard-webhooks), signed and verified by the `standardwebhooks` library', () => {
  it('a request signed by the library is answered; the body may leave out id (webhook-id is the id), and the same webhook-id again is a duplicate', async () => {
    const body = JSON.stringify({ user: 'bob', text: 'echo standard hello' });
    const headers = standardSigned(body, { id: 'msg_std_1' });
    expect(await send('std', body, headers)).toEqual({
      status: 200,
      body: { id: 'msg_std_1', status: 'answered', reply: 'standard hello', notices: [] },
    });
    // The sender's retry: the same webhook-id, signed afresh.
    expect(await send('std', body, standardSigned(body, { id: 'msg_std_1' }))).toEqual({
      status: 200,
      body: { id: 'msg_std_1', status: 'duplicate' },
    });
    // An id in the body is the message's id, as in berth's scheme.
    const withId = JSON.stringify({ id: 'ticket-9', user: 'bob', text: 'echo own id' });
    expect(await send('std', withId, standardSigned(withId))).toEqual({
      status: 200,
      body: { id: 'ticket-9', status: 'answered', reply: 'own id', notices: [] },
    });
  });

  it('any one of several signatures in webhook-signature may match (a sender rotating its secret signs with both)', async () => {
    const body = JSON.stringify({ user: 'bob', text: 'echo rotated' });
    const id = 'msg_rotating';
    const at = new Date();
    const old = new Webhook(OTHER_STD_SECRET).sign(id, at, body);
    const current = new Webhook(STD_SECRET).sign(id, at, body);
    const res = await send('std', body, {
      'webhook-id': id,
      'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
      'webhook-signature': `${old} ${current}`,
    });
    expect(res).toEqual({ status: 200, body: { id, status: 'answered', reply: 'rotated', notices: [] } });
  });

  it("refuses a tampered body, another secret, a stale or future timestamp, missing headers, and berth's own headers on a standard hook (and the reverse)", async () => {
    const body = JSON.stringify({ user: 'mallory', text: 'echo pwned' });
    const tampered = standardSigned(body);
    expect((await send('std', body.replace('pwned', 'owned'), tampered)).status).toBe(401);
    expect((await send('std', body, standardSigned(body, { secret: OTHER_STD_SECRET }))).status).toBe(401);
    expect((await send('std', body, standardSigned(body, { at: new Date(Date.now() - 301_000) }))).body.error.message).toContain('replay');
    expect((await send('std', body, standardSigned(body, { at: new Date(Date.now() + 301_000) }))).status).toBe(401);
    const { 'webhook-id': _id, ...noId } = standardSigned(body);
    expect((await send('std', body, noId)).body.error).toMatchObject({
      code: 'UNAUTHORIZED',
      message: expect.stringContaining('webhook-id'),
    });
    expect((await send('std', body, opensslSigned(body, String(now()), STD_SECRET))).status).toBe(401);
    const berthBody = JSON.stringify({ id: 'x-1', user: 'mallory', text: 'echo pwned' });
    expect((await send('ci', berthBody, standardSigned(berthBody, { secret: STD_SECRET }))).status).toBe(401);
  });

  it('a callback is signed the Standard Webhooks way: the library verifies it', async () => {
    const body = JSON.stringify({ user: 'carol', conversation: 'c-1', text: 'echo standard callback' });
    expect(await send('stdcb', body, standardSigned(body, { id: 'msg_cb_1' }))).toEqual({
      status: 202,
      body: { id: 'msg_cb_1', status: 'accepted' },
    });
    const got = await callbackAt('/standard');
    const headers = {
      'webhook-id': String(got.headers['webhook-id']),
      'webhook-timestamp': String(got.headers['webhook-timestamp']),
      'webhook-signature': String(got.headers['webhook-signature']),
    };
    expect(new Webhook(STD_SECRET).verify(got.body, headers)).toEqual({
      id: 'msg_cb_1',
      user: 'carol',
      conversation: 'c-1',
      reply: 'standard callback',
    });
    expect(() => new Webhook(OTHER_STD_SECRET).verify(got.body, headers)).toThrow();
    expect(got.headers['x-berth-signature']).toBeUndefined();
  });

  it('berth.yaml refuses a standard-webhooks secret that is not base64 (whsec_…)', async () => {
    const { WebhookBridgeSchema } = await import('../../src/channels/webhook.js');
    const parsed = WebhookBridgeSchema.safeParse({
      hooks: { bad: { signing: 'standard-webhooks', secret: 'not base64 at all, but long enough!!' } },
    });
    expect(parsed.success).toBe(false);
    expect(parsed.error?.issues[0]).toMatchObject({ path: ['hooks', 'bad', 'secret'] });
  });
});
