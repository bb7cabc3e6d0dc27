import fs from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { z } from 'zod';
import { errnoOf } from '../base/errors.js';
import { openIfExists, withFd } from '../fs/fd-path.js';
import { atomicWriteFile } from '../fs/tree.js';
import { parseJsonLine, readTextIfExists } from '../fs/json-file.js';
import { readdirIfExists } from '../fs/dir.js';

/**
 * The files of one audit log: the current file (`audit.jsonl`), the rotated ones
 * (`audit.jsonl.<n>`, n counting up: the smallest is the oldest), and the head record
 * (`audit.jsonl.head`) kept beside them: the seq and hash of the last line berth wrote, and where
 * the kept chain starts once the oldest files were dropped. A chain point is a line's seq and hash.
 */
export const AUDIT_ROTATION = {
  /** The current file is rotated once it reaches this size. */
  rotateBytes: 16 * 1024 * 1024,
  /** Rotated files kept besides the current one; older ones are deleted (at most ~80 MiB in all). */
  keep: 4,
} as const;
export type AuditRotation = { rotateBytes: number; keep: number };

export const GENESIS = '0'.repeat(64);

const ChainPointSchema = z.object({ seq: z.number().int().min(0), hash: z.string().regex(/^[0-9a-f]{64}$/) }).strict();
export type ChainPoint = z.infer<typeof ChainPointSchema>;

export const AuditHeadSchema = ChainPointSchema.extend({
  /** The last line of the newest file that was deleted by rotation: the kept chain follows it. */
  base: ChainPointSchema.optional(),
}).strict();
export type AuditHead = z.infer<typeof AuditHeadSchema>;

export const headFile = (file: string) => `${file}.head`;

/** The rotated files, oldest first, as [generation, path]. */
export function rotatedFiles(file: string): Array<[number, string]> {
  const prefix = `${basename(file)}.`;
  return readdirIfExists(dirname(file))
    .filter((n) => n.startsWith(prefix) && /^\d{1,9}$/.test(n.slice(prefix.length)))
    .map((n): [number, string] => [Number(n.slice(prefix.length)), join(dirname(file), n)])
    .sort((a, b) => a[0] - b[0]);
}

/** Every file of the log, oldest first (the current one last, whether or not it exists yet). */
export function logFiles(file: string): string[] {
  return [...rotatedFiles(file).map(([, path]) => path), file];
}

export function readHead(file: string): AuditHead | undefined {
  const text = readTextIfExists(headFile(file));
  if (text === undefined) return undefined;
  const parsed = parseJsonLine(text, AuditHeadSchema);
  if (!parsed) throw new Error(`${basename(headFile(file))} is not a head record: refusing to chain on from a guess`);
  return parsed;
}

export function writeHead(file: string, head: AuditHead): void {
  atomicWriteFile(headFile(file), `${JSON.stringify(head)}\n`, 0o600);
}

/**
 * The last whole entry of one file, read from its tail (the log only grows); undefined for an
 * empty or missing file. A line a crash cut short is passed over (verify names it), never a
 * reason to restart the chain.
 */
export function lastPointOf(path: string, isEntry: (line: string) => ChainPoint | undefined): ChainPoint | undefined {
  const fd = openIfExists(path);
  if (fd === undefined) return undefined;
  try {
    const size = fs.fstatSync(fd).size;
    const length = Math.min(size, 64 * 1024);
    const buf = Buffer.alloc(length);
    fs.readSync(fd, buf, 0, length, size - length);
    for (const line of buf.toString('utf8').trimEnd().split('\n').reverse()) {
      const point = isEntry(line);
      if (point) return point;
    }
    if (size > 0) throw new Error(`${basename(path)} ends in no whole entry: refusing to start a new chain over it`);
    return undefined;
  } finally {
    fs.closeSync(fd);
  }
}

export function sizeOf(path: string): number {
  try {
    return fs.statSync(path).size;
  } catch (err) {
    if (errnoOf(err) === 'ENOENT') return 0;
    throw err;
  }
}

/**
 * Move the current file aside as the next generation, then drop the oldest beyond `keep`. The
 * head's base moves to the last line of each dropped file before that file is deleted, so the
 * kept chain still starts from a known point (and a kept file deleted by hand shows).
 */
export function rotate(
  file: string,
  rotation: AuditRotation,
  head: AuditHead,
  isEntry: (line: string) => ChainPoint | undefined,
): AuditHead {
  // Lines whose sync is shared may not be on disk yet, and a head written below can name them.
  withFd(fs.openSync(file, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW), (fd) => fs.fsyncSync(fd));
  const rotated = rotatedFiles(file);
  const next = (rotated.at(-1)?.[0] ?? 0) + 1;
  fs.renameSync(file, `${file}.${next}`);
  rotated.push([next, `${file}.${next}`]);
  let kept = head;
  while (rotated.length > rotation.keep) {
    const [, oldest] = rotated.shift() as [number, string];
    const last = lastPointOf(oldest, isEntry);
    if (last) {
      kept = { ...kept, base: last };
      writeHead(file, kept);
    }
    fs.rmSync(oldest, { force: true });
  }
  return kept;
}
