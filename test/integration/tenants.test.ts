import Docker from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { installationId } from '../../src/main.js';
import { testHome, type TestHome } from '../helpers.js';

let h: TestHome;
beforeAll(() => {
  process.env.BERTH_TEST_HOST_SECRET = 'host-env-must-not-leak';
  h = testHome({ config: 'env:\n  API_TOKEN: from-berth-yaml\n  NOT_ALLOWED: nope\n' });
  h.create({ name: 'many', workspace_isolation: true, env: ['API_TOKEN', 'UNSET_NAME'] });
});
afterAll(async () => {
  delete process.env.BERTH_TEST_HOST_SECRET;
  await h[Symbol.asyncDispose]();
});

describe('tenants (real containers)', () => {
  it('ten tenants at once each see only their own files', async () => {
    const users = Array.from({ length: 10 }, (_, i) => `signal:+49150000000${i}`);
    await Promise.all(users.map((u, i) => h.run('many', u, `echo "secret-${i}" > mine-${i}.txt`)));
    const outcomes = await Promise.all(
      users.map((u) =>
        h.run(
          'many',
          u,
          'ls /workspace | grep mine-; cat /workspace/mine-*.txt; find / -name "mine-*" 2>/dev/null | grep -v ^/proc | wc -l',
        ),
      ),
    );
    outcomes.forEach((o, i) => {
      expect(o.exitCode).toBe(0);
      expect(o.stdout).toBe(`mine-${i}.txt\nsecret-${i}\n1\n`);
    });
    expect(new Set(outcomes.map((o) => o.workspaceId)).size).toBe(10);
  });

  it('the host environment does not reach the container; only allowed names with berth.yaml values do', async () => {
    const o = await h.run('many', 'web:env', 'env | sort');
    const names = o.stdout
      .trim()
      .split('\n')
      .map((l) => l.split('=')[0]);
    // HOSTNAME (the container id) is the engine's own; everything else is the plan's allowlist
    // (a new session is medium: the egress proxy's variables too; never PS4, which the trace sets inside the shell).
    const proxy = ['HTTP_PROXY', 'HTTPS_PROXY', 'http_proxy', 'https_proxy', 'NO_PROXY', 'no_proxy', 'NODE_USE_ENV_PROXY'];
    // The session's home takes user-level installs (plan/user-tools.ts).
    const tools = [
      'PIP_USER',
      'PIP_BREAK_SYSTEM_PACKAGES',
      'PYTHONUSERBASE',
      'NPM_CONFIG_PREFIX',
      'CARGO_HOME',
      'CARGO_INSTALL_ROOT',
      'GOPATH',
      'GOBIN',
    ];
    expect(names.sort()).toEqual(
      [
        'API_TOKEN',
        'BERTH_GATEWAY',
        'BERTH_PROJECT',
        'BERTH_RUN',
        'BERTH_WORKSPACE',
        'HOME',
        'HOSTNAME',
        'PATH',
        'PWD',
        'SHLVL',
        ...proxy,
        ...tools,
      ].sort(),
    );
    expect(o.stdout).toContain('API_TOKEN=from-berth-yaml');
    expect(o.stdout).not.toContain('host-env-must-not-leak');
    expect(o.warnings).toEqual(['env "UNSET_NAME" is allowed but berth.yaml gives it no value']);
  });

  it('labelled leftovers of a crashed berth are removed at startup', async () => {
    const docker = new Docker();
    const orphan = await docker.createContainer({
      Image: 'berth/shell:latest',
      Cmd: ['sleep', '300'],
      Labels: {
        'berth.managed': 'true',
        'berth.installation': installationId(h.home),
        'berth.project': 'many',
        'berth.workspace': 'x',
        'berth.run': 'crashed',
      },
    });
    await orphan.start();
    expect((await h.berth.runner.listContainers('many')).map((c) => c.run)).toEqual(['crashed']);
    expect(await h.berth.runner.reapLeftovers()).toBeGreaterThanOrEqual(1);
    expect(await h.berth.runner.listContainers('many')).toEqual([]);
  });

  it('a missing image is IMAGE_MISSING with the command that builds it', async () => {
    await h.berth.store.update('many', { image: 'berth/does-not-exist:1' });
    await expect(h.run('many', 'web:a', 'true')).rejects.toMatchObject({
      code: 'IMAGE_MISSING',
      details: { hint: expect.stringContaining('berth images build') },
    });
    await h.berth.store.update('many', { image: 'berth/shell:latest' });
    expect(await h.berth.runner.listContainers('many')).toEqual([]);
  });
});
