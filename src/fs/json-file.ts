import fs from 'node:fs';
import type { z } from 'zod';
import { errnoOf } from '../base/errors.js';

/** A berth-owned text file's content; undefined when it does not exist (any other failure is thrown). */
export function readTextIfExists(path: string): string | undefined {
  try {
    return fs.readFileSync(path, 'utf8');
  } catch (err) {
    if (errnoOf(err) === 'ENOENT') return undefined;
    throw err;
  }
}

/** A berth-owned JSON file, validated by its schema; undefined when it does not exist. */
export function readJsonFile<S extends z.ZodType>(path: string, schema: S): z.output<S> | undefined {
  const text = readTextIfExists(path);
  return text === undefined ? undefined : schema.parse(JSON.parse(text));
}

/** The lines of a berth-owned JSON-lines file (a log, a journal); [] when it does not exist. */
export function readJsonLines(path: string): string[] {
  return (readTextIfExists(path) ?? '').split('\n').filter(Boolean);
}

/**
 * The lines of a berth-owned JSON-lines file from the last to the first, read from the end in
 * 64 KiB slices, until `visit` says stop: a reader that wants the newest few never reads a whole
 * day's log. Nothing when it does not exist.
 */
export function visitLinesNewestFirst(path: string, visit: (line: string) => boolean): void {
  let fd: number;
  try {
    fd = fs.openSync(path, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW);
  } catch (err) {
    if (errnoOf(err) === 'ENOENT') return;
    throw err;
  }
  try {
    const slice = Buffer.alloc(64 * 1024);
    let end = fs.fstatSync(fd).size;
    let carry = Buffer.alloc(0); // the start of a line whose beginning is in an earlier slice
    while (end > 0) {
      const start = Math.max(0, end - slice.length);
      const n = fs.readSync(fd, slice, 0, end - start, start);
      end = start;
      let chunk = Buffer.concat([slice.subarray(0, n), carry]);
      let nl = chunk.lastIndexOf(0x0a);
      // Lines are cut at newline bytes, which never occur inside a UTF-8 character.
      while (nl !== -1) {
        const line = chunk.subarray(nl + 1).toString('utf8');
        if (line && !visit(line)) return;
        chunk = chunk.subarray(0, nl);
        nl = chunk.lastIndexOf(0x0a);
      }
      carry = Buffer.from(chunk);
    }
    const first = carry.toString('utf8');
    if (first) visit(first);
  } finally {
    fs.closeSync(fd);
  }
}

/** One line validated by its schema; undefined for a line a crash cut short or that fails the schema. */
export function parseJsonLine<S extends z.ZodType>(line: string, schema: S): z.output<S> | undefined {
  try {
    const parsed = schema.safeParse(JSON.parse(line));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}

/** A check for atomicWriteFile's read-back: the text parses as JSON its schema accepts. */
export const parsesAs =
  <S extends z.ZodType>(schema: S) =>
  (text: string): void =>
    void schema.parse(JSON.parse(text));

/** Identity and version of a file (device, inode, size, mtime), to notice a change; undefined when it is gone. */
export function fileStamp(path: string): string | undefined {
  try {
    const st = fs.statSync(path);
    return `${st.dev}:${st.ino}:${st.size}:${st.mtimeMs}`;
  } catch {
    return undefined;
  }
}
