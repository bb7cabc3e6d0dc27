import fs from 'node:fs';
import type { z } from 'zod';
import { errnoOf } from '../errors.js';

/** A berth-owned JSON file, validated by its schema; undefined when it does not exist. */
export function readJsonFile<S extends z.ZodType>(path: string, schema: S): z.output<S> | undefined {
  let text: string;
  try {
    text = fs.readFileSync(path, 'utf8');
  } catch (err) {
    if (errnoOf(err) === 'ENOENT') return undefined;
    throw err;
  }
  return schema.parse(JSON.parse(text));
}

/** The lines of a berth-owned JSON-lines file (a log, a journal); [] when it does not exist. */
export function readJsonLines(path: string): string[] {
  let text: string;
  try {
    text = fs.readFileSync(path, 'utf8');
  } catch (err) {
    if (errnoOf(err) === 'ENOENT') return [];
    throw err;
  }
  return text.split('\n').filter(Boolean);
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
