import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { BerthError, errnoOf } from '../base/errors.js';
import { readdirIfExists } from '../fs/dir.js';
import { readJsonFile } from '../fs/json-file.js';
import { atomicWriteFile } from '../fs/tree.js';
import { mediaTypeOf, safeFileName } from '../plan/file-names.js';

/**
 * Files a web chat person uploaded and has not sent yet: berth's private state, one directory per
 * person (a hash of "<project>/<user>"), each upload its bytes and a small record. A message names
 * them by id; its run takes each one (read and removed) before the run, as any channel's
 * attachment is fetched. Bounded per person (count and bytes); an upload never sent is swept
 * after UPLOAD_TTL_MS.
 */
export const UPLOAD_BOUNDS = { perPerson: 20, bytesPerPerson: 128 * 1024 * 1024 };
export const UPLOAD_TTL_MS = 24 * 60 * 60 * 1000;
export const UPLOAD_ID_PATTERN = /^u[0-9a-f]{24}$/;

const UploadRecordSchema = z.object({ name: z.string(), type: z.string(), size: z.number().int(), at: z.number() });
export type UploadRecord = z.infer<typeof UploadRecordSchema>;

export interface ChatUploads {
  /** Keep an upload of a person; LIMIT_REACHED past their bounds. */
  put(owner: string, name: string, type: string | undefined, data: Uint8Array): { id: string; name: string; type: string; size: number };
  /** An upload of the person's, as it was kept; undefined when it is not theirs or not there (any more). */
  info(owner: string, id: string): UploadRecord | undefined;
  /** The ref a message's attachment carries for it (ChannelAttachment.ref). */
  refOf(owner: string, id: string): string;
  /** Its bytes, once: read and removed. TOO_LARGE past maxBytes (kept then), NOT_FOUND when gone. */
  take(ref: string, maxBytes: number): Uint8Array;
}

export function openChatUploads(dir: string, now: () => number = Date.now): ChatUploads {
  const dirOf = (owner: string) => join(dir, createHash('sha256').update(owner).digest('hex').slice(0, 32));
  const ownerDirPattern = /^[0-9a-f]{32}$/;

  function sweep(personDir: string): UploadRecord[] {
    const kept: UploadRecord[] = [];
    for (const entry of readdirIfExists(personDir)) {
      if (!entry.endsWith('.json')) continue;
      const id = entry.slice(0, -5);
      const record = safeRecord(join(personDir, entry));
      if (!record || now() - record.at > UPLOAD_TTL_MS) {
        removeUpload(personDir, id);
        continue;
      }
      kept.push(record);
    }
    return kept;
  }

  return {
    put(owner, name, type, data) {
      const personDir = dirOf(owner);
      const kept = sweep(personDir);
      const bytes = kept.reduce((s, r) => s + r.size, 0);
      if (kept.length >= UPLOAD_BOUNDS.perPerson || bytes + data.byteLength > UPLOAD_BOUNDS.bytesPerPerson) {
        throw new BerthError(
          'LIMIT_REACHED',
          `at most ${UPLOAD_BOUNDS.perPerson} files (${UPLOAD_BOUNDS.bytesPerPerson / 1048576} MB) may wait to be sent`,
          { hint: 'send a message with the files you uploaded first' },
        );
      }
      fs.mkdirSync(personDir, { recursive: true, mode: 0o700 });
      const id = `u${randomBytes(12).toString('hex')}`;
      const safe = safeFileName(name, type);
      const record: UploadRecord = { name: safe, type: mediaTypeOf(safe, type), size: data.byteLength, at: now() };
      atomicWriteFile(join(personDir, id), data, 0o600);
      atomicWriteFile(join(personDir, `${id}.json`), JSON.stringify(record), 0o600);
      return { id, name: record.name, type: record.type, size: record.size };
    },
    info(owner, id) {
      if (!UPLOAD_ID_PATTERN.test(id)) return undefined;
      const record = safeRecord(join(dirOf(owner), `${id}.json`));
      return record && now() - record.at <= UPLOAD_TTL_MS ? record : undefined;
    },
    refOf: (owner, id) => `${dirOf(owner).slice(dir.length + 1)}/${id}`,
    take(ref, maxBytes) {
      const [person, id, ...rest] = ref.split('/');
      if (!person || !ownerDirPattern.test(person) || !id || !UPLOAD_ID_PATTERN.test(id) || rest.length > 0)
        throw new BerthError('NOT_FOUND', 'no such upload');
      const personDir = join(dir, person);
      const record = safeRecord(join(personDir, `${id}.json`));
      if (!record) throw new BerthError('NOT_FOUND', 'the upload is gone (sent already, or past a day old)');
      if (record.size > maxBytes) throw new BerthError('TOO_LARGE', `the upload is larger than ${maxBytes} bytes`);
      const data = fs.readFileSync(join(personDir, id));
      removeUpload(personDir, id);
      return data;
    },
  };
}

function safeRecord(path: string): UploadRecord | undefined {
  try {
    return readJsonFile(path, UploadRecordSchema);
  } catch {
    return undefined;
  }
}

function removeUpload(personDir: string, id: string): void {
  for (const f of [id, `${id}.json`]) {
    try {
      fs.unlinkSync(join(personDir, f));
    } catch (err) {
      if (errnoOf(err) !== 'ENOENT') throw err;
    }
  }
}
