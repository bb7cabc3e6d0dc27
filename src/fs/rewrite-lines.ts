import fs from 'node:fs';
import { errnoOf } from '../base/errors.js';

/**
 * Rewrite an append-only JSON-lines file without the lines `drop` picks (a tenant forgotten):
 * the kept lines go to a temp file, then whatever was appended meanwhile is copied after them
 * as it is, then the temp file takes the name. Appenders write one line per O_APPEND write with
 * no lock, so a line appended in the instant between the last copy and the rename is the one
 * thing this cannot hold; the window is one rename long. Returns how many lines went.
 */
export function rewriteLines(path: string, drop: (line: string) => boolean): number {
  let data: Buffer;
  try {
    data = fs.readFileSync(path);
  } catch (err) {
    if (errnoOf(err) === 'ENOENT') return 0;
    throw err;
  }
  // Only whole lines are judged: a last line still being written is carried over with the tail.
  const whole = data.lastIndexOf(0x0a) + 1;
  const lines = data.subarray(0, whole).toString('utf8').split('\n').slice(0, -1);
  const kept = lines.filter((l) => !drop(l));
  if (kept.length === lines.length) return 0;
  const tmp = `${path}.rewrite-${process.pid}`;
  const fd = fs.openSync(tmp, 'wx', 0o600);
  try {
    fs.writeSync(fd, kept.map((l) => `${l}\n`).join(''));
    const tail = fs.readFileSync(path).subarray(whole);
    if (tail.length > 0) fs.writeSync(fd, tail);
    fs.fsyncSync(fd);
  } catch (err) {
    fs.closeSync(fd);
    fs.rmSync(tmp, { force: true });
    throw err;
  }
  fs.closeSync(fd);
  fs.renameSync(tmp, path);
  return lines.length - kept.length;
}
