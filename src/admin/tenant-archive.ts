import fs from 'node:fs';
import { once } from 'node:events';
import { pipeline } from 'node:stream/promises';
import tar from 'tar-stream';
import { at, openChildDir, openRegularFile, openRootDir } from '../fs/fd-path.js';
import { kindAt } from '../fs/tree.js';

/** What an archive left out, and why (a link is kept as a link; a fifo, socket or device is not). */
export interface Skipped {
  path: string;
  reason: string;
}

const CHUNK = 1 << 20;
const MAX_DEPTH = 64;

/**
 * A tar archive written to `out` (0600, whole or not at all: a temp file renamed at the end) from
 * berth's own records and from trees a tenant controls. A tree is read one no-follow open at a
 * time from a descriptor (fs/fd-path.ts): a link is archived as a link and never followed, a fifo
 * never blocks, and a file is read up to the size seen at open and never beyond `maxBytes` in all.
 */
export async function writeArchive(
  out: string,
  fill: (archive: ArchiveWriter) => Promise<void>,
  maxBytes: number,
): Promise<{ bytes: number; skipped: Skipped[] }> {
  const tmp = `${out}.partial-${process.pid}`;
  const pack = tar.pack();
  const file = fs.createWriteStream(tmp, { flags: 'wx', mode: 0o600 });
  const written = pipeline(pack, file);
  const writer = archiveWriter(pack, maxBytes);
  try {
    await fill(writer);
    pack.finalize();
    await written;
    fs.renameSync(tmp, out);
  } catch (err) {
    pack.destroy();
    await written.catch(() => undefined);
    fs.rmSync(tmp, { force: true });
    throw err;
  }
  return { bytes: writer.bytes(), skipped: writer.skipped };
}

export interface ArchiveWriter {
  /** A file of berth's own (a record, a JSON list). */
  add(name: string, data: string | Buffer): Promise<void>;
  /** A directory tree, read without following a link, under `name` in the archive. */
  addTree(name: string, dir: string): Promise<void>;
  skipped: Skipped[];
  bytes(): number;
}

function archiveWriter(pack: tar.Pack, maxBytes: number): ArchiveWriter {
  let total = 0;
  const skipped: Skipped[] = [];
  const entry = (header: Partial<tar.Header> & { name: string }, body: Buffer = Buffer.alloc(0)) =>
    new Promise<void>((resolve, reject) => void pack.entry(header, body, (err) => (err ? reject(err) : resolve())));

  async function addFile(dirFd: number, name: string, shown: string): Promise<void> {
    let opened: { fd: number; size: number } | undefined;
    try {
      opened = openRegularFile(dirFd, name, shown);
    } catch {
      skipped.push({ path: shown, reason: 'changed into something other than a regular file' });
      return;
    }
    if (!opened) return;
    const { fd, size } = opened;
    try {
      if (total + size > maxBytes) {
        skipped.push({ path: shown, reason: `over the archive's ${maxBytes} bytes` });
        return;
      }
      total += size;
      const stream = pack.entry({ name: shown, size, mode: 0o644, type: 'file' });
      const done = once(stream, 'finish');
      // The size seen at open, exactly: a file shrinking meanwhile is padded with zeros, one growing is cut.
      for (let pos = 0; pos < size;) {
        const chunk = Buffer.alloc(Math.min(CHUNK, size - pos));
        const n = fs.readSync(fd, chunk, 0, chunk.length, pos);
        pos += chunk.length;
        if (n < chunk.length) skipped.push({ path: shown, reason: 'shrank while read: padded with zeros' });
        if (!stream.write(chunk)) await once(stream, 'drain');
      }
      stream.end(Buffer.alloc(0));
      await done;
    } finally {
      fs.closeSync(fd);
    }
  }

  async function addAt(dirFd: number, name: string, shown: string, depth: number): Promise<void> {
    const kind = kindAt(dirFd, name);
    if (kind === 'missing') return;
    if (kind === 'symlink') {
      let target: string;
      try {
        target = fs.readlinkSync(at(dirFd, name));
      } catch {
        return;
      }
      await entry({ name: shown, type: 'symlink', linkname: target.slice(0, 4096) });
      return;
    }
    if (kind === 'file') return addFile(dirFd, name, shown);
    if (kind !== 'dir') {
      skipped.push({ path: shown, reason: 'not a regular file (a fifo, socket or device)' });
      return;
    }
    if (depth >= MAX_DEPTH) {
      skipped.push({ path: shown, reason: `deeper than ${MAX_DEPTH} levels` });
      return;
    }
    let child: number | undefined;
    try {
      child = openChildDir(dirFd, name, shown);
    } catch {
      skipped.push({ path: shown, reason: 'changed into something other than a directory' });
      return;
    }
    if (child === undefined) return;
    const fd = child;
    try {
      await entry({ name: `${shown}/`, type: 'directory', mode: 0o755 });
      for (const next of fs.readdirSync(`/proc/self/fd/${fd}`).sort()) await addAt(fd, next, `${shown}/${next}`, depth + 1);
    } finally {
      fs.closeSync(fd);
    }
  }

  return {
    async add(name, data) {
      const body = Buffer.isBuffer(data) ? data : Buffer.from(data);
      total += body.length;
      await entry({ name, type: 'file', mode: 0o644 }, body);
    },
    async addTree(name, dir) {
      let parent: number;
      try {
        parent = openRootDir(dir);
      } catch {
        return; // never made, or gone: nothing to archive
      }
      try {
        await entry({ name: `${name}/`, type: 'directory', mode: 0o755 });
        for (const next of fs.readdirSync(`/proc/self/fd/${parent}`).sort()) await addAt(parent, next, `${name}/${next}`, 1);
      } finally {
        fs.closeSync(parent);
      }
    },
    skipped,
    bytes: () => total,
  };
}
