import { createHash } from 'node:crypto';
import fs from 'node:fs';
import { fileURLToPath } from 'node:url';

/**
 * The chat page's two libraries, served by berth itself (no CDN; the page works offline): marked
 * turns an agent's Markdown into HTML, DOMPurify sanitizes what it made before the page shows it.
 * Each is read once from its npm package and served at a path that names its content, so a
 * browser may keep it for good.
 */
export interface ChatAsset {
  path: string;
  body: string;
}

function asset(name: string, pkg: string, file: string): ChatAsset {
  const body = fs.readFileSync(fileURLToPath(new URL(file, import.meta.resolve(pkg))), 'utf8');
  return { path: `/chat/assets/${name}-${createHash('sha256').update(body).digest('hex').slice(0, 12)}.js`, body };
}

let assets: { marked: ChatAsset; purify: ChatAsset } | undefined;

export function chatAssets(): { marked: ChatAsset; purify: ChatAsset } {
  return (assets ??= { marked: asset('marked', 'marked', './marked.umd.js'), purify: asset('purify', 'dompurify', './purify.min.js') });
}

export const CHAT_ASSET_HEADERS: Record<string, string> = {
  'content-type': 'text/javascript; charset=utf-8',
  'cache-control': 'public, max-age=31536000, immutable',
  'x-content-type-options': 'nosniff',
};
