/**
 * Files in and out, pure: what a person's file is called in the workspace, what kind it is and
 * which media type it counts as. Nothing here touches the disk; the writer (store/run-files.ts)
 * picks the first free name of `candidateNames`.
 */

/** Bytes of a file name berth writes (ext4 allows 255; this leaves room for "-NN" and keeps listings short). */
export const MAX_NAME_BYTES = 120;
/** Tries at a free name before a file is refused (100 of one name in a message, or a crowded inbox/). */
export const MAX_NAME_TRIES = 100;

const EXTENSION_TYPES: Record<string, string> = {
  png: 'image/png',
  jpg: 'image/jpeg',
  jpeg: 'image/jpeg',
  gif: 'image/gif',
  webp: 'image/webp',
  svg: 'image/svg+xml',
  heic: 'image/heic',
  bmp: 'image/bmp',
  pdf: 'application/pdf',
  txt: 'text/plain',
  md: 'text/markdown',
  csv: 'text/csv',
  tsv: 'text/tab-separated-values',
  json: 'application/json',
  html: 'text/html',
  xml: 'application/xml',
  yaml: 'application/yaml',
  yml: 'application/yaml',
  log: 'text/plain',
  zip: 'application/zip',
  gz: 'application/gzip',
  tar: 'application/x-tar',
  ogg: 'audio/ogg',
  oga: 'audio/ogg',
  opus: 'audio/ogg',
  mp3: 'audio/mpeg',
  m4a: 'audio/mp4',
  wav: 'audio/wav',
  mp4: 'video/mp4',
  webm: 'video/webm',
  mov: 'video/quicktime',
  docx: 'application/vnd.openxmlformats-officedocument.wordprocessingml.document',
  xlsx: 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet',
  pptx: 'application/vnd.openxmlformats-officedocument.presentationml.presentation',
};

const TYPE_EXTENSIONS: Record<string, string> = Object.fromEntries(
  Object.entries(EXTENSION_TYPES)
    .reverse()
    .map(([ext, type]) => [type, ext]),
);

/** Controls (C0, DEL, C1), zero-width and bidirectional marks: nothing a listing should hide or reorder. */
// eslint-disable-next-line no-control-regex
const INVISIBLE = /[\u0000-\u001f\u007f-\u009f\u200b-\u200f\u2028\u2029\u202a-\u202e\u2060-\u2069\ufeff]/g;

const extensionOf = (name: string): string => {
  const dot = name.lastIndexOf('.');
  return dot > 0 ? name.slice(dot + 1).toLowerCase() : '';
};

/** A media type without its parameters, lowercased; undefined for what is not one. */
function bareType(mime: string | undefined): string | undefined {
  const t = mime?.split(';')[0]?.trim().toLowerCase();
  return t && /^[a-z0-9][a-z0-9!#$&^_.+-]*\/[a-z0-9][a-z0-9!#$&^_.+-]*$/.test(t) ? t : undefined;
}

/** The type a file counts as: its extension's where berth knows it (a declared type is the sender's word), else the declared one, else bytes. */
export function mediaTypeOf(name: string, declared?: string): string {
  return EXTENSION_TYPES[extensionOf(name)] ?? bareType(declared) ?? 'application/octet-stream';
}

/** Cut a string to at most `max` UTF-8 bytes without splitting a character. */
function cutBytes(text: string, max: number): string {
  let out = '';
  let bytes = 0;
  for (const ch of text) {
    const n = Buffer.byteLength(ch);
    if (bytes + n > max) break;
    out += ch;
    bytes += n;
  }
  return out;
}

/**
 * A name safe to create in inbox/ (or to show for an outbox file): the last segment of whatever
 * path the sender gave, without invisible characters, without leading dots (no hidden file, no
 * "." or ".."), without a trailing dot or space, at most MAX_NAME_BYTES with its extension kept.
 * Nothing left: "file" with the extension its type has.
 */
export function safeFileName(raw: string | undefined, declaredType?: string): string {
  const last = (raw ?? '').normalize('NFC').split(/[/\\]/).pop() ?? '';
  let name = last
    .replace(INVISIBLE, '')
    .replace(/\s+/g, ' ')
    .replace(/^[.\s]+/, '')
    .replace(/[.\s]+$/, '');
  if (name === '') {
    const ext = TYPE_EXTENSIONS[bareType(declaredType) ?? ''];
    return ext ? `file.${ext}` : 'file';
  }
  if (Buffer.byteLength(name) <= MAX_NAME_BYTES) return name;
  const ext = extensionOf(name);
  const keep = ext && Buffer.byteLength(ext) <= 16 ? `.${ext}` : '';
  name = cutBytes(keep ? name.slice(0, -keep.length) : name, MAX_NAME_BYTES - Buffer.byteLength(keep)).replace(/[.\s]+$/, '');
  return `${name || 'file'}${keep}`;
}

/** The names to try, in order: the name itself, then "chart-2.png", "chart-3.png", … (MAX_NAME_TRIES in all). */
export function candidateNames(name: string): string[] {
  const ext = extensionOf(name);
  const stem = ext ? name.slice(0, -(ext.length + 1)) : name;
  const out = [name];
  for (let n = 2; n <= MAX_NAME_TRIES; n++) {
    const suffix = `-${n}${ext ? `.${ext}` : ''}`;
    out.push(`${cutBytes(stem, MAX_NAME_BYTES - Buffer.byteLength(suffix))}${suffix}`);
  }
  return out;
}

/** A file's kind, as the agent and the person read it. */
export type FileKind = 'image' | 'text' | 'PDF' | 'audio' | 'video' | 'file';

export function kindOf(type: string): FileKind {
  if (type.startsWith('image/')) return 'image';
  if (type === 'application/pdf') return 'PDF';
  if (type.startsWith('audio/')) return 'audio';
  if (type.startsWith('video/')) return 'video';
  if (type.startsWith('text/') || type === 'application/json' || type === 'application/yaml' || type === 'application/xml') return 'text';
  return 'file';
}

/** A type is allowed by patterns like "image/*", "application/pdf", "*\/*". */
export function typeAllowed(type: string, patterns: readonly string[]): boolean {
  const [major] = type.split('/');
  return patterns.some((p) => p === '*/*' || p === type || (p.endsWith('/*') && p.slice(0, -2) === major));
}

/** Sizes as people read them: "0 bytes", "812 bytes", "120 KB", "3.4 MB". */
export function sizeWords(bytes: number): string {
  if (bytes < 1024) return `${bytes} ${bytes === 1 ? 'byte' : 'bytes'}`;
  if (bytes < 1024 * 1024) return `${Math.round(bytes / 1024)} KB`;
  const mb = bytes / (1024 * 1024);
  return `${mb < 10 ? mb.toFixed(1) : Math.round(mb)} MB`;
}
