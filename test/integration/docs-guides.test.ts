import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { homePaths } from '../../src/config/home.js';
import { bridgeDir } from '../../src/bridges/start.js';
import { createBerth } from '../../src/main.js';
import { openBridgeState } from '../../src/store/bridge-state.js';
import { startFakeAnthropic, type FakeAnthropic } from '../fakes/anthropic-api.js';
import { startFakeSignalCli, type FakeSignalCli } from '../fakes/signal-cli.js';
import { startFakeTelegram, type FakeTelegram } from '../fakes/telegram.js';
import { startFakeSlack, type FakeSlack } from '../fakes/slack.js';
import { startFakeMatrix, type FakeMatrix } from '../fakes/matrix.js';
import { CHANNEL_NAMES } from '../../src/channels/registry.js';
import { docCommands, runDocLine, runDocLineAsync } from '../helpers.js';
import { startTestProvider, type TestProvider } from '../helpers/oidc-provider.js';

/**
 * A fresh home driven through the quickstart (README) and each guide's commands, as written and
 * in order: every line of a guide's ```sh blocks that runs berth (`npx berth …`, also inside
 * another command). What only a real deployment has is swapped for this machine's fakes (a model
 * API, signal-cli); the lines left out are named here with the reason.
 */
const NOT_HERE: Array<[RegExp, string]> = [
  [/^npx berth serve\b/, 'serves until stopped: the serve, bridge and web chat tests run it'],
  [
    new RegExp(`^npx berth bridge (${CHANNEL_NAMES.join('|')})\\b`),
    "serves until stopped: each channel's bridge test and the chaos test run it",
  ],
];

const homes: string[] = [];
let anthropic: FakeAnthropic;
let signal: FakeSignalCli;
let telegram: FakeTelegram;
let slack: FakeSlack;
let matrix: FakeMatrix;
let provider: TestProvider;
const KEY = `sk-ant-docs-${Math.random().toString(36).slice(2)}`;
const STRANGER = '99999999-9999-4999-8999-999999999901';

beforeAll(async () => {
  anthropic = await startFakeAnthropic({ apiKey: KEY });
  signal = await startFakeSignalCli({ keepaliveMs: 200, receiveMode: 'on-connection' });
  telegram = await startFakeTelegram();
  slack = await startFakeSlack();
  matrix = await startFakeMatrix();
  provider = await startTestProvider({}, 'http://127.0.0.1:8080/oidc/callback');
});
afterAll(async () => {
  for (const home of homes) {
    await createBerth({ home, logLevel: 'silent' }).runner.reapLeftovers();
    fs.rmSync(home, { recursive: true, force: true });
  }
  await anthropic?.close();
  await signal?.close();
  await telegram?.close();
  await slack?.close();
  await matrix?.close();
  await provider?.close();
});

/** A stranger waiting on a channel of a fresh home, as `bridge pending` shows them. */
const stranger = (channel: string, sender: string) => (home: string) =>
  void openBridgeState(bridgeDir(homePaths(home).stateDir), channel).noteStranger(sender, 'Sam', new Date(), 3600_000);

/** The guide's pairing lines: pending names the stranger, approve lets them in. */
function expectPairing(ran: Array<{ line: string; stdout: string }>, sender: string) {
  expect(ran.find((r) => r.line.startsWith('npx berth bridge pending'))?.stdout).toContain(sender);
  expect(ran.find((r) => r.line.startsWith('npx berth bridge approve'))?.stdout).toContain(`approved ${sender}`);
}

function freshHome(): string {
  const home = fs.realpathSync(fs.mkdtempSync(join(os.tmpdir(), 'berth-guide-')));
  homes.push(home);
  return home;
}

/** Run the lines of `file` in order on a fresh home; each must succeed. Returns what each printed. */
async function walk(
  file: string,
  swap: Array<[string, string]> = [],
  before?: (home: string) => void,
): Promise<Array<{ line: string; stdout: string }>> {
  const home = freshHome();
  before?.(home);
  const lines = [
    ...new Set([
      ...docCommands(file, 'npx berth '),
      ...(() => {
        try {
          return docCommands(file, 'tar ');
        } catch {
          return [];
        }
      })(),
    ]),
  ];
  const ran: Array<{ line: string; stdout: string }> = [];
  for (const line of lines) {
    if (NOT_HERE.some(([pattern]) => pattern.test(line))) continue;
    const r = await runDocLineAsync(line, home, swap);
    expect(r.code, `${file}: ${line}\n${r.stderr}${r.stdout}`).toBe(0);
    ran.push({ line, stdout: r.stdout });
  }
  return ran;
}

describe("the docs' commands, as written, on a fresh home", () => {
  it('README: the first steps (projects, runs of two tenants, doctor)', async () => {
    const ran = await walk('README.md');
    expect(ran.map((r) => /^npx berth (\S+(?: \S+)?)/.exec(r.line)?.[1])).toEqual(
      expect.arrayContaining(['project create', 'run bot', 'doctor']),
    );
    const alice = ran.find((r) => r.line.includes('--user web:alice'));
    expect(alice?.stdout).toContain('no notes.txt here'); // her own workspace: the other tenant's notes.txt is not there
  });

  it('Signal guide: the bridge and the channel by command, doctor, pending, approve (signal-cli is the fake)', async () => {
    const ran = await walk(
      'docs/signal.md',
      [
        ['http://127.0.0.1:8081', signal.url],
        ['+4915550000', signal.account],
        ['signal:<uuid>', `signal:${STRANGER}`],
      ],
      stranger('signal', `signal:${STRANGER}`),
    );
    expect(ran.find((r) => r.line.startsWith('npx berth doctor'))?.stdout).toMatch(/bridge signal .*answers/);
    expect(ran.find((r) => r.line.startsWith('npx berth bridge pending'))?.stdout).toContain(`signal:${STRANGER}`);
    expect(ran.find((r) => r.line.startsWith('npx berth bridge approve'))?.stdout).toContain(`approved signal:${STRANGER}`);
  });

  it('Telegram guide: the bot by command, doctor names it, pending, approve (the Bot API is the fake)', async () => {
    const sender = 'telegram:7000999';
    const ran = await walk(
      'docs/telegram.md',
      [
        ['"123456:ABC-DEF1234ghIkl"', `"${telegram.token}", api_url: "${telegram.url}"`],
        ['telegram:<user id>', sender],
      ],
      stranger('telegram', sender),
    );
    expect(ran.find((r) => r.line.startsWith('npx berth doctor'))?.stdout).toMatch(
      new RegExp(`bridge telegram .*@${telegram.bot.username} answers with project "telegram-bot"`),
    );
    expectPairing(ran, sender);
  });

  it('Slack guide: Socket Mode by command, doctor names the bot, pending, approve (Slack is the fake)', async () => {
    const sender = 'slack:U0SAM0001';
    const ran = await walk(
      'docs/slack.md',
      [
        ['"xoxb-1-berth"', `"${slack.botToken}", api_url: "${slack.url}/api"`],
        ['"xapp-1-berth"', `"${slack.appToken}"`],
        ['slack:<user id>', sender],
      ],
      stranger('slack', sender),
    );
    expect(ran.find((r) => r.line.startsWith('npx berth doctor'))?.stdout).toMatch(
      /bridge slack .*answers with project "slack-bot"; socket/,
    );
    expectPairing(ran, sender);
  });

  it('Matrix guide: the bot account by command, doctor checks its token, pending, approve (the homeserver is the fake)', async () => {
    const sender = `matrix:@sam:${matrix.serverName}`;
    const ran = await walk(
      'docs/matrix.md',
      [
        ['https://matrix.example.org', matrix.url],
        ['@berth:example.org', matrix.botUserId],
        ['syt_berth_token', matrix.botAccessToken],
        ['matrix:@sam:example.org', sender],
      ],
      stranger('matrix', sender),
    );
    expect(ran.find((r) => r.line.startsWith('npx berth doctor'))?.stdout).toMatch(/bridge matrix .*answers with project "matrix-bot"/);
    expectPairing(ran, sender);
  });

  it('secrets guide: a token from a 0600 file, granted, listed (never printed), revoked, removed', async () => {
    const tokenFile = join(freshHome(), 'gh-token');
    fs.writeFileSync(tokenFile, 'ghp_docsGuideToken123\n', { mode: 0o600 });
    const ran = await walk('docs/secrets.md', [['/etc/berth/gh-token', tokenFile]]);
    const list = ran.find((r) => r.line.startsWith('npx berth secret list'))?.stdout ?? '';
    expect(list).toMatch(/GH_TOKEN {2}from file .* {2}readable/);
    expect(list).toContain('granted: dev → github.com, Authorization: Basic (x-access-token:…)');
    expect(ran.find((r) => r.line.includes('grant API_TOKEN'))?.stdout).toBe(
      'granted API_TOKEN: dev → api.acme.example/v1/, GET,POST, Authorization: Bearer {}, ≤ 60/min per person\n',
    );
    expect(ran.map((r) => r.stdout).join('')).not.toContain('ghp_docsGuideToken123');
    expect(ran.find((r) => r.line.startsWith('npx berth secret revoke'))?.stdout).toContain('revoked 1 grant(s) of GH_TOKEN from dev');
  });

  it('webhooks guide: a hook by command, and doctor names where it is served', async () => {
    const ran = await walk('docs/webhooks.md');
    expect(ran.find((r) => r.line.startsWith('npx berth doctor'))?.stdout).toMatch(
      /bridge webhook tickets .*POST \/hooks\/tickets \(reply: sync\)/,
    );
  });

  it('agents guide: the real-agent image, a model upstream by command, Claude Code runs of two tenants, the allowlist (the model API is the fake)', async () => {
    const before = anthropic.requests.length;
    const ran = await walk('docs/agents.md', [
      ['https://api.anthropic.com', anthropic.url],
      ['sk-ant-...', KEY],
    ]);
    expect(ran.filter((r) => r.line.includes(' run coder ')).map((r) => r.stdout)).toEqual(['done\n', 'done\n', 'done\n', 'done\n']);
    expect(anthropic.requests.length).toBeGreaterThan(before);
  });

  it('web chat guide: approvals by the operator only, and what waits', async () => {
    const ran = await walk('docs/web-chat.md');
    expect(ran.at(-1)?.stdout).toBe('nothing waits for an answer\n');
  });

  it('security guide: gVisor offered by berth.yaml, a project on it, and verify under it', async () => {
    const ran = await walk('docs/security.md');
    expect(ran.at(-1)?.stdout).toMatch(/runtime +.*gVisor/);
  }, 240_000);

  it('production guide: the checks before it serves, and a backup of the home that restores', async () => {
    const backup = join(freshHome(), 'backup.tgz');
    // A home with something in it: a project, a tenant's file, berth's secret.
    // The provider is a real one on loopback, its client secret a file only this user reads.
    const secret = join(freshHome(), 'oidc-secret');
    fs.writeFileSync(secret, `${provider.clientSecret}\n`, { mode: 0o600 });
    const swaps: Array<[string, string]> = [
      ['/tmp/berth-backup.tgz', backup],
      ['https://login.example.org', provider.issuer],
      ['/etc/berth/oidc-secret', secret],
    ];
    const ran = await walk('docs/production.md', swaps, (home) => {
      expect(
        runDocLine("npx berth project create stock --isolation && npx berth run stock --user web:a -- 'echo kept > f'", home),
      ).toMatchObject({ code: 0 });
    });
    expect(ran.map((r) => r.line.split(' ')[0])).toContain('tar');
    expect(ran.find((r) => r.line.startsWith('npx berth doctor | grep oidc'))?.stdout).toMatch(
      /ok +oidc +http:\/\/127\.0\.0\.1:\d+ answers/,
    );
    const listed = runDocLine(`tar -tzf ${backup}`, freshHome());
    expect(listed.stdout).toMatch(/^\.\/\.berth\/secret$/m);
    expect(listed.stdout).toMatch(/^\.\/projects\/stock\/workspaces\/[0-9a-f]+\/f$/m);
    // Restored into an empty home: the tenant finds their file (same secret, same workspace id).
    const restored = freshHome();
    expect(runDocLine(`tar -C ${restored} -xzf ${backup}`, restored)).toMatchObject({ code: 0 });
    expect(runDocLine("npx berth run stock --user web:a -- 'cat f'", restored)).toMatchObject({ code: 0, stdout: 'kept\n' });
    expect(listed.stdout).not.toMatch(/\.berth\/(tmp|sockets|cache)\//);
  });
});
