import { randomBytes, timingSafeEqual } from 'node:crypto';
import fs from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { BerthError, errnoOf } from '../base/errors.js';
import type { FilesSettings } from '../config/metadata.js';
import { at, closeQuietly, openChildDir, withFd } from '../fs/fd-path.js';
import { readdirIfExists } from '../fs/dir.js';
import { readJsonFile } from '../fs/json-file.js';
import { readFdWhole } from '../fs/read-fd.js';
import { atomicWriteFile, ensureDirPath, type Owner } from '../fs/tree.js';
import { candidateNames, kindOf, mediaTypeOf, safeFileName } from '../plan/file-names.js';
import { OUTBOX_DIR } from '../plan/files-in.js';
import { FILE_BOUNDS } from '../config/bounds.js';
import { linkToFreeName, openWorkspace, writeUnder } from './workspace-write.js';
import { readOutboxFile, type LeftFile } from './outbox-file.js';

/**
 * Files out, on disk (files in: inbox-files.ts). What the agent left in outbox/ (regular files
 * with one link only, bounded) copied into berth's state for the run (served by the download
 * routes, sent by the bridges) and moved to outbox/sent/ so it is never sent twice; a workspace
 * file queued into outbox/ by send_file.
 */

const { O_RDONLY, O_NOFOLLOW, O_NONBLOCK } = fs.constants;

export const RunFileSchema = z.object({
  name: z.string().describe('As berth stored it (safe; the name in outbox/, numbered if two collide).'),
  size: z.number().int(),
  type: z.string().describe('Media type, by its extension.'),
});
export type RunFile = z.infer<typeof RunFileSchema>;

const RunFilesRecordSchema = z.object({
  tenant_key: z.string(),
  session: z.string(),
  files: z.array(RunFileSchema),
  key: z
    .string()
    .optional()
    .describe("The run's link key: a person without a web chat login opens its files with it (older records: none)."),
});
export type RunFilesRecord = z.infer<typeof RunFilesRecordSchema>;

/** Each run's files' record, beside them. */
export const RUN_FILES_RECORD = '.run.json';
const RECORD = RUN_FILES_RECORD;
export const runFilesDirOf = (stateDir: string, runId: string) => join(stateDir, 'run-files', runId);

export type { LeftFile } from './outbox-file.js';

/**
 * Take what the agent left in <workspace>/outbox/ (its top level, regular files only) into berth's
 * state for this run: each read through a no-follow, non-blocking descriptor (a link, fifo, device
 * or a file with a second hard link is left where it is), at most max_files and max_file_mb each,
 * max_message_mb together; then moved to outbox/sent/. No outbox/: nothing.
 */
export function collectOutbox(opts: {
  workspaceDir: string;
  filesDir: string;
  settings: FilesSettings;
  who: { tenant_key: string; session: string };
  owner?: Owner;
  /** A file not to send (it carries a decoy credential: runs/run-files.ts): it stays in outbox/, listed as held. */
  hold?: (name: string, data: Uint8Array) => boolean;
}): { files: RunFile[]; left: LeftFile[] } {
  const { settings } = opts;
  const files: RunFile[] = [];
  const left: LeftFile[] = [];
  const wsFd = openWorkspace(opts.workspaceDir);
  let outFd: number | undefined;
  try {
    outFd = openChildDir(wsFd, OUTBOX_DIR, `${OUTBOX_DIR}/`);
  } catch (err) {
    closeQuietly(wsFd);
    if (err instanceof BerthError && err.code === 'E_SANDBOX_VIOLATION')
      return { files, left: [{ name: `${OUTBOX_DIR}/`, reason: 'not a directory (a link or a file is in the way): nothing sent' }] };
    throw err;
  }
  closeQuietly(wsFd);
  if (outFd === undefined) return { files, left };
  const maxFile = settings.max_file_mb * 1024 * 1024;
  let budget = settings.max_message_mb * 1024 * 1024;
  let sentFd: number | undefined;
  try {
    // A failure midway (berth's own disk full) keeps what was taken: the record below is written whatever happens.
    for (const entry of listNames(outFd, FILE_BOUNDS.outboxEntries)) {
      if (entry.startsWith('.') || entry === 'sent') continue;
      if (files.length >= settings.max_files) {
        left.push({ name: entry, reason: `past max_files (${settings.max_files}): sent after the next run` });
        continue;
      }
      const data = readOutboxFile(outFd, entry, Math.min(maxFile, budget), left);
      if (!data) continue;
      if (opts.hold?.(entry, data)) {
        left.push({ name: entry, reason: 'not sent: held for the operator' });
        continue;
      }
      budget -= data.byteLength;
      if (files.length === 0) fs.mkdirSync(opts.filesDir, { recursive: true, mode: 0o700 });
      const name = freeStoreName(opts.filesDir, safeFileName(entry));
      atomicWriteFile(join(opts.filesDir, name), data, 0o600);
      files.push({ name, size: data.byteLength, type: mediaTypeOf(name) });
      sentFd ??= ensureDirPath(outFd, ['sent'], { owner: opts.owner, displace: true, shownRoot: OUTBOX_DIR });
      // Kept for the tenant under sent/ (a free name there), out of the next collection's way.
      if (linkToFreeName(outFd, entry, sentFd, entry) === undefined)
        left.push({ name: entry, reason: 'sent, but outbox/sent/ has no free name for it: removed' });
      fs.unlinkSync(at(outFd, entry));
    }
  } finally {
    closeQuietly(sentFd);
    closeQuietly(outFd);
    if (files.length > 0)
      atomicWriteFile(
        join(opts.filesDir, RECORD),
        JSON.stringify({ ...opts.who, files, key: randomBytes(16).toString('base64url') } satisfies RunFilesRecord),
        0o600,
      );
  }
  return { files, left };
}

/**
 * What berth keeps of runs' files (they left the tenant's quota when they left outbox/): a run's
 * files for FILE_BOUNDS.runFilesDays, and a project's at most FILE_BOUNDS.runFilesBytes, the
 * oldest runs' going first. Returns how many runs' files went.
 */
export function pruneRunFiles(stateDir: string, now: number): number {
  const root = join(stateDir, 'run-files');
  const runs = readdirIfExists(root)
    .map((run) => {
      const dir = join(root, run);
      try {
        const st = fs.lstatSync(dir);
        const bytes = st.isDirectory() ? readdirIfExists(dir).reduce((sum, f) => sum + fs.lstatSync(join(dir, f)).size, 0) : 0;
        return { dir, at: st.mtimeMs, bytes };
      } catch {
        return undefined; // removed meanwhile
      }
    })
    .filter((r) => r !== undefined)
    .sort((a, b) => b.at - a.at);
  let kept = 0;
  let removed = 0;
  for (const r of runs) {
    kept += r.bytes;
    if (now - r.at <= FILE_BOUNDS.runFilesDays * 86_400_000 && kept <= FILE_BOUNDS.runFilesBytes) continue;
    fs.rmSync(r.dir, { recursive: true, force: true });
    removed++;
  }
  return removed;
}

/** Entry names of a directory descriptor, sorted, at most `max` read. */
function listNames(dirFd: number, max: number): string[] {
  const dir = fs.opendirSync(`/proc/self/fd/${dirFd}`);
  const names: string[] = [];
  try {
    for (let e = dir.readSync(); e !== null && names.length < max; e = dir.readSync()) names.push(e.name);
  } finally {
    dir.closeSync();
  }
  return names.sort();
}

function freeStoreName(dir: string, name: string): string {
  for (const candidate of candidateNames(name)) if (!fs.existsSync(join(dir, candidate))) return candidate;
  return `${randomBytes(4).toString('hex')}-${name}`;
}

/** A run's stored files and whose they are; undefined when the run left none. */
export function readRunFiles(stateDir: string, runId: string): RunFilesRecord | undefined {
  if (!/^r[0-9a-z]{1,16}[0-9a-f]{10}$/.test(runId)) return undefined;
  return readJsonFile(join(runFilesDirOf(stateDir, runId), RECORD), RunFilesRecordSchema);
}

/** One stored file of a run, held open: its bytes and type. Undefined: no such run or file. */
export function readRunFile(
  stateDir: string,
  runId: string,
  name: string,
): { data: Buffer; file: RunFile; record: RunFilesRecord } | undefined {
  const record = readRunFiles(stateDir, runId);
  const file = record?.files.find((f) => f.name === name);
  if (!record || !file) return undefined;
  const opened = openStoredFile(runFilesDirOf(stateDir, runId), file.name);
  return opened && { data: readWhole(opened.fd, opened.size), file, record };
}

/** A run's stored file, held by its descriptor (what a download streams; the caller closes it). */
export interface OpenedRunFile {
  fd: number;
  size: number;
  type: string;
  name: string;
  tenant_key: string;
  /** The run's link key (runFileKeyMatches). */
  key?: string;
}

/**
 * A run's stored file for a download or a send, opened once without following a link (a file
 * swapped for one after the record was read is refused); NOT_FOUND when there is none.
 */
export function openRunFile(stateDir: string, runId: string, name: string): OpenedRunFile {
  const record = readRunFiles(stateDir, runId);
  const file = record?.files.find((f) => f.name === name);
  const opened = record && file && openStoredFile(runFilesDirOf(stateDir, runId), file.name);
  if (!record || !file || !opened)
    throw new BerthError('NOT_FOUND', `run ${runId.slice(0, 64)} left no file "${name.slice(0, 200)}"`, { path: name.slice(0, 200) });
  return { ...opened, type: file.type, name: file.name, tenant_key: record.tenant_key, ...(record.key ? { key: record.key } : {}) };
}

/** An opened run file's bytes, whole (a channel's send takes them so); the descriptor is closed. */
export const readOpenedRunFile = (f: OpenedRunFile): { data: Buffer; type: string; name: string } => ({
  data: readWhole(f.fd, f.size),
  type: f.type,
  name: f.name,
});

/** Whether `given` is the run's link key (constant time; a run without one opens with no key). */
export function runFileKeyMatches(f: Pick<OpenedRunFile, 'key'>, given: string): boolean {
  if (!f.key) return false;
  const a = Buffer.from(f.key);
  const b = Buffer.from(given);
  return a.length === b.length && timingSafeEqual(a, b);
}

/** A regular file in berth's run-files directory, by a no-follow, non-blocking open; undefined when it is not one. */
function openStoredFile(dir: string, name: string): { fd: number; size: number } | undefined {
  let fd: number;
  try {
    fd = fs.openSync(join(dir, name), O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
  } catch (err) {
    if (['ENOENT', 'ELOOP', 'ENXIO', 'ENOTDIR'].includes(errnoOf(err) ?? '')) return undefined;
    throw err;
  }
  const st = fs.fstatSync(fd);
  if (!st.isFile()) {
    closeQuietly(fd);
    return undefined;
  }
  return { fd, size: st.size };
}

/** `size` bytes from `fd` (fewer if it shrank), then closed. */
const readWhole = (fd: number, size: number): Buffer => withFd(fd, (f) => readFdWhole(f, size));
/**
 * send_file: queue a workspace file (a path relative to the workspace) by copying it into
 * outbox/ under a free name; it leaves with the run's other outbox files. The source is read
 * through the path sandbox (no link followed), bounded by max_file_mb.
 */
export function queueOutboxFile(
  workspaceDir: string,
  readFile: (rootFd: number, maxBytes: number) => Buffer | undefined,
  path: string,
  settings: FilesSettings,
): { queued: string; size: number; kind: string } {
  return withFd(openWorkspace(workspaceDir), (wsFd) => {
    // Owned as the workspace is (the agent's user made it so): the agent can move or delete what berth wrote.
    const st = fs.fstatSync(wsFd);
    const owner = { uid: st.uid, gid: st.gid };
    const data = readFile(wsFd, settings.max_file_mb * 1024 * 1024);
    if (!data) throw new BerthError('NOT_FOUND', `no file at ${path} in the workspace`, { path });
    const name = safeFileName(path);
    const queued = withFd(ensureDirPath(wsFd, [OUTBOX_DIR], { owner, displace: true, shownRoot: 'workspace' }), (outFd) =>
      writeUnder(outFd, name, data, owner),
    );
    if (queued === undefined)
      throw new BerthError('CONFIG_INVALID', `outbox/ has no free name for ${name}`, {
        issues: [{ field: 'path', reason: 'too many files of that name wait in outbox/' }],
      });
    return { queued: `${OUTBOX_DIR}/${queued}`, size: data.byteLength, kind: kindOf(mediaTypeOf(name)) };
  });
}
