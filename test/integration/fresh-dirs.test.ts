import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { BindMount } from '../../src/plan/run-plan.js';
import { adoptFreshDirs, makeFreshDirs, ownAdoptDir, removeFreshDirs } from '../../src/runs/fresh-dirs.js';
import { freshLayoutOf } from '../../src/plan/pool.js';

/**
 * The adopt claim's directories on the host (runs/fresh-dirs.ts), with the failures a claim must
 * survive losing nothing: a rename the kernel refuses (an immutable parent, root only), a person's
 * directory that changed under it. What the sandbox sees is test/integration/prestart-pool.test.ts.
 */
let dir: string;
const immutable: string[] = [];
const chattr = (flag: '+i' | '-i', path: string) => execFileSync('chattr', [flag, path]);

/** A tree as data: kinds, contents, modes and inodes (links not followed). */
function snapshot(root: string): Record<string, string> {
  const out: Record<string, string> = { '.': `${fs.statSync(root).ino} ${(fs.statSync(root).mode & 0o7777).toString(8)}` };
  const walk = (d: string, rel: string) => {
    for (const name of fs.readdirSync(d).sort()) {
      const full = join(d, name);
      const st = fs.lstatSync(full);
      out[`${rel}${name}`] = st.isDirectory() ? `dir ${st.ino}` : `file ${st.ino} ${fs.readFileSync(full, 'utf8')}`;
      if (st.isDirectory()) walk(full, `${rel}${name}/`);
    }
  };
  walk(root, '');
  return out;
}

/** A new person's directories as a run makes them before its claim: workspace (seed, a file, a mount point), home (a decoy), run directory. */
function person(): { binds: BindMount[]; ws: string; home: string; run: string } {
  const ws = join(dir, 'projects', 'p', 'workspaces', 'w1');
  const home = join(dir, '.berth', 'projects', 'p', 'homes', 's1');
  const run = join(dir, '.berth', 'sockets', 'r1');
  for (const d of [join(ws, 'inbox'), home, run]) fs.mkdirSync(d, { recursive: true });
  fs.writeFileSync(join(ws, 'AGENTS.md'), 'seed\n');
  fs.writeFileSync(join(ws, 'RULES.md'), 'hidden under the protected mount\n');
  fs.writeFileSync(join(ws, 'inbox', 'a.txt'), 'first file\n');
  fs.writeFileSync(join(home, '.decoy'), 'decoy\n');
  fs.writeFileSync(join(run, 'gateway.sock'), '');
  const bind = (source: string, target: string, readOnly = false): BindMount => ({ type: 'bind', source, target, readOnly });
  return { binds: [bind(ws, '/workspace'), bind(home, '/home/agent'), bind(run, '/run/berth', true)], ws, home, run };
}

const layout = freshLayoutOf({
  mounts: ['/workspace', '/home/agent', '/run/berth'].map((target) => ({ type: 'bind', source: `/x${target}`, target, readOnly: false })),
  prepare: { rwRoot: '', rwRootPath: [], files: [], dirs: [], mountpoints: [{ path: 'RULES.md', kind: 'file' }] },
} as never);

beforeEach(() => {
  dir = fs.realpathSync(fs.mkdtempSync(join(os.tmpdir(), 'berth-fresh-')));
});
afterEach(() => {
  for (const p of immutable.splice(0)) chattr('-i', p);
  fs.rmSync(dir, { recursive: true, force: true });
});

describe('adopt on the host', () => {
  it("each container's fresh directories are its own, under this process's directory; a dead process's are removed", () => {
    const adopt = join(dir, '.berth', 'adopt');
    fs.mkdirSync(join(adopt, '999999999.1.dead0000', 'x'), { recursive: true });
    const own = ownAdoptDir(adopt);
    expect(fs.readdirSync(adopt)).toEqual([own.split('/').at(-1)]);
    const a = makeFreshDirs(own, layout);
    const b = makeFreshDirs(own, layout);
    expect(a.root).not.toBe(b.root);
    expect(fs.readdirSync(a.byTarget['/workspace'] as string)).toEqual(['RULES.md']);
    expect(fs.statSync(a.byTarget['/home/agent'] as string).mode & 0o777).toBe(0o700);
  });

  it("a claim renames each fresh directory over the person's: their entries inside, the mount point keeping its inode", () => {
    const p = person();
    const fresh = makeFreshDirs(ownAdoptDir(join(dir, '.berth', 'adopt')), layout);
    const inodes = Object.fromEntries(Object.entries(fresh.byTarget).map(([t, path]) => [t, fs.statSync(path).ino]));
    const mountPoint = fs.statSync(join(fresh.byTarget['/workspace'] as string, 'RULES.md')).ino;
    adoptFreshDirs(fresh, p.binds);
    expect(fs.statSync(p.ws).ino).toBe(inodes['/workspace']);
    expect(fs.statSync(p.home).ino).toBe(inodes['/home/agent']);
    expect(fs.statSync(p.run).ino).toBe(inodes['/run/berth']);
    expect(fs.statSync(join(p.ws, 'RULES.md')).ino).toBe(mountPoint);
    expect(fs.readFileSync(join(p.ws, 'RULES.md'), 'utf8')).toBe('hidden under the protected mount\n');
    expect(fs.readdirSync(p.ws).sort()).toEqual(['AGENTS.md', 'RULES.md', 'inbox']);
    expect(fs.readdirSync(p.home)).toEqual(['.decoy']);
    expect(fs.readdirSync(p.run)).toEqual(['gateway.sock']);
    removeFreshDirs(fresh);
    expect(fs.existsSync(fresh.root)).toBe(false);
  });

  it("a rename the kernel refuses puts every entry back: the person's directories as they were, nothing lost", () => {
    const p = person();
    const before = [snapshot(p.ws), snapshot(p.home), snapshot(p.run)];
    const fresh = makeFreshDirs(ownAdoptDir(join(dir, '.berth', 'adopt')), layout);
    const workspaces = join(dir, 'projects', 'p', 'workspaces');
    chattr('+i', workspaces); // nothing may be renamed in or out of it
    immutable.push(workspaces);
    expect(() => adoptFreshDirs(fresh, p.binds)).toThrow(/EPERM|not permitted/);
    expect([snapshot(p.ws), snapshot(p.home), snapshot(p.run)]).toEqual(before);
    expect(fresh.keep).toBeUndefined();
  });

  it("a later directory's rename refused: the ones already renamed stay whole (they are the person's now), the rest go back", () => {
    const p = person();
    const before = { home: snapshot(p.home), run: snapshot(p.run), ws: Object.keys(snapshot(p.ws)) };
    const fresh = makeFreshDirs(ownAdoptDir(join(dir, '.berth', 'adopt')), layout);
    const freshWs = fs.statSync(fresh.byTarget['/workspace'] as string).ino;
    const homes = join(dir, '.berth', 'projects', 'p', 'homes');
    chattr('+i', homes);
    immutable.push(homes);
    expect(() => adoptFreshDirs(fresh, p.binds)).toThrow(/EPERM|not permitted/);
    expect(fs.statSync(p.ws).ino).toBe(freshWs);
    expect(Object.keys(snapshot(p.ws))).toEqual(before.ws);
    expect(fs.readFileSync(join(p.ws, 'inbox', 'a.txt'), 'utf8')).toBe('first file\n');
    expect(snapshot(p.home)).toEqual(before.home);
    expect(snapshot(p.run)).toEqual(before.run);
  });

  it("a person's directory that is not a directory, or a link, is refused before anything moves", () => {
    const p = person();
    const fresh = makeFreshDirs(ownAdoptDir(join(dir, '.berth', 'adopt')), layout);
    fs.renameSync(p.home, `${p.home}.real`);
    fs.symlinkSync(`${p.home}.real`, p.home);
    const ws = snapshot(p.ws);
    expect(() => adoptFreshDirs(fresh, p.binds)).toThrow(/not a directory/);
    expect(snapshot(p.ws)).toEqual(ws);
    expect(fs.readdirSync(`${p.home}.real`)).toEqual(['.decoy']);
  });
});
