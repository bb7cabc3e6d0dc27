import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import Docker from 'dockerode';
import { afterAll, describe, expect, it } from 'vitest';
import { createBerth, installationId } from '../../src/main.js';
import { startFakeSignalCli } from '../fakes/signal-cli.js';
import { BERTH_BIN, cliAsync } from '../helpers.js';
import { until } from '../helpers/until.js';

const homes: string[] = [];
const servers: ChildProcess[] = [];
afterAll(async () => {
  // Waited for: a stopping serve still writes (the audit's last summary) into the home removed next.
  await Promise.all(
    servers.map((s) =>
      s.exitCode !== null || s.signalCode !== null ? undefined : new Promise((r) => (s.once('exit', r), s.kill('SIGTERM'))),
    ),
  );
  for (const home of homes) {
    await createBerth({ home, logLevel: 'silent' }).runner.reapLeftovers();
    fs.rmSync(home, { recursive: true, force: true });
  }
});

function start(home: string, extra: string[] = []): Promise<{ out: string; proc: ChildProcess }> {
  const proc = spawn(process.execPath, [BERTH_BIN, '--home', home, 'serve', '--port', '0', ...extra], {
    env: { PATH: process.env.PATH ?? '' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  servers.push(proc);
  return new Promise((resolve, reject) => {
    let out = '';
    proc.stdout?.on('data', (d: Buffer) => {
      out += d.toString();
      if (out.includes('ready\n')) resolve({ out, proc });
    });
    proc.once('exit', (code) => reject(new Error(`serve exited ${code}: ${out}`)));
  });
}

describe('berth serve (a real process)', () => {
  it('generates a 0600 token once, prints it once, and the printed curl example works (make run)', async () => {
    const home = fs.mkdtempSync(join(os.tmpdir(), 'berth-serve-'));
    homes.push(home);
    const first = await start(home, ['--demo']);
    expect(first.out).toMatch(/serving http:\/\/127\.0\.0\.1:\d+/);
    const token = fs.readFileSync(join(home, '.berth/admin-token'), 'utf8').trim();
    expect(fs.statSync(join(home, '.berth/admin-token')).mode & 0o777).toBe(0o600);
    expect(first.out).toContain(`admin token: ${token}`);
    const curl = /try:\n([\s\S]+?)\nready/.exec(first.out)?.[1];
    expect(curl).toContain('curl');
    const reply = JSON.parse(execFileSync('sh', ['-c', curl as string], { encoding: 'utf8' }));
    expect(reply).toMatchObject({ project: 'demo', exit_code: 0, stdout: expect.stringMatching(/^hello from agent\n/) });

    first.proc.kill('SIGTERM');
    await new Promise((r) => first.proc.once('exit', r));
    const second = await start(home);
    expect(second.out).not.toContain(token);
    expect(second.out).toContain(`admin token: from ${join(fs.realpathSync(home), '.berth/admin-token')}`);
  });

  it('logs structured JSON with a request id and never the token', async () => {
    const home = fs.mkdtempSync(join(os.tmpdir(), 'berth-serve-'));
    homes.push(home);
    const { out, proc } = await start(home);
    let logs = '';
    proc.stderr?.on('data', (d: Buffer) => (logs += d.toString()));
    const url = /serving (\S+)/.exec(out)?.[1] as string;
    const token = fs.readFileSync(join(home, '.berth/admin-token'), 'utf8').trim();
    const res = await fetch(`${url}/api/projects`, { headers: { authorization: `Bearer ${token}`, 'x-request-id': 'req-42' } });
    expect(res.status).toBe(200);
    await fetch(`${url}/api/projects`, { headers: { authorization: 'Bearer wrong-token-guess' } });
    await until(() => logs.includes('"status":401'), 'the refused request in the log');
    const lines = logs
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(lines).toContainEqual(expect.objectContaining({ req: 'req-42', method: 'GET', path: '/api/projects', status: 200 }));
    expect(lines).toContainEqual(expect.objectContaining({ status: 401 }));
    expect(logs).not.toContain(token);
    expect(logs).not.toContain('wrong-token-guess');
  });
});

describe('berth demo beside a live berth serve (first hour: make demo killed live runs)', () => {
  it("a run in flight on the server still finishes with exit 0 while `berth demo` runs; the demo removes none of the server's containers", async () => {
    const home = fs.realpathSync(fs.mkdtempSync(join(os.tmpdir(), 'berth-serve-')));
    homes.push(home);
    const { out } = await start(home, ['--demo']);
    const url = /serving (\S+)/.exec(out)?.[1] as string;
    const token = fs.readFileSync(join(home, '.berth/admin-token'), 'utf8').trim();
    const post = (user: string, message: string) =>
      fetch(`${url}/api/projects/demo/runs`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ user, message }),
      }).then((r) => r.json() as Promise<{ exit_code: number; stdout: string; warm: boolean }>);
    // A warm container the server keeps between messages, and a run in flight.
    expect(await post('web:carol', 'echo warm')).toMatchObject({ exit_code: 0 });
    const inFlight = post('web:dave', 'sleep 5; echo done');
    const docker = new Docker();
    const running = async () =>
      (await docker.listContainers({ filters: { label: [`berth.installation=${installationId(home)}`] } })).length;
    const t0 = Date.now();
    while ((await running()) < 2) {
      if (Date.now() - t0 > 20_000) throw new Error('the in-flight run never got its container');
      await new Promise((r) => setTimeout(r, 50));
    }
    const demo = await cliAsync(['--home', home, 'demo']);
    expect(demo.code, demo.stderr).toBe(0);
    expect(await inFlight).toMatchObject({ exit_code: 0, stdout: 'done\n' });
    expect(demo.stdout).not.toMatch(/removed \d+ container/);
    // The server's warm container was spared too: its next message reuses it.
    expect(await post('web:carol', 'echo again')).toMatchObject({ exit_code: 0, warm: true });
  }, 120_000);

  it('a Signal bridge added to berth.yaml while it runs is started within seconds, and said so (no restart)', async () => {
    const fake = await startFakeSignalCli({ keepaliveMs: 200, receiveMode: 'on-connection' });
    try {
      const home = fs.mkdtempSync(join(os.tmpdir(), 'berth-serve-'));
      homes.push(home);
      const served = await start(home);
      let out = served.out;
      served.proc.stdout?.on('data', (d: Buffer) => void (out += d.toString()));
      fs.writeFileSync(
        join(home, 'berth.yaml'),
        ['bridges:', '  signal:', `    url: ${fake.url}`, `    account: '${fake.account}'`, ''].join('\n'),
      );
      await fake.waitForClients(1, 15_000);
      await expect
        .poll(() => out, { timeout: 5000 })
        .toContain(`berth: berth.yaml changed: signal bridge started: ${fake.account} at ${fake.url}\n`);
    } finally {
      await fake.close();
    }
  });
});
