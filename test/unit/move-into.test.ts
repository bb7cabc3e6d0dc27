import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { moveInto } from '../../src/fs/move-into.js';
import { openRootDir } from '../../src/fs/fd-path.js';

/**
 * fs/move-into.ts: a directory's entries moved into another through descriptors, merged where the
 * target already holds an entry (something may be mounted on it: its inode must stay), and put
 * back exactly on undo or on any failure.
 */
let dir: string;
let from: string;
let to: string;
let aside: string;
const fds: number[] = [];
const open = (p: string) => {
  const fd = openRootDir(p);
  fds.push(fd);
  return fd;
};
const move = (limit = 1 << 20) => moveInto(open(from), open(to), open(aside), { bytes: limit });

/** A tree as data: every entry's kind, content or link target, mode and inode (links not followed). */
function snapshot(root: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (d: string, rel: string) => {
    for (const name of fs.readdirSync(d).sort()) {
      const full = join(d, name);
      const st = fs.lstatSync(full);
      const key = `${rel}${name}`;
      const mode = (st.mode & 0o7777).toString(8);
      if (st.isSymbolicLink()) out[key] = `link ${fs.readlinkSync(full)} ${st.ino}`;
      else if (st.isDirectory()) {
        out[key] = `dir ${mode} ${st.ino}`;
        walk(full, `${key}/`);
      } else out[key] = `file ${mode} ${st.ino} ${fs.readFileSync(full, 'utf8')}`;
    }
  };
  walk(root, '');
  return out;
}

beforeEach(() => {
  dir = fs.realpathSync(fs.mkdtempSync(join(os.tmpdir(), 'berth-move-')));
  [from, to, aside] = ['from', 'to', 'aside'].map((n) => join(dir, n)) as [string, string, string];
  for (const d of [from, to, aside]) fs.mkdirSync(d);
  // A new person's first contents: a seed, a first message's file, a link (never followed), the protected paths' mount points.
  fs.writeFileSync(join(from, 'AGENTS.md'), 'seed rules\n', { mode: 0o640 });
  fs.mkdirSync(join(from, 'inbox'));
  fs.writeFileSync(join(from, 'inbox', 'photo.jpg'), 'jpeg');
  fs.symlinkSync('/etc/shadow', join(from, 'link'));
  fs.mkdirSync(join(from, 'docs'), { mode: 0o750 });
  fs.writeFileSync(join(from, 'docs', 'rules.md'), '');
  fs.writeFileSync(join(from, 'docs', 'notes.md'), 'notes');
  // The fresh directory: mount points where the plan mounts something (a file, and one in a directory).
  fs.writeFileSync(join(to, 'AGENTS.md'), '');
  fs.mkdirSync(join(to, 'docs'));
  fs.writeFileSync(join(to, 'docs', 'rules.md'), '');
});
afterEach(() => {
  for (const fd of fds.splice(0)) fs.closeSync(fd);
  fs.rmSync(dir, { recursive: true, force: true });
});

describe('moveInto', () => {
  it("moves what the target lacks (same inodes, links as links), and merges into what it holds without changing the target's inodes", () => {
    const before = snapshot(from);
    const kept = { agents: fs.statSync(join(to, 'AGENTS.md')).ino, docs: fs.statSync(join(to, 'docs')).ino };
    move().close();
    expect(fs.readdirSync(from)).toEqual([]);
    const after = snapshot(to);
    // Renamed in: the very entries.
    for (const moved of ['inbox', 'inbox/photo.jpg', 'link', 'docs/notes.md']) expect(after[moved]).toBe(before[moved]);
    expect(fs.readlinkSync(join(to, 'link'))).toBe('/etc/shadow');
    // Held by the target: its inode stays, the content and mode are the source's.
    expect(fs.statSync(join(to, 'AGENTS.md')).ino).toBe(kept.agents);
    expect(fs.readFileSync(join(to, 'AGENTS.md'), 'utf8')).toBe('seed rules\n');
    expect(fs.statSync(join(to, 'AGENTS.md')).mode & 0o777).toBe(0o640);
    expect(fs.statSync(join(to, 'docs')).ino).toBe(kept.docs);
    expect(fs.statSync(join(to, 'docs')).mode & 0o777).toBe(0o750);
    // What was merged away waits aside (removed with the fresh directories).
    expect(fs.readdirSync(aside).length).toBe(3);
  });

  it('undo puts every entry back where it was: the same tree, the same inodes', () => {
    const before = snapshot(from);
    const moved = move();
    moved.undo();
    moved.close();
    expect(snapshot(from)).toEqual(before);
    expect(fs.readdirSync(aside)).toEqual([]);
  });

  it('an entry of another kind where it goes is refused, and whatever had moved goes back', () => {
    fs.rmSync(join(from, 'docs'), { recursive: true });
    fs.writeFileSync(join(from, 'docs'), 'a file where the target has a directory');
    const before = snapshot(from);
    expect(() => move()).toThrow(/docs is a file here and a dir where it goes/);
    expect(snapshot(from)).toEqual(before);
  });

  it('a file past the copy limit is refused, and everything goes back', () => {
    const before = snapshot(from);
    expect(() => move(4)).toThrow(/larger than a pool claim copies/);
    expect(snapshot(from)).toEqual(before);
  });

  it('a link where the target holds a file is refused (never written through)', () => {
    fs.rmSync(join(from, 'AGENTS.md'));
    fs.symlinkSync(join(dir, 'elsewhere'), join(from, 'AGENTS.md'));
    fs.writeFileSync(join(dir, 'elsewhere'), 'not to be read');
    const before = snapshot(from);
    expect(() => move()).toThrow(/AGENTS.md is a symlink here and a file where it goes/);
    expect(snapshot(from)).toEqual(before);
    expect(fs.readFileSync(join(to, 'AGENTS.md'), 'utf8')).toBe('');
  });
});
