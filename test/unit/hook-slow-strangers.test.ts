import { createHmac } from 'node:crypto';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { webhookSignature } from '../../src/channels/webhook-signing.js';
import { listenHttp, type HttpSurface } from '../../src/cli/serve.js';
import { unitHome, type TestHome } from '../helpers.js';

/**
 * Outside attack 4, M1: anyone may open /hooks/<name>, and a body is read before its signature
 * can be checked. Strangers who send a current timestamp, a wrong signature, a large
 * Content-Length and then one body byte a second (reopening each connection berth closes) must
 * not keep correctly signed Slack events and signed webhooks from being answered. A real berth
 * serve on loopback: every request comes from 127.0.0.1, as behind a reverse proxy.
 */
const TOKEN = 'hook-flood-admin-token-0123456789abcdef';
const SLACK_SECRET = 'slack-signing-secret-0123456789abcdef';
const HOOK_SECRET = 'hook-secret-0123456789abcdef0123456789';
const TELEGRAM_SECRET = 'telegram-secret-0123456789';
const ATTACKERS_PER_HOOK = 80;
const quiet = { out: () => undefined, err: () => undefined };
let h: TestHome;
let server: HttpSurface;

beforeAll(async () => {
  h = unitHome({
    config: [
      'bridges:',
      '  slack:',
      '    bot_token: xoxb-hook-flood-test',
      `    signing_secret: ${SLACK_SECRET}`,
      '    api_url: http://127.0.0.1:9/api',
      '  telegram:',
      "    token: '1:hook-flood-test'",
      '    api_url: http://127.0.0.1:9',
      '    mode: webhook',
      '    public_url: https://berth.example',
      `    webhook_secret: ${TELEGRAM_SECRET}`,
      '  webhook:',
      '    hooks:',
      '      ci:',
      `        secret: ${HOOK_SECRET}`,
      '        reply: callback',
      '        callback_url: http://127.0.0.1:9/answers',
      'routes:',
      '  webhook: { project: hooks }',
      '  slack: { project: hooks }',
      '  telegram: { project: hooks }',
      '',
    ].join('\n'),
  });
  h.create({ name: 'hooks', workspace_isolation: true });
  server = await listenHttp(h.berth, { host: '127.0.0.1', port: 0, token: TOKEN }, quiet);
}, 60_000);
afterAll(async () => {
  await server?.close();
  await h?.[Symbol.asyncDispose]();
});

const now = () => String(Math.floor(Date.now() / 1000));

/** A correctly signed Slack url_verification: 200 with the challenge. */
async function signedSlack(i: number): Promise<{ status: number; ok: boolean }> {
  const body = JSON.stringify({ type: 'url_verification', token: 'x', challenge: `challenge-${i}` });
  const ts = now();
  const signature = `v0=${createHmac('sha256', SLACK_SECRET).update(`v0:${ts}:${body}`).digest('hex')}`;
  const res = await fetch(`${server.url}/hooks/slack`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-slack-request-timestamp': ts, 'x-slack-signature': signature },
    body,
  });
  const answer = (await res.json().catch(() => undefined)) as { challenge?: string } | undefined;
  return { status: res.status, ok: answer?.challenge === `challenge-${i}` };
}

/** A correctly signed webhook (reply: callback): 202 accepted once journaled. */
async function signedHook(i: number): Promise<{ status: number; ok: boolean }> {
  const body = JSON.stringify({ id: `flood-${i}`, user: 'ci-bot', text: `echo ${i}` });
  const ts = now();
  const res = await fetch(`${server.url}/hooks/ci`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-berth-timestamp': ts, 'x-berth-signature': webhookSignature(HOOK_SECRET, ts, body) },
    body,
  });
  const answer = (await res.json().catch(() => undefined)) as { status?: string } | undefined;
  return { status: res.status, ok: answer?.status === 'accepted' };
}

/**
 * One stranger's slot: a request with a current timestamp, a wrong signature and a large
 * Content-Length, then a byte a second; whatever berth does with it (an answer, a close), it is
 * opened again until `stop`. Counts how often berth ended it, and every status it answered.
 */
function slowStranger(port: number, path: string, headers: string[]) {
  const state = {
    open: false,
    ended: 0,
    statuses: [] as number[],
    stopped: false,
    socket: undefined as net.Socket | undefined,
    ready: undefined as Promise<void> | undefined,
  };
  const open = () =>
    new Promise<void>((resolve) => {
      if (state.stopped) return resolve();
      const socket = net.connect(port, '127.0.0.1');
      state.socket = socket;
      let drip: NodeJS.Timeout | undefined;
      let done = false;
      const end = () => {
        if (done) return;
        done = true;
        clearInterval(drip);
        state.open = false;
        state.ended++;
        socket.destroy();
        resolve();
        setImmediate(() => void open());
      };
      socket.on('connect', () => {
        socket.write(
          `POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 200000\r\n${headers.map((l) => `${l}\r\n`).join('')}\r\n{`,
        );
        state.open = true;
        drip = setInterval(() => socket.write('a'), 1000);
        resolve();
      });
      socket.on('data', (chunk) => {
        const status = /^HTTP\/1\.1 (\d{3})/.exec(chunk.toString('latin1'))?.[1];
        if (status) state.statuses.push(Number(status));
        end();
      });
      socket.on('error', end);
      socket.on('close', end);
    });
  state.ready = open();
  return {
    state,
    stop() {
      state.stopped = true;
      state.socket?.destroy();
    },
  };
}

/** One raw request (head, then `body` if any, and nothing more): its answer's status and JSON, once berth answers. */
function exchange(port: number, head: string, body = ''): Promise<{ status: number; json: any }> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1', () => socket.write(`${head}\r\n\r\n${body}`));
    let got = '';
    socket.on('data', (chunk) => {
      got += chunk.toString('utf8');
      const at = got.indexOf('\r\n\r\n');
      const length = Number(/content-length: (\d+)/i.exec(got)?.[1] ?? NaN);
      if (at < 0 || got.length < at + 4 + length) return;
      socket.destroy();
      resolve({ status: Number(got.slice(9, 12)), json: JSON.parse(got.slice(at + 4, at + 4 + length)) });
    });
    socket.on('error', reject);
    socket.on('close', () => reject(new Error(`closed without an answer: ${JSON.stringify(got.slice(0, 200))}`)));
  });
}

describe('/hooks under slow unsigned requests (outside attack 4, M1)', () => {
  it(`${ATTACKERS_PER_HOOK} slow strangers on each of /hooks/slack and /hooks/ci: every correctly signed request beside them is answered 2xx`, async () => {
    const port = Number(new URL(server.url).port);
    const wrong = '0'.repeat(64);
    const strangers = [
      ...Array.from({ length: ATTACKERS_PER_HOOK }, () =>
        slowStranger(port, '/hooks/slack', [`X-Slack-Request-Timestamp: ${now()}`, `X-Slack-Signature: v0=${wrong}`]),
      ),
      ...Array.from({ length: ATTACKERS_PER_HOOK }, () =>
        slowStranger(port, '/hooks/ci', [`X-Berth-Timestamp: ${now()}`, `X-Berth-Signature: v1=${wrong}`]),
      ),
    ];
    const answers: Array<{ what: string; status: number; ok: boolean; strangersOpen: number }> = [];
    try {
      await Promise.all(strangers.map((s) => s.state.ready));
      // Signed requests one after another, each while the strangers hold their connections, until
      // berth has ended every stranger's connection at least once (so each was read and judged)
      // and at least 40 signed requests were answered; the first one refused ends the loop.
      for (let i = 0; ; i++) {
        const strangersOpen = strangers.filter((s) => s.state.open).length;
        const answer = i % 2 === 0 ? await signedSlack(i) : await signedHook(i);
        answers.push({ what: i % 2 === 0 ? 'slack' : 'webhook', ...answer, strangersOpen });
        if (answer.status >= 300 || !answer.ok) break;
        if (i >= 40 && strangers.every((s) => s.state.ended > 0)) break;
      }
    } finally {
      for (const s of strangers) s.stop();
    }
    const refused = answers.filter((a) => a.status >= 300 || !a.ok);
    expect(refused, `signed requests refused: ${JSON.stringify(refused.slice(0, 3))}`).toEqual([]);
    expect(answers.length).toBeGreaterThan(40);
    // Most of them were sent while more strangers held a connection open than the 64 slots per channel of old.
    expect(answers.filter((a) => a.strangersOpen >= 2 * 64).length).toBeGreaterThan(answers.length / 2);
    // No stranger was ever answered with a success.
    const strangerStatuses = strangers.flatMap((s) => s.state.statuses);
    expect(strangerStatuses.filter((s) => s < 400)).toEqual([]);
  });

  it('a lone stranger sending a byte a second is cut for its pace (429 BUSY, saying why), not held to the 10 s deadline of old', async () => {
    const port = Number(new URL(server.url).port);
    const stranger = slowStranger(port, '/hooks/ci', [`X-Berth-Timestamp: ${now()}`, `X-Berth-Signature: v1=${'0'.repeat(64)}`]);
    try {
      await stranger.state.ready;
      const socket = stranger.state.socket!;
      const answer = await new Promise<string>((resolve) => socket.on('data', (d) => resolve(d.toString('utf8'))));
      expect(answer).toMatch(/^HTTP\/1\.1 429 /);
      expect(answer).toContain('"code":"BUSY"');
      expect(answer).toContain('slower than 32 KiB a second');
    } finally {
      stranger.stop();
    }
  });

  it('a request without a well-formed signature, or declaring more than the service ever sends, is refused before a byte of its body is read', async () => {
    const port = Number(new URL(server.url).port);
    const ts = now();
    // No body is sent at all: an answer means berth did not wait to read one.
    const unsignedHook = await exchange(port, `POST /hooks/ci HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\nX-Berth-Timestamp: ${ts}`);
    expect(unsignedHook).toMatchObject({
      status: 401,
      json: { error: { code: 'UNAUTHORIZED', message: expect.stringContaining('X-Berth-Signature is missing') } },
    });
    const unsignedSlack = await exchange(
      port,
      `POST /hooks/slack HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\nX-Slack-Request-Timestamp: ${ts}\r\nX-Slack-Signature: v0=not-hex`,
    );
    expect(unsignedSlack).toMatchObject({ status: 401, json: { error: { code: 'UNAUTHORIZED' } } });
    const hugeHook = await exchange(
      port,
      `POST /hooks/ci HTTP/1.1\r\nHost: x\r\nContent-Length: ${256 * 1024 + 1}\r\nX-Berth-Timestamp: ${ts}\r\nX-Berth-Signature: v1=${'0'.repeat(64)}`,
    );
    expect(hugeHook).toMatchObject({ status: 413, json: { error: { code: 'PAYLOAD_TOO_LARGE' } } });
    const hugeSlack = await exchange(
      port,
      `POST /hooks/slack HTTP/1.1\r\nHost: x\r\nContent-Length: ${1024 * 1024 + 1}\r\nX-Slack-Request-Timestamp: ${ts}\r\nX-Slack-Signature: v0=${'0'.repeat(64)}`,
    );
    expect(hugeSlack).toMatchObject({ status: 413, json: { error: { code: 'PAYLOAD_TOO_LARGE' } } });
  });

  it("an authenticated caller (Telegram's secret header, checked before the body) keeps its slots: 64 slow updates are held, the 65th is told to come back, a stranger is refused at once", async () => {
    const port = Number(new URL(server.url).port);
    const head = (secret: string) =>
      `POST /hooks/telegram HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\nX-Telegram-Bot-Api-Secret-Token: ${secret}`;
    const held = await Promise.all(
      Array.from(
        { length: 64 },
        () =>
          new Promise<net.Socket>((resolve) => {
            const socket = net.connect(port, '127.0.0.1', () => {
              socket.write(`${head(TELEGRAM_SECRET)}\r\n\r\n{"update_id":`);
              resolve(socket);
            });
            socket.on('error', () => undefined);
          }),
      ),
    );
    try {
      // A wrong secret is refused before its body is read, whatever is held.
      expect((await exchange(port, head('not-the-secret-0123456789'))).status).toBe(401);
      // Until all 64 are in (a busy machine takes a while to read their heads), a whole update is
      // answered 200; once they are, 429. The slow ones are held for up to 10 s each.
      const update = JSON.stringify({ update_id: 1 });
      const probe = () => exchange(port, head(TELEGRAM_SECRET).replace('Content-Length: 1000', `Content-Length: ${update.length}`), update);
      let answer = await probe();
      while (answer.status === 200 && held.every((s) => !s.destroyed && !s.readableEnded)) answer = await probe();
      expect(answer).toMatchObject({
        status: 429,
        json: { error: { code: 'BUSY', message: expect.stringContaining('64 requests to the telegram bridge') } },
      });
    } finally {
      for (const s of held) s.destroy();
    }
  });
});
