import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RUNTIME, testHome, WRITE_REFUSED, type TestHome } from '../helpers.js';

let h: TestHome;
beforeAll(() => {
  h = testHome();
  h.create({ name: 'shared' });
  h.create({ name: 'iso', workspace_isolation: true });
});
afterAll(async () => {
  await h[Symbol.asyncDispose]();
});

describe('workspace isolation (real containers)', () => {
  it('off: the tenant sees the whole project, other workspaces included, from cwd workspaces/<id>', async () => {
    const a = await h.run('shared', 'web:alice', 'echo alice-data > note.txt && pwd');
    expect(a.exitCode).toBe(0);
    expect(a.stdout.trim()).toBe(`/workspace/workspaces/${a.workspaceId}`);
    const b = await h.run('shared', 'web:bob', 'cat ../*/note.txt; ls /workspace');
    expect(b.stdout).toContain('alice-data');
    expect(b.stdout).toContain('AGENTS.md');
    expect(b.stdout).toContain('workspaces');
  });

  it('on: only the own workspace at /workspace; others unreachable by "..", by searching /, by /proc', async () => {
    const a = await h.run('iso', 'web:alice', 'echo alice-secret > note.txt && pwd && ls -a');
    expect(a.exitCode).toBe(0);
    expect(a.stdout.split('\n')[0]).toBe('/workspace');
    expect(fs.readFileSync(join(h.home, 'projects/iso/workspaces', a.workspaceId, 'note.txt'), 'utf8')).toBe('alice-secret\n');

    const b = await h.run(
      'iso',
      'web:bob',
      [
        'ls -a /workspace',
        'echo ---',
        'cat ../note.txt ../../note.txt ../workspaces/*/note.txt 2>&1',
        'echo ---',
        'find / \\( -path /proc -o -path /sys -o -path /dev \\) -prune -o \\( -name note.txt -o -name metadata.json \\) -print',
        'find / \\( -path /proc -o -path /sys -o -path /dev \\) -prune -o -type f -print | xargs grep -l alice-secret 2>/dev/null',
        'echo ---',
        'cat /proc/1/root/workspace/note.txt 2>&1; ls /proc/1/root/ 2>&1 | wc -l',
      ].join('; '),
    );
    const [listing, dotdot, search] = b.stdout.split('---\n');
    expect(listing?.split('\n').filter(Boolean).sort()).toEqual(['.', '..', '.factory', 'AGENTS.md']);
    expect(dotdot).not.toContain('alice-secret');
    expect(search?.trim()).toBe('');
    expect(b.stdout).not.toContain('alice-secret');
    expect(b.workspaceId).not.toBe(a.workspaceId);
  });

  it('every container runs unprivileged: non-root, no capabilities, no new privileges, read-only root; low level: no network', async () => {
    const o = await h.run(
      'iso',
      'web:carol',
      'id -u; grep -E "^(CapEff|CapBnd|NoNewPrivs)" /proc/self/status; grep -q "^Linux version 4.4.0 #1 SMP Sun Jan 10 15:06:54 PST 2016" /proc/version && echo under-gVisor; touch /bin/x 2>&1; touch /tmp/ok && echo tmp-ok; ls /sys/class/net; ip route | grep -v " dev lo " | wc -l',
      'low',
    );
    const lines = o.stdout.trim().split('\n');
    expect(lines[0]).toBe('10001');
    expect(o.stdout).toMatch(/CapEff:\s+0000000000000000/);
    expect(o.stdout).toMatch(/CapBnd:\s+0000000000000000/);
    // gVisor's kernel has no NoNewPrivs line: there the agent runs in the sentry, and the sentry's
    // host process is the one with no new privileges (the launcher contract checks it on the host).
    if (RUNTIME === 'runsc') expect(o.stdout).toContain('under-gVisor');
    else expect(o.stdout).toMatch(/NoNewPrivs:\s+1/);
    expect(o.stdout).toMatch(WRITE_REFUSED);
    expect(o.stdout).toContain('tmp-ok');
    expect(lines.slice(-2)).toEqual(['lo', '0']);
  });

  it("shared mode keeps berth's own files out of reach: metadata.json read-only, sessions/ hidden", async () => {
    const before = fs.readFileSync(join(h.home, 'projects/shared/metadata.json'), 'utf8');
    const o = await h.run(
      'shared',
      'web:mallory',
      'echo "{}" > /workspace/metadata.json 2>&1; rm -f /workspace/metadata.json 2>&1; mv /workspace/metadata.json /workspace/m 2>&1; ls -a /workspace/sessions 2>&1; cat /workspace/sessions/runs.jsonl 2>&1; cat /workspace/sessions/journal.jsonl 2>&1; touch /workspace/sessions/x 2>&1',
    );
    expect(fs.readFileSync(join(h.home, 'projects/shared/metadata.json'), 'utf8')).toBe(before);
    // Refused in the kernel's words: runc's (EROFS, EBUSY for a mount point) or gVisor's (EACCES from its gofer).
    expect(o.stderr).toMatch(/can't create \/workspace\/metadata\.json: (Read-only file system|Permission denied)/);
    expect(o.stdout).toMatch(/can't remove '\/workspace\/metadata\.json': (Device or resource busy|Permission denied)/);
    expect(o.stdout).toMatch(
      /can't rename '\/workspace\/metadata\.json': (Device or resource busy|Read-only file system|Permission denied)/,
    );
    // The run log exists on the host (earlier runs wrote it) but the container cannot see or add to it.
    expect(o.stdout).not.toContain('"exit_code"');
    expect(o.stdout).toContain("can't open '/workspace/sessions/runs.jsonl'");
    expect(o.stdout).toContain("can't open '/workspace/sessions/journal.jsonl'");
    expect(fs.readdirSync(join(h.home, 'projects/shared/sessions')).filter((n) => !/^t-[0-9a-f]{32}\.json$/.test(n))).toEqual([
      'journal.jsonl',
      'runs.jsonl',
    ]); // berth's own, written on the host
    expect(o.stdout).not.toContain('permission_level');
  });

  it('host submounts below a mount source are not carried in (binds are non-recursive)', async () => {
    const first = await h.run('iso', 'web:dave', 'mkdir -p sub && echo under > sub/under.txt');
    const sub = join(h.home, 'projects/iso/workspaces', first.workspaceId, 'sub');
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', sub]);
    try {
      fs.writeFileSync(join(sub, 'host-only.txt'), 'host');
      const o = await h.run('iso', 'web:dave', 'ls sub');
      expect(o.stdout).toBe('under.txt\n');
    } finally {
      execFileSync('umount', [sub]);
    }
  });

  it('leaves no labelled container behind (warm: once the idle ones are released, as when berth stops)', async () => {
    if (h.warm) expect(await h.berth.runner.releaseWarm()).toBeGreaterThan(0);
    expect(await h.berth.runner.listContainers('iso')).toEqual([]);
    expect(await h.berth.runner.listContainers('shared')).toEqual([]);
  });
});
