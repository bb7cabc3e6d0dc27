import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import Docker from 'dockerode';
import { afterAll, describe, expect, it } from 'vitest';

/**
 * `berth-bridge prepare` (images/shell/berth-bridge.c), the init container of a Kubernetes pod
 * (kubernetes/objects.ts prepareEntries), in berth's shell image as the agent user, on a directory
 * standing for the tenant's volume: everything a tenant can leave where a mountpoint must be.
 */

const docker = new Docker();
const root = fs.mkdtempSync(join(os.tmpdir(), 'berth-prepare-'));
afterAll(() => fs.rmSync(root, { recursive: true, force: true }));

/** berth-bridge prepare /workspace ARGS, as uid 10001 on a read-only root, the volume at /workspace. */
async function prepare(volume: string, args: string[]): Promise<{ code: number; stderr: string }> {
  let stderr = '';
  const sink = new Writable({ write: (c: Buffer, _e, done) => ((stderr += c.toString()), done()) });
  const ignore = new Writable({ write: (_c, _e, done) => done() });
  const container = await docker.createContainer({
    Image: 'berth/shell:latest',
    Cmd: ['berth-bridge', 'prepare', '/workspace', ...args],
    User: '10001:10001',
    NetworkDisabled: true,
    HostConfig: {
      ReadonlyRootfs: true,
      CapDrop: ['ALL'],
      SecurityOpt: ['no-new-privileges'],
      Mounts: [{ Type: 'bind', Source: volume, Target: '/workspace' }],
    },
  });
  try {
    const stream = await container.attach({ stream: true, stdout: true, stderr: true });
    docker.modem.demuxStream(stream, ignore, sink);
    await container.start();
    const ended = new Promise((r) => stream.once('end', r)); // the last of stderr, demuxed
    const { StatusCode } = (await container.wait()) as { StatusCode: number };
    await ended;
    return { code: StatusCode, stderr };
  } finally {
    await container.remove({ force: true });
  }
}

/** A tenant's volume: owned by the agent user, as fsGroup leaves a PVC. */
function volume(name: string, plant: (dir: string) => void): string {
  const dir = join(root, name);
  fs.mkdirSync(dir);
  plant(dir);
  chownTree(dir);
  return dir;
}
/** Never through a link: the volume holds links out of it (fs.readdirSync's recursion follows them). */
function chownTree(path: string): void {
  fs.lchownSync(path, 10001, 10001);
  if (fs.lstatSync(path).isDirectory()) for (const name of fs.readdirSync(path)) chownTree(join(path, name));
}
const kind = (p: string) => {
  const st = fs.lstatSync(p);
  return st.isSymbolicLink()
    ? `link:${fs.readlinkSync(p)}`
    : st.isDirectory()
      ? 'dir'
      : st.isFile()
        ? `file:${fs.readFileSync(p, 'utf8')}`
        : st.isFIFO()
          ? 'fifo'
          : 'other';
};
const displaced = (dir: string) =>
  fs
    .readdirSync(dir)
    .filter((n) => n.includes('.displaced-by-berth-'))
    .map((n) => n.replace(/-\d+$/, ''))
    .sort();

describe('berth-bridge prepare', () => {
  it('makes each mountpoint a real entry of its kind, moving aside (never following) what a tenant left: links, a fifo, a file for a directory, a directory for a file', async () => {
    const dir = volume('tricks', (d) => {
      fs.writeFileSync(join(d, 'mine.md'), 'mine');
      fs.symlinkSync('mine.md', join(d, 'AGENTS.md')); // a link to the tenant's own file
      fs.symlinkSync('/etc', join(d, '.cfg')); // a parent that is a link out of the volume
      fs.symlinkSync('/nonexistent/x', join(d, 'dangling')); // a dangling link
      execFileSync('mkfifo', [join(d, 'pipe')]);
      fs.writeFileSync(join(d, 'a-dir'), 'a file where a directory must be');
      fs.mkdirSync(join(d, 'a-file', 'inside'), { recursive: true }); // a directory where a file must be
      fs.writeFileSync(join(d, 'a-file', 'inside', 'kept'), 'kept');
    });
    const r = await prepare(dir, [
      'file:AGENTS.md',
      'file:.cfg/settings.json',
      'dir:dangling',
      'file:pipe',
      'dir:a-dir/deeper',
      'file:a-file',
    ]);
    expect(r.code, r.stderr).toBe(0);
    expect(kind(join(dir, 'AGENTS.md'))).toBe('file:');
    expect(kind(join(dir, '.cfg'))).toBe('dir');
    expect(kind(join(dir, '.cfg', 'settings.json'))).toBe('file:');
    expect(fs.existsSync('/etc/settings.json')).toBe(false);
    expect(kind(join(dir, 'dangling'))).toBe('dir');
    expect(kind(join(dir, 'pipe'))).toBe('file:');
    expect(kind(join(dir, 'a-dir', 'deeper'))).toBe('dir');
    expect(kind(join(dir, 'a-file'))).toBe('file:');
    // The tenant's things are kept under telling names, as Docker's prepare step keeps them.
    expect(displaced(dir)).toEqual([
      '.cfg.displaced-by-berth',
      'AGENTS.md.displaced-by-berth',
      'a-dir.displaced-by-berth',
      'a-file.displaced-by-berth',
      'dangling.displaced-by-berth',
      'pipe.displaced-by-berth',
    ]);
    expect(
      kind(
        join(
          dir,
          fs.readdirSync(dir).find((n) => n.startsWith('AGENTS.md.'))!,
        ),
      ),
    ).toBe('link:mine.md');
    expect(
      fs.readFileSync(
        join(
          dir,
          fs.readdirSync(dir).find((n) => n.startsWith('a-file.'))!,
          'inside',
          'kept',
        ),
        'utf8',
      ),
    ).toBe('kept');
    expect(kind(join(dir, 'mine.md'))).toBe('file:mine');
    expect(r.stderr).toMatch(/moved AGENTS\.md aside to AGENTS\.md\.displaced-by-berth-\d+/);
    // Again: all is as planned, nothing is moved.
    const again = await prepare(dir, [
      'file:AGENTS.md',
      'file:.cfg/settings.json',
      'dir:dangling',
      'file:pipe',
      'dir:a-dir/deeper',
      'file:a-file',
    ]);
    expect(again).toEqual({ code: 0, stderr: '' });
    expect(displaced(dir)).toHaveLength(6);
  });

  it('refuses an entry that is not a plain relative path or a known kind, before it changes anything (exit 2)', async () => {
    const dir = volume('refused', () => undefined);
    for (const bad of ['file:/etc/passwd', 'dir:a/../..', 'dir:a//b', 'file:./x', 'file:', 'link:x', 'x']) {
      const r = await prepare(dir, ['dir:made-first', bad]);
      expect({ bad, code: r.code }).toEqual({ bad, code: 2 });
      expect(r.stderr).toMatch(/berth-bridge prepare: /);
    }
    expect(fs.readdirSync(dir)).toEqual([]);
  });
});
