import fs from 'node:fs';

/**
 * One mechanism for every journal berth keeps (runs, chat inboxes): a JSON line appended with
 * O_APPEND (concurrent writers never interleave inside a line), never through a link, and
 * fsynced before the call returns — so whatever a caller did after it survives kill -9.
 */
export function appendFsyncedLine(file: string, entry: object): void {
  const fd = fs.openSync(file, fs.constants.O_WRONLY | fs.constants.O_APPEND | fs.constants.O_CREAT | fs.constants.O_NOFOLLOW, 0o600);
  try {
    fs.writeSync(fd, `${JSON.stringify(entry)}\n`);
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}

/** Fold a journal's lines by key: each key's later lines override what earlier ones said. */
export function foldByKey<T extends object>(entries: Iterable<T>, keyOf: (entry: T) => string): Map<string, T> {
  const folded = new Map<string, T>();
  for (const entry of entries) {
    const key = keyOf(entry);
    const defined = Object.fromEntries(Object.entries(entry).filter(([, v]) => v !== undefined));
    folded.set(key, { ...folded.get(key), ...defined } as T);
  }
  return folded;
}
