import type { WebFileView, WebUploadView } from '../../../bridges/web-protocol.js';
import { showAny, type ChatError } from './api.js';
import { $, $input } from './state.js';

/**
 * Files in the chat. In: the paperclip, a paste into the message box, a drop anywhere on the page —
 * each file uploaded at once (POST /chat/uploads, the login's cookie, this origin) and shown as a
 * chip until the next message names it (socket.ts send). Out: the agent's files after its answer —
 * PNG, JPEG, GIF and WebP as images, anything else a download link, from berth's own file route
 * (the page's CSP lets images come from there only).
 */
const waiting: WebUploadView[] = [];
let uploading = 0;
const INLINE = new Set(['image/png', 'image/jpeg', 'image/gif', 'image/webp']);

export function sizeWords(bytes: number): string {
  if (bytes < 1024) return bytes + (bytes === 1 ? ' byte' : ' bytes');
  if (bytes < 1024 * 1024) return Math.round(bytes / 1024) + ' KB';
  const mb = bytes / (1024 * 1024);
  return (mb < 10 ? mb.toFixed(1) : String(Math.round(mb))) + ' MB';
}

/** The uploads the next message carries (taken: the chips go); none while one is still uploading. */
export function takeWaiting(): WebUploadView[] | null {
  if (uploading > 0) return null;
  const taken = waiting.splice(0);
  renderWaiting();
  return taken;
}

export const hasWaiting = (): boolean => waiting.length > 0;

async function upload(file: File): Promise<void> {
  uploading++;
  renderWaiting();
  try {
    const res = await fetch('/chat/uploads?name=' + encodeURIComponent(file.name || 'pasted'), {
      method: 'POST',
      headers: { 'content-type': file.type || 'application/octet-stream' },
      body: file,
    });
    const data = (await res.json().catch(() => ({}))) as { upload?: WebUploadView; error?: { code?: string; message?: string } };
    if (!res.ok || !data.upload)
      throw Object.assign(new Error((file.name ? file.name + ': ' : '') + (data.error?.message ?? res.statusText)), {
        code: data.error?.code,
        status: res.status,
      } satisfies Partial<ChatError>);
    waiting.push(data.upload);
  } finally {
    uploading--;
    renderWaiting();
  }
}

function uploadAll(files: FileList | null | undefined): void {
  for (const f of Array.from(files ?? [])) upload(f).catch(showAny);
}

function renderWaiting(): void {
  const box = $('attachments');
  box.replaceChildren(
    ...waiting.map((w, i) => {
      const chip = document.createElement('span');
      chip.className = 'chip';
      chip.textContent = w.name + ' (' + sizeWords(w.size) + ')';
      const drop = document.createElement('button');
      drop.type = 'button';
      drop.textContent = '×';
      drop.setAttribute('aria-label', 'remove ' + w.name);
      drop.onclick = () => {
        waiting.splice(i, 1);
        renderWaiting();
      };
      chip.append(drop);
      return chip;
    }),
  );
  if (uploading > 0) {
    const busy = document.createElement('span');
    busy.className = 'chip busy';
    busy.textContent = 'uploading ' + uploading + '…';
    box.append(busy);
  }
  box.hidden = waiting.length === 0 && uploading === 0;
}

/** Files in the transcript: the person's by name, the agent's as an image or a download link. */
export function filesBlock(files: readonly WebFileView[]): HTMLElement {
  const box = document.createElement('div');
  box.className = 'files';
  for (const f of files) {
    if (!f.url) {
      const chip = document.createElement('span');
      chip.className = 'chip';
      chip.textContent = f.name + ' (' + sizeWords(f.size) + ')';
      box.append(chip);
      continue;
    }
    const a = document.createElement('a');
    a.href = f.url;
    a.target = '_blank';
    a.rel = 'noopener noreferrer';
    if (INLINE.has(f.type)) {
      const img = document.createElement('img');
      img.src = f.url;
      img.alt = f.name;
      img.loading = 'lazy';
      a.append(img);
    } else {
      a.download = f.name;
      a.textContent = f.name + ' (' + sizeWords(f.size) + ')';
    }
    box.append(a);
  }
  return box;
}

/** The paperclip, paste and drop. */
export function wireFiles(): void {
  $('attach').onclick = () => $input('file').click();
  $input('file').onchange = () => {
    uploadAll($input('file').files);
    $input('file').value = '';
  };
  $input('input').addEventListener('paste', (ev) => {
    if (!ev.clipboardData?.files.length) return;
    ev.preventDefault();
    uploadAll(ev.clipboardData.files);
  });
  document.addEventListener('dragover', (ev) => {
    if (ev.dataTransfer?.types.includes('Files')) ev.preventDefault();
  });
  document.addEventListener('drop', (ev) => {
    if (!ev.dataTransfer?.files.length) return;
    ev.preventDefault();
    uploadAll(ev.dataTransfer.files);
  });
}
