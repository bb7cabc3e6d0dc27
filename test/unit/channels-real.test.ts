import { createHmac } from 'node:crypto';
import { isValidSlackRequest } from '@slack/bolt';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { listenHttp, type HttpSurface } from '../../src/cli/serve.js';
import { unitHome, type TestHome } from '../helpers.js';

/**
 * Channels proven against software berth did not write (channels-real-4 §2): Slack's signatures
 * against Slack's published test vector and Bolt's own verifier. (Telegram's MarkdownV2 against
 * TDLib's own parser is test/integration/telegram-tdlib.test.ts: prebuilt-tdlib's per-platform
 * optional packages would leave package-lock.json out of step for `npm ci`, so
 * scripts/ensure-tdlib.sh installs it outside the lock.)
 */

// Slack's "Verifying requests from Slack" example.
const VECTOR = {
  secret: '8f742231b10e8888abcd99yyyzzz85a5',
  timestamp: 1531420618,
  body: 'token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c',
  signature: 'v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503',
};
const TOKEN = 'channels-real-admin-token-0123456789';
const quiet = { out: () => undefined, err: () => undefined };
let h: TestHome;
let server: HttpSurface;

beforeAll(async () => {
  h = unitHome({
    config: [
      'bridges:',
      '  slack:',
      '    bot_token: xoxb-channels-real',
      `    signing_secret: ${VECTOR.secret}`,
      '    api_url: http://127.0.0.1:9/api',
      'routes:',
      '  slack: { project: real }',
      '',
    ].join('\n'),
  });
  h.create({ name: 'real' });
  server = await listenHttp(h.berth, { host: '127.0.0.1', port: 0, token: TOKEN }, quiet);
}, 60_000);
afterAll(async () => {
  await server?.close();
  await h?.[Symbol.asyncDispose]();
});

const slackPost = (body: string, timestamp: string, signature: string) =>
  fetch(`${server.url}/hooks/slack`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-slack-request-timestamp': timestamp, 'x-slack-signature': signature },
    body,
  });
const bolt = (body: string, timestamp: string, signature: string, secret = VECTOR.secret, nowMilliseconds = Date.now()) =>
  isValidSlackRequest({
    signingSecret: secret,
    body,
    headers: { 'x-slack-signature': signature, 'x-slack-request-timestamp': Number(timestamp) },
    nowMilliseconds,
  });

describe("Slack: berth's signature check against the published vector and Bolt's verifier", () => {
  it("the published vector: Bolt accepts it, and so does berth at the vector's own time (the signature passes; the form body is then no event)", async () => {
    expect(bolt(VECTOR.body, String(VECTOR.timestamp), VECTOR.signature, VECTOR.secret, VECTOR.timestamp * 1000)).toBe(true);
    vi.useFakeTimers({ toFake: ['Date'], now: VECTOR.timestamp * 1000 });
    try {
      const accepted = await slackPost(VECTOR.body, String(VECTOR.timestamp), VECTOR.signature);
      expect(accepted.status).not.toBe(401);
      const tampered = await slackPost(VECTOR.body.replace('roadrunner', 'coyote'), String(VECTOR.timestamp), VECTOR.signature);
      expect(tampered.status).toBe(401);
    } finally {
      vi.useRealTimers();
    }
  });

  it('berth accepts exactly the requests Bolt accepts (signed, tampered, wrong secret, stale, uppercase, no prefix)', async () => {
    const body = JSON.stringify({ type: 'url_verification', token: 'x', challenge: 'c-1' });
    const sign = (ts: string, b = body, secret = VECTOR.secret) =>
      `v0=${createHmac('sha256', secret).update(`v0:${ts}:${b}`).digest('hex')}`;
    const now = Math.floor(Date.now() / 1000);
    const cases: Array<[string, string, string, string]> = [
      ['signed now', body, String(now), sign(String(now))],
      ['4 minutes old', body, String(now - 240), sign(String(now - 240))],
      ['tampered body', body.replace('c-1', 'c-2'), String(now), sign(String(now))],
      ['wrong secret', body, String(now), sign(String(now), body, 'another-secret-0123456789abcdef')],
      ['6 minutes old', body, String(now - 360), sign(String(now - 360))],
      ['uppercase hex', body, String(now), sign(String(now)).toUpperCase().replace('V0=', 'v0=')],
      ['no v0= prefix', body, String(now), sign(String(now)).slice(3)],
    ];
    const verdicts = [];
    for (const [label, b, ts, sig] of cases) verdicts.push([label, (await slackPost(b, ts, sig)).status !== 401, bolt(b, ts, sig)]);
    expect(verdicts.filter(([, berth, boltSays]) => berth !== boltSays)).toEqual([]);
    expect(verdicts.filter(([, berth]) => berth).map(([label]) => label)).toEqual(['signed now', '4 minutes old']);
  });
});
