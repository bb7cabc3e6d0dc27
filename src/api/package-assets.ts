import { createHash } from 'node:crypto';
import fs from 'node:fs';
import { fileURLToPath } from 'node:url';

/**
 * A file of an npm package that a page of berth's loads (marked, DOMPurify, uPlot), served by
 * berth itself (no CDN; the page works offline): read once, at a path that names its content
 * (`<prefix>/<name>-<12 hex>.<ext>`), so a browser may keep it for good.
 */
export interface PackageAsset {
  path: string;
  body: string;
  contentType: string;
}

const TYPES = { js: 'text/javascript; charset=utf-8', css: 'text/css; charset=utf-8' } as const;

export function packageAsset(prefix: string, name: string, pkg: string, file: string, ext: keyof typeof TYPES): PackageAsset {
  const body = fs.readFileSync(fileURLToPath(new URL(file, import.meta.resolve(pkg))), 'utf8');
  return {
    path: `${prefix}/${name}-${createHash('sha256').update(body).digest('hex').slice(0, 12)}.${ext}`,
    body,
    contentType: TYPES[ext],
  };
}

/** Its headers: cacheable for good (the path changes with the content). */
export function assetHeaders(asset: PackageAsset): Record<string, string> {
  return { 'content-type': asset.contentType, 'cache-control': 'public, max-age=31536000, immutable', 'x-content-type-options': 'nosniff' };
}
