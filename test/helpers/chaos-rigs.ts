import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { webhookSignature } from '../../src/channels/webhook-signing.js';
import { startFakeMatrix } from '../fakes/matrix.js';
import { startFakeSignalCli } from '../fakes/signal-cli.js';
import { startFakeSlack } from '../fakes/slack.js';
import { startFakeTelegram } from '../fakes/telegram.js';

/**
 * One chaos rig per chat channel: its fake service (or, for signed webhooks, the caller and its
 * callback receiver), the berth.yaml lines that point berth at it, the berth command that runs
 * it, and how a person sends and what they got back, as plain text. bridge-chaos.test.ts runs
 * the same kill -9 storm through each.
 */
export interface ChaosRig {
  name: string;
  /** berth.yaml's `bridges:` entries for this channel (indented under bridges). */
  bridge: string[];
  /** Extra top-level berth.yaml lines. */
  extra?: string[];
  /** berth's arguments after --home. */
  command: string[];
  /** Connected: berth receives now. */
  ready(timeoutMs: number): Promise<void>;
  /** A person (0..3) sends a text. Resolves once the service has it (a webhook: once berth took it). */
  deliver(person: number, text: string): Promise<void>;
  /** What the person got back, as plain text, in order. */
  replies(person: number): string[];
  close(): Promise<void>;
}

/** MarkdownV2 as written back to plain text. */
const unMarkdownV2 = (t: string) => t.replace(/\\([_*[\]()~`>#+\-=|{}.!\\])/g, '$1');
const unMrkdwn = (t: string) => t.replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&amp;/g, '&');
const wait = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function freePort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const { port } = s.address() as AddressInfo;
  await new Promise((r) => s.close(r));
  return port;
}

async function signalRig(): Promise<ChaosRig> {
  const fake = await startFakeSignalCli({ keepaliveMs: 500, receiveMode: 'on-connection', redeliverUntilReceipt: true });
  const uuid = (n: number) => `00000000-0000-4000-8000-0000000000${String(n).padStart(2, '0')}`;
  return {
    name: 'signal',
    bridge: ['  signal:', `    url: ${fake.url}`, `    account: '${fake.account}'`, '    senders: open'],
    command: ['bridge', 'signal'],
    ready: (ms) => fake.waitForClients(1, ms).then(() => undefined),
    async deliver(n, text) {
      fake.deliverText({ fromUuid: uuid(n), fromNumber: null, text });
    },
    replies: (n) => fake.repliesTo(uuid(n)).map((s) => s.message),
    close: () => fake.close(),
  };
}

async function telegramRig(): Promise<ChaosRig> {
  const fake = await startFakeTelegram({ longPollCapMs: 2000 });
  const id = (n: number) => 5_000_001 + n;
  return {
    name: 'telegram',
    bridge: ['  telegram:', `    token: '${fake.token}'`, `    api_url: ${fake.url}`, '    senders: open'],
    command: ['bridge', 'telegram'],
    ready: (ms) => fake.waitFor(() => fake.longPolling(), ms).then(() => undefined),
    async deliver(n, text) {
      fake.deliverText({ chat: { id: id(n), type: 'private', first_name: `P${n}` }, from: { id: id(n), first_name: `P${n}` }, text });
    },
    replies: (n) => fake.repliesTo(id(n)).map((m) => unMarkdownV2(m.text ?? '')),
    close: () => fake.close(),
  };
}

async function slackRig(): Promise<ChaosRig> {
  const fake = await startFakeSlack({ ackTimeoutMs: 1500, maxRetries: 10 });
  const channel = (n: number) => `D0CHAOS0${n}`;
  return {
    name: 'slack',
    bridge: [
      '  slack:',
      '    mode: socket',
      `    bot_token: ${fake.botToken}`,
      `    app_token: ${fake.appToken}`,
      `    api_url: ${fake.url}/api`,
      '    senders: open',
    ],
    command: ['bridge', 'slack'],
    ready: (ms) => fake.waitForSocketClients(1, ms).then(() => undefined),
    async deliver(n, text) {
      fake.deliverMessage({ channel: channel(n), channelType: 'im', user: `U0CHAOS0${n}`, text });
    },
    replies: (n) => fake.repliesIn(channel(n)).map((p) => unMrkdwn(p.text ?? '')),
    close: () => fake.close(),
  };
}

async function matrixRig(): Promise<ChaosRig> {
  const fake = await startFakeMatrix();
  const people = [0, 1, 2, 3].map((n) => `@person${n}:${fake.serverName}`);
  for (const p of people) fake.addUser(p);
  const rooms = people.map((p) => fake.createRoom({ members: [p, fake.botUserId], direct: true }));
  return {
    name: 'matrix',
    bridge: [
      '  matrix:',
      `    homeserver: ${fake.url}`,
      `    user_id: '${fake.botUserId}'`,
      `    access_token: ${fake.botAccessToken}`,
      '    senders: open',
    ],
    command: ['bridge', 'matrix'],
    // The first sync of a new home (timeout 0) only takes its token: ready once berth holds the next.
    ready: (ms) => fake.waitForPoll(ms),
    async deliver(n, text) {
      fake.sendText(rooms[n]!, people[n]!, text);
    },
    replies: (n) => fake.repliesIn(rooms[n]!).map((e) => String((e.content as { body?: unknown }).body ?? '')),
    close: () => fake.close(),
  };
}

async function webhookRig(): Promise<ChaosRig> {
  const secret = 'chaos-webhook-secret-0123456789abcdef';
  // What the person is sent: an answer ({reply}) or one of berth's notices ({notice}: a refusal, a link, a delivery given up).
  const got: Array<{ user: string; reply?: string; notice?: string }> = [];
  const receiver = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      try {
        got.push(JSON.parse(body) as { user: string; reply?: string; notice?: string });
      } catch {
        // not berth's
      }
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
  const receiverPort = (receiver.address() as AddressInfo).port;
  const port = await freePort();
  let seq = 0;
  return {
    name: 'webhook',
    bridge: [
      '  webhook:',
      '    hooks:',
      '      chaos:',
      `        secret: ${secret}`,
      '        reply: callback',
      `        callback_url: http://127.0.0.1:${receiverPort}/answers`,
    ],
    extra: ['egress:', `  private_hosts: ['127.0.0.1:${receiverPort}']`],
    command: ['serve', '--port', String(port)],
    async ready(ms) {
      for (const end = Date.now() + ms; Date.now() < end; await wait(100)) {
        if ((await fetch(`http://127.0.0.1:${port}/healthz`).catch(() => undefined))?.ok) return;
      }
      throw new Error('berth serve did not come up');
    },
    /** As a caller with retries does: the same id until berth takes it (a duplicate is taken too). */
    async deliver(n, text) {
      const body = JSON.stringify({ id: `chaos-${++seq}`, user: `u${n}`, text });
      for (const end = Date.now() + 60_000; Date.now() < end; await wait(200)) {
        const ts = String(Math.floor(Date.now() / 1000));
        const res = await fetch(`http://127.0.0.1:${port}/hooks/chaos`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-berth-timestamp': ts, 'x-berth-signature': webhookSignature(secret, ts, body) },
          body,
        }).catch(() => undefined);
        if (res && res.status < 300) return;
      }
      throw new Error('berth never took the webhook');
    },
    replies: (n) => got.flatMap((g) => (g.user === `u${n}` ? [g.reply ?? g.notice ?? ''] : [])),
    close: async () => void receiver.close(),
  };
}

export const CHAOS_RIGS: Record<string, () => Promise<ChaosRig>> = {
  signal: signalRig,
  telegram: telegramRig,
  slack: slackRig,
  matrix: matrixRig,
  webhook: webhookRig,
};
