import { errnoOf } from '../base/errors.js';
import { withFd } from '../fs/fd-path.js';
import { ensureDirPath, type Owner } from '../fs/tree.js';
import { safeFileName } from '../plan/file-names.js';
import { INBOX_DIR, type IncomingFile, type PlannedFile, type RefusedFile, type SavedFile } from '../plan/files-in.js';
import { openWorkspace, writeUnder } from './workspace-write.js';

/**
 * Files in, on disk: a message's files written into the workspace's inbox/ through no-follow
 * descriptors (a link, fifo or file the tenant planted at inbox/ is moved aside, never followed;
 * a file is created under a temporary name and linked to the first free name, never written over
 * anything), and a voice note's transcript beside it.
 */

const FULL = new Set(['ENOSPC', 'EDQUOT', 'EFBIG']);

/**
 * Write the planned files into <workspace>/inbox/. A write the disk refuses (quota) refuses that
 * file; the others still land. `from[i]`: the index in `files` of `saved[i]`.
 */
export function landIncoming(
  workspaceDir: string,
  files: readonly IncomingFile[],
  plan: readonly PlannedFile[],
  owner?: Owner,
): { saved: SavedFile[]; refused: RefusedFile[]; from: number[] } {
  const saved: SavedFile[] = [];
  const refused: RefusedFile[] = [];
  const from: number[] = [];
  if (plan.length === 0) return { saved, refused, from };
  withFd(openWorkspace(workspaceDir), (wsFd) =>
    withFd(ensureDirPath(wsFd, [INBOX_DIR], { owner, displace: true, shownRoot: 'workspace' }), (inboxFd) => {
      for (const p of plan) {
        const data = files[p.index]?.data ?? new Uint8Array();
        try {
          const name = writeUnder(inboxFd, p.name, data, owner);
          if (name === undefined) refused.push({ name: p.name, reason: 'unwritable', size: p.size });
          else {
            saved.push({ path: `${INBOX_DIR}/${name}`, kind: p.kind, size: p.size, voice: p.voice });
            from.push(p.index);
          }
        } catch (err) {
          if (!FULL.has(errnoOf(err) ?? '')) throw err;
          refused.push({ name: p.name, reason: 'quota', size: p.size });
        }
      }
    }),
  );
  return { saved, refused, from };
}

/**
 * A text beside a file in inbox/ (a voice note's transcript, "<name>.txt"), written as a file
 * that came in is: no link followed, nothing replaced (a name taken is numbered). Its path in the
 * workspace, or undefined when no name was free; a full disk throws.
 */
export function saveBeside(workspaceDir: string, name: string, text: string, owner?: Owner): string | undefined {
  return withFd(openWorkspace(workspaceDir), (wsFd) =>
    withFd(ensureDirPath(wsFd, [INBOX_DIR], { owner, displace: true, shownRoot: 'workspace' }), (inboxFd) => {
      const saved = writeUnder(inboxFd, safeFileName(`${name}.txt`, 'text/plain'), Buffer.from(text, 'utf8'), owner);
      return saved === undefined ? undefined : `${INBOX_DIR}/${saved}`;
    }),
  );
}

/** What a workspace has left under limits.disk_mb (its quota filesystem's room when it has one). */
export function freeBytesOf(used: { size_bytes: number; quota?: { size_bytes: number } }, diskMb: number): number {
  const cap = used.quota?.size_bytes ?? diskMb * 1024 * 1024;
  return Math.max(0, cap - used.size_bytes);
}
