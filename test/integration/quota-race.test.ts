import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureWorkspace, quotaImageOf, workspaceOf, type WorkspaceQuota } from '../../src/store/workspaces.js';
import { workspaceIdOf } from '../../src/store/sessions.js';
import { mountPoints } from '../../src/fs/mount-table.js';
import { at, openChildDir, openRootDir, withFd } from '../../src/fs/fd-path.js';
import { removeTreeAt } from '../../src/fs/tree.js';
import { testHome, type TestHome } from '../helpers.js';

/**
 * H1 of the third outside attack: a shared-mode container of the project (its rw view holds
 * workspaces/) swaps a workspace directory for a link while berth, as root, gives it its quota
 * image. Here the swapper is a host process doing renameat2(RENAME_EXCHANGE) as fast as it can
 * (stronger than a container's), racing the migration of a non-empty workspace for many rounds.
 * Nothing may be mounted anywhere but at the workspace, and no host byte may enter an image.
 */
let h: TestHome;
let canary: string;
let racer: string;
const TOKEN = `HOST-CANARY-${randomBytes(8).toString('hex')}`;
const ROOT_ONLY = `ROOT-ONLY-${randomBytes(8).toString('hex')}`;
const MiB = 1024 * 1024;

const RACER_C = `
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
int main(int argc, char **argv) {
  time_t end = time(0) + atoi(argv[3]);
  while (time(0) < end) syscall(SYS_renameat2, AT_FDCWD, argv[1], AT_FDCWD, argv[2], 2 /* RENAME_EXCHANGE */);
  return 0;
}
`;

beforeAll(() => {
  h = testHome({ config: 'disk_quotas: loop\nruns:\n  warm_idle_seconds: 0\n' });
  h.create({ name: 'race', workspace_isolation: true, limits: { disk_mb: 16, files: 300, timeout_seconds: 30 } });
  canary = fs.mkdtempSync(join(os.tmpdir(), 'berth-canary-'));
  fs.writeFileSync(join(canary, 'HOST-CANARY.txt'), `${TOKEN}\n`, { mode: 0o644 });
  fs.writeFileSync(join(canary, 'root-only.txt'), `${ROOT_ONLY}\n`, { mode: 0o600 });
  fs.writeFileSync(join(h.home, 'racer.c'), RACER_C);
  racer = join(h.home, 'racer');
  execFileSync('gcc', ['-O2', '-o', racer, join(h.home, 'racer.c')]);
});
afterAll(async () => {
  await h[Symbol.asyncDispose]();
  fs.rmSync(canary, { recursive: true, force: true });
});

const canaryState = () =>
  fs
    .readdirSync(canary)
    .sort()
    .map((n) => `${n}:${fs.lstatSync(join(canary, n)).size}`);

describe('disk quotas against a swapped workspace path (H1)', () => {
  it('a directory swapped for a link during migration: no mount outside the workspace, no host byte in any image', async () => {
    const project = h.berth.store.get('race');
    const before = canaryState();
    const quota = (): WorkspaceQuota => ({ mode: 'loop', sizeBytes: 16 * MiB, files: 300, scratchDir: join(h.home, '.berth', 'tmp') });
    const rounds = 24;
    const images: string[] = [];
    const outcomes: Record<string, number> = {};
    for (let i = 0; i < rounds; i++) {
      const tenantKey = `web:victim${i}`;
      // The victim's workspace, made while quotas were off, with files of its own: the first quota'd run migrates it.
      const ws = ensureWorkspace({
        project,
        tenantKey,
        workspace: workspaceOf(project, workspaceIdOf(h.berth.secret, project.metadata.name, tenantKey)),
      });
      fs.writeFileSync(join(ws.dir, 'mine.txt'), "the tenant's own file\n");
      for (let f = 0; f < 40; f++) fs.writeFileSync(join(ws.dir, `f${f}`), 'x'.repeat(1000));
      const link = `${ws.dir}.lnk`;
      fs.symlinkSync(canary, link);
      const swapper: ChildProcess = spawn(racer, [ws.dir, link, '3'], { stdio: 'ignore' });
      await new Promise((r) => setTimeout(r, 20));
      let outcome = 'migrated';
      try {
        ensureWorkspace({ project, tenantKey, workspace: workspaceOf(project, ws.id), quota: quota() });
      } catch (err) {
        outcome = (err as { code?: string }).code ?? 'error'; // a refusal is fine; what it left behind is checked below
      }
      outcomes[outcome] = (outcomes[outcome] ?? 0) + 1;
      swapper.kill('SIGKILL');
      await new Promise((r) => swapper.once('exit', r));
      // Whatever the race left at the workspace's name (a link, a displaced directory) is the next round's no concern.
      for (const p of [ws.dir, link]) if (fs.lstatSync(p, { throwIfNoEntry: false })?.isSymbolicLink()) fs.unlinkSync(p);
      images.push(quotaImageOf(project, ws.id));

      // Every mount of the home is exactly a workspace directory (or nothing); none is at the canary.
      const stray = mountPoints().filter((p) => (p.startsWith(h.home) && !/\/workspaces\/[0-9a-f]{32}$/.test(p)) || p.startsWith(canary));
      expect(stray, `round ${i}`).toEqual([]);
      expect(canaryState(), `round ${i}`).toEqual(before);
    }
    for (const image of images.filter((p) => fs.existsSync(p))) {
      const raw = fs.readFileSync(image);
      expect(raw.includes(TOKEN), image).toBe(false);
      expect(raw.includes(ROOT_ONLY), image).toBe(false);
    }
    // The race hit (some rounds were refused) and did not stop the good case (some still migrated).
    console.log('H1 race outcomes', outcomes);
    expect(images.filter((p) => fs.existsSync(p)).length).toBeGreaterThan(0);
    expect(outcomes.E_SANDBOX_VIOLATION ?? 0).toBeGreaterThan(0);
    // Every refusal is berth's own, in words (no raw errno from a half-done step).
    expect(Object.keys(outcomes).filter((o) => !['migrated', 'E_SANDBOX_VIOLATION', 'DISK_QUOTA_FAILED'].includes(o))).toEqual([]);
  }, 240_000);
});

describe('no quota is made while a container that sees every workspace lives (H1)', () => {
  const waitFor = async (cond: () => Promise<boolean>, ms = 15_000) => {
    for (const end = Date.now() + ms; Date.now() < end; await new Promise((r) => setTimeout(r, 100))) if (await cond()) return;
    throw new Error('timed out');
  };
  const sharedAlive = async (project: string) => (await h.berth.runner.listContainers(project)).filter((c) => c.reach === 'project').length;

  it('a shared run in flight holds off the first image; switching isolation on retires it, then the image is made', async () => {
    h.create({ name: 'flip', limits: { disk_mb: 16, timeout_seconds: 60 } }); // shared: the default
    const victim = await h.run('flip', 'web:v', 'echo mine > mine.txt; basename "$(pwd)"');
    const id = victim.stdout.trim();
    const project = () => h.berth.store.get('flip');
    const image = () => quotaImageOf(project(), id);

    // A shared run that could swap workspaces/<id>: alive while isolation goes on behind berth's back (another berth's update).
    const racer = h.run('flip', 'web:racer', 'sleep 40');
    await waitFor(async () => (await sharedAlive('flip')) === 1);
    await h.berth.store.update('flip', { workspace_isolation: true });
    const held = await h.run('flip', 'web:v', 'cat mine.txt');
    expect(held.stdout).toBe('mine\n');
    expect(fs.existsSync(image())).toBe(false); // no image made, nothing copied, nothing mounted
    expect(mountPoints()).not.toContain(join(project().paths.workspacesDir, id));

    // Through the admin (API, CLI, MCP): switching isolation on retires the shared container first.
    await h.berth.admin.updateProject('flip', { workspace_isolation: false });
    await h.berth.admin.updateProject('flip', { workspace_isolation: true });
    expect(await sharedAlive('flip')).toBe(0);
    await racer.catch(() => undefined); // its container is gone: the run ends (killed), it does not hang
    const quotad = await h.run('flip', 'web:v', 'cat mine.txt; df -k . | tail -1');
    expect(quotad.stdout).toMatch(/^mine\n/);
    expect(fs.existsSync(image())).toBe(true);
    expect(mountPoints()).toContain(join(project().paths.workspacesDir, id));
  }, 120_000);
});

describe('quota follow-ups from the review of the fix', () => {
  const waitFor = async (cond: () => Promise<boolean>, ms = 15_000) => {
    for (const end = Date.now() + ms; Date.now() < end; await new Promise((r) => setTimeout(r, 100))) if (await cond()) return;
    throw new Error('timed out');
  };

  it('a message queued before isolation goes on runs isolated: no whole-project container after the switch', async () => {
    h.create({ name: 'queued', limits: { timeout_seconds: 60 } }); // shared
    const first = h.run('queued', 'web:q', 'sleep 5');
    await waitFor(async () => (await h.berth.runner.listContainers('queued')).length === 1);
    const second = h.run('queued', 'web:q', 'ls /workspace; pwd'); // waits for the workspace's lock
    await new Promise((r) => setTimeout(r, 300));
    await h.berth.admin.updateProject('queued', { workspace_isolation: true });
    await first.catch(() => undefined);
    const o = await second;
    expect(o.stdout).not.toMatch(/^workspaces$/m); // the project tree (every workspace) is not its view
    expect(o.stdout.trim().split('\n').pop()).toBe('/workspace');
  }, 60_000);

  it('a workspace far over its quota (a 100 GB sparse file, or too many files) is refused after a walk, not a copy', async () => {
    h.create({ name: 'sparse', workspace_isolation: true, limits: { disk_mb: 16, files: 200 } });
    const project = h.berth.store.get('sparse');
    const ws = ensureWorkspace({
      project,
      tenantKey: 'web:sparse',
      workspace: workspaceOf(project, workspaceIdOf(h.berth.secret, project.metadata.name, 'web:sparse')),
    });
    fs.writeFileSync(join(ws.dir, 'big'), '');
    fs.truncateSync(join(ws.dir, 'big'), 100 * 1024 ** 3);
    const quota: WorkspaceQuota = { mode: 'loop', sizeBytes: 16 * MiB, files: 200, scratchDir: join(h.home, '.berth', 'tmp') };
    // The walk's words (treeFits), not a copy's ("... limits.disk_mb or limits.files allow"): no wall-clock bound.
    expect(() => ensureWorkspace({ project, tenantKey: 'web:sparse', workspace: workspaceOf(project, ws.id), quota })).toThrow(
      /holds more than 16 MiB/,
    );
    expect(fs.existsSync(quotaImageOf(project, ws.id))).toBe(false);
    fs.rmSync(join(ws.dir, 'big'));
    for (let i = 0; i < 250; i++) fs.writeFileSync(join(ws.dir, `f${i}`), '');
    expect(() => ensureWorkspace({ project, tenantKey: 'web:sparse', workspace: workspaceOf(project, ws.id), quota })).toThrow(
      /more than 200 files/,
    );
  });

  it('migration keeps a tree deeper than PATH_MAX, hard links, links (unfollowed), modes and owners', () => {
    h.create({ name: 'deep', workspace_isolation: true, limits: { disk_mb: 16 } });
    const project = h.berth.store.get('deep');
    const ws = ensureWorkspace({
      project,
      tenantKey: 'web:deep',
      workspace: workspaceOf(project, workspaceIdOf(h.berth.secret, project.metadata.name, 'web:deep')),
    });
    // 20 levels of 250-character names: 5,000+ characters, past PATH_MAX for any path-based copy.
    const name = 'd'.repeat(250);
    const descend = (root: string, make: boolean) => {
      let fd = openRootDir(root);
      for (let i = 0; i < 20; i++) {
        if (make) fs.mkdirSync(at(fd, name));
        const next = openChildDir(fd, name, name) ?? -1;
        fs.closeSync(fd);
        fd = next;
      }
      return fd;
    };
    withFd(descend(ws.dir, true), (fd) => fs.writeFileSync(at(fd, 'leaf'), 'bottom\n'));
    fs.writeFileSync(join(ws.dir, 'a'), 'shared inode\n', { mode: 0o640 });
    fs.linkSync(join(ws.dir, 'a'), join(ws.dir, 'b'));
    fs.chownSync(join(ws.dir, 'a'), 10001, 10001);
    fs.symlinkSync(canary, join(ws.dir, 'to-host'));
    const quota: WorkspaceQuota = { mode: 'loop', sizeBytes: 16 * MiB, files: 1000, scratchDir: join(h.home, '.berth', 'tmp') };
    expect(ensureWorkspace({ project, tenantKey: 'web:deep', workspace: workspaceOf(project, ws.id), quota }).ownFilesystem).toBe(true);
    expect(withFd(descend(ws.dir, false), (fd) => fs.readFileSync(at(fd, 'leaf'), 'utf8'))).toBe('bottom\n');
    const [a, b] = [fs.statSync(join(ws.dir, 'a')), fs.statSync(join(ws.dir, 'b'))];
    expect(a.ino).toBe(b.ino);
    expect([a.uid, a.mode & 0o777]).toEqual([10001, 0o640]);
    expect(fs.readlinkSync(join(ws.dir, 'to-host'))).toBe(canary);
    expect(fs.readdirSync(canary).sort()).toEqual(['HOST-CANARY.txt', 'root-only.txt']);
    withFd(openRootDir(ws.dir), (fd) => removeTreeAt(fd, name)); // rm -rf cannot: its paths pass PATH_MAX
  });

  it("a tenant's bytes that look like another filesystem's signature do not stop its image mounting", async () => {
    h.create({ name: 'sig', workspace_isolation: true, limits: { disk_mb: 16 } });
    await h.run('sig', 'web:sig', 'echo kept > mine');
    const project = h.berth.store.get('sig');
    const id = h.berth.admin.listWorkspaces('sig')[0]?.id ?? '';
    const dir = join(project.paths.workspacesDir, id);
    expect(mountPoints()).toContain(dir);
    execFileSync('umount', [dir]);
    // What a tenant gets by filling its disk with the signature at every sector: an Intel RAID member to blkid.
    const image = quotaImageOf(project, id);
    const fd = fs.openSync(image, 'r+');
    const size = fs.fstatSync(fd).size;
    fs.writeSync(fd, Buffer.from('Intel Raid ISM Cfg Sig. 1.0.00\0\0'), 0, 32, size - 1024);
    fs.closeSync(fd);
    const o = await h.run('sig', 'web:sig', 'cat mine');
    expect(o.stdout).toBe('kept\n');
  });
});
