import { packageAsset, type PackageAsset } from '../package-assets.js';
import { pageBundle } from '../page-bundle.js';

/**
 * What the chat page loads, served by berth itself: its own script and style (client/), marked
 * (which turns an agent's Markdown into HTML) and DOMPurify (which sanitizes what it made before
 * the page shows it). Read or bundled once, on first use.
 */
export interface ChatAssets {
  marked: PackageAsset;
  purify: PackageAsset;
  script: PackageAsset;
  style: PackageAsset;
}
let assets: ChatAssets | undefined;

export function chatAssets(): ChatAssets {
  return (assets ??= {
    marked: packageAsset('/chat/assets', 'marked', 'marked', './marked.umd.js', 'js'),
    purify: packageAsset('/chat/assets', 'purify', 'dompurify', './purify.min.js', 'js'),
    ...pageBundle('/chat/assets', 'chat'),
  });
}
