import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { assessRunc } from '../../src/cli/doctor.js';
import { createDockerLauncher } from '../../src/launch/docker/launcher.js';
import { createBerth } from '../../src/main.js';
import { spawnSync } from 'node:child_process';
import { BERTH_BIN, cli, docCommands, runDocLine } from '../helpers.js';

let home: string;
const berth = (...args: string[]) => cli(['--home', home, ...args]);

beforeAll(() => {
  home = fs.mkdtempSync(join(os.tmpdir(), 'berth-cli-'));
});
afterAll(async () => {
  await createBerth({ home, logLevel: 'silent' }).runner.reapLeftovers();
  fs.rmSync(home, { recursive: true, force: true });
});

describe('berth CLI (real process, real engine)', () => {
  it("the Signal guide's setup lines, as written, configure the bridge by command (no heredoc that could clobber berth.yaml)", () => {
    const own = fs.mkdtempSync(join(os.tmpdir(), 'berth-readme-signal-'));
    try {
      fs.writeFileSync(join(own, 'berth.yaml'), "# the operator's own notes stay\nruns:\n  warm_idle_seconds: 45\n");
      const lines = docCommands('docs/signal.md', 'npx berth config set ');
      expect(lines.length).toBeGreaterThanOrEqual(2);
      for (const line of lines) expect(runDocLine(line, own)).toMatchObject({ code: 0 });
      expect(cli(['--home', own, 'config', 'get', 'bridges.signal']).stdout).toBe(
        'url: http://127.0.0.1:8081\naccount: "+4915550000"\nmax_file_bytes: 104857600\nsenders: pairing\nallow: []\n',
      );
      expect(cli(['--home', own, 'config', 'get', 'routes.signal.project']).stdout).toBe('signal-bot\n');
      const text = fs.readFileSync(join(own, 'berth.yaml'), 'utf8');
      expect(text).toContain("# the operator's own notes stay");
      expect(text).toContain('warm_idle_seconds: 45');
    } finally {
      fs.rmSync(own, { recursive: true, force: true });
    }
  });

  it('with no --home or BERTH_HOME, the home is ~/.local/share/berth (outside any checkout), or the current directory if it already is a home', () => {
    const user = fs.mkdtempSync(join(os.tmpdir(), 'berth-user-'));
    const checkout = fs.mkdtempSync(join(os.tmpdir(), 'berth-checkout-'));
    const bare = (cwd: string, ...args: string[]) =>
      spawnSync(process.execPath, [BERTH_BIN, ...args], { cwd, env: { PATH: process.env.PATH ?? '', HOME: user }, encoding: 'utf8' });
    try {
      expect(bare(checkout, 'project', 'create', 'elsewhere')).toMatchObject({
        status: 0,
        stdout: `created project elsewhere at ${join(user, '.local/share/berth/projects/elsewhere')}\n`,
      });
      expect(fs.readdirSync(checkout)).toEqual([]);
      // An older berth's home in the current directory keeps being used.
      fs.writeFileSync(join(checkout, 'berth.yaml'), '');
      expect(bare(checkout, 'project', 'create', 'here')).toMatchObject({
        status: 0,
        stdout: `created project here at ${join(fs.realpathSync(checkout), 'projects/here')}\n`,
      });
      expect(
        spawnSync(process.execPath, [BERTH_BIN, 'project', 'list'], {
          cwd: checkout,
          env: { PATH: process.env.PATH ?? '', HOME: user, XDG_DATA_HOME: join(user, 'xdg') },
          encoding: 'utf8',
        }).stdout,
      ).toMatch(/^here\t/);
    } finally {
      fs.rmSync(user, { recursive: true, force: true });
      fs.rmSync(checkout, { recursive: true, force: true });
    }
  });

  it('prints help and version', () => {
    expect(cli(['--help'])).toMatchObject({ code: 0, stdout: expect.stringContaining('berth [--home DIR] <command>') });
    expect(cli(['--version']).stdout).toMatch(/^berth \d+\.\d+\.\d+\n$/);
    expect(cli(['frobnicate'])).toMatchObject({ code: 64, stderr: expect.stringMatching(/^USAGE: unknown command "frobnicate"/) });
  });

  it("each command has its own help; unknown options get berth's own one-line error", () => {
    expect(cli(['run', '--help'])).toMatchObject({
      code: 0,
      stdout: expect.stringMatching(/^Usage: berth \[--home DIR\] run <project> --user <tenant-key>/),
    });
    expect(cli(['help', 'project', 'create'])).toMatchObject({
      code: 0,
      stdout: expect.stringContaining('project create <name> [--isolation]'),
    });
    expect(cli(['--help', 'doctor']).stdout).toContain('doctor [--json]');
    expect(cli(['help', 'nope'])).toMatchObject({ code: 64, stderr: expect.stringMatching(/^USAGE: no command "nope"/) });
    const bad = cli(['run', 'bot', '--user', 'a', '--frob', 'x']);
    expect(bad.code).toBe(64);
    expect(bad.stderr).toBe(
      'USAGE: unknown option "--frob" for "berth run" (a message starting with - goes after --) (usage: berth run <project> --user <tenant-key> [--session ID] [--level low|medium|high] [--file PATH]... [--] <message...>)\n',
    );
    expect(cli(['run', 'bot', '--user'])).toMatchObject({
      code: 64,
      stderr: expect.stringMatching(/^USAGE: option "--user" of "berth run" needs a value/),
    });
  });

  it('creates a project, refusing bad names and bad protected paths with the field at fault', () => {
    expect(berth('project', 'create', 'Bad_Name')).toMatchObject({
      code: 2,
      stderr: expect.stringMatching(/^CONFIG_INVALID: .*name: must be 1-63 characters/),
    });
    expect(berth('project', 'create', 'ok', '--protect', '../etc')).toMatchObject({
      code: 2,
      stderr: expect.stringContaining('protected_paths.0: "../etc" must not contain ".."'),
    });
    expect(fs.existsSync(join(home, 'projects/ok'))).toBe(false);
    expect(berth('project', 'create', 'bot', '--isolation', '--protect', 'AGENTS.md', '--protect', '.factory/')).toMatchObject({
      code: 0,
      stdout: `created project bot at ${fs.realpathSync(home)}/projects/bot\n`,
    });
    expect(berth('project', 'create', 'bot')).toMatchObject({ code: 4, stderr: 'PROJECT_EXISTS: project "bot" already exists\n' });
  });

  it('gets, lists and updates', () => {
    const got = JSON.parse(berth('project', 'get', 'bot').stdout);
    expect(got).toMatchObject({ name: 'bot', workspace_isolation: true, protected_paths: ['AGENTS.md', '.factory/'], agent: 'shell' });
    expect(got.protection.entries.map((e: { path: string }) => e.path)).toEqual(['AGENTS.md', '.factory']);
    expect(berth('project', 'list').stdout).toMatch(/^bot\tisolation=on\tagent=shell\tprotected=AGENTS.md,.factory\/\tworkspaces=0\n$/);
    expect(berth('project', 'update', 'bot', '--timeout', '3', '--protect', 'AGENTS.md')).toMatchObject({ code: 0 });
    expect(JSON.parse(berth('project', 'get', 'bot').stdout)).toMatchObject({
      protected_paths: ['AGENTS.md'],
      limits: { timeout_seconds: 3, memory_mb: 512 },
    });
    expect(berth('project', 'update', 'bot', '--protect', 'x', '--no-protect')).toMatchObject({ code: 64 });
    expect(berth('project', 'update', 'bot', '--timeout', 'soon')).toMatchObject({
      code: 2,
      stderr: expect.stringContaining('limits.timeout_seconds'),
    });
    expect(berth('project', 'update', 'nope', '--isolation')).toMatchObject({
      code: 3,
      stderr: expect.stringMatching(/^PROJECT_NOT_FOUND: /),
    });
    expect(berth('project', 'get', '../../etc')).toMatchObject({
      code: 2,
      stderr: expect.stringMatching(/^CONFIG_INVALID: project name is invalid/),
    });
  });

  it('runs: prints the output and exits with the agent exit code', () => {
    expect(berth('run', 'bot', '--user', 'web:a', '--', 'echo hi; echo oops >&2; exit 3')).toEqual({
      code: 3,
      stdout: 'hi\n',
      stderr: 'oops\n',
    });
    expect(berth('run', 'bot', '--user', 'web:a', '--', 'ls', '-a', '--color=never')).toMatchObject({
      code: 0,
      stdout: expect.stringContaining('AGENTS.md'),
    });
    expect(cli(['run', 'bot', '--user', 'web:a', '--', 'pwd'], { BERTH_HOME: home })).toMatchObject({ code: 0, stdout: '/workspace\n' });
    expect(JSON.parse(berth('project', 'get', 'bot').stdout).workspaces).toEqual([
      { id: expect.stringMatching(/^[0-9a-f]{32}$/), tenant_key: 'web:a', created_at: expect.any(String), size_bytes: expect.any(Number) },
    ]);
  });

  it('sessions: run --session --level, session list/get/set', () => {
    expect(berth('run', 'bot', '--user', 'web:s', '--session', 'chat-1', '--level', 'low', '--', 'ls /sys/class/net')).toMatchObject({
      code: 0,
      stdout: 'lo\n',
    });
    expect(berth('session', 'list', 'bot').stdout).toMatch(/^chat-1\tlevel=low\tmode=tenant\truns=1\ttenant=web:s$/m);
    expect(JSON.parse(berth('session', 'get', 'bot', 'chat-1').stdout)).toMatchObject({
      id: 'chat-1',
      tenant_key: 'web:s',
      settings: { permission_level: 'low' },
    });
    expect(berth('session', 'set', 'bot', 'chat-1', '--level', 'high', '--mode', 'session')).toMatchObject({
      code: 0,
      stdout: 'session chat-1: level=high mode=session\n',
    });
    expect(berth('session', 'set', 'bot', 'chat-1', '--level', 'root')).toMatchObject({
      code: 2,
      stderr: expect.stringContaining('settings.permission_level'),
    });
    expect(berth('run', 'bot', '--user', 'web:s', '--level', 'max', '--', 'true')).toMatchObject({
      code: 2,
      stderr: expect.stringMatching(/^CONFIG_INVALID: --level is invalid/),
    });
    expect(berth('session', 'get', 'bot', 'nope')).toMatchObject({ code: 12, stderr: expect.stringMatching(/^SESSION_NOT_FOUND: /) });
    expect(berth('run', 'bot', '--user', 'web:other', '--session', 'chat-1', '--', 'true')).toMatchObject({
      code: 11,
      stderr: expect.stringMatching(/^PERMISSION_DENIED: session "chat-1" belongs to another tenant/),
    });
  });

  it("berth's own failures: a code and a one-line reason on stderr, non-zero exit", () => {
    expect(berth('run', 'nope', '--user', 'a', '--', 'true')).toMatchObject({
      code: 3,
      stderr: expect.stringMatching(/^PROJECT_NOT_FOUND: project "nope" does not exist/),
    });
    expect(berth('run', 'bot', '--', 'true')).toMatchObject({ code: 64, stderr: 'USAGE: missing --user <tenant-key>\n' });
    expect(berth('run', 'bot', '--user', 'a')).toMatchObject({ code: 64, stderr: expect.stringMatching(/^USAGE: missing message/) });
    const t = berth('run', 'bot', '--user', 'web:a', '--', 'echo started; sleep 30');
    expect(t).toMatchObject({ code: 124, stdout: 'started\n', stderr: expect.stringMatching(/^RUN_TIMEOUT: the run passed its timeout/m) });
    expect(
      cli(['--home', home, 'run', 'bot', '--user', 'a', '--', 'true'], { DOCKER_HOST: 'unix:///nonexistent/docker.sock' }),
    ).toMatchObject({
      code: 5,
      stderr: expect.stringMatching(/^ENGINE_UNAVAILABLE: no Docker engine answers/),
    });
  });

  it('doctor reports engine, runc, images and config, and fails when unsafe', async () => {
    const info = await createDockerLauncher().info();
    const runc = info.runtimes.find((r) => r.name === 'runc')?.version ?? 'unknown';
    const ok = berth('doctor');
    expect(ok.stdout).toContain(`Docker ${info.version}`);
    expect(ok.stdout).toContain('image berth/shell:latest');
    expect(ok.code).toBe(assessRunc(runc, []).status === 'fail' ? 1 : 0);
    const json = JSON.parse(berth('doctor', '--json').stdout) as {
      ok: boolean;
      checks: Array<{ name: string; status: string; detail: string }>;
    };
    expect(json.ok).toBe(ok.code === 0);
    expect(json.checks.map((c) => c.name)).toEqual(
      expect.arrayContaining(['config', 'engine', 'runc', 'runtimes', 'disk quotas', 'image berth/shell:latest', 'pool']),
    );
    // As root, with gcc (setup installs it): the pool can attach mounts under runc.
    expect(json.checks.find((c) => c.name === 'pool')).toMatchObject({
      status: 'ok',
      detail: expect.stringMatching(/^2 pre-started per shape under serve, for isolated projects on .*runc/),
    });
    // gVisor registered (make test does it): the operator is told the pool serves a new person there.
    const pool = json.checks.find((c) => c.name === 'pool')?.detail ?? '';
    const sandboxed = info.runtimes.some((r) => r.name === 'runsc');
    expect(pool.includes("on runsc for a new person's first message (fresh directories renamed into place)")).toBe(sandboxed);
    fs.writeFileSync(join(home, 'berth.yaml'), 'runs: { pool: 0 }\n');
    expect(berth('doctor').stdout).toMatch(/^ok +pool +runs\.pool: 0 \(a new session starts its container\)$/m);
    fs.rmSync(join(home, 'berth.yaml'));
    // A shared-mount project makes unpatched runc a failure, not a warning.
    expect(berth('project', 'create', 'shared').code).toBe(0);
    const shared = berth('doctor');
    expect(shared.code).toBe(assessRunc(runc, ['shared']).status === 'fail' ? 1 : 0);
    if (shared.code === 1) expect(shared.stdout).toMatch(/^FAIL\s+runc .*project "shared" \(workspace_isolation false\)/m);
    fs.writeFileSync(join(home, 'berth.yaml'), 'bogus: 1\n');
    expect(berth('doctor')).toMatchObject({ code: 2, stderr: expect.stringContaining('bogus: unknown field') });
    fs.rmSync(join(home, 'berth.yaml'));
    expect(cli(['--home', home, 'doctor'], { DOCKER_HOST: 'unix:///nonexistent/docker.sock' })).toMatchObject({
      code: 1,
      stdout: expect.stringContaining('FAIL  engine'),
    });
  });
});

describe('the demo under gVisor', () => {
  it('a demo project with --runtime runsc runs every step of `berth demo` in the sentry, with the same boundary', async () => {
    const dir = fs.mkdtempSync(join(os.tmpdir(), 'berth-demo-runsc-'));
    try {
      fs.writeFileSync(join(dir, 'berth.yaml'), 'runtimes: [runc, runsc]\n');
      const made = cli([
        '--home',
        dir,
        'project',
        'create',
        'demo',
        '--isolation',
        '--protect',
        'AGENTS.md',
        '--protect',
        '.factory/',
        '--runtime',
        'runsc',
      ]);
      expect(made.code, made.stderr).toBe(0);
      const demo = cli(['--home', dir, 'demo']);
      expect(demo.code, demo.stderr).toBe(0);
      const steps = demo.stdout.match(/^\(exit \d+, \d+ ms, level \w+, runtime \w+, workspace/gm) ?? [];
      expect(steps).toHaveLength(5);
      // Every step in the sentry; the low one ends with wget's refusal (exit 1), the others well.
      expect(steps.map((step) => /^\(exit (\d+), .*runtime (\w+),/.exec(step)?.slice(1))).toEqual([
        ['0', 'runsc'],
        ['0', 'runsc'],
        ['0', 'runsc'],
        ['1', 'runsc'],
        ['0', 'runsc'],
      ]);
      expect(demo.stdout).toContain('found: 0'); // bob finds no notes.txt of alice's
      expect(demo.stdout).toMatch(/AGENTS\.md: (Read-only file system|Permission denied)/);
      expect(demo.stdout).toContain('default routes: 0');
      expect(demo.stdout).toContain('wget: there is no network at level low');
      expect(demo.stdout).toMatch(/\$ cat notes\.txt\nalice was here\n/);
    } finally {
      await createBerth({ home: dir, logLevel: 'silent' }).runner.reapLeftovers();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('make demo after make run (first hour, round 4, step 7)', () => {
  it("alice's notes.txt in the default home's demo project survives `berth demo`, and bob's session keeps its level", async () => {
    const data = fs.mkdtempSync(join(os.tmpdir(), 'berth-demo-default-'));
    const env = { XDG_DATA_HOME: data, HOME: data };
    const home = join(data, 'berth'); // the default home: no --home, no BERTH_HOME
    const user = (tenant: string, message: string) => cli(['run', 'demo', '--user', tenant, '--', message], env);
    try {
      // make run's demo project, then alice's and bob's chats.
      expect(cli(['project', 'create', 'demo', '--isolation', '--protect', 'AGENTS.md', '--protect', '.factory/'], env)).toMatchObject({
        code: 0,
      });
      expect(user('web:alice', 'echo hi > notes.txt')).toMatchObject({ code: 0 });
      expect(user('web:bob', 'true')).toMatchObject({ code: 0 });
      const sessions = () =>
        cli(['session', 'list', 'demo'], env)
          .stdout.split('\n')
          .filter((l) => l.includes('tenant=web:'))
          .sort();
      const before = sessions();
      expect(before).toHaveLength(2);

      const demo = cli(['demo'], env);
      expect(demo.code, demo.stderr).toBe(0);
      expect(demo.stdout).toContain(
        `The demo runs as its own tenants demo:alice and demo:bob in project "demo" of ${home}; no one else's workspace or session is touched.`,
      );
      expect(demo.stdout).toMatch(/\$ cat notes\.txt\nalice was here\n/);
      // At level low a command that needs the network says why it fails (busybox wget crashed there).
      expect(demo.stdout).toContain('wget: there is no network at level low');
      expect(demo.stdout).not.toContain('Segmentation fault');

      expect(sessions()).toEqual(before); // neither ran in, and web:bob's is not left at level low
      expect(user('web:alice', 'cat notes.txt')).toMatchObject({ code: 0, stdout: 'hi\n' });
    } finally {
      await createBerth({ home, logLevel: 'silent' }).runner.reapLeftovers();
      fs.rmSync(data, { recursive: true, force: true });
    }
  });
});

describe('berth project delete', () => {
  it('needs the name twice; then stops the containers, moves the project to the trash and names where', async () => {
    const dir = fs.mkdtempSync(join(os.tmpdir(), 'berth-delete-'));
    try {
      expect(cli(['--home', dir, 'project', 'create', 'gone', '--isolation']).code).toBe(0);
      expect(cli(['--home', dir, 'run', 'gone', '--user', 'web:a', '--', 'echo kept > note.txt']).code).toBe(0);
      const unconfirmed = cli(['--home', dir, 'project', 'delete', 'gone']);
      expect(unconfirmed).toMatchObject({
        code: 64,
        stderr: 'USAGE: deleting needs --confirm gone (the name twice, so a slip of the shell deletes nothing)\n',
      });
      expect(cli(['--home', dir, 'project', 'delete', 'gone', '--confirm', 'other']).code).toBe(2);
      expect(fs.existsSync(join(dir, 'projects', 'gone'))).toBe(true);
      const done = cli(['--home', dir, 'project', 'delete', 'gone', '--confirm', 'gone']);
      expect(done.code, done.stderr).toBe(0);
      const trashed = /^deleted project gone: moved to (\S+)/.exec(done.stdout)?.[1];
      expect(trashed).toMatch(new RegExp(`^${dir}/\\.berth/trash/gone-`));
      expect(fs.existsSync(join(dir, 'projects', 'gone'))).toBe(false);
      expect(fs.readdirSync(join(trashed!, 'project', 'workspaces')).length).toBe(1); // the tenant's workspace went along, not lost
      expect(cli(['--home', dir, 'project', 'get', 'gone']).code).toBe(3); // PROJECT_NOT_FOUND
    } finally {
      await createBerth({ home: dir, logLevel: 'silent' }).runner.reapLeftovers();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
