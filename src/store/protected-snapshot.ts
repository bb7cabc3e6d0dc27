import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { protectedPathKey } from '../config/metadata.js';
import { BerthError } from '../base/errors.js';
import { at, closeQuietly, openRootDir, withFd } from '../fs/fd-path.js';
import { readJsonFile } from '../fs/json-file.js';
import { atomicWriteFile, copyEntry, ensureDirPath, kindAt, openDirPath, writeNewFileAt, type Skipped } from '../fs/tree.js';
import type { ProtectedSnapshot } from '../plan/run-plan.js';

/**
 * Protected paths are served from a berth-owned copy, never from the tenant tree: a symlink or
 * hardlink a tenant planted, or an edit made before protection was switched on, cannot reach
 * what containers get read-only. The copy is taken from the project directory when an admin
 * creates or updates the project, and kept in generations so running containers keep theirs.
 */

export const SnapshotPointerSchema = z.object({
  generation: z.string().regex(/^[0-9a-z-]+$/),
  taken_at: z.string(),
  entries: z.array(
    z.object({
      path: z.string(),
      kind: z.enum(['file', 'dir']),
      source: z.enum(['project', 'empty']),
      skipped: z.array(z.object({ path: z.string(), reason: z.string() })),
    }),
  ),
});

export type SnapshotPointer = z.infer<typeof SnapshotPointerSchema>;

const POINTER = 'current.json';
/** Older generations may still be mounted by a run in flight (at most the longest timeout). */
const KEEP_OLD_GENERATIONS_MS = 25 * 3600 * 1000;

export function takeProtectedSnapshot(opts: { sourceDir: string; protectedDir: string; entries: readonly string[] }): SnapshotPointer {
  fs.mkdirSync(opts.protectedDir, { recursive: true, mode: 0o755 });
  const generation = `${Date.now().toString(36)}-${randomBytes(4).toString('hex')}`;
  const genDir = join(opts.protectedDir, generation);
  fs.mkdirSync(genDir, { mode: 0o755 });
  const entries: SnapshotPointer['entries'] = [];
  try {
    withFd(openRootDir(opts.sourceDir), (srcRoot) =>
      withFd(openRootDir(genDir), (genRoot) => {
        for (const entry of opts.entries) entries.push(snapshotOne(srcRoot, genRoot, entry));
      }),
    );
  } catch (err) {
    fs.rmSync(genDir, { recursive: true, force: true });
    throw err;
  }
  const pointer: SnapshotPointer = { generation, taken_at: new Date().toISOString(), entries };
  atomicWriteFile(join(opts.protectedDir, POINTER), `${JSON.stringify(pointer, null, 2)}\n`);
  pruneGenerations(opts.protectedDir, generation);
  return pointer;
}

function snapshotOne(srcRoot: number, genRoot: number, entry: string): SnapshotPointer['entries'][number] {
  const path = protectedPathKey(entry);
  const wantDir = entry.endsWith('/');
  const parts = path.split('/');
  const name = parts.pop() as string;
  const skipped: Skipped[] = [];

  let srcParent: number | undefined;
  try {
    srcParent = openDirPath(srcRoot, parts, '');
  } catch (err) {
    if (!(err instanceof BerthError)) throw err;
    skipped.push({ path, reason: 'a parent directory is a symbolic link or a file' });
  }
  const dstParent = ensureDirPath(genRoot, parts, { shownRoot: '' });
  try {
    const srcKind = srcParent === undefined ? 'missing' : kindAt(srcParent, name);
    if (srcParent !== undefined && (srcKind === 'dir' || (srcKind === 'file' && !wantDir))) {
      copyEntry(srcParent, dstParent, name, { shownPath: path, skipped });
      return { path, kind: srcKind, source: 'project', skipped };
    }
    if (srcKind !== 'missing')
      skipped.push({
        path,
        reason:
          srcKind === 'file' ? 'a file, where a directory was named' : `a ${srcKind === 'symlink' ? 'symbolic link' : 'special file'}`,
      });
    // Nothing trustworthy to copy: protect an empty placeholder, so the path is read-only all the same.
    if (wantDir) fs.mkdirSync(at(dstParent, name), { mode: 0o755 });
    else writeNewFileAt(dstParent, name, '');
    return { path, kind: wantDir ? 'dir' : 'file', source: 'empty', skipped };
  } finally {
    closeQuietly(srcParent);
    closeQuietly(dstParent);
  }
}

function pruneGenerations(protectedDir: string, keep: string): void {
  const now = Date.now();
  for (const name of fs.readdirSync(protectedDir)) {
    if (name === keep || name === POINTER || name.includes('.tmp-')) continue;
    const full = join(protectedDir, name);
    const stat = fs.lstatSync(full);
    if (stat.isDirectory() && now - stat.mtimeMs > KEEP_OLD_GENERATIONS_MS) fs.rmSync(full, { recursive: true, force: true });
  }
}

export function readSnapshotPointer(protectedDir: string): SnapshotPointer | undefined {
  return readJsonFile(join(protectedDir, POINTER), SnapshotPointerSchema);
}

export function snapshotForPlan(protectedDir: string, pointer: SnapshotPointer | undefined): ProtectedSnapshot {
  if (!pointer) return { dir: join(protectedDir, 'none'), entries: [] };
  return { dir: join(protectedDir, pointer.generation), entries: pointer.entries.map(({ path, kind }) => ({ path, kind })) };
}
