import type { AdminService } from '../admin/service.js';
import type { ChannelAttachment } from '../channels/contract.js';
import { BerthError } from '../base/errors.js';
import { tenantOfChatUser } from '../store/chat-links.js';
import type { ChatUploads } from '../store/chat-uploads.js';
import type { RunFile } from '../store/run-files.js';
import { chatFileUrl } from './files.js';
import type { TranscriptEntry } from '../store/chat-transcripts.js';
import type { WebFileView, WebServerMessage, WebUploadView } from './web-protocol.js';

/**
 * The web chat's files: an upload kept until the message that names it runs (store/chat-uploads.ts),
 * the message's attachments made from the ids it names (the person's own uploads only), and the
 * agent's files as the page shows them (inline images and links below /chat/api, opened with the login).
 */
export interface WebFiles {
  /** An upload of the person's, bounded by their project's max_file_mb (PAYLOAD_TOO_LARGE) and the upload store's per-person bounds. */
  upload(login: { project: string; user: string }, name: string, type: string | undefined, data: Uint8Array): WebUploadView;
  /** A run message's uploads as its attachments; CONFIG_INVALID (field files) for an id that is not the person's upload. */
  attachmentsOf(
    login: { project: string; user: string },
    ids: readonly string[],
  ): { attachments: ChannelAttachment[]; shown: WebFileView[] };
  fetch(ref: string, maxBytes: number): Uint8Array;
  /** The agent's files in the person's chat: kept in the transcript (while the session is there), then pushed to the page. */
  show(
    at: Chat,
    run: string,
    files: readonly RunFile[],
    keep: (at: Chat, entry: Omit<TranscriptEntry, 'at'>) => void,
    push: (at: Chat, message: WebServerMessage) => void,
  ): void;
}

type Chat = { project: string; user: string; session: string };

export function createWebFiles(uploads: ChatUploads, admin: Pick<AdminService, 'getProjectMetadata'>): WebFiles {
  const ownerOf = (login: { project: string; user: string }) => `${login.project}/${tenantOfChatUser(login.user)}`;
  return {
    upload(login, name, type, data) {
      const max = admin.getProjectMetadata(login.project).files.max_file_mb;
      if (data.byteLength > max * 1024 * 1024) throw new BerthError('PAYLOAD_TOO_LARGE', `files up to ${max} MB are taken here`);
      return uploads.put(ownerOf(login), name, type, data);
    },
    attachmentsOf(login, ids) {
      const owner = ownerOf(login);
      const attachments: ChannelAttachment[] = [];
      const shown: WebFileView[] = [];
      for (const [i, id] of ids.entries()) {
        const info = uploads.info(owner, id);
        if (!info)
          throw new BerthError('CONFIG_INVALID', 'a file of this message is not (or no longer) uploaded', {
            issues: [{ field: `files.${i}`, reason: 'upload it again' }],
          });
        attachments.push({ ref: uploads.refOf(owner, id), name: info.name, mime: info.type, size: info.size });
        shown.push({ name: info.name, size: info.size, type: info.type });
      }
      return { attachments, shown };
    },
    fetch: (ref, maxBytes) => uploads.take(ref, maxBytes),
    show(at, run, list, keep, push) {
      const files = list.map((f) => ({ ...f, url: chatFileUrl(undefined, run, f.name) }));
      keep(at, { role: 'files', text: files.map((f) => f.name).join(', '), files });
      push(at, { type: 'files', session_id: at.session, files });
    },
  };
}
