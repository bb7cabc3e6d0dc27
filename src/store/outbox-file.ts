import fs from 'node:fs';
import { errnoOf } from '../base/errors.js';
import { at, withFd } from '../fs/fd-path.js';
import { readFdWhole } from '../fs/read-fd.js';

const { O_NOFOLLOW, O_RDONLY, O_NONBLOCK } = fs.constants;

/** A left outbox file and why (the next run tries it again, unless it is not a file berth sends). */
export interface LeftFile {
  name: string;
  reason: string;
}

/** One outbox file's bytes, or undefined (and why, in `left`) when berth does not send it. */
export function readOutboxFile(dirFd: number, name: string, maxBytes: number, left: LeftFile[]): Buffer | undefined {
  let fd: number;
  try {
    fd = fs.openSync(at(dirFd, name), O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
  } catch (err) {
    const code = errnoOf(err);
    if (code === 'ELOOP') left.push({ name, reason: 'a symbolic link: not sent' });
    else if (code === 'ENXIO') left.push({ name, reason: 'not a regular file: not sent' });
    else if (code !== 'ENOENT') left.push({ name, reason: `could not be opened (${code ?? 'error'})` });
    return undefined;
  }
  return withFd(fd, (f) => {
    const st = fs.fstatSync(f);
    if (!st.isFile()) return void left.push({ name, reason: 'not a regular file: not sent' });
    if (st.nlink > 1) return void left.push({ name, reason: 'has another hard link: not sent (copy it into outbox/ instead)' });
    if (st.size > maxBytes)
      return void left.push({
        name,
        reason: `too big (${st.size} bytes; max_file_mb and max_message_mb bound what one run sends): not sent`,
      });
    return readFdWhole(f, st.size);
  });
}
