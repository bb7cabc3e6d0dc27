import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createGroupCommit } from '../../src/fs/group-commit.js';

/**
 * Group commit (issue 24 item 3): a line is in the file when append returns, its promise settles
 * only after a sync that began after it was written, and lines appended while a sync runs share
 * the next one. The sync is held by the test, so the order of events is the test's.
 */
const dirs: string[] = [];
afterEach(() => dirs.splice(0).forEach((d) => fs.rmSync(d, { recursive: true, force: true })));
const tmp = () => {
  const d = fs.mkdtempSync(join(os.tmpdir(), 'berth-commit-'));
  dirs.push(d);
  return d;
};

/** A sync the test releases: each call waits in `held` until release(). */
function heldSync() {
  const held: Array<{ fd: number; done: (err: NodeJS.ErrnoException | null) => void }> = [];
  return {
    held,
    sync: (fd: number, done: (err: NodeJS.ErrnoException | null) => void) => held.push({ fd, done }),
    release(err: NodeJS.ErrnoException | null = null) {
      for (const h of held.splice(0)) h.done(err);
    },
  };
}
const tick = () => new Promise((r) => setImmediate(r));
const lines = (file: string) =>
  fs
    .readFileSync(file, 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l));

describe('createGroupCommit', () => {
  it('settles a line only after a sync that began after its write; lines written meanwhile share the next sync', async () => {
    const file = join(tmp(), 'journal.jsonl');
    const s = heldSync();
    const commit = createGroupCommit(s.sync);
    const settled: string[] = [];
    const a = commit.append(file, { n: 'a' }).then(() => settled.push('a'));
    expect(lines(file)).toEqual([{ n: 'a' }]); // written before any sync
    expect(s.held).toHaveLength(1);
    const rest = ['b', 'c', 'd', 'e'].map((n) => commit.append(file, { n }).then(() => settled.push(n)));
    expect(s.held).toHaveLength(1); // no sync of their own while one runs
    s.release(); // the first sync began before b..e were written: it settles only a
    await a;
    await tick();
    expect(settled).toEqual(['a']);
    expect(s.held).toHaveLength(1); // one sync for the four
    s.release();
    await Promise.all(rest);
    expect(settled.sort()).toEqual(['a', 'b', 'c', 'd', 'e']);
    expect(commit.syncs()).toBe(2);
    expect(lines(file).map((l) => l.n)).toEqual(['a', 'b', 'c', 'd', 'e']);
  });

  it('a failed sync rejects its group only; the next group syncs again', async () => {
    const file = join(tmp(), 'journal.jsonl');
    const s = heldSync();
    const commit = createGroupCommit(s.sync);
    const first = commit.append(file, { n: 1 });
    const second = commit.append(file, { n: 2 });
    s.release(Object.assign(new Error('EIO: i/o error, fdatasync'), { code: 'EIO' }));
    await expect(first).rejects.toThrow(/EIO/);
    await tick();
    s.release();
    await expect(second).resolves.toBeUndefined();
  });

  it('syncs each file of a group once, and each inode once when the file was replaced mid-group', async () => {
    const dir = tmp();
    const s = heldSync();
    const commit = createGroupCommit(s.sync);
    const blocker = commit.append(join(dir, 'x.jsonl'), { n: 0 });
    const other = commit.append(join(dir, 'y.jsonl'), { n: 0 }); // another file: its own sync, not queued behind x's
    expect(s.held).toHaveLength(2);
    const before = commit.append(join(dir, 'x.jsonl'), { n: 1 });
    fs.renameSync(join(dir, 'x.jsonl'), join(dir, 'x.old')); // compacted away: the next line makes a new file
    const after = commit.append(join(dir, 'x.jsonl'), { n: 2 });
    s.release();
    await Promise.all([blocker, other]);
    await tick();
    expect(s.held).toHaveLength(2); // two inodes in x's second group
    s.release();
    await Promise.all([before, after]);
    expect(commit.syncs()).toBe(4);
  });

  it('note() writes a line with no sync; a later committed line carries it', async () => {
    const file = join(tmp(), 'journal.jsonl');
    const s = heldSync();
    const commit = createGroupCommit(s.sync);
    commit.note(file, { phase: 'started' });
    expect(s.held).toHaveLength(0);
    expect(lines(file)).toEqual([{ phase: 'started' }]);
    const done = commit.append(file, { phase: 'finished' });
    s.release();
    await done;
    expect(commit.syncs()).toBe(1);
    expect((fs.statSync(file).mode & 0o777).toString(8)).toBe('600');
  });

  it('never writes through a link, and leaves no descriptor open', async () => {
    const dir = tmp();
    fs.writeFileSync(join(dir, 'target'), '');
    fs.symlinkSync(join(dir, 'target'), join(dir, 'journal.jsonl'));
    const commit = createGroupCommit();
    expect(() => commit.append(join(dir, 'journal.jsonl'), { n: 1 })).toThrow(/ELOOP/);
    expect(() => commit.note(join(dir, 'journal.jsonl'), { n: 1 })).toThrow(/ELOOP/);
    expect(fs.readFileSync(join(dir, 'target'), 'utf8')).toBe('');
    // The process's descriptors that are the journal (other test files may share this process).
    const openOnJournal = () =>
      fs.readdirSync('/proc/self/fd').filter((fd) => {
        try {
          return fs.readlinkSync(`/proc/self/fd/${fd}`) === join(dir, 'real.jsonl');
        } catch {
          return false; // closed meanwhile
        }
      });
    const pending = Promise.all(Array.from({ length: 50 }, (_, n) => commit.append(join(dir, 'real.jsonl'), { n })));
    expect(openOnJournal().length).toBeGreaterThan(0); // held until their sync is done
    await pending;
    expect(openOnJournal()).toEqual([]);
    expect(lines(join(dir, 'real.jsonl'))).toHaveLength(50);
    expect(commit.syncs()).toBeLessThanOrEqual(2);
  });
});
