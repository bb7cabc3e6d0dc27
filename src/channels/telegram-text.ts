import { graphemeCut } from './text-cut.js';

/**
 * A reply as Telegram shows it: MarkdownV2 where the agent's code stays code (``` blocks and
 * `spans`) and every other character Telegram reserves is escaped, so nothing an agent (or a
 * prompt) writes turns into markup or makes Telegram refuse the message. Long replies are cut at
 * line breaks, a code block cut in two closed and opened again.
 */
const RESERVED = /[_*[\]()~`>#+\-=|{}.!\\]/g;
const escapeText = (s: string) => s.replace(RESERVED, '\\$&');
const escapeCode = (s: string) => s.replace(/[`\\]/g, '\\$&');

/** Nothing Telegram would show: it trims a message's ends and refuses an empty one ("message text is empty"). */
const blank = (s: string) => /^[\s\p{Cc}]*$/u.test(s);
const CODE = /```([A-Za-z0-9_+-]{0,32})\n([\s\S]*?)```|`([^`\n]+)`/g;

export function toMarkdownV2(text: string): string {
  let out = '';
  let last = 0;
  for (const m of text.matchAll(CODE)) {
    out += escapeText(text.slice(last, m.index));
    const code = m[3] ?? m[2] ?? '';
    // Code of nothing but white space shows as nothing (an empty one is no entity at all), and a
    // message of only that is refused as empty: its characters are shown instead.
    if (blank(code)) out += escapeText(m[0]);
    else if (m[3] !== undefined) out += `\`${escapeCode(code)}\``;
    // TDLib takes a \r right after the opening line as part of its line break: escaped, it stays.
    else out += `\`\`\`${m[1]}\n${escapeCode(code).replace(/^\r/, '\\\r')}\`\`\``;
    last = m.index + m[0].length;
  }
  return out + escapeText(text.slice(last));
}

const FENCE = '```';
/** Telegram's limit: "1-4096 characters after entities parsing". */
export const TELEGRAM_TEXT_LIMIT = 4096;
/** Longer replies than this many messages go as their start and the whole as reply.txt. */
export const TELEGRAM_MAX_PARTS = 4;
const ATTACHED = '\n[… the whole reply is attached as reply.txt]';

/**
 * Parts of at most `limit` characters, cut at line breaks where it can (a longer line between
 * graphemes); a code block cut in two is closed and opened again. The line break at a cut is the
 * break between messages, and a part with nothing to show is not sent (a blank reply is "(empty)").
 */
export function splitForLimit(text: string, limit: number): string[] {
  if (blank(text)) return ['(empty)'];
  if (text.length <= limit) return [text];
  const room = limit - (FENCE.length + 1) * 2; // a reopened fence before, a closing one after
  const parts: string[] = [];
  let current = '';
  let inFence = false;
  let reopened = false;
  let fresh = true; // nothing of the reply in this part yet: its first line follows no line break
  const shows = () => !blank(reopened ? current.slice(FENCE.length + 1) : current);
  const flush = () => {
    if (shows()) parts.push(inFence ? `${current}\n${FENCE}` : current);
    current = inFence ? `${FENCE}\n` : '';
    reopened = inFence;
    fresh = true;
  };
  for (const line of text.split('\n')) {
    for (let piece = line, first = true; first || piece.length > 0; first = false) {
      const take = piece.slice(0, graphemeCut(piece, room));
      piece = piece.slice(take.length);
      const add = fresh ? take : `\n${take}`;
      if (current.length + add.length > room) {
        flush();
        current += take;
      } else current += add;
      fresh = false;
      if (piece.length > 0) flush();
    }
    if (line.trimStart().startsWith(FENCE)) inFence = !inFence;
  }
  if (shows()) parts.push(current);
  return parts;
}

/**
 * The messages a reply goes as: up to TELEGRAM_MAX_PARTS parts; a longer one as its start (a
 * code block in it closed) with a note, and `attach`: the whole goes after it as reply.txt.
 */
export function planTelegramReply(text: string): { messages: string[]; attach: boolean } {
  const parts = splitForLimit(text, TELEGRAM_TEXT_LIMIT);
  if (parts.length <= TELEGRAM_MAX_PARTS) return { messages: parts, attach: false };
  const head = splitForLimit(text, TELEGRAM_TEXT_LIMIT - ATTACHED.length)[0] ?? '';
  return { messages: [`${head}${ATTACHED}`], attach: true };
}
