import fs from 'node:fs';
import { join, posix } from 'node:path';
import { BerthError } from '../../base/errors.js';
import type { SnapshotFile } from './objects.js';

/** At most this much of a read-only mount is read into a ConfigMap (kubernetes/objects.ts bounds the sum). */
const FILE_BYTES = 1024 * 1024;
const FILE_COUNT = 512;

/** berth's own read-only content of a bind mount (seeds, protected paths, memory, CA), read without following links. */
export function readSnapshot(source: string): SnapshotFile[] {
  const files: SnapshotFile[] = [];
  let bytes = 0;
  const walk = (abs: string, rel: string) => {
    const st = fs.lstatSync(abs);
    if (st.isSymbolicLink()) return; // berth's copies hold none; a link is never followed
    if (st.isFile()) {
      // Read through the descriptor that was checked: no link followed, the size the one read.
      const fd = fs.openSync(abs, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW);
      try {
        const fst = fs.fstatSync(fd);
        bytes += fst.size;
        if (!fst.isFile() || bytes > FILE_BYTES || files.length >= FILE_COUNT) {
          throw new BerthError(
            'LAUNCHER_UNSUPPORTED',
            `the Kubernetes launcher cannot carry ${source}: more than ${FILE_BYTES} bytes or ${FILE_COUNT} files`,
          );
        }
        files.push({ path: rel, data: fs.readFileSync(fd), mode: fst.mode & 0o777 });
      } finally {
        fs.closeSync(fd);
      }
      return;
    }
    if (st.isDirectory()) for (const name of fs.readdirSync(abs).sort()) walk(join(abs, name), rel ? posix.join(rel, name) : name);
  };
  walk(source, '');
  return files;
}
