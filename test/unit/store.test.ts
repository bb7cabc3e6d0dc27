import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { workspaceIdFor } from '../../src/store/secret.js';
import { ensureWorkspace, listWorkspaces, workspaceOf } from '../../src/store/workspaces.js';
import { workspaceIdOf } from '../../src/store/sessions.js';
import type { Project } from '../../src/store/projects.js';
import { listTree, unitHome } from '../helpers.js';
import { runCli } from '../helpers/cli-main.js';

const secret = Buffer.alloc(32, 7);

describe('project create', () => {
  it('makes metadata.json, AGENTS.md, .factory/, sessions/ and workspaces/', async () => {
    await using h = unitHome();
    h.create({ name: 'bot' });
    expect(listTree(join(h.home, 'projects/bot'))).toEqual([
      '.factory',
      '.factory/mcp.json',
      '.factory/settings.json',
      'AGENTS.md',
      'memory',
      'metadata.json',
      'sessions',
      'workflows',
      'workspaces',
    ]);
    expect(JSON.parse(fs.readFileSync(join(h.home, 'projects/bot/metadata.json'), 'utf8'))).toMatchObject({
      name: 'bot',
      workspace_isolation: false,
    });
  });

  it('refuses bad input and leaves nothing behind', async () => {
    await using h = unitHome();
    for (const input of [{ name: '../evil' }, { name: 'ok', protected_paths: ['/etc'] }, { name: 'ok', bogus: 1 }]) {
      expect(() => h.berth.store.create(input as never)).toThrow(expect.objectContaining({ code: 'CONFIG_INVALID' }));
    }
    expect(fs.existsSync(join(h.home, 'projects/ok'))).toBe(false);
    expect(fs.readdirSync(h.home).filter((n) => n !== '.berth')).toEqual([]);
    expect(fs.existsSync(join(h.home, '.berth/tmp')) ? fs.readdirSync(join(h.home, '.berth/tmp')) : []).toEqual([]);
  });

  it('a model upstream berth.yaml does not define is refused at create and update, with the ones it has; nothing is made or changed', async () => {
    await using h = unitHome({
      config: 'models:\n  anthropic: { api: anthropic, url: "https://api.anthropic.com", api_key: k-secret-1 }\n',
    });
    const refused = {
      code: 'CONFIG_INVALID',
      details: expect.objectContaining({
        issues: [{ field: 'models.upstreams.1', reason: 'model upstream "openai" is not one berth.yaml defines' }],
        hint: "berth.yaml's models: anthropic; docs/agents.md adds one with its key",
      }),
    };
    expect(() => h.berth.admin.createProject({ name: 'bot', agent: 'claude', models: { upstreams: ['anthropic', 'openai'] } })).toThrow(
      expect.objectContaining(refused),
    );
    expect(fs.existsSync(join(h.home, 'projects/bot'))).toBe(false);
    h.berth.admin.createProject({ name: 'bot', agent: 'claude', models: { upstreams: ['anthropic'] } });
    await expect(
      h.berth.admin.updateProject('bot', { models: { ...h.berth.store.get('bot').metadata.models, upstreams: ['anthropic', 'openai'] } }),
    ).rejects.toMatchObject(refused);
    expect(h.berth.store.get('bot').metadata.models.upstreams).toEqual(['anthropic']);
    // The CLI says it in words, with the field, and exits 2.
    const cliRefused = await runCli(['--home', h.home, 'project', 'update', 'bot', '--model', 'openai']);
    expect(cliRefused.code).toBe(2);
    expect(cliRefused.stderr).toBe(
      'CONFIG_INVALID: project settings is invalid — models.upstreams.0: model upstream "openai" is not one berth.yaml defines (berth.yaml\'s models: anthropic; docs/agents.md adds one with its key)\n',
    );
  });

  it('update changes only what it names and writes metadata atomically', async () => {
    await using h = unitHome();
    h.create({ name: 'bot', limits: { memory_mb: 128 } });
    await h.berth.store.update('bot', { limits: { timeout_seconds: 9 } });
    expect(h.berth.store.get('bot').metadata.limits).toMatchObject({ memory_mb: 128, timeout_seconds: 9 });
    await Promise.all(Array.from({ length: 10 }, (_, i) => h.berth.store.update('bot', { limits: { pids: 100 + i } })));
    const meta = h.berth.store.get('bot').metadata;
    expect(meta.limits.pids).toBeGreaterThanOrEqual(100);
    expect(fs.readdirSync(join(h.home, 'projects/bot')).filter((n) => n.includes('.tmp-'))).toEqual([]);
  });

  it('reports a missing project as PROJECT_NOT_FOUND', async () => {
    await using h = unitHome();
    expect(() => h.berth.store.get('nope')).toThrow(expect.objectContaining({ code: 'PROJECT_NOT_FOUND' }));
  });
});

describe('workspaces', () => {
  /** As a run does: the tenant's workspace id, then that workspace of the project. */
  const ensure = (p: Project, tenantKey: string) =>
    ensureWorkspace({ project: p, tenantKey, workspace: workspaceOf(p, workspaceIdOf(secret, p.metadata.name, tenantKey)) });
  it('derives a stable id per tenant that depends on the secret', () => {
    const a = workspaceIdFor(secret, 'bot', 'web:alice');
    expect(a).toMatch(/^[0-9a-f]{32}$/);
    expect(workspaceIdFor(secret, 'bot', 'web:alice')).toBe(a);
    expect(workspaceIdFor(secret, 'bot', 'web:bob')).not.toBe(a);
    expect(workspaceIdFor(Buffer.alloc(32, 8), 'bot', 'web:alice')).not.toBe(a);
  });

  it('creates on first contact, seeds when isolated, and is idempotent', async () => {
    await using h = unitHome();
    h.create({ name: 'bot', workspace_isolation: true });
    const p = h.berth.store.get('bot');
    const first = ensure(p, 'signal:+4915');
    expect(first.created).toBe(true);
    expect(listTree(first.dir)).toEqual(['.factory', '.factory/mcp.json', '.factory/settings.json', 'AGENTS.md']);
    fs.writeFileSync(join(first.dir, 'mine.txt'), 'x');
    const again = ensure(p, 'signal:+4915');
    expect(again).toMatchObject({ id: first.id, created: false });
    expect(fs.readFileSync(join(first.dir, 'mine.txt'), 'utf8')).toBe('x');
    expect(listWorkspaces(p)).toEqual([{ id: first.id, tenant_key: 'signal:+4915', created_at: expect.any(String) }]);
  });

  it('tenant keys that look like paths create nothing outside workspaces/', async () => {
    await using h = unitHome();
    h.create({ name: 'bot', workspace_isolation: true });
    const p = h.berth.store.get('bot');
    const before = listTree(h.home).filter((x) => !x.startsWith('projects/bot/workspaces/') && !x.startsWith('.berth/'));
    const keys = ['../../../etc', '/etc/passwd', '..', '.', 'a/b/../../c', '~root', '$(id)', 'ünï/cödé', ' '];
    const ids = keys.map((tenantKey) => ensure(p, tenantKey).id);
    expect(new Set(ids).size).toBe(keys.length);
    const after = listTree(h.home).filter((x) => !x.startsWith('projects/bot/workspaces/') && !x.startsWith('.berth/'));
    expect(after).toEqual(before);
    expect(fs.readdirSync(join(h.home, 'projects/bot/workspaces')).sort()).toEqual([...ids].sort());
    expect(() => ensure(p, 'a\0b')).toThrow(expect.objectContaining({ code: 'CONFIG_INVALID' }));
    expect(() => ensure(p, '')).toThrow(expect.objectContaining({ code: 'CONFIG_INVALID' }));
  });

  it('moves a planted symlink aside instead of following it', async () => {
    await using h = unitHome();
    h.create({ name: 'bot', workspace_isolation: true });
    const p = h.berth.store.get('bot');
    const outside = join(h.home, 'outside');
    fs.mkdirSync(outside);
    const id = workspaceIdFor(secret, 'bot', 'web:eve');
    fs.symlinkSync(outside, join(p.paths.workspacesDir, id));
    const ws = ensure(p, 'web:eve');
    expect(ws.created).toBe(true);
    expect(fs.lstatSync(ws.dir).isDirectory()).toBe(true);
    expect(fs.readdirSync(outside)).toEqual([]);
    expect(fs.readdirSync(p.paths.workspacesDir).some((n) => n.startsWith(`${id}.displaced-by-berth-`))).toBe(true);
  });

  it('seeding copies no link, no special file and no huge file, and never blocks on a fifo', async () => {
    await using h = unitHome();
    h.create({ name: 'bot', workspace_isolation: true });
    const p = h.berth.store.get('bot');
    const canary = join(h.home, 'canary');
    fs.writeFileSync(canary, 'host secret');
    // What a tenant could have left in the project tree while isolation was off:
    fs.symlinkSync(canary, join(p.paths.dir, '.factory/link-to-host'));
    fs.symlinkSync('/', join(p.paths.dir, '.factory/root'));
    execFileSync('mkfifo', [join(p.paths.dir, '.factory/fifo')]);
    fs.writeFileSync(join(p.paths.dir, '.factory/huge'), '');
    fs.truncateSync(join(p.paths.dir, '.factory/huge'), 20 * 1024 * 1024 * 1024);
    fs.linkSync(canary, join(p.paths.dir, '.factory/hardlink'));
    const ws = ensure(p, 'web:new');
    expect(listTree(ws.dir)).toEqual(['.factory', '.factory/hardlink', '.factory/mcp.json', '.factory/settings.json', 'AGENTS.md']);
    // The hardlink's content is copied into a new inode: editing the copy cannot reach the host file.
    expect(fs.statSync(join(ws.dir, '.factory/hardlink')).ino).not.toBe(fs.statSync(canary).ino);
    expect(ws.skipped.map((s) => s.path).sort()).toEqual(['.factory/fifo', '.factory/huge', '.factory/link-to-host', '.factory/root']);
  });
});
