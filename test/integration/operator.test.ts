import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pino } from 'pino';
import { appDepsFrom, createApp } from '../../src/api/app.js';
import { createBerth, type Berth } from '../../src/main.js';
import { runWorkflow } from '../../src/workflows/run.js';
import { cli } from '../helpers.js';
import { until } from '../helpers/until.js';

/**
 * Operator settings against the real engine: a project sees its private workspace plus exactly
 * its granted shared areas, nothing else; misconfigured areas stop berth from starting;
 * workflows run in the private workspace or a run workspace; routes grant nothing.
 */
let root: string;
let home: string;
let areas: Record<'finance' | 'legal' | 'drafts', string>;
let berth: Berth;

const YAML = (a: typeof areas) => `# operator settings: keep this comment
shared_workspaces:
  finance-kb: ${a.finance}   # finance knowledge, read-only
  legal-kb: ${a.legal}
  drafts: ${a.drafts}
routes:
  "signal:finance-desk": { project: finance, workflow: answer }
  "signal:legal-desk": { project: legal, workflow: answer }
`;

const WORKFLOW = `description: answer a question
steps:
  - name: look
    message: 'echo "cwd=$(pwd)"; ls /shared 2>&1; cat /shared/*/fact.txt 2>/dev/null'
    workspace_mode: orchestrator_workspace
  - name: write
    message: 'echo "cwd=$(pwd)"; echo "$BERTH_INPUT" > answer.txt; cat answer.txt'
    workspace_mode: run_workspace
`;

beforeAll(() => {
  root = fs.realpathSync(fs.mkdtempSync(join(os.tmpdir(), 'berth-op-')));
  home = join(root, 'home');
  areas = { finance: join(root, 'areas/finance'), legal: join(root, 'areas/legal'), drafts: join(root, 'areas/drafts') };
  for (const [name, dir] of Object.entries(areas)) {
    fs.mkdirSync(dir, { recursive: true });
    fs.writeFileSync(join(dir, 'fact.txt'), `${name}-fact\n`);
  }
  fs.chownSync(areas.drafts, 10001, 10001);
  fs.mkdirSync(home);
  fs.writeFileSync(join(home, 'berth.yaml'), YAML(areas));
  berth = createBerth({ home, logLevel: 'silent' });
  for (const name of ['finance', 'legal', 'plain']) {
    berth.store.create({ name });
    fs.writeFileSync(join(home, 'projects', name, 'workflows/answer.yaml'), WORKFLOW);
  }
});
afterAll(async () => {
  await berth.runner.reapLeftovers();
  fs.rmSync(root, { recursive: true, force: true });
});

const run = (project: string, message: string) => berth.runner.run({ project, tenantKey: 'web:t', message });
const b = (...args: string[]) => cli(['--home', home, ...args]);

describe('shared areas (real containers)', () => {
  it('a project with no grants sees only its private workspace', async () => {
    const o = await run('plain', 'ls /shared 2>&1; grep -c " /shared" /proc/self/mountinfo; cat /proc/self/mountinfo | grep -c areas');
    expect(o.stdout).toBe('ls: /shared: No such file or directory\n0\n0\n');
  });

  it('grants (CLI, comments kept) give exactly the granted areas: read-only stays read-only, rw is writable', async () => {
    expect(b('project', 'grant', 'finance', 'finance-kb')).toMatchObject({ code: 0 });
    expect(b('project', 'grant', 'finance', 'drafts', '--rw')).toMatchObject({ code: 0 });
    const yaml = fs.readFileSync(join(home, 'berth.yaml'), 'utf8');
    expect(yaml).toContain('# operator settings: keep this comment');
    expect(yaml).toContain('# finance knowledge, read-only');
    expect(b('project', 'show', 'finance').stdout).toBe(
      `project finance\nprivate workspace: ${home}/projects/finance\nshared: /shared/finance-kb → ${areas.finance} (ro)\nshared: /shared/drafts → ${areas.drafts} (rw)\n`,
    );
    const o = await run(
      'finance',
      'ls /shared; cat /shared/finance-kb/fact.txt; touch /shared/finance-kb/x 2>&1; echo d > /shared/drafts/new.txt && echo wrote; ls /shared/legal-kb 2>&1',
    );
    expect(o.stdout).toBe(
      `drafts\nfinance-kb\nfinance-fact\ntouch: /shared/finance-kb/x: Read-only file system\nwrote\nls: /shared/legal-kb: No such file or directory\n`,
    );
    expect(fs.readdirSync(areas.finance)).toEqual(['fact.txt']);
    expect(fs.readFileSync(join(areas.drafts, 'new.txt'), 'utf8')).toBe('d\n');
  });

  it('revoke applies to the next run; an ungranted area is refused through the API path and logged', async () => {
    expect(b('project', 'revoke', 'finance', 'drafts')).toMatchObject({ code: 0 });
    expect((await run('finance', 'ls /shared')).stdout).toBe('finance-kb\n');
    expect(() => berth.operator.assertGranted('finance', 'legal-kb')).toThrow(expect.objectContaining({ code: 'AREA_NOT_GRANTED' }));
    expect(b('project', 'grant', 'finance', 'nope')).toMatchObject({ code: 2, stderr: expect.stringContaining('no shared area "nope"') });
  });

  it('a grant revoked while a run waits for its workspace is not mounted into it', async () => {
    expect(b('project', 'grant', 'finance', 'drafts')).toMatchObject({ code: 0 });
    const before = new Set((await berth.runner.listContainers('finance')).map((c) => c.id));
    const first = run('finance', 'sleep 2; ls /shared');
    // The first run holds the tenant's workspace once its container runs.
    await until(
      async () => (await berth.runner.listContainers('finance')).some((c) => !before.has(c.id) && c.state === 'running'),
      'the first run to be in flight',
    );
    const queued = run('finance', 'ls /shared');
    expect(b('project', 'revoke', 'finance', 'drafts')).toMatchObject({ code: 0 });
    expect((await first).stdout).toBe('drafts\nfinance-kb\n'); // in flight: keeps what it started with
    expect((await queued).stdout).toBe('finance-kb\n');
  });

  it('the shell tool reads granted areas, refuses ungranted ones (AREA_NOT_GRANTED) and writes to read-only ones', async () => {
    await berth.runner.run({ project: 'finance', tenantKey: 'web:sh', message: 'true', sessionId: 'fin-sh', level: 'medium' });
    const ok = await berth.sessionTools.shellRun({ project: 'finance', session: 'fin-sh' }, { command: 'cat /shared/finance-kb/fact.txt' });
    expect(ok).toMatchObject({ exit_code: 0, stdout: 'finance-fact\n' });
    await expect(
      berth.sessionTools.shellRun({ project: 'finance', session: 'fin-sh' }, { command: 'cat /shared/legal-kb/fact.txt' }),
    ).rejects.toMatchObject({ code: 'AREA_NOT_GRANTED' });
    await expect(
      berth.sessionTools.shellRun({ project: 'finance', session: 'fin-sh' }, { command: 'touch /shared/finance-kb/x' }),
    ).rejects.toMatchObject({ code: 'PERMISSION_DENIED', details: { rule: 'write_outside_workspace' } });
  });

  it('misconfigured shared areas stop serve, run and doctor, naming the entry', () => {
    const bad = join(root, 'bad-home');
    fs.mkdirSync(bad, { recursive: true });
    fs.symlinkSync(areas.legal, join(root, 'link-to-legal'));
    const cases: Array<[string, string]> = [
      ['relative/path', 'must be an absolute path'],
      [join(root, 'missing'), 'does not exist'],
      [join(root, 'link-to-legal'), 'is not canonical'],
      ['/', 'must not be /'],
      ['/var/run', "engine's directories"],
      [join(bad, 'projects/inside'), 'workspaces_path'],
      [`${areas.finance}/..`, 'is not canonical'],
    ];
    for (const [path, reason] of cases) {
      fs.writeFileSync(join(bad, 'berth.yaml'), `shared_workspaces:\n  kb: ${path}\n`);
      for (const args of [['run', 'x', '--user', 'u', '--', 'true'], ['doctor'], ['serve', '--port', '0']]) {
        const r = cli(['--home', bad, ...args]);
        expect(r.code, `${path} ${args[0]}`).toBe(2);
        expect(r.stderr).toMatch(/^CONFIG_INVALID: .*berth\.yaml is invalid — shared_workspaces\.kb: /);
        expect(r.stderr).toContain(reason);
      }
    }
    fs.writeFileSync(join(bad, 'berth.yaml'), `shared_workspaces:\n  a: ${areas.finance}\n  b: ${join(root, 'areas')}\n`);
    expect(cli(['--home', bad, 'doctor']).stderr).toContain('overlaps shared area');
  });
});

describe('workflows (real containers)', () => {
  it('orchestrator_workspace runs at the private workspace root; run_workspace under work/runs/<run_id>', async () => {
    const r = b('workflow', 'run', 'finance', 'answer', '--input', 'forty-two');
    expect(r.code).toBe(0);
    expect(r.stderr).toContain('step 1/2 (look) ...');
    expect(r.stderr).toContain('step 2/2 ok');
    const [first, second] = r.stdout.split(/(?=cwd=)/);
    expect(first).toBe('cwd=/workspace\nfinance-kb\nfinance-fact\n');
    const runDir = /^cwd=\/workspace\/work\/runs\/(w[0-9a-z]+)\nforty-two\n$/.exec(second ?? '')?.[1];
    expect(runDir).toBeDefined();
    expect(fs.readFileSync(join(home, 'projects/finance/work/runs', runDir as string, 'answer.txt'), 'utf8')).toBe('forty-two\n');
  });

  it('a failing step stops the run with its error; every step is recorded', async () => {
    fs.writeFileSync(
      join(home, 'projects/plain/workflows/fails.yaml'),
      `steps:\n  - { message: 'echo one', workspace_mode: orchestrator_workspace }\n  - { message: 'echo two; exit 3', workspace_mode: run_workspace }\n  - { message: 'echo never', workspace_mode: orchestrator_workspace }\n`,
    );
    const r = b('workflow', 'run', 'plain', 'fails');
    expect(r.code).toBe(14);
    expect(r.stdout).toBe('one\ntwo\n');
    expect(r.stderr).toMatch(/^WORKFLOW_FAILED: workflow fails stopped at step 2: exited with 3/m);
    const log = fs
      .readFileSync(join(home, 'projects/plain/sessions/workflow-runs.jsonl'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(log.at(-1)).toMatchObject({
      workflow: 'fails',
      status: 'failed',
      error: { step: 1 },
      steps: [{ exit_code: 0 }, { exit_code: 3 }],
    });
  });

  it('workspace_mode other than the two (agent_workspace included) fails validation naming file, step and allowed values', () => {
    fs.writeFileSync(
      join(home, 'projects/plain/workflows/old.yaml'),
      `steps:\n  - { message: 'x', workspace_mode: orchestrator_workspace }\n  - { message: 'y', workspace_mode: agent_workspace }\n`,
    );
    const r = b('workflow', 'run', 'plain', 'old');
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`workflow file ${home}/projects/plain/workflows/old.yaml is invalid`);
    expect(r.stderr).toContain('steps.1.workspace_mode: must be one of orchestrator_workspace, run_workspace (got "agent_workspace")');
  });

  it('a workflow that needs an ungranted area is refused before any step runs', async () => {
    fs.writeFileSync(
      join(home, 'projects/plain/workflows/needs.yaml'),
      `shared: [legal-kb]\nsteps:\n  - { message: 'touch ran', workspace_mode: orchestrator_workspace }\n`,
    );
    await expect(
      runWorkflow(
        { store: berth.store, runner: berth.runner, assertGranted: berth.operator.assertGranted },
        { project: 'plain', workflow: 'needs' },
      ),
    ).rejects.toMatchObject({ code: 'AREA_NOT_GRANTED' });
    expect(fs.existsSync(join(home, 'projects/plain/ran'))).toBe(false);
  });

  it("routes: each desk's workflow sees only its own project's areas", () => {
    expect(b('project', 'grant', 'legal', 'legal-kb')).toMatchObject({ code: 0 });
    const legal = b('channel', 'run', 'signal:legal-desk', '--input', 'q');
    expect(legal.code).toBe(0);
    expect(legal.stdout.split(/(?=cwd=)/)[0]).toBe('cwd=/workspace\nlegal-kb\nlegal-fact\n');
    const finance = b('channel', 'run', 'signal:finance-desk', '--input', 'q');
    expect(finance.stdout.split(/(?=cwd=)/)[0]).toBe('cwd=/workspace\nfinance-kb\nfinance-fact\n');
    expect(b('channel', 'run', 'signal:nobody')).toMatchObject({ code: 2, stderr: expect.stringContaining('no route') });
  });
});

describe('workflow attacks (issue: input pasted into a shell; steps saw every tenant)', () => {
  const ATTACK = 'hello"; cat /workspace/workspaces/*/secret.txt; echo "';
  const LEAK = `steps:
  - name: answer
    message: 'echo "$BERTH_INPUT" > answer.txt; cat answer.txt'
    workspace_mode: run_workspace
  - name: snoop
    message: 'ls /workspace/workspaces | wc -l; cat /workspace/workspaces/*/secret.txt; echo poison > /workspace/.factory/mcp.json; echo poison >> /workspace/AGENTS.md; echo done'
    workspace_mode: orchestrator_workspace
`;
  let seed: Record<string, string>;
  beforeAll(async () => {
    berth.store.create({ name: 'iso', workspace_isolation: true });
    fs.writeFileSync(join(home, 'projects/iso/workflows/leak.yaml'), LEAK);
    const o = await berth.runner.run({ project: 'iso', tenantKey: 'signal:+4915550001', message: 'echo tenant-secret-123 > secret.txt' });
    expect(o.exitCode).toBe(0);
    seed = {
      agents: fs.readFileSync(join(home, 'projects/iso/AGENTS.md'), 'utf8'),
      mcp: fs.readFileSync(join(home, 'projects/iso/.factory/mcp.json'), 'utf8'),
    };
  });

  const unchanged = () => {
    expect(fs.readFileSync(join(home, 'projects/iso/AGENTS.md'), 'utf8')).toBe(seed.agents);
    expect(fs.readFileSync(join(home, 'projects/iso/.factory/mcp.json'), 'utf8')).toBe(seed.mcp);
  };

  it('CLI: the input is data (printed literally), tenant workspaces are hidden, the seed is read-only', () => {
    const r = b('workflow', 'run', 'iso', 'leak', '--input', ATTACK);
    expect(r.stdout).not.toContain('tenant-secret-123');
    expect(r.stdout.split('\n')[0]).toBe(ATTACK);
    expect(r.stdout).toContain('\n0\n'); // an empty, read-only workspaces/
    expect(r.code).toBe(0);
    unchanged();
    expect(
      fs.readFileSync(
        join(home, 'projects/iso/workspaces', fs.readdirSync(join(home, 'projects/iso/workspaces'))[0] as string, 'secret.txt'),
        'utf8',
      ),
    ).toBe('tenant-secret-123\n');
  });

  it('HTTP: the same, over POST /api/projects/:name/workflows/:wf/runs', async () => {
    const app = createApp(appDepsFrom(berth, { token: 'test-token-0123456789', logger: pino({ level: 'silent' }) }));
    const res = await app.request('/api/projects/iso/workflows/leak/runs', {
      method: 'POST',
      headers: { authorization: 'Bearer test-token-0123456789', 'content-type': 'application/json' },
      body: JSON.stringify({ input: ATTACK }),
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { status: string; steps: Array<{ stdout: string }> };
    expect(body.status).toBe('succeeded');
    expect(body.steps[0]?.stdout).toBe(`${ATTACK}\n`);
    expect(JSON.stringify(body)).not.toContain('tenant-secret-123');
    unchanged();
  });

  it('a step message with the old {input} placeholder is refused, naming the way that works', () => {
    fs.writeFileSync(
      join(home, 'projects/iso/workflows/old-input.yaml'),
      `steps:\n  - { message: 'echo "{input}"', workspace_mode: orchestrator_workspace }\n`,
    );
    const r = b('workflow', 'run', 'iso', 'old-input', '--input', 'x');
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('steps.0.message: must not contain {input}');
    expect(r.stderr).toContain('$BERTH_INPUT');
  });
});

describe('private workspace override', () => {
  it('set moves the project to the operator path (runs follow); unset moves it back', async () => {
    const target = join(root, 'elsewhere/plain');
    expect(b('project', 'set-private-workspace', 'plain', target)).toMatchObject({
      code: 0,
      stdout: `project plain now lives at ${target}\n`,
    });
    expect(fs.existsSync(join(target, 'metadata.json'))).toBe(true);
    expect(fs.existsSync(join(home, 'projects/plain'))).toBe(false);
    expect(fs.readFileSync(join(home, 'berth.yaml'), 'utf8')).toContain(`private_workspace: ${target}`);
    expect(b('project', 'list').stdout).toContain('plain\t');
    const o = await createBerth({ home, logLevel: 'silent' }).runner.run({
      project: 'plain',
      tenantKey: 'web:t',
      message: 'echo moved > m.txt',
    });
    expect(o.workspaceRoot.startsWith(target)).toBe(true);
    expect(b('project', 'set-private-workspace', 'plain', 'relative/dir')).toMatchObject({ code: 2 });
    expect(b('project', 'unset-private-workspace', 'plain')).toMatchObject({
      code: 0,
      stdout: `project plain now lives at ${home}/projects/plain\n`,
    });
    expect(fs.readFileSync(join(o.workspaceRoot.replace(target, join(home, 'projects/plain')), 'm.txt'), 'utf8')).toBe('moved\n');
    expect(fs.readFileSync(join(home, 'berth.yaml'), 'utf8')).not.toContain('private_workspace');
  });
});
