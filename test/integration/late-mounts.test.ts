import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import Docker from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { attachMounts, mountHelper } from '../../src/launch/docker/late-mounts.js';
import { holdProcess, type ProcessHandle } from '../../src/launch/docker/proc-handle.js';
import { pidAt } from '../helpers/pid-at.js';

/**
 * The late-mount helper (native/berth-mount.c via launch/docker/late-mounts.ts) against a real runc
 * container, as the pre-started pool uses it, attacked the way a tenant could (a link where a
 * protected file is to be mounted, a link in a source's path) and the way a busy host does: the
 * container's process gone and its number handed to a process of another container.
 */
const docker = new Docker();
let dir: string;
let helper: string;
const containers: string[] = [];

/** A container like a pool container: blank stand-ins at /workspace and /workspace/AGENTS.md; returns its id and its first process, held. */
async function blankContainer(): Promise<{ id: string; proc: ProcessHandle }> {
  const blank = fs.mkdtempSync(join(dir, 'blank-'));
  fs.writeFileSync(join(dir, 'blank-file'), '');
  const c = await docker.createContainer({
    Image: 'berth/shell:latest',
    Entrypoint: [],
    Cmd: ['sleep', '300'],
    User: '10001:10001',
    HostConfig: {
      NetworkMode: 'none',
      CapDrop: ['ALL'],
      ReadonlyRootfs: true,
      Mounts: [
        { Type: 'bind', Source: blank, Target: '/workspace', ReadOnly: false },
        { Type: 'bind', Source: join(dir, 'blank-file'), Target: '/workspace/AGENTS.md', ReadOnly: false },
      ] as Docker.MountConfig,
    },
  });
  containers.push(c.id);
  await c.start();
  const { State } = await c.inspect();
  const proc = holdProcess(State.Pid, c.id);
  if (!proc) throw new Error(`container ${c.id}'s process ${State.Pid} cannot be held from here`);
  return { id: c.id, proc };
}

const inside = async (id: string, script: string): Promise<string> => {
  const exec = await docker.getContainer(id).exec({ Cmd: ['sh', '-c', script], AttachStdout: true, AttachStderr: true });
  const stream = await exec.start({});
  const chunks: Buffer[] = [];
  stream.on('data', (d: Buffer) => chunks.push(d));
  await new Promise((r) => stream.on('end', r));
  // Strip the engine's 8-byte frame headers.
  const raw = Buffer.concat(chunks);
  let out = '';
  for (let i = 0; i + 8 <= raw.length;) {
    const size = raw.readUInt32BE(i + 4);
    out += raw.subarray(i + 8, i + 8 + size).toString();
    i += 8 + size;
  }
  return out;
};

beforeAll(() => {
  dir = fs.realpathSync(fs.mkdtempSync(join(os.tmpdir(), 'berth-late-')));
  helper = mountHelper(join(dir, 'cache'));
  fs.mkdirSync(join(dir, 'ws'));
  fs.writeFileSync(join(dir, 'ws', 'notes.txt'), 'mine\n');
  fs.writeFileSync(join(dir, 'ws', 'AGENTS.md'), 'tenant copy\n');
  fs.writeFileSync(join(dir, 'protected-AGENTS.md'), 'the rules\n');
});
afterAll(async () => {
  await Promise.all(
    containers.map((id) =>
      docker
        .getContainer(id)
        .remove({ force: true })
        .catch(() => undefined),
    ),
  );
  fs.rmSync(dir, { recursive: true, force: true });
});

describe('late mounts into a running runc container', () => {
  it("the workspace and a read-only file land where the plan says; the container's mount table shows them alone", async () => {
    const { id, proc } = await blankContainer();
    await attachMounts(helper, proc, id, [
      { type: 'bind', source: join(dir, 'ws'), target: '/workspace', readOnly: false },
      { type: 'bind', source: join(dir, 'protected-AGENTS.md'), target: '/workspace/AGENTS.md', readOnly: true },
    ]);
    const out = await inside(
      id,
      'cat /workspace/notes.txt /workspace/AGENTS.md; (echo x > /workspace/AGENTS.md) 2>&1; grep -c " /workspace " /proc/self/mountinfo; grep -c " /workspace/AGENTS.md " /proc/self/mountinfo',
    );
    expect(out).toContain('mine\nthe rules\n');
    expect(out).toMatch(/Read-only file system/);
    expect(out.trim().split('\n').slice(-2)).toEqual(['1', '1']);
    // The host's file under the read-only mount is the tenant's own, untouched.
    expect(fs.readFileSync(join(dir, 'ws', 'AGENTS.md'), 'utf8')).toBe('tenant copy\n');
  });

  it('a link where a file is to be mounted fails the attach: the mount never follows it', async () => {
    const { id, proc } = await blankContainer();
    const ws = fs.mkdtempSync(join(dir, 'ws-evil-'));
    fs.symlinkSync('/etc/passwd', join(ws, 'AGENTS.md'));
    const before = await inside(id, 'cat /etc/passwd');
    await expect(
      attachMounts(helper, proc, id, [
        { type: 'bind', source: ws, target: '/workspace', readOnly: false },
        { type: 'bind', source: join(dir, 'protected-AGENTS.md'), target: '/workspace/AGENTS.md', readOnly: true },
      ]),
    ).rejects.toThrow(/the mount point \/workspace\/AGENTS\.md: Too many levels of symbolic links/);
    expect(await inside(id, 'cat /etc/passwd')).toBe(before);
    expect(await inside(id, 'grep -c " /etc/passwd " /proc/self/mountinfo || true')).toBe('0\n');
  });

  it('a source whose path goes through a link is refused before the helper runs', async () => {
    const { id, proc } = await blankContainer();
    fs.symlinkSync(join(dir, 'ws'), join(dir, 'ws-link'));
    await expect(
      attachMounts(helper, proc, id, [{ type: 'bind', source: join(dir, 'ws-link'), target: '/workspace', readOnly: false }]),
    ).rejects.toMatchObject({ code: 'E_SANDBOX_VIOLATION' });
  });

  it('bad specs are refused with the usage, never half-applied', () => {
    const r = (args: string[]) => {
      try {
        execFileSync(helper, args, { stdio: ['ignore', 'ignore', 'pipe'] });
        return 0;
      } catch (err) {
        return (err as { status: number }).status;
      }
    };
    const id = 'a'.repeat(64);
    expect(r([])).toBe(2);
    expect(r(['3', id, '1', '4:x:/workspace'])).toBe(2);
    expect(r(['3', id, '1', '4:r:workspace'])).toBe(2);
    expect(r(['3', id, '1', '0:r:/workspace'])).toBe(2);
    expect(r(['-5', id, '1', '4:r:/workspace'])).toBe(2);
    expect(r(['3', 'not-an-engine-id', '1', '4:r:/workspace'])).toBe(2);
    expect(r(['3', id, '12x', '4:r:/workspace'])).toBe(2);
  });

  it("a container whose process is gone, its number now held by another container's process: nothing is mounted anywhere", async () => {
    const pool = await blankContainer();
    const victim = await blankContainer();
    await attachMounts(helper, victim.proc, victim.id, [{ type: 'bind', source: join(dir, 'ws'), target: '/workspace', readOnly: false }]);
    const victimTable = await inside(victim.id, 'cat /proc/1/mountinfo');
    // The pool container goes behind berth's back; a process in the victim's mount namespace takes its number.
    await docker.getContainer(pool.id).remove({ force: true });
    const squatter = await pidAt(pool.proc.pid, victim.proc.pid);
    try {
      const other = fs.mkdtempSync(join(dir, 'other-'));
      fs.writeFileSync(join(other, 'other.txt'), 'another tenant\n');
      const attached = await attachMounts(helper, pool.proc, pool.id, [
        { type: 'bind', source: other, target: '/workspace', readOnly: false },
        { type: 'bind', source: join(dir, 'protected-AGENTS.md'), target: '/workspace/AGENTS.md', readOnly: true },
      ]);
      expect(attached).toBe(false);
      expect(await inside(victim.id, 'cat /proc/1/mountinfo')).toBe(victimTable);
      expect(await inside(victim.id, 'cat /workspace/notes.txt')).toBe('mine\n');
    } finally {
      squatter.kill();
    }
  });

  it("a live process that is not the named container's is refused: the helper checks its cgroup and start time", async () => {
    const a = await blankContainer();
    const b = await blankContainer();
    const before = await inside(b.id, 'cat /proc/1/mountinfo');
    const source = [{ type: 'bind' as const, source: join(dir, 'ws'), target: '/workspace', readOnly: false }];
    // b's process handed over as container a's.
    expect(await attachMounts(helper, b.proc, a.id, source)).toBe(false);
    // b's process with a start time it does not have.
    expect(await attachMounts(helper, { ...b.proc, startTime: String(Number(b.proc.startTime) + 1) }, b.id, source)).toBe(false);
    expect(await inside(b.id, 'cat /proc/1/mountinfo')).toBe(before);
  });
});
