import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ALERT_BOUNDS, alertSignature, createAlertWebhook, type Alert } from '../../src/outbound/alert-webhook.js';

/** The alert webhook against a real HTTP receiver: signed, tried again only where a retry can help, bounded, never waited for. */
let server: http.Server;
let url: string;
const got: Array<{ body: string; headers: http.IncomingHttpHeaders }> = [];
let answer = (_n: number) => 204;

beforeAll(async () => {
  server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      got.push({ body: Buffer.concat(chunks).toString(), headers: req.headers });
      res.statusCode = answer(got.length);
      res.end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
});
afterAll(() => void server.close());

const SECRET = 'webhook-secret-0123456789';
const alert: Alert = { type: 'honeytoken.hit', project: 'p', tenant: 'web:a', where: 'egress GET x', at: '2026-01-01T00:00:00.000Z' };
const sleeps: number[] = [];
const hookOf = (settings = { webhook: { url, secret: SECRET } }) =>
  createAlertWebhook({ settings: () => settings, logger: pino({ level: 'silent' }), sleep: async (ms) => void sleeps.push(ms) });

describe('the alert webhook', () => {
  it('POSTs the alert as JSON, signed over its timestamp and body', async () => {
    got.length = 0;
    answer = () => 204;
    const hook = hookOf();
    hook.send(alert);
    await hook.settled();
    expect(got).toHaveLength(1);
    const { body, headers } = got[0]!;
    expect(JSON.parse(body)).toEqual(alert);
    expect(headers['content-type']).toBe('application/json');
    expect(headers['x-berth-signature']).toBe(alertSignature(SECRET, String(headers['x-berth-timestamp']), body));
    expect(headers['x-berth-signature']).not.toBe(alertSignature('another-secret-0123456', String(headers['x-berth-timestamp']), body));
  });

  it('a 5xx is tried again (after 1 s, then 5 s), three tries in all; a 4xx is not', async () => {
    got.length = 0;
    sleeps.length = 0;
    answer = () => 503;
    const hook = hookOf();
    hook.send(alert);
    await hook.settled();
    expect(got).toHaveLength(ALERT_BOUNDS.attempts);
    expect(sleeps).toEqual([1000, 5000]);

    got.length = 0;
    answer = () => 401;
    hook.send(alert);
    await hook.settled();
    expect(got).toHaveLength(1);
  });

  it('returns at once, and past its bound drops what it cannot hold; without a webhook it sends nothing', async () => {
    got.length = 0;
    answer = () => 204;
    const hook = hookOf();
    for (let i = 0; i < ALERT_BOUNDS.queued + 20; i++) hook.send(alert);
    await hook.settled();
    expect(got).toHaveLength(ALERT_BOUNDS.queued);

    got.length = 0;
    const none = createAlertWebhook({ settings: () => ({}), logger: pino({ level: 'silent' }) });
    none.send(alert);
    await none.settled();
    expect(got).toEqual([]);
  });
});
