// The two libraries berth serves beside the page (api/chat/assets.ts), as globals of their UMD builds.
import type { marked as Marked } from 'marked';
import type { DOMPurify } from 'dompurify';

declare global {
  interface Window {
    marked?: typeof Marked;
    DOMPurify?: DOMPurify;
  }
}
