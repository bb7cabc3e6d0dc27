import fs from 'node:fs';

/** The first `size` bytes of an open file, read until they are all in or the file ends (a short read is not its end). */
export function readFdWhole(fd: number, size: number): Buffer {
  const buf = Buffer.alloc(size);
  let got = 0;
  while (got < size) {
    const n = fs.readSync(fd, buf, got, size - got, got);
    if (n === 0) break;
    got += n;
  }
  return buf.subarray(0, got);
}
