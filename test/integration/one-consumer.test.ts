import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeSignalCli, type FakeSignalCli } from '../fakes/signal-cli.js';
import { BERTH_BIN, REPO_ROOT, removeContainersOf } from '../helpers.js';
import { until } from '../helpers/until.js';

/**
 * One home, one consumer per bridge (attack report M2, first hour: the second serve). signal-cli
 * fans every event out to every connected client, so two berth processes of one home answering
 * Signal means every message runs and is answered twice. Real processes against the fake
 * signal-cli: the second consumer refuses with one line and exits, the fake never sees it connect,
 * and a message gets exactly one reply. Underneath, the inbox accepts a message id once even when
 * two processes race to receive it.
 */
const home = fs.realpathSync(fs.mkdtempSync(join(os.tmpdir(), 'berth-one-consumer-')));
const SENDER = '00000000-0000-4000-8000-00000000c0de';
let fake: FakeSignalCli;
const procs: ChildProcess[] = [];

beforeAll(async () => {
  fake = await startFakeSignalCli({ keepaliveMs: 200, receiveMode: 'on-connection' });
  fs.writeFileSync(
    join(home, 'berth.yaml'),
    [
      'bridges:',
      '  signal:',
      `    url: ${fake.url}`,
      `    account: '${fake.account}'`,
      '    senders: open',
      'routes:',
      '  signal: { project: oc }',
      '',
    ].join('\n'),
  );
  const create = spawn(process.execPath, [BERTH_BIN, '--home', home, 'project', 'create', 'oc', '--isolation'], { stdio: 'ignore' });
  await new Promise((r) => create.once('close', r));
});
afterAll(async () => {
  for (const p of procs) if (p.exitCode === null && p.signalCode === null) p.kill('SIGKILL');
  await removeContainersOf(home);
  fs.rmSync(home, { recursive: true, force: true });
  await fake?.close();
});

interface Proc {
  proc: ChildProcess;
  out: () => string;
  err: () => string;
  /** The exit code, or 'running' if it has not exited within ms. */
  exited(ms: number): Promise<number | 'running'>;
}

function berth(args: string[]): Proc {
  const proc = spawn(process.execPath, [BERTH_BIN, '--home', home, ...args], {
    env: { PATH: process.env.PATH ?? '', BERTH_LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  procs.push(proc);
  let out = '';
  let err = '';
  proc.stdout?.on('data', (d: Buffer) => (out += d.toString()));
  proc.stderr?.on('data', (d: Buffer) => (err += d.toString()));
  const exit = new Promise<number>((resolve) => proc.once('exit', (code, signal) => resolve(code ?? (signal ? 128 : -1))));
  return {
    proc,
    out: () => out,
    err: () => err,
    exited: (ms) => Promise.race([exit, new Promise<'running'>((r) => setTimeout(() => r('running'), ms))]),
  };
}

async function ready(p: Proc): Promise<string> {
  const t0 = Date.now();
  while (!p.out().includes('ready\n')) {
    if (p.proc.exitCode !== null) throw new Error(`berth exited ${p.proc.exitCode} before ready: ${p.out()}${p.err()}`);
    if (Date.now() - t0 > 30_000) throw new Error(`berth not ready after 30 s: ${p.out()}${p.err()}`);
    await new Promise((r) => setTimeout(r, 20));
  }
  return p.out();
}

async function stop(p: Proc): Promise<void> {
  p.proc.kill('SIGTERM');
  expect(await p.exited(30_000)).toBe(0);
}

const repliesTo = () => fake.repliesTo(SENDER).map((s) => s.message);

/** A message with a side effect the agent counts: its one reply says how many times it ran. */
async function askOnce(tag: string): Promise<string[]> {
  const before = repliesTo().length;
  fake.deliverText({ fromUuid: SENDER, fromNumber: null, text: `echo ${tag} >> ran.txt; grep -c ${tag} ran.txt` });
  await fake.waitFor(() => repliesTo().length > before, 30_000);
  // A second consumer's answer would come within the same run time: give it that time.
  await new Promise((r) => setTimeout(r, 2500));
  return repliesTo().slice(before);
}

describe('one consumer per bridge per home (M2)', () => {
  it('beside a serve that runs the Signal bridge, `berth bridge signal` refuses in one line and exits 26; a message is answered once', async () => {
    const serve = berth(['serve', '--port', '0']);
    await ready(serve);
    await fake.waitForClients(1, 20_000);
    const connections = fake.connections();

    const second = berth(['bridge', 'signal']);
    // Before the fix it connected as a second SSE client and stayed: wait for either.
    await fake.waitFor(() => second.proc.exitCode !== null || fake.clients() > 1, 20_000);
    expect(await askOnce('first')).toEqual(['1']);
    expect(await second.exited(10_000)).toBe(26);
    expect(second.err().trim().split('\n')).toEqual([
      expect.stringMatching(/^ALREADY_RUNNING: .*signal bridge.*already runs in berth process \d+/),
    ]);
    expect(second.out()).not.toContain('ready');
    expect(fake.connections()).toBe(connections);
    expect(fake.clients()).toBe(1);
    await stop(serve);
  });

  it('beside a running `berth bridge signal`, `berth serve` refuses to start (exit 26, nothing served); a message is answered once', async () => {
    await fake.waitForClients(0, 10_000);
    const bridge = berth(['bridge', 'signal']);
    await ready(bridge);
    await fake.waitForClients(1, 20_000);
    const connections = fake.connections();

    const serve = berth(['serve', '--port', '0']);
    await fake.waitFor(() => serve.proc.exitCode !== null || fake.clients() > 1, 20_000);
    expect(await askOnce('second')).toEqual(['1']);
    expect(await serve.exited(10_000)).toBe(26);
    expect(serve.err().trim().split('\n')).toEqual([expect.stringMatching(/^ALREADY_RUNNING: /)]);
    expect(serve.out()).not.toContain('serving');
    expect(fake.connections()).toBe(connections);
    await stop(bridge);
  });

  it('a bridge killed with -9 leaves its lock behind: the next one takes it over at once', async () => {
    await fake.waitForClients(0, 10_000);
    const first = berth(['bridge', 'signal']);
    await ready(first);
    first.proc.kill('SIGKILL');
    await first.exited(10_000);
    const next = berth(['bridge', 'signal']);
    await ready(next);
    await fake.waitFor(() => fake.clients() === 1, 10_000);
    expect(await askOnce('third')).toEqual(['1']);
    await stop(next);
  });
});

describe('a second serve whose port is taken (first hour)', () => {
  it('exits 25 at once with one ADDRESS_IN_USE line, and never connects a bridge', async () => {
    await fake.waitForClients(0, 10_000);
    const first = berth(['serve', '--port', '0']);
    const port = /serving http:\/\/127\.0\.0\.1:(\d+)/.exec(await ready(first))?.[1] as string;
    await fake.waitForClients(1, 20_000);
    const connections = fake.connections();

    const second = berth(['serve', '--port', port]);
    // Waited for until it exits or does what it must not (serve, connect a bridge): no wall-clock bound on "at once".
    await until(
      () => second.proc.exitCode !== null || second.proc.signalCode !== null || second.out() !== '' || fake.clients() > 1,
      'the second serve to exit',
      30_000,
    );
    const code = await second.exited(0);
    const clientsMeanwhile = fake.clients();
    expect({ code, stderr: second.err().trim().split('\n') }).toEqual({
      code: 25,
      stderr: [`ADDRESS_IN_USE: 127.0.0.1:${port} is in use (another berth serve?): stop it, or pick another port with --port`],
    });
    expect(second.out()).toBe('');
    expect(clientsMeanwhile).toBe(1);
    expect(fake.connections()).toBe(connections);
    expect(await askOnce('fourth')).toEqual(['1']);
    await stop(first);
  });
});

describe('the inbox across processes', () => {
  it('two processes receiving the same 300 message ids at the same moment accept each exactly once', async () => {
    const dir = join(home, 'race');
    const startAt = Date.now() + 1500;
    // Each process opens the inbox first (loading what it knows), then both receive at startAt.
    const script = `
      const { openInbox } = await import(${JSON.stringify(join(REPO_ROOT, 'dist/store/inbox.js'))});
      const inbox = openInbox(${JSON.stringify(dir)}, 'signal');
      while (Date.now() < ${startAt}) await new Promise((r) => setTimeout(r, 1));
      const accepted = [];
      for (let i = 0; i < 300; i++) {
        const id = 'm' + i;
        if (inbox.receive({ id, chat: 'c', sender: 's', tenant: 's', text: 'x', owner: String(process.pid) })) accepted.push(id);
      }
      process.stdout.write(JSON.stringify(accepted));
    `;
    const run = () =>
      new Promise<string[]>((resolve, reject) => {
        const p = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'pipe'] });
        let out = '';
        let err = '';
        p.stdout.on('data', (d: Buffer) => (out += d));
        p.stderr.on('data', (d: Buffer) => (err += d));
        p.once('close', (code) => (code === 0 ? resolve(JSON.parse(out) as string[]) : reject(new Error(err))));
      });
    const [a, b] = await Promise.all([run(), run()]);
    const both = a.filter((id) => b.includes(id));
    expect({ accepted: a.length + b.length, both: both.length }).toEqual({ accepted: 300, both: 0 });
    const lines = fs.readFileSync(join(dir, 'signal.jsonl'), 'utf8').split('\n').filter(Boolean);
    expect(lines.length).toBe(300);
  });
});
