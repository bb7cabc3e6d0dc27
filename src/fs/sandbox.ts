import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import { StringDecoder } from 'node:string_decoder';
import { z } from 'zod';
import { BerthError, errnoOf } from '../base/errors.js';
import { at, closeQuietly, withFd } from './fd-path.js';
import { ensureDirPath, openDirPath } from './tree.js';

/**
 * The path sandbox under every gateway file operation. Paths resolve inside a scope root that
 * is an open directory descriptor; every component is opened without following links, so a
 * tenant swapping directories and symlinks while we work can make an operation fail, never
 * make it land outside. A link anywhere — absolute, relative, dangling, chained, looping — is a
 * violation (fail closed), not "not found". Only regular files and directories are touched;
 * a fifo or device never blocks us; sizes are capped.
 */

export const MAX_FILE_BYTES = 4 * 1024 * 1024;
const MAX_NAME_BYTES = 255;
const MAX_PATH_BYTES = 4096;

export function violation(message: string, path: string): BerthError {
  return new BerthError('E_SANDBOX_VIOLATION', message, { path, kind: 'sandbox_violation' });
}

/** Pure: a relative path → its components, or a violation. "" and "." name the root. */
export function splitSandboxPath(path: string): string[] {
  if (path.includes('\0')) throw violation('path contains NUL', path.replace(/\0/g, '\\0'));
  if (Buffer.byteLength(path) > MAX_PATH_BYTES)
    throw new BerthError('CONFIG_INVALID', `path is longer than ${MAX_PATH_BYTES} bytes`, {
      issues: [{ field: 'path', reason: 'too long' }],
    });
  if (path.startsWith('/')) throw violation('absolute paths are outside the sandbox; give a path relative to the folder', path);
  const parts = path
    .normalize('NFC')
    .split('/')
    .filter((p) => p !== '' && p !== '.');
  for (const part of parts) {
    if (part === '..') throw violation('".." leaves the sandbox', path);
    if (Buffer.byteLength(part) > MAX_NAME_BYTES)
      throw new BerthError('CONFIG_INVALID', `a path component is longer than ${MAX_NAME_BYTES} bytes`, {
        issues: [{ field: 'path', reason: 'name too long' }],
      });
  }
  return parts;
}

/**
 * Run `act` in the directory that holds the path's last component: the root itself for a name
 * directly in it, else each parent opened without following links (made, with `create`).
 * Undefined when a parent does not exist.
 */
function inParent<T>(
  rootFd: number,
  parts: string[],
  path: string,
  create: boolean,
  act: (dirFd: number) => T,
  owner?: { uid: number; gid: number },
): T | undefined {
  if (parts.length === 1) return act(rootFd);
  let parent: number | undefined;
  try {
    parent = create ? ensureDirPath(rootFd, parts.slice(0, -1), { shownRoot: '', owner }) : openDirPath(rootFd, parts.slice(0, -1), '');
  } catch (err) {
    if (err instanceof BerthError && err.code === 'E_SANDBOX_VIOLATION') throw violation('a parent directory is a link or a file', path);
    throw err;
  }
  return parent === undefined ? undefined : withFd(parent, act);
}

function lstatAt(dirFd: number, name: string): fs.Stats | undefined {
  try {
    return fs.lstatSync(at(dirFd, name));
  } catch (err) {
    if (errnoOf(err) === 'ENOENT') return undefined;
    throw err;
  }
}

export const FileInfoSchema = z.object({
  path: z.string(),
  type: z.enum(['file', 'dir']),
  size: z.number().describe('Bytes.'),
  modified: z.string().describe('ISO time of the last change.'),
});
export type FileInfo = z.infer<typeof FileInfoSchema>;

export function sandboxInfo(rootFd: number, path: string): FileInfo | undefined {
  const parts = splitSandboxPath(path);
  if (parts.length === 0) {
    const st = fs.fstatSync(rootFd);
    return { path: '', type: 'dir', size: st.size, modified: st.mtime.toISOString() };
  }
  return inParent(rootFd, parts, path, false, (p) => {
    const st = lstatAt(p, parts.at(-1) as string);
    if (!st) return undefined;
    if (st.isSymbolicLink()) throw violation('the path is a link', path);
    if (!st.isFile() && !st.isDirectory()) throw violation('not a regular file or directory', path);
    return { path: parts.join('/'), type: st.isFile() ? 'file' : 'dir', size: st.size, modified: st.mtime.toISOString() };
  });
}

export function sandboxRead(rootFd: number, path: string, maxBytes = MAX_FILE_BYTES, opts: { oneLink?: boolean } = {}): Buffer | undefined {
  return withFileAt(rootFd, path, maxBytes, (f, size) => {
    // A file sent out of the workspace must be the tenant's own: a second hard link may name a file from elsewhere.
    if (opts.oneLink && fs.fstatSync(f).nlink !== 1) throw violation('the file has another hard link: not sent', path);
    const buf = Buffer.alloc(size);
    const n = fs.readSync(f, buf, 0, size, 0);
    return buf.subarray(0, n);
  });
}

/** Bytes decoded at a time by sandboxReadText (small enough to stay an ordinary heap string). */
const TEXT_SLICE = 64 * 1024;
const textSlice = Buffer.alloc(TEXT_SLICE);

/**
 * A file as UTF-8 text (invalid sequences become U+FFFD), decoded a slice at a time into one
 * reused buffer: a 4 MiB file read whole was a 4 MiB buffer plus a 4 MiB string outside V8's
 * heap per read, garbage V8 collects late (under a flood of reads they were most of berth's memory).
 */
export function sandboxReadText(rootFd: number, path: string, maxBytes = MAX_FILE_BYTES): string | undefined {
  return withFileAt(rootFd, path, maxBytes, (f, size) => {
    const decoder = new StringDecoder('utf8');
    let text = '';
    for (let pos = 0; pos < size;) {
      const n = fs.readSync(f, textSlice, 0, Math.min(TEXT_SLICE, size - pos), pos);
      if (n === 0) break;
      text += decoder.write(textSlice.subarray(0, n));
      pos += n;
    }
    return text + decoder.end();
  });
}

/** Open a regular file under the root without following links, and read it with `read(fd, size)`. */
function withFileAt<T>(rootFd: number, path: string, maxBytes: number, read: (fd: number, size: number) => T): T | undefined {
  const parts = splitSandboxPath(path);
  if (parts.length === 0) throw violation('the folder root is not a file', path);
  return inParent(rootFd, parts, path, false, (p) => {
    let fd: number;
    try {
      fd = fs.openSync(at(p, parts.at(-1) as string), fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW | fs.constants.O_NONBLOCK);
    } catch (err) {
      const code = errnoOf(err);
      if (code === 'ENOENT') return undefined;
      if (code === 'ELOOP' || code === 'ENXIO') throw violation('the path is a link or a special file', path);
      throw err;
    }
    return withFd(fd, (f) => {
      const st = fs.fstatSync(f);
      if (!st.isFile()) throw violation('not a regular file', path);
      if (st.size > maxBytes) throw violation(`file is larger than ${maxBytes} bytes`, path);
      return read(f, st.size);
    });
  });
}

/** Write atomically: a temp file in the (verified) parent, then rename over the name — never through a link. */
export function sandboxWrite(rootFd: number, path: string, data: Buffer, owner?: { uid: number; gid: number }): FileInfo {
  const parts = splitSandboxPath(path);
  if (parts.length === 0) throw violation('the folder root is not a file', path);
  if (data.length > MAX_FILE_BYTES) throw violation(`content is larger than ${MAX_FILE_BYTES} bytes`, path);
  const write = (p: number): FileInfo => {
    const name = parts.at(-1) as string;
    const existing = lstatAt(p, name);
    if (existing && !existing.isFile()) throw violation(existing.isSymbolicLink() ? 'the path is a link' : 'not a regular file', path);
    const tmp = `.berth-write-${randomBytes(6).toString('hex')}`;
    const { O_WRONLY, O_CREAT, O_EXCL, O_NOFOLLOW } = fs.constants;
    withFd(fs.openSync(at(p, tmp), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0o644), (fd) => {
      fs.writeFileSync(fd, data);
      if (owner) fs.fchownSync(fd, owner.uid, owner.gid);
      fs.fsyncSync(fd);
    });
    try {
      fs.renameSync(at(p, tmp), at(p, name));
    } catch (err) {
      fs.rmSync(at(p, tmp), { force: true });
      if (errnoOf(err) === 'EISDIR' || errnoOf(err) === 'ENOTDIR') throw violation('not a regular file', path);
      throw err;
    }
    const st = fs.lstatSync(at(p, name));
    return { path: parts.join('/'), type: 'file', size: st.size, modified: st.mtime.toISOString() };
  };
  // With create, every parent is made: there always is one.
  return inParent(rootFd, parts, path, true, write, owner) as FileInfo;
}

/** Delete a regular file (unlink never follows a link; a link itself is a violation). */
export function sandboxDelete(rootFd: number, path: string): boolean {
  const parts = splitSandboxPath(path);
  if (parts.length === 0) throw violation('the folder root cannot be deleted', path);
  const deleted = inParent(rootFd, parts, path, false, (p) => {
    const name = parts.at(-1) as string;
    const st = lstatAt(p, name);
    if (!st) return false;
    if (!st.isFile()) throw violation(st.isSymbolicLink() ? 'the path is a link' : 'only regular files can be deleted', path);
    fs.unlinkSync(at(p, name));
    return true;
  });
  return deleted ?? false;
}

/** Open a folder scope root: <project>/workspaces/<id>[/shared], no-follow all the way. */
export function openScopeRoot(
  projectDir: string,
  folderId: string,
  scope: 'private' | 'shared',
  create: boolean,
  owner?: { uid: number; gid: number },
): number | undefined {
  const projectFd = fs.openSync(projectDir, fs.constants.O_RDONLY | fs.constants.O_DIRECTORY);
  try {
    const parts = ['workspaces', folderId, ...(scope === 'shared' ? ['shared'] : [])];
    if (create) return ensureDirPath(projectFd, parts, { shownRoot: '', displace: false, owner });
    return openDirPath(projectFd, parts, '');
  } catch (err) {
    if (err instanceof BerthError && err.code === 'E_SANDBOX_VIOLATION')
      throw violation('the folder is not a directory', `${folderId}/${scope}`);
    throw err;
  } finally {
    closeQuietly(projectFd);
  }
}
