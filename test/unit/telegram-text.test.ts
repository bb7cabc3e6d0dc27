import { describe, expect, it } from 'vitest';
import { splitForLimit, toMarkdownV2 } from '../../src/channels/telegram-text.js';
import { parseMarkdownV2 } from '../fakes/telegram.js';

/**
 * What berth sends Telegram as MarkdownV2, parsed by the fake's port of Telegram's own parser
 * (tdlib): every text an agent could write must parse, show exactly the agent's characters, and
 * carry no entity but the code the agent wrote as code.
 */
const RESERVED = '_*[]()~`>#+-=|{}.!\\';
function randomText(seed: number, length: number): string {
  let x = seed;
  const next = () => (x = (x * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
  const alphabet = Array.from(`${RESERVED}ab c\n\t1é😀<&`); // code points: an emoji is one
  return Array.from({ length }, () => alphabet[Math.floor(next() * alphabet.length)]).join('');
}

describe('toMarkdownV2', () => {
  it('any text, however full of markup characters, parses and reads back as itself', () => {
    for (let seed = 1; seed <= 400; seed++) {
      const text = randomText(seed, 1 + (seed % 97)).replace(/`/g, "'"); // code spans apart: the next test
      const parsed = parseMarkdownV2(toMarkdownV2(text));
      expect(parsed.text, JSON.stringify(text)).toBe(text);
      expect(parsed.entities, JSON.stringify(text)).toEqual([]);
    }
  });

  it("the agent's fenced blocks and spans become pre and code, and only those", () => {
    const text = 'run `npm *test*` then:\n```sh\nls [a](b) _x_ \\ `q`\n```\n**done**.';
    const parsed = parseMarkdownV2(toMarkdownV2(text));
    expect(parsed.entities.map((e) => e.type)).toEqual(['code', 'pre']);
    expect(parsed.text).toBe('run npm *test* then:\nls [a](b) _x_ \\ `q`\n\n**done**.');
  });

  it('backticks that open no span stay characters', () => {
    for (const text of ['a ` b', '``` not closed', 'x ``` y', '`\n`']) {
      const parsed = parseMarkdownV2(toMarkdownV2(text));
      expect(parsed.entities, text).toEqual([]);
    }
  });
});

describe('splitForLimit', () => {
  it('cuts at line breaks into parts within the limit, losing nothing', () => {
    const text = Array.from({ length: 3000 }, (_, i) => `line ${i}`).join('\n');
    const parts = splitForLimit(text, 4096);
    expect(parts.every((p) => p.length <= 4096)).toBe(true);
    expect(parts.join('\n')).toBe(text);
  });

  it('a line longer than the limit is cut inside; a code block cut in two is closed and opened again', () => {
    const long = 'x'.repeat(9000);
    expect(splitForLimit(long, 4096).join('')).toBe(long);
    const code = ['```', ...Array.from({ length: 900 }, (_, i) => `code ${i}`), '```'].join('\n');
    const parts = splitForLimit(code, 4096);
    expect(parts.length).toBeGreaterThan(1);
    for (const p of parts) {
      expect(p.length).toBeLessThanOrEqual(4096);
      expect(p.startsWith('```')).toBe(true);
      expect(p.trimEnd().endsWith('```')).toBe(true);
      expect(parseMarkdownV2(toMarkdownV2(p)).entities.map((e) => e.type)).toEqual(['pre']);
    }
  });
});
