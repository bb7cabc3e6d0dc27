import fs from 'node:fs';
import { BerthError, errnoOf } from '../base/errors.js';

/**
 * Node has no openat(). A path through /proc/self/fd/<fd>/ resolves from the exact directory
 * that descriptor holds, so walking a tree one no-follow open at a time gives the same
 * guarantee: no component is ever a symlink the tenant swapped in between check and use.
 */
export function at(dirFd: number, name: string): string {
  if (name === '' || name === '.' || name === '..' || name.includes('/') || name.includes('\0')) {
    throw new BerthError('E_SANDBOX_VIOLATION', `refusing path component "${name}"`, { path: name });
  }
  return `/proc/self/fd/${dirFd}/${name}`;
}

// libuv opens every descriptor close-on-exec, so none leaks into a child process.
const { O_RDONLY, O_DIRECTORY, O_NOFOLLOW, O_NONBLOCK } = fs.constants;
const DIR_FLAGS = O_RDONLY | O_DIRECTORY | O_NOFOLLOW;

export function openRootDir(absPath: string): number {
  return fs.openSync(absPath, O_RDONLY | O_DIRECTORY);
}

/** Open a child directory without following a symlink; undefined if it does not exist. */
export function openChildDir(dirFd: number, name: string, shownPath: string): number | undefined {
  try {
    return fs.openSync(at(dirFd, name), DIR_FLAGS);
  } catch (err) {
    const code = errnoOf(err);
    if (code === 'ENOENT') return undefined;
    if (code === 'ELOOP' || code === 'ENOTDIR') {
      throw new BerthError(
        'E_SANDBOX_VIOLATION',
        `${shownPath} is not a directory (a symlink or file is in the way)`,
        { path: shownPath },
        { cause: err },
      );
    }
    throw err;
  }
}

/** Open a regular file for reading: never follows a symlink, never blocks on a fifo. */
export function openRegularFile(dirFd: number, name: string, shownPath: string): { fd: number; size: number } | undefined {
  let fd: number;
  try {
    fd = fs.openSync(at(dirFd, name), O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
  } catch (err) {
    const code = errnoOf(err);
    if (code === 'ENOENT') return undefined;
    if (code === 'ELOOP' || code === 'ENXIO') {
      throw new BerthError('E_SANDBOX_VIOLATION', `${shownPath} is not a regular file`, { path: shownPath });
    }
    throw err;
  }
  const stat = fs.fstatSync(fd);
  if (!stat.isFile()) {
    fs.closeSync(fd);
    throw new BerthError('E_SANDBOX_VIOLATION', `${shownPath} is not a regular file`, { path: shownPath });
  }
  return { fd, size: stat.size };
}

/** Open a berth-owned file for reading without following a link; undefined when it does not exist. */
export function openIfExists(path: string): number | undefined {
  try {
    return fs.openSync(path, O_RDONLY | O_NOFOLLOW);
  } catch (err) {
    if (errnoOf(err) === 'ENOENT') return undefined;
    throw err;
  }
}

/** The path the kernel says a descriptor refers to. */
export function fdRealPath(fd: number): string {
  return fs.readlinkSync(`/proc/self/fd/${fd}`);
}

export function closeQuietly(fd: number | undefined): void {
  if (fd === undefined) return;
  try {
    fs.closeSync(fd);
  } catch {
    // already closed
  }
}

/** Run fn with an open descriptor, closing it afterwards whatever happens. */
export function withFd<T>(fd: number, fn: (fd: number) => T): T {
  try {
    return fn(fd);
  } finally {
    closeQuietly(fd);
  }
}

/**
 * A mount source opened as openNoFollow does, and still the very path berth planned (the kernel's
 * name for the descriptor): E_SANDBOX_VIOLATION otherwise. The caller closes the descriptor.
 */
export function openPlannedSource(source: string): number {
  const { fd } = openNoFollow(source);
  if (fdRealPath(fd) !== source) {
    closeQuietly(fd);
    throw new BerthError('E_SANDBOX_VIOLATION', `mount source ${source} is not the path berth planned`, { path: source });
  }
  return fd;
}

/**
 * Open an absolute path with no symlink in any component (each one opened no-follow from the
 * one before), as a directory or a regular file; E_SANDBOX_VIOLATION otherwise. Mount sources
 * go through this right before launch: the engine would follow a link anywhere in them.
 */
export function openNoFollow(absPath: string): { fd: number; kind: 'dir' | 'file' } {
  if (!absPath.startsWith('/')) throw new BerthError('E_SANDBOX_VIOLATION', `${absPath} is not absolute`, { path: absPath });
  const parts = absPath.split('/').filter(Boolean);
  let fd = openRootDir('/');
  try {
    for (const [i, name] of parts.entries()) {
      const shown = `/${parts.slice(0, i + 1).join('/')}`;
      const last = i === parts.length - 1;
      let child: number | undefined;
      try {
        child = openChildDir(fd, name, shown);
      } catch (err) {
        if (!(last && err instanceof BerthError && errnoOf(err.cause) === 'ENOTDIR')) throw err;
        const file = openRegularFile(fd, name, shown);
        if (!file) throw new BerthError('E_SANDBOX_VIOLATION', `${shown} disappeared`, { path: shown });
        closeQuietly(fd);
        return { fd: file.fd, kind: 'file' };
      }
      if (child === undefined) throw new BerthError('E_SANDBOX_VIOLATION', `${shown} does not exist`, { path: shown });
      closeQuietly(fd);
      fd = child;
    }
    return { fd, kind: 'dir' };
  } catch (err) {
    closeQuietly(fd);
    throw err;
  }
}
