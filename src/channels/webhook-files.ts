import fs from 'node:fs';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { z } from 'zod';
import { BerthError, errnoOf } from '../base/errors.js';
import { readFdWhole } from '../fs/read-fd.js';
import { atomicWriteFile } from '../fs/tree.js';
import { base64Length, decodeBase64Capped, foreignRef, tooLarge } from './attachment-bytes.js';
import type { ChannelAttachment } from './contract.js';

/**
 * Files a signed webhook carries inline (`files: [{name, content_base64, mime?}]`): the bytes
 * arrive with the request, before the core fetches anything, so they are staged under the
 * channel's own directory with a random ref (`hook-file:<32 hex>`), read back by
 * fetchAttachment. Staged files are kept a day (a restart's recovery may fetch again) and never
 * more than STAGED_MAX_BYTES in all: past it a request with files is told to come back (BUSY).
 */
export const WEBHOOK_FILE_BOUNDS = {
  /** Files in one request. */
  files: 10,
  /**
   * A request's files together, decoded: a hook's max_file_bytes, off unless the operator sets it
   * (a hook's body is read before its signature is checked: a larger one is a larger budget for strangers), and its most.
   */
  defaultBytes: 0,
  maxBytes: 32 * 1024 * 1024,
  /** Staged and not yet swept, across hooks. */
  stagedBytes: 256 * 1024 * 1024,
  stagedMs: 24 * 60 * 60 * 1000,
} as const;

const REF = /^hook-file:([0-9a-f]{32})$/;

export const HookFileSchema = z
  .object({
    name: z
      .string()
      .min(1)
      .max(255)
      .regex(/^[^\u0000-\u001f\u007f/\\]+$/, 'must be printable, without "/" or "\\"')
      .describe("The file's name as the sender gives it (berth sanitises it again before it lands in the workspace)."),
    content_base64: z.string().describe('The bytes, base64 (standard alphabet, padded).'),
    mime: z
      .string()
      .regex(/^[\w.+-]{1,64}\/[\w.+-]{1,128}$/, 'must be a media type, e.g. application/pdf')
      .optional(),
  })
  .strict();
export type HookFile = z.output<typeof HookFileSchema>;

/** The most a body may be for a hook whose files may hold `maxFileBytes` (its base64, and room for the names around it). */
export const filesBodyBytes = (maxFileBytes: number) =>
  maxFileBytes === 0 ? 0 : base64Length(maxFileBytes) + WEBHOOK_FILE_BOUNDS.files * 512;

export interface FileStage {
  /** Decode and stage a request's files (TOO_LARGE past `maxBytes` together, nothing staged). */
  stage(files: readonly HookFile[], maxBytes: number): ChannelAttachment[];
  /** Remove staged files whose message was not taken (a duplicate, a refusal). */
  drop(attachments: readonly ChannelAttachment[]): void;
  fetch(ref: string, limits: { maxBytes: number }): Uint8Array;
}

export function createFileStage(dir: string, now: () => number = Date.now): FileStage {
  const pathOf = (hex: string) => join(dir, hex);

  /** Files past their day are removed; what remains, in bytes. */
  function sweep(): number {
    let kept = 0;
    let names: string[];
    try {
      names = fs.readdirSync(dir);
    } catch {
      return 0;
    }
    for (const name of names) {
      try {
        const st = fs.lstatSync(pathOf(name));
        if (now() - st.mtimeMs > WEBHOOK_FILE_BOUNDS.stagedMs || !st.isFile()) fs.rmSync(pathOf(name), { force: true });
        else kept += st.size;
      } catch {
        // gone meanwhile
      }
    }
    return kept;
  }

  return {
    stage(files, maxBytes) {
      if (files.length === 0) return [];
      const decoded = files.map((f) => decodeBase64Capped(f.content_base64, maxBytes));
      const total = decoded.reduce((n, d) => n + d.byteLength, 0);
      if (total > maxBytes) throw tooLarge(maxBytes);
      if (sweep() + total > WEBHOOK_FILE_BOUNDS.stagedBytes) {
        throw new BerthError('BUSY', 'too many files from webhooks are waiting to be read: send it again later', { retry_after: 60 });
      }
      fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
      return files.map((f, i) => {
        const hex = randomBytes(16).toString('hex');
        atomicWriteFile(pathOf(hex), decoded[i]!, 0o600);
        return { ref: `hook-file:${hex}`, name: f.name, size: decoded[i]!.byteLength, ...(f.mime ? { mime: f.mime } : {}) };
      });
    },
    drop(attachments) {
      for (const a of attachments) {
        const hex = REF.exec(a.ref)?.[1];
        if (hex) fs.rmSync(pathOf(hex), { force: true });
      }
    },
    fetch(ref, limits) {
      const hex = REF.exec(ref)?.[1];
      if (hex === undefined) throw foreignRef('webhook');
      let fd: number;
      try {
        fd = fs.openSync(pathOf(hex), fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW);
      } catch (err) {
        if (errnoOf(err) === 'ENOENT')
          throw new BerthError(
            'NOT_FOUND',
            `the webhook's file is gone (staged files are kept ${WEBHOOK_FILE_BOUNDS.stagedMs / 3_600_000} h)`,
          );
        throw err;
      }
      try {
        const st = fs.fstatSync(fd);
        if (!st.isFile()) throw foreignRef('webhook');
        if (st.size > limits.maxBytes) throw tooLarge(limits.maxBytes);
        return readFdWhole(fd, st.size);
      } finally {
        fs.closeSync(fd);
      }
    },
  };
}
