import fs from 'node:fs';

/**
 * Group commit for append-only JSON-line files (the run journal): a line is written at once
 * (O_APPEND, never through a link: concurrent writers never interleave inside a line, and a
 * kill -9 after the write keeps it: it is in the kernel's page cache), and its promise settles
 * once an fdatasync that began after the write has finished. Lines appended while one fdatasync
 * runs share the next, so N concurrent runs cost about two syncs, not N.
 *
 * fdatasync of any descriptor flushes every dirty page of the inode (whoever wrote it) and the
 * size an append changed, so one call per distinct file covers a whole group.
 */

type Sync = (fd: number, done: (err: NodeJS.ErrnoException | null) => void) => void;

interface Waiter {
  fd: number;
  ino: number;
  settle: (err?: Error) => void;
}

interface FileState {
  syncing: boolean;
  waiting: Waiter[];
}

export interface GroupCommit {
  /** Append a line; resolves once it is on disk. */
  append(file: string, entry: object): Promise<void>;
  /**
   * Append a line with no sync of its own: kill -9 keeps it, and the next committed line of the
   * file (or a running sync) carries it to disk. For a line whose loss at power-off changes nothing
   * a reader acts on.
   */
  note(file: string, entry: object): void;
  /** Syncs issued so far (for tests and benches). */
  syncs(): number;
}

export function createGroupCommit(sync: Sync = fs.fdatasync): GroupCommit {
  const files = new Map<string, FileState>();
  let issued = 0;

  function write(file: string, entry: object): number {
    const fd = fs.openSync(file, fs.constants.O_WRONLY | fs.constants.O_APPEND | fs.constants.O_CREAT | fs.constants.O_NOFOLLOW, 0o600);
    try {
      fs.writeSync(fd, `${JSON.stringify(entry)}\n`);
      return fd;
    } catch (err) {
      fs.closeSync(fd);
      throw err;
    }
  }

  function flush(file: string, state: FileState): void {
    const group = state.waiting;
    state.waiting = [];
    state.syncing = true;
    // One descriptor per inode: the file may have been replaced between two appends of a group.
    const byInode = new Map<number, number>();
    for (const w of group) byInode.set(w.ino, w.fd);
    const fds = [...byInode.values()];
    let left = fds.length;
    let failure: Error | undefined;
    const done = () => {
      for (const w of group) {
        fs.closeSync(w.fd); // closed before anyone hears it is done
        w.settle(failure);
      }
      state.syncing = false;
      if (state.waiting.length > 0) flush(file, state);
      else files.delete(file);
    };
    for (const fd of fds) {
      issued++;
      sync(fd, (err) => {
        if (err) failure ??= err;
        if (--left === 0) done();
      });
    }
  }

  return {
    append(file, entry) {
      const fd = write(file, entry);
      let ino: number;
      try {
        ino = fs.fstatSync(fd).ino;
      } catch (err) {
        fs.closeSync(fd);
        throw err;
      }
      return new Promise<void>((resolve, reject) => {
        let state = files.get(file);
        if (!state) {
          state = { syncing: false, waiting: [] };
          files.set(file, state);
        }
        state.waiting.push({ fd, ino, settle: (err) => (err ? reject(err) : resolve()) });
        if (!state.syncing) flush(file, state);
      });
    },
    note(file, entry) {
      fs.closeSync(write(file, entry));
    },
    syncs: () => issued,
  };
}

/** The process's one group commit: every journal file shares it. */
export const journalCommit = createGroupCommit();
