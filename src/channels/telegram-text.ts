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

const CODE = /```([A-Za-z0-9_+-]{0,32})\n([\s\S]*?)```|`([^`\n]+)`/g;

export function toMarkdownV2(text: string): string {
  let out = '';
  let last = 0;
  for (const m of text.matchAll(CODE)) {
    out += escapeText(text.slice(last, m.index));
    out += m[3] !== undefined ? `\`${escapeCode(m[3])}\`` : `\`\`\`${m[1]}\n${escapeCode(m[2] ?? '')}\`\`\``;
    last = m.index + m[0].length;
  }
  return out + escapeText(text.slice(last));
}

const FENCE = '```';

/** Parts of at most `limit` characters, cut at line breaks where it can (a longer line between graphemes); a code block cut in two is closed and opened again. */
export function splitForLimit(text: string, limit: number): string[] {
  if (text.length <= limit) return [text];
  const room = limit - (FENCE.length + 1) * 2; // a reopened fence before, a closing one after
  const parts: string[] = [];
  let current = '';
  let inFence = false;
  const flush = () => {
    parts.push(inFence ? `${current}\n${FENCE}` : current);
    current = inFence ? `${FENCE}\n` : '';
  };
  for (const line of text.split('\n')) {
    for (let piece = line, first = true; first || piece.length > 0; first = false) {
      const take = piece.slice(0, graphemeCut(piece, room));
      piece = piece.slice(take.length);
      const add = current === '' || current === `${FENCE}\n` ? take : `\n${take}`;
      if (current.length + add.length > room) {
        flush();
        current += take;
      } else current += add;
      if (piece.length > 0) flush();
    }
    if (line.trimStart().startsWith(FENCE)) inFence = !inFence;
  }
  if (current.trim() !== '' && current !== `${FENCE}\n`) parts.push(current);
  return parts;
}
