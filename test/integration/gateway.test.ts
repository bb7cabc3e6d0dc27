import fs from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { workspaceIdFor } from '../../src/store/secret.js';
import { execFileSync } from 'node:child_process';
import { compileBridge } from '../../src/images/build.js';
import { REPO_ROOT, testHome, type TestHome } from '../helpers.js';

/**
 * The agent tool gateway through the real channel: inside a real container, berth-bridge
 * speaks MCP (stdio framing) over the per-run Unix socket mounted into that container only.
 * The caller's identity is the socket's; no tool takes an identity.
 */
let h: TestHome;
let canaryDir: string;
const P = 'org';
const id = (key: string) => workspaceIdFor(h.berth.secret, P, key);

const CLIENT_IMAGE = 'berth/gateway-client:test';

/** Build the in-container client image: node from the host, the SDK client bundled, berth-bridge. */
function buildClientImage(): void {
  const dir = join(REPO_ROOT, 'test/fixtures/gateway-client');
  const run = (cmd: string, args: string[]) => execFileSync(cmd, args, { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  run(join(REPO_ROOT, 'scripts/make-node-base.sh'), []);
  run(join(REPO_ROOT, 'node_modules/.bin/esbuild'), [
    join(dir, 'client.ts'),
    '--bundle',
    '--platform=node',
    '--format=esm',
    '--target=node20',
    `--outfile=${join(dir, 'client.mjs')}`,
    '--banner:js=import { createRequire } from "module"; const require = createRequire(import.meta.url);',
  ]);
  compileBridge(join(REPO_ROOT, 'images/shell/berth-bridge.c'), join(dir, 'berth-bridge'));
  run('docker', ['build', '-q', '-t', CLIENT_IMAGE, dir]);
}

beforeAll(async () => {
  buildClientImage();
  h = testHome();
  h.create({
    name: P,
    workspace_isolation: true,
    image: CLIENT_IMAGE,
    agent: ['node', '/usr/local/bin/client.mjs', '{message}'],
    teams: { 'team:a': { members: ['web:alice', 'web:bob'] }, 'team:b': { members: ['web:carol'] } },
    admins: ['web:boss'],
  });
  canaryDir = join(h.home, 'canary');
  fs.mkdirSync(canaryDir);
  fs.writeFileSync(join(canaryDir, 'secret.txt'), 'host-canary');
  // First contact creates each folder; owners publish something in their shared scope.
  for (const who of ['web:bob', 'web:carol', 'web:boss', 'team:b']) {
    await inContainer(who, [
      write(who, 'shared', 'note.txt', `${who} published\n`),
      write(who, 'private', 'private.txt', `${who} private\n`),
    ]);
  }
}, 180_000);
afterAll(async () => {
  await h[Symbol.asyncDispose]();
});

type Call = { name: string; arguments: Record<string, unknown> };
type Answer = { ok: boolean; value: any; error?: any };

/** Run tool calls with the SDK's Client inside `user`'s container (network none) → berth-bridge → its socket. */
async function inContainer(user: string, calls: Call[]): Promise<Answer[]> {
  const o = await h.run(P, user, JSON.stringify(calls), 'low');
  expect(o.exitCode, o.stderr).toBe(0);
  const out = JSON.parse(o.stdout) as { tools: string[]; answers: Answer[] };
  expect(out.tools.sort()).toEqual([
    'delete_file_by_id',
    'get_file_info_by_id',
    'list_folders',
    'read_file_by_id',
    'workspace_profile',
    'write_file_by_id',
  ]);
  return out.answers;
}

const ref = (folder: string, scope: 'private' | 'shared', path: string, extra: Record<string, unknown> = {}) => ({
  folderId: id(folder),
  scope,
  path,
  ...extra,
});
const read = (folder: string, scope: 'private' | 'shared', path: string): Call => ({
  name: 'read_file_by_id',
  arguments: ref(folder, scope, path),
});
const write = (folder: string, scope: 'private' | 'shared', path: string, content = 'x'): Call => ({
  name: 'write_file_by_id',
  arguments: ref(folder, scope, path, { content }),
});
const del = (folder: string, scope: 'private' | 'shared', path: string): Call => ({
  name: 'delete_file_by_id',
  arguments: ref(folder, scope, path),
});

describe('gateway: every cell of the permission table, from inside a real container', () => {
  it('own folder: read / write / delete in both scopes', async () => {
    const r = await inContainer('web:alice', [
      write('web:alice', 'private', 'p.txt', 'mine'),
      read('web:alice', 'private', 'p.txt'),
      del('web:alice', 'private', 'p.txt'),
      write('web:alice', 'shared', 'pub.txt', 'published by alice'),
      read('web:alice', 'shared', 'pub.txt'),
      write('web:alice', 'shared', 'gone.txt'),
      del('web:alice', 'shared', 'gone.txt'),
    ]);
    expect(r.map((a) => a.ok)).toEqual([true, true, true, true, true, true, true]);
    expect(r[1]?.value).toEqual({ text: 'mine' });
    expect(fs.readFileSync(join(h.home, 'projects', P, 'workspaces', id('web:alice'), 'shared/pub.txt'), 'utf8')).toBe(
      'published by alice',
    );
  });

  it("own team's folder (member): read / write / delete in both scopes; creating it when it does not exist", async () => {
    expect(fs.existsSync(join(h.home, 'projects', P, 'workspaces', id('team:a')))).toBe(false);
    const r = await inContainer('web:alice', [
      write('team:a', 'shared', 'plan.md', 'team plan'),
      write('team:a', 'private', 'notes.md', 'team notes'),
      read('team:a', 'private', 'notes.md'),
      del('team:a', 'private', 'notes.md'),
    ]);
    expect(r.map((a) => a.ok)).toEqual([true, true, true, true]);
    const bob = await inContainer('web:bob', [
      read('team:a', 'shared', 'plan.md'),
      write('team:a', 'shared', 'plan.md', 'v2'),
      del('team:a', 'shared', 'plan.md'),
    ]);
    expect(bob.map((a) => a.ok)).toEqual([true, true, true]);
  });

  it("another member's folder: private never; shared readable by teammates and leadership only, never writable", async () => {
    const alice = await inContainer('web:alice', [
      read('web:bob', 'private', 'private.txt'),
      read('web:bob', 'shared', 'note.txt'),
      write('web:bob', 'shared', 'note.txt', 'pwned'),
      del('web:bob', 'shared', 'note.txt'),
      write('web:bob', 'private', 'x.txt'),
    ]);
    expect(alice.map((a) => a.ok)).toEqual([false, true, false, false, false]);
    expect(alice[1]?.value.text).toBe('web:bob published\n');
    for (const a of [alice[0], alice[2], alice[3], alice[4]]) expect(a?.error.code).toBe('PERMISSION_DENIED');
    const boss = await inContainer('web:boss', [read('web:bob', 'shared', 'note.txt'), read('web:bob', 'private', 'private.txt')]);
    expect(boss.map((a) => a.ok)).toEqual([true, false]);
    const carol = await inContainer('web:carol', [read('web:bob', 'shared', 'note.txt')]);
    expect(carol.map((a) => a.ok)).toEqual([false]);
    expect(fs.readFileSync(join(h.home, 'projects', P, 'workspaces', id('web:bob'), 'shared/note.txt'), 'utf8')).toBe(
      'web:bob published\n',
    );
  });

  it("another team's folder: private never; shared readable by every project member, never writable", async () => {
    const r = await inContainer('web:alice', [
      read('team:b', 'shared', 'note.txt'),
      read('team:b', 'private', 'private.txt'),
      write('team:b', 'shared', 'note.txt', 'pwned'),
      del('team:b', 'shared', 'note.txt'),
    ]);
    expect(r.map((a) => a.ok)).toEqual([true, false, false, false]);
  });

  it("a folder that does not exist may be created only as one's own or one's team's", async () => {
    const stranger = 'f'.repeat(32);
    const r = await inContainer('web:alice', [
      { name: 'write_file_by_id', arguments: { folderId: stranger, scope: 'shared', path: 'x', content: 'x' } },
      write('web:nobody', 'private', 'x'),
    ]);
    expect(r.map((a) => a.ok)).toEqual([false, false]);
    expect(fs.existsSync(join(h.home, 'projects', P, 'workspaces', stranger))).toBe(false);
  });

  it('list_folders shows only what the caller may see; no tool takes an identity', async () => {
    const r = await inContainer('web:alice', [
      { name: 'list_folders', arguments: { scope: 'my_private' } },
      { name: 'list_folders', arguments: { scope: 'team_shared' } },
      { name: 'list_folders', arguments: { scope: 'org_shared' } },
      { name: 'read_file_by_id', arguments: { ...ref('web:bob', 'private', 'private.txt'), agent: 'web:bob' } },
    ]);
    expect(r[0]?.value.folders).toEqual([{ name: 'web:alice', uuid: id('web:alice'), scope: 'private', path: '/' }]);
    expect(r[1]?.value.folders).toEqual([{ name: 'team:a', uuid: id('team:a'), scope: 'shared', path: '/' }]);
    expect(r[2]?.value.folders.map((f: { name: string }) => f.name).sort()).toEqual(['team:a', 'team:b', 'web:bob']);
    expect(r[3]?.error.code).toBe('CONFIG_INVALID');
  });

  it("in workspace mode \"session\", the file tools of the session's container act on that session's workspace; the tenant's default one is out of reach", async () => {
    const inSession = async (session: string, calls: Call[]) => {
      const o = await h.berth.runner.run({
        project: P,
        tenantKey: 'web:dora',
        sessionId: session,
        message: JSON.stringify(calls),
        level: 'low',
      });
      expect(o.exitCode, o.stderr).toBe(0);
      return { answers: (JSON.parse(o.stdout) as { answers: Answer[] }).answers, workspaceId: o.workspaceId };
    };
    // dora's default workspace holds a private note; then one of her sessions gets its own workspace.
    await inSession('dora-own', [write('web:dora', 'private', 'default.txt', 'in the default workspace')]);
    h.berth.admin.updateSession(P, 'dora-own', { workspace: { mode: 'session' } });
    const { answers, workspaceId } = await inSession('dora-own', [{ name: 'list_folders', arguments: { scope: 'my_private' } }]);
    expect(workspaceId).not.toBe(id('web:dora'));
    expect(answers[0]?.value.folders.map((f: { uuid: string }) => f.uuid)).toEqual([workspaceId]);
    const own = (path: string, content?: string): Call =>
      content === undefined
        ? { name: 'read_file_by_id', arguments: { folderId: workspaceId, scope: 'private', path } }
        : { name: 'write_file_by_id', arguments: { folderId: workspaceId, scope: 'private', path, content } };
    const r = (
      await inSession('dora-own', [
        own('session.txt', 'in the session workspace'),
        own('session.txt'),
        read('web:dora', 'private', 'default.txt'),
        write('web:dora', 'private', 'default.txt', 'overwritten'),
      ])
    ).answers;
    expect(r.map((a) => a.ok)).toEqual([true, true, false, false]);
    expect(r[1]?.value).toEqual({ text: 'in the session workspace' });
    expect(r[2]?.error.code).toBe('PERMISSION_DENIED');
    expect(fs.readFileSync(join(h.home, 'projects', P, 'workspaces', id('web:dora'), 'default.txt'), 'utf8')).toBe(
      'in the default workspace',
    );
  });

  it('a link a tenant planted is a structured sandbox violation, logged and counted; the host file is untouched', async () => {
    const before = h.berth.fileTools.violations(P);
    const ws = join(h.home, 'projects', P, 'workspaces', id('web:alice'));
    // What the tenant's own agent could do in its workspace between runs:
    fs.symlinkSync(join(canaryDir, 'secret.txt'), join(ws, 'shared/link'));
    fs.symlinkSync(canaryDir, join(ws, 'shared/dirlink'));
    const r = await inContainer('web:alice', [
      read('web:alice', 'shared', 'link'),
      write('web:alice', 'shared', 'link', 'pwned'),
      write('web:alice', 'shared', 'dirlink/new.txt', 'pwned'),
      read('web:alice', 'shared', '../../../canary/secret.txt'),
      read('web:alice', 'shared', '/etc/passwd'),
    ]);
    for (const a of r) expect(a.error).toMatchObject({ code: 'E_SANDBOX_VIOLATION', kind: 'sandbox_violation', path: expect.any(String) });
    expect(h.berth.fileTools.violations(P)).toBe(before + 5);
    expect(h.berth.admin.getProject(P).sandbox_violations).toBe(before + 5);
    expect(fs.readdirSync(canaryDir)).toEqual(['secret.txt']);
    expect(fs.readFileSync(join(canaryDir, 'secret.txt'), 'utf8')).toBe('host-canary');
  });
});

describe('workspace profile', () => {
  it('is detected from the workspace files, served to its agent and in the admin API, refreshed when they change', async () => {
    const r = await inContainer('web:dev', [
      write('web:dev', 'private', 'package.json', '{"scripts":{"test":"vitest","lint":"eslint ."}}'),
      { name: 'workspace_profile', arguments: {} },
      write('web:dev', 'private', 'pnpm-lock.yaml', ''),
      { name: 'workspace_profile', arguments: {} },
    ]);
    expect(r[1]?.value).toMatchObject({
      ecosystems: ['node'],
      package_manager: 'npm',
      commands: { test: ['npm', 'test'], lint: ['npm', 'run', 'lint'] },
    });
    expect(r[3]?.value).toMatchObject({ package_manager: 'pnpm', commands: { test: ['pnpm', 'test'] } });
    expect(h.berth.admin.workspaceProfile(P, id('web:dev'))).toMatchObject({
      package_manager: 'pnpm',
      detected_from: ['package.json', 'pnpm-lock.yaml'],
    });
  });
});

describe('gateway under a race', () => {
  it('a tenant swapping directories and symlinks from a running container for 10 s changes no host file and leaks no byte', async () => {
    h.create({ name: 'race', workspace_isolation: true, limits: { timeout_seconds: 20 } }); // shell image
    const attacker = h.berth.runner.run({
      project: 'race',
      tenantKey: 'web:mallory',
      level: 'low',
      // "x" is a real directory most of the time, and for an instant a link to a host directory.
      message: `mkdir -p shared/x && echo mine > shared/x/f.txt && ln -sfn ${canaryDir} shared/link
        n=0; end=$(( $(date +%s) + 12 ))
        while [ $(date +%s) -lt $end ]; do
          mv -T shared/x shared/d; mv -T shared/link shared/x; mv -T shared/x shared/link; mv -T shared/d shared/x
          n=$((n+4))
        done 2>/dev/null; echo "swaps=$n"`,
    });
    await new Promise((r) => setTimeout(r, 1500));
    const g = h.berth.fileTools.forCaller({ project: 'race', tenantKey: 'web:mallory' });
    const folderId = workspaceIdFor(h.berth.secret, 'race', 'web:mallory');
    const stats = { ok: 0, refused: 0, reads: 0 };
    const deadline = Date.now() + 10_000;
    while (Date.now() < deadline) {
      for (const op of [
        () => g.read({ folderId, scope: 'shared', path: 'x/f.txt' }),
        () => g.write({ folderId, scope: 'shared', path: 'w.txt' }, 'gateway'),
        () => g.read({ folderId, scope: 'shared', path: 'x/secret.txt' }),
        () => g.info({ folderId, scope: 'shared', path: 'x/secret.txt' }),
        () => g.remove({ folderId, scope: 'shared', path: 'x/secret.txt' }),
        () => g.listFolders('org_shared'),
      ]) {
        try {
          const out = op();
          stats.ok++;
          if (out && typeof out === 'object' && 'content' in out) {
            stats.reads++;
            expect(out.content).toBe('mine\n');
          }
        } catch (err) {
          expect((err as { code: string }).code).toMatch(/^(E_SANDBOX_VIOLATION|CONFIG_INVALID|FILE_CHANGED)$/);
          stats.refused++;
        }
      }
      await new Promise((r) => setImmediate(r));
    }
    const o = await attacker;
    const swaps = Number(/swaps=(\d+)/.exec(o.stdout)?.[1]);
    console.log(`race: ${swaps} swaps by the tenant; gateway ${stats.ok} ok (${stats.reads} reads), ${stats.refused} refused`);
    expect(swaps).toBeGreaterThan(1000);
    expect(stats.ok + stats.refused).toBeGreaterThan(1000);
    expect(stats.reads).toBeGreaterThan(100);
    expect(fs.readdirSync(canaryDir)).toEqual(['secret.txt']);
    expect(fs.readFileSync(join(canaryDir, 'secret.txt'), 'utf8')).toBe('host-canary');
  }, 60_000);
});
