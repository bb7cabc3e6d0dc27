import { describe, expect, it } from 'vitest';
import { BerthConfigSchema } from '../../src/config/berth-config.js';
import { RUNSC_MIN_PIDS } from '../../src/config/runtimes.js';
import { ProjectMetadataSchema } from '../../src/config/metadata.js';
import { toCreateOptions } from '../../src/launch/docker/create.js';
import { planRun, type PlanInput } from '../../src/plan/run-plan.js';
import { NO_NETWORK_WORDS } from '../../src/plan/agent-command.js';
import { warmIdentity } from '../../src/plan/warm.js';

const config = BerthConfigSchema.parse({ env: { API_KEY: 'k-123', OTHER: 'not allowed' } });

function input(meta: Record<string, unknown>, snapshotEntries: PlanInput['protectedSnapshot']['entries'] = []): PlanInput {
  return {
    config,
    project: {
      dir: '/h/projects/bot',
      metadataFile: '/h/projects/bot/metadata.json',
      metadata: ProjectMetadataSchema.parse({ name: 'bot', ...meta }),
    },
    workspace: { id: 'w1', dir: '/h/projects/bot/workspaces/w1', isolated: meta.workspace_isolation === true },
    protectedSnapshot: { dir: '/h/.berth/projects/bot/protected/g1', entries: snapshotEntries },
    run: { id: 'r1', level: 'medium', message: 'echo "hi"; ls' },
    installation: 'inst1',
  };
}

const commonTail = {
  runtime: 'runc',
  user: '10001:10001',
  network: 'none',
  sockets: [],
  readOnlyRootfs: true,
  // The IPC namespace's own limits: 16 of each kind of object, stock sizes, shared memory as /tmp.
  sysctls: {
    'kernel.msgmni': '16',
    'kernel.msgmnb': '16384',
    'kernel.shmmni': '16',
    'kernel.shmmax': String(64 * 1024 * 1024),
    'kernel.shmall': '16384',
    'kernel.sem': '250 4000 32 16',
  },
  limits: {
    memoryBytes: 512 * 1024 * 1024,
    nanoCpus: 1e9,
    pids: 256,
    timeoutMs: 300_000,
    outputBytes: 1048576,
    diskBytes: 1024 * 1024 * 1024,
    files: 100000,
  },
  labels: { 'berth.managed': 'true', 'berth.installation': 'inst1', 'berth.project': 'bot', 'berth.workspace': 'w1', 'berth.run': 'r1' },
  env: {
    PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
    HOME: '/tmp',
    BERTH_PROJECT: 'bot',
    BERTH_WORKSPACE: 'w1',
    BERTH_RUN: 'r1',
  },
  warnings: [],
};
const tmp = { type: 'tmpfs', target: '/tmp', readOnly: false, sizeBytes: 64 * 1024 * 1024, mode: 0o1777 };

describe('planRun', () => {
  it('isolation off: the whole project at /workspace, cwd in the workspace, berth files read-only or hidden', () => {
    expect(planRun(input({}))).toEqual({
      ...commonTail,
      labels: { ...commonTail.labels, 'berth.reach': 'project' }, // sees every workspace: holds off quota changes
      image: 'berth/shell:latest',
      argv: ['sh', '-c', '--', 'echo "hi"; ls'],
      exec: ['sh', '-c', '--', 'echo "hi"; ls'],
      keepAlive: ['berth-bridge', 'idle'],
      cwd: '/workspace/workspaces/w1',
      mounts: [
        { type: 'bind', source: '/h/projects/bot', target: '/workspace', readOnly: false },
        { type: 'bind', source: '/h/projects/bot/metadata.json', target: '/workspace/metadata.json', readOnly: true },
        { type: 'bind', source: '/h/projects/bot/workflows', target: '/workspace/workflows', readOnly: true },
        { type: 'tmpfs', target: '/workspace/sessions', readOnly: true, sizeBytes: 4096, mode: 0o555 },
        { type: 'tmpfs', target: '/workspace/memory', readOnly: true, sizeBytes: 4096, mode: 0o555 },
        tmp,
      ],
      prepare: {
        rwRoot: '/h/projects/bot',
        rwRootPath: [],
        files: ['metadata.json'],
        dirs: [
          { path: 'sessions', mode: 0o700, tenantOwned: false },
          { path: 'memory', mode: 0o755, tenantOwned: false },
          { path: 'workflows', mode: 0o755, tenantOwned: false },
          { path: 'workspaces/w1', mode: 0o755, tenantOwned: true },
        ],
        mountpoints: [],
      },
    });
  });

  it('isolation on: only the workspace, cwd /workspace, each protected path a read-only bind from the snapshot', () => {
    const plan = planRun(
      input({ workspace_isolation: true, protected_paths: ['AGENTS.md', '.factory/'] }, [
        { path: 'AGENTS.md', kind: 'file' },
        { path: '.factory', kind: 'dir' },
      ]),
    );
    expect(plan).toEqual({
      ...commonTail,
      labels: { ...commonTail.labels, 'berth.reach': 'workspace' },
      image: 'berth/shell:latest',
      argv: ['sh', '-c', '--', 'echo "hi"; ls'],
      exec: ['sh', '-c', '--', 'echo "hi"; ls'],
      keepAlive: ['berth-bridge', 'idle'],
      cwd: '/workspace',
      mounts: [
        { type: 'bind', source: '/h/projects/bot/workspaces/w1', target: '/workspace', readOnly: false },
        { type: 'bind', source: '/h/.berth/projects/bot/protected/g1/AGENTS.md', target: '/workspace/AGENTS.md', readOnly: true },
        { type: 'bind', source: '/h/.berth/projects/bot/protected/g1/.factory', target: '/workspace/.factory', readOnly: true },
        tmp,
      ],
      prepare: {
        rwRoot: '/h/projects/bot/workspaces/w1',
        rwRootPath: ['workspaces', 'w1'],
        files: [],
        dirs: [],
        mountpoints: [
          { path: 'AGENTS.md', kind: 'file' },
          { path: '.factory', kind: 'dir' },
        ],
      },
    });
  });

  it("a session's run: its home read-write at /home/agent, and the user-level tools (pip --user, npm -g, cargo, go) install there, their programs on PATH after the image's", () => {
    const plan = planRun({ ...input({ workspace_isolation: true }), home: { dir: '/h/.berth/projects/bot/homes/s1' } });
    expect(plan).toEqual({
      ...commonTail,
      labels: { ...commonTail.labels, 'berth.reach': 'workspace' },
      image: 'berth/shell:latest',
      argv: ['sh', '-c', '--', 'echo "hi"; ls'],
      exec: ['sh', '-c', '--', 'echo "hi"; ls'],
      keepAlive: ['berth-bridge', 'idle'],
      cwd: '/workspace',
      mounts: [
        { type: 'bind', source: '/h/projects/bot/workspaces/w1', target: '/workspace', readOnly: false },
        { type: 'bind', source: '/h/.berth/projects/bot/homes/s1', target: '/home/agent', readOnly: false },
        tmp,
      ],
      env: {
        PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/home/agent/.local/bin',
        HOME: '/home/agent',
        PIP_USER: '1',
        PIP_BREAK_SYSTEM_PACKAGES: '1',
        PYTHONUSERBASE: '/home/agent/.local',
        NPM_CONFIG_PREFIX: '/home/agent/.local',
        CARGO_HOME: '/home/agent/.cargo',
        CARGO_INSTALL_ROOT: '/home/agent/.local',
        GOPATH: '/home/agent/go',
        GOBIN: '/home/agent/.local/bin',
        BERTH_PROJECT: 'bot',
        BERTH_WORKSPACE: 'w1',
        BERTH_RUN: 'r1',
      },
      prepare: { rwRoot: '/h/projects/bot/workspaces/w1', rwRootPath: ['workspaces', 'w1'], files: [], dirs: [], mountpoints: [] },
    });
  });

  it('never mounts a protected path from the tenant tree', () => {
    const plan = planRun(input({ protected_paths: ['AGENTS.md'] }, [{ path: 'AGENTS.md', kind: 'file' }]));
    const ro = plan.mounts.filter((m) => m.type === 'bind' && m.readOnly && m.target === '/workspace/AGENTS.md');
    expect(ro).toEqual([
      { type: 'bind', source: '/h/.berth/projects/bot/protected/g1/AGENTS.md', target: '/workspace/AGENTS.md', readOnly: true },
    ]);
  });

  it('fails closed when a protected path has no snapshot', () => {
    expect(() => planRun(input({ protected_paths: ['AGENTS.md'] }))).toThrow(/no snapshot/);
  });

  it("skips a protected path that is one of berth's own in shared mode, with a warning", () => {
    const plan = planRun(input({ protected_paths: ['sessions/'] }, [{ path: 'sessions', kind: 'dir' }]));
    expect(plan.mounts.filter((m) => m.target === '/workspace/sessions')).toHaveLength(1);
    expect(plan.warnings).toEqual([expect.stringContaining('"sessions/" is one of berth\'s own paths')]);
  });

  it('passes only allowed env names, with values from berth.yaml', () => {
    const plan = planRun(input({ env: ['API_KEY', 'MISSING'] }));
    expect(plan.env.API_KEY).toBe('k-123');
    expect(plan.env).not.toHaveProperty('OTHER');
    expect(plan.env).not.toHaveProperty('MISSING');
    expect(plan.warnings).toEqual(['env "MISSING" is allowed but berth.yaml gives it no value']);
  });

  it('fills {message} into presets and custom argv without a shell of its own', () => {
    expect(planRun(input({ agent: 'claude' })).argv).toEqual([
      'claude',
      '-p',
      '--output-format',
      'stream-json',
      '--verbose',
      '--dangerously-skip-permissions',
      '--continue',
      '--',
      'echo "hi"; ls',
    ]);
    expect(planRun(input({ agent: 'claude' })).image).toBe('berth/agent:latest');
    expect(planRun(input({ agent: ['bot', '--q={message}'] })).argv).toEqual(['bot', '--q=echo "hi"; ls']);
    expect(planRun(input({ image: 'mine:1' })).image).toBe('mine:1');
  });

  it('converts limits', () => {
    const plan = planRun(
      input({ limits: { memory_mb: 64, cpus: 0.5, pids: 32, timeout_seconds: 2, output_bytes: 2048, disk_mb: 20, files: 500 } }),
    );
    expect(plan.limits).toEqual({
      memoryBytes: 64 * 1024 * 1024,
      nanoCpus: 5e8,
      pids: 32,
      timeoutMs: 2000,
      outputBytes: 2048,
      diskBytes: 20 * 1024 * 1024,
      files: 500,
    });
    expect(toCreateOptions(plan).HostConfig?.Ulimits).toEqual([{ Name: 'fsize', Soft: 20 * 1024 * 1024, Hard: 20 * 1024 * 1024 }]);
  });

  it("under runsc the engine's pids limit is at least RUNSC_MIN_PIDS (it bounds the sandbox's host tasks); a higher limit stays", () => {
    const offered = { ...input({}), config: BerthConfigSchema.parse({ runtimes: ['runc', 'runsc'] }) };
    const plan = (meta: Record<string, unknown>) => planRun({ ...offered, project: input(meta).project });
    expect(plan({ runtime: 'runsc', limits: { pids: 32 } }).limits.pids).toBe(RUNSC_MIN_PIDS);
    expect(plan({ runtime: 'runsc', limits: { pids: 4096 } }).limits.pids).toBe(4096);
    expect(plan({ runtime: 'runc', limits: { pids: 32 } }).limits.pids).toBe(32);
  });
});

describe('toCreateOptions (engine translation)', () => {
  const plan = planRun(input({ workspace_isolation: true, protected_paths: ['AGENTS.md'] }, [{ path: 'AGENTS.md', kind: 'file' }]));
  const options = toCreateOptions(plan);

  it('drops every capability, forbids new privileges, read-only root, no network, no engine-side log copy', () => {
    expect(options.HostConfig).toMatchObject({
      CapDrop: ['ALL'],
      SecurityOpt: ['no-new-privileges'],
      ReadonlyRootfs: true,
      NetworkMode: 'none',
      PidsLimit: 256,
      Memory: 512 * 1024 * 1024,
      MemorySwap: 512 * 1024 * 1024,
      NanoCpus: 1e9,
      LogConfig: { Type: 'none', Config: {} },
    });
    expect(options.User).toBe('10001:10001');
    expect(options.HostConfig?.IpcMode).toBe('private');
    expect(options.HostConfig?.Sysctls).toEqual(commonTail.sysctls);
    expect(options.HostConfig).not.toHaveProperty('Binds');
    expect(options.HostConfig).not.toHaveProperty('Privileged');
    expect(options.HostConfig?.CapAdd).toBeUndefined();
  });

  it('uses typed mounts, non-recursive binds', () => {
    expect(options.HostConfig?.Mounts).toEqual([
      { Type: 'bind', Source: '/h/projects/bot/workspaces/w1', Target: '/workspace', ReadOnly: false, BindOptions: { NonRecursive: true } },
      {
        Type: 'bind',
        Source: '/h/.berth/projects/bot/protected/g1/AGENTS.md',
        Target: '/workspace/AGENTS.md',
        ReadOnly: true,
        BindOptions: { NonRecursive: true },
      },
      { Type: 'tmpfs', Target: '/tmp', ReadOnly: false, TmpfsOptions: { SizeBytes: 64 * 1024 * 1024, Mode: 0o1777 } },
    ]);
  });

  it('passes the environment as a list built only from the plan', () => {
    expect(options.Env).toEqual(Object.entries(plan.env).map(([k, v]) => `${k}=${v}`));
  });
});

describe('planRun: messages that look like options', () => {
  it.each([
    ['shell', ['sh', '-c', '--', '--help']],
    [
      'claude',
      ['claude', '-p', '--output-format', 'stream-json', '--verbose', '--dangerously-skip-permissions', '--continue', '--', '--help'],
    ],
    [
      'codex',
      [
        'codex',
        'exec',
        'resume',
        '--last',
        '-c',
        'features.plugins=false',
        '-c',
        'analytics.enabled=false',
        '--json',
        '--dangerously-bypass-approvals-and-sandbox',
        '--skip-git-repo-check',
        '--',
        '--help',
      ],
    ],
    ['droid', ['droid', 'exec', '--skip-permissions-unsafe', '--output-format', 'stream-json', '--', '--help']],
  ])('%s: the message comes after "--"', (agent, argv) => {
    expect(planRun({ ...input({ agent }), run: { id: 'r1', level: 'medium', message: '--help' } }).argv).toEqual(argv);
  });
});

describe('planRun: reading the agent at work', () => {
  it('claude and codex always stream events; the shell traces only when watched; a custom argv and the shell tool never', () => {
    const plan = (agent: unknown, live: boolean, argv?: string[]) =>
      planRun({ ...input({ agent }), run: { id: 'r1', level: 'medium', message: 'ls', live, argv } });
    expect(plan('claude', false).progress).toBe('claude-stream-json');
    expect(plan('codex', false).progress).toBe('codex-json');
    expect(plan('shell', false)).not.toHaveProperty('progress');
    expect(plan('shell', false).exec).toEqual(['sh', '-c', '--', 'ls']);
    // Traced: PS4 set inside the shell (never exported: the agent's env does not show it), the message its $1.
    expect(plan('shell', true)).toMatchObject({
      progress: 'shell-trace',
      exec: ['sh', '-c', `PS4=$(printf '\\037berth-step\\037 '); eval "set -x; $1"`, 'sh', 'ls'],
    });
    expect(plan('shell', true).env).not.toHaveProperty('PS4');
    expect(plan(['bot', '{message}'], true)).not.toHaveProperty('progress');
    expect(plan('shell', true, ['cat', 'x'])).not.toHaveProperty('progress');
    // Watched or not, the same warm container serves.
    expect(warmIdentity(plan('shell', true))).toBe(warmIdentity(plan('shell', false)));
  });

  it("at level low (no network) the shell preset's wget says so instead of crashing; other levels and presets are untouched", () => {
    const plan = (agent: unknown, level: 'low' | 'medium', live: boolean) =>
      planRun({ ...input({ agent }), run: { id: 'r1', level, message: 'wget -qO- http://example.com', live } });
    // Loopback (the model gateway is there at every level) goes to busybox's own wget.
    const wget = `wget() { case "$*" in *127.0.0.1*|*localhost*) BERTH_LOOPBACK=1 command wget "$@";; *) sh -c 'echo "wget: ${NO_NETWORK_WORDS}" >&2; exit 1';; esac; }; `;
    expect(plan('shell', 'low', false).exec).toEqual(['sh', '-c', `${wget}eval "$1"`, 'sh', 'wget -qO- http://example.com']);
    expect(plan('shell', 'low', true).exec).toEqual([
      'sh',
      '-c',
      `PS4=$(printf '\\037berth-step\\037 '); ${wget}eval "set -x; $1"`,
      'sh',
      'wget -qO- http://example.com',
    ]);
    expect(plan('shell', 'medium', false).exec).toEqual(['sh', '-c', '--', 'wget -qO- http://example.com']);
    expect(plan('claude', 'low', false).exec).toEqual([
      'claude',
      '-p',
      '--output-format',
      'stream-json',
      '--verbose',
      '--dangerously-skip-permissions',
      '--continue',
      '--',
      'wget -qO- http://example.com',
    ]);
  });
});

describe('planRun: a workflow step (private workspace)', () => {
  const seeds = {
    dir: '/h/.berth/tmp/seed-r1',
    entries: [
      { path: 'AGENTS.md', kind: 'file' as const },
      { path: '.factory', kind: 'dir' as const },
    ],
  };
  const isolatedProject = input({ workspace_isolation: true });
  const plan = planRun({
    ...isolatedProject,
    // As the run context gives a step: the private workspace is never isolated, whatever the project says.
    workspace: { ...isolatedProject.workspace, isolated: false },
    run: { id: 'r1', level: 'medium', message: 'echo "$BERTH_INPUT"', env: { BERTH_INPUT: 'hello"; cat /etc/passwd; echo "' } },
    privateWorkspace: { cwdRel: 'work/runs/w1', seeds, ensureDir: ['work', 'runs', 'w1'] },
  });

  it("hides every tenant workspace, mounts the seed read-only from berth's copy, and passes the input as data", () => {
    expect(plan.mounts).toEqual([
      { type: 'bind', source: '/h/projects/bot', target: '/workspace', readOnly: false },
      { type: 'bind', source: '/h/projects/bot/metadata.json', target: '/workspace/metadata.json', readOnly: true },
      { type: 'bind', source: '/h/projects/bot/workflows', target: '/workspace/workflows', readOnly: true },
      { type: 'tmpfs', target: '/workspace/sessions', readOnly: true, sizeBytes: 4096, mode: 0o555 },
      { type: 'tmpfs', target: '/workspace/memory', readOnly: true, sizeBytes: 4096, mode: 0o555 },
      { type: 'tmpfs', target: '/workspace/workspaces', readOnly: true, sizeBytes: 4096, mode: 0o555 },
      { type: 'bind', source: '/h/.berth/tmp/seed-r1/AGENTS.md', target: '/workspace/AGENTS.md', readOnly: true },
      { type: 'bind', source: '/h/.berth/tmp/seed-r1/.factory', target: '/workspace/.factory', readOnly: true },
      { type: 'tmpfs', target: '/tmp', readOnly: false, sizeBytes: 64 * 1024 * 1024, mode: 0o1777 },
    ]);
    expect(plan.prepare).toEqual({
      rwRoot: '/h/projects/bot',
      rwRootPath: [],
      files: ['metadata.json'],
      dirs: [
        { path: 'sessions', mode: 0o700, tenantOwned: false },
        { path: 'memory', mode: 0o755, tenantOwned: false },
        { path: 'workflows', mode: 0o755, tenantOwned: false },
        { path: 'work/runs/w1', mode: 0o755, tenantOwned: true },
      ],
      mountpoints: [{ path: 'workspaces', kind: 'dir' }, ...seeds.entries],
    });
    expect(plan.argv).toEqual(['sh', '-c', '--', 'echo "$BERTH_INPUT"']);
    expect(plan.env.BERTH_INPUT).toBe('hello"; cat /etc/passwd; echo "');
    expect(plan.cwd).toBe('/workspace/work/runs/w1');
  });
});

describe('warmIdentity: which plans may share a warm container', () => {
  it('ignores the message and the run id, and sees every other change', () => {
    const base = planRun(input({}));
    const next = planRun({ ...input({}), run: { ...input({}).run, id: 'r2', message: 'another message' } });
    expect(warmIdentity(next)).toBe(warmIdentity(base));
    const changed = [
      { ...base, limits: { ...base.limits, memoryBytes: base.limits.memoryBytes * 2 } },
      { ...base, mounts: base.mounts.slice(1) },
      { ...base, env: { ...base.env, EXTRA: '1' } },
      { ...base, image: 'berth/other:latest' },
      { ...base, user: '10002:10002' },
      { ...base, sockets: ['model' as const] },
      { ...base, keepAlive: ['berth-bridge', 'relay', '41400=/run/berth/model.sock', '--', 'berth-bridge', 'idle'] },
      { ...base, sysctls: { ...base.sysctls, 'kernel.msgmni': '32000' } },
    ];
    for (const plan of changed) expect(warmIdentity(plan)).not.toBe(warmIdentity(base));
  });
});

describe('planRun: brokered secrets', () => {
  const withGrant = BerthConfigSchema.parse({
    secrets: {
      GH_TOKEN: { file: '/etc/berth/gh', grants: [{ project: 'bot', host: 'github.com' }] },
      OTHER: { env: 'X', grants: [{ project: 'elsewhere', host: 'x.example' }] },
    },
  });
  const trust = { ca: '/h/.berth/egress-trust/berth-egress-ca.crt', bundle: '/h/.berth/egress-trust/ca-certificates.crt' };
  const plan = (level: 'low' | 'medium') =>
    planRun({
      ...input({}),
      config: withGrant,
      runDir: '/h/.berth/sockets/r1',
      egressTrust: trust,
      run: { id: 'r1', level, message: 'x' },
    });

  it("at medium: a placeholder for each secret granted to the project (no other), and berth's CA over the system store", () => {
    const p = plan('medium');
    expect(p.env.GH_TOKEN).toBe('berth-placeholder-GH_TOKEN');
    expect(p.env.OTHER).toBeUndefined();
    expect(p.env).toMatchObject({
      SSL_CERT_FILE: '/etc/ssl/certs/ca-certificates.crt',
      GIT_SSL_CAINFO: '/etc/ssl/certs/ca-certificates.crt',
      NODE_EXTRA_CA_CERTS: '/usr/local/share/ca-certificates/berth-egress-ca.crt',
      NODE_USE_ENV_PROXY: '1',
    });
    expect(p.mounts).toEqual(
      expect.arrayContaining([
        { type: 'bind', source: trust.bundle, target: '/etc/ssl/certs/ca-certificates.crt', readOnly: true },
        { type: 'bind', source: trust.ca, target: '/usr/local/share/ca-certificates/berth-egress-ca.crt', readOnly: true },
      ]),
    );
    expect(JSON.stringify(p)).not.toContain('/etc/berth/gh');
  });

  it("at low (no egress): neither placeholders nor berth's CA", () => {
    const p = plan('low');
    expect(p.env.GH_TOKEN).toBeUndefined();
    expect(p.env.SSL_CERT_FILE).toBeUndefined();
    expect(p.mounts.some((m) => m.target.startsWith('/etc/ssl'))).toBe(false);
  });
});
