import { packageAsset, type PackageAsset } from '../package-assets.js';

/**
 * The chat page's two libraries, served by berth itself: marked turns an agent's Markdown into
 * HTML, DOMPurify sanitizes what it made before the page shows it.
 */
let assets: { marked: PackageAsset; purify: PackageAsset } | undefined;

export function chatAssets(): { marked: PackageAsset; purify: PackageAsset } {
  return (assets ??= { marked: packageAsset('/chat/assets', 'marked', 'marked', './marked.umd.js', 'js'), purify: packageAsset('/chat/assets', 'purify', 'dompurify', './purify.min.js', 'js') });
}
