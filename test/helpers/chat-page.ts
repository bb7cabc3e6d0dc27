/**
 * A chat as a person's phone shows it, from what a chat service's fake stored: each message a
 * bubble (theirs on the left, the person's on the right), its text escaped, and its formatting
 * drawn from the service's parsed entities (the Bot API's MessageEntity: offset and length in
 * UTF-16 code units, nested, never partly overlapping). For screenshots of what berth sent as the
 * service would show it (test/integration/receipt-telegram.test.ts); nothing here is berth's.
 */
import type { Message } from '../fakes/telegram.js';

/** The MessageEntity fields drawn (core.telegram.org/bots/api#messageentity). */
export interface ChatEntity {
  type: string;
  offset: number;
  length: number;
  url?: string;
  language?: string;
}

export interface ChatBubble {
  /** 'them': the bot (left); 'me': the person (right). */
  side: 'them' | 'me';
  text: string;
  entities?: readonly ChatEntity[];
  /** Unix seconds, shown as hh:mm UTC. */
  date?: number;
}

const escapeHtml = (s: string) =>
  s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c] as string);

/** Only links a chat would open; anything else (javascript:, data:) is shown as text, never a link. */
const safeUrl = (url: string | undefined) => (url && /^(https?:|mailto:|tg:)/i.test(url) ? url : undefined);

/** The tags one entity opens and closes; undefined: drawn as its text alone. */
function tagsOf(e: ChatEntity, text: string): [string, string] | undefined {
  const plain: Record<string, string> = { bold: 'b', italic: 'i', underline: 'u', strikethrough: 's', code: 'code' };
  if (plain[e.type]) return [`<${plain[e.type]}>`, `</${plain[e.type]}>`];
  const href =
    e.type === 'text_link' ? safeUrl(e.url) : e.type === 'url' ? safeUrl(/^[a-z]+:/i.test(text) ? text : `https://${text}`) : undefined;
  if (e.type === 'email') return [`<a href="mailto:${escapeHtml(text)}">`, '</a>'];
  if (href) return [`<a href="${escapeHtml(href)}">`, '</a>'];
  if (e.type === 'pre') return [`<pre${e.language ? ` data-language="${escapeHtml(e.language)}"` : ''}><code>`, '</code></pre>'];
  if (e.type === 'blockquote' || e.type === 'expandable_blockquote') return ['<blockquote>', '</blockquote>'];
  if (['spoiler', 'bot_command', 'mention', 'hashtag', 'cashtag', 'text_mention'].includes(e.type))
    return [`<span class="${e.type}">`, '</span>'];
  return undefined;
}

/**
 * A message's text as HTML: every character escaped, each entity's tags around its range. An
 * entity that would close across another (never sent by Telegram, but a fake may be wrong) closes
 * the inner ones and opens them again, so the HTML is always well formed.
 */
export function entitiesHtml(text: string, entities: readonly ChatEntity[] = []): string {
  const drawn = entities
    .filter((e) => e.length > 0 && e.offset >= 0 && e.offset + e.length <= text.length)
    .flatMap((e) => {
      const tags = tagsOf(e, text.slice(e.offset, e.offset + e.length));
      return tags ? [{ start: e.offset, end: e.offset + e.length, open: tags[0], close: tags[1] }] : [];
    })
    .sort((a, b) => a.start - b.start || b.end - a.end);
  const cuts = [...new Set([0, text.length, ...drawn.flatMap((d) => [d.start, d.end])])].sort((a, b) => a - b);
  const open: typeof drawn = [];
  let html = '';
  for (const [i, at] of cuts.entries()) {
    // What ends here closes, and what was opened inside it closes with it and opens again.
    const lowest = open.findIndex((d) => d.end === at);
    if (lowest >= 0) {
      const closed = open.splice(lowest);
      html += closed
        .toReversed()
        .map((d) => d.close)
        .join('');
      for (const d of closed.filter((d) => d.end !== at)) {
        html += d.open;
        open.push(d);
      }
    }
    for (const d of drawn.filter((d) => d.start === at)) {
      html += d.open;
      open.push(d);
    }
    const next = cuts[i + 1];
    if (next !== undefined) html += escapeHtml(text.slice(at, next));
  }
  return html;
}

const hhmm = (date: number) => new Date(date * 1000).toISOString().slice(11, 16);

const STYLE = `
* { box-sizing: border-box; }
body { margin: 0; font: 15px/1.4 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; color: #000;
  background: #c9d9b8 linear-gradient(160deg, #d5e3c1, #b9cfa8); min-height: 100vh; }
header { position: sticky; top: 0; display: flex; align-items: center; gap: 10px; padding: 8px 14px; background: #fff;
  border-bottom: 1px solid #d9d9d9; }
header .avatar { width: 38px; height: 38px; border-radius: 50%; background: #5caffa; color: #fff; display: grid;
  place-items: center; font-weight: 600; }
header .name { font-weight: 600; }
header .about { color: #8a8a8a; font-size: 13px; }
main { display: flex; flex-direction: column; gap: 6px; padding: 12px 10px 20px; max-width: 760px; margin: 0 auto; }
.bubble { position: relative; max-width: min(85%, 540px); padding: 6px 10px 18px; border-radius: 14px;
  white-space: pre-wrap; overflow-wrap: anywhere; box-shadow: 0 1px 1px rgba(0, 0, 0, 0.12); }
.them { align-self: flex-start; background: #fff; border-bottom-left-radius: 4px; }
.me { align-self: flex-end; background: #e1fec6; border-bottom-right-radius: 4px; }
.bubble time { position: absolute; right: 9px; bottom: 3px; font-size: 11px; color: #8a9a84; }
.them time { color: #a0a0a0; }
code, pre { font: 13.5px/1.4 ui-monospace, "DejaVu Sans Mono", monospace; color: #c2185b; }
pre { margin: 4px 0; padding: 6px 8px; background: #f2f2f2; border-radius: 6px; white-space: pre-wrap; color: #333; }
pre code { color: inherit; }
a, .bot_command, .mention, .hashtag, .cashtag, .text_mention { color: #168acd; text-decoration: none; }
blockquote { margin: 2px 0; padding: 2px 8px; border-left: 3px solid #168acd; background: rgba(22, 138, 205, 0.08); }
.spoiler { background: #a0a0a0; color: transparent; border-radius: 3px; }
`;

/** A whole page: the chat's header (its name, a line under it) and its bubbles, in order. */
export function chatPageHtml(chat: { title: string; about?: string; bubbles: readonly ChatBubble[] }): string {
  const bubbles = chat.bubbles.map(
    (b) =>
      `<div class="bubble ${b.side}"><span class="text">${entitiesHtml(b.text, b.entities)}</span>${
        b.date === undefined ? '' : `<time>${hhmm(b.date)}</time>`
      }</div>`,
  );
  return [
    '<!doctype html><html><head><meta charset="utf-8">',
    '<meta name="viewport" content="width=device-width, initial-scale=1">',
    `<title>${escapeHtml(chat.title)}</title><style>${STYLE}</style></head><body>`,
    `<header><div class="avatar">${escapeHtml([...chat.title][0] ?? '?')}</div><div><div class="name">${escapeHtml(chat.title)}</div>`,
    chat.about ? `<div class="about">${escapeHtml(chat.about)}</div>` : '',
    `</div></header><main>${bubbles.join('')}</main></body></html>`,
  ].join('');
}

/** A Telegram chat's messages as the fake keeps them (fake.messages(chat)): the bot's on the left. */
export const telegramBubbles = (messages: readonly Message[], botId: number): ChatBubble[] =>
  messages.map((m) => ({
    side: m.from?.id === botId ? 'them' : 'me',
    text: m.text ?? m.caption ?? '',
    entities: m.entities ?? m.caption_entities ?? [],
    date: m.date,
  }));
