import { describe, expect, it } from 'vitest';
import { planTelegramReply, splitForLimit, toMarkdownV2 } from '../../src/channels/telegram-text.js';
import { parseMarkdownV2 } from '../fakes/telegram.js';

/**
 * What berth sends Telegram as MarkdownV2, parsed by the fake's port of Telegram's own parser
 * (tdlib; test/integration/telegram-tdlib.test.ts shows it agrees with TDLib itself): every text
 * an agent could write must parse, show exactly the agent's characters, and carry no entity but
 * the code the agent wrote as code.
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

  it('code of nothing but white space shows as its characters: TDLib keeps no such entity, and a reply of only that was an empty message', () => {
    for (const text of ['```\n```', '```js\n```', '```\n  \n```', '` `', 'a\n```sh\n\n```\nb']) {
      const parsed = parseMarkdownV2(toMarkdownV2(text));
      expect(parsed.text, JSON.stringify(text)).toBe(text);
      expect(parsed.entities, JSON.stringify(text)).toEqual([]);
    }
  });

  it('a carriage return opening a code block stays (TDLib takes it as part of the line break after the fence)', () => {
    const parsed = parseMarkdownV2(toMarkdownV2('```\n\rx\n```'));
    expect(parsed.text).toBe('\rx\n');
    expect(parsed.entities.map((e) => e.type)).toEqual(['pre']);
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

  it('a blank reply is "(empty)", and a part with nothing to show is not sent (Telegram refuses an empty message)', () => {
    expect(splitForLimit('\r\n ', 4096)).toEqual(['(empty)']);
    expect(splitForLimit('', 4096)).toEqual(['(empty)']);
    const parts = splitForLimit(`${' '.repeat(5000)}\nthe only words`, 4096);
    expect(parts.length).toBe(1);
    expect(parts[0]!.trim()).toBe('the only words');
  });

  it("an empty line after a fence that opens a part keeps its place (it was taken for a reopened fence's own line break)", () => {
    const before = 'x'.repeat(4085);
    expect(splitForLimit(`${before}\n\`\`\`\n\ncode\n\`\`\``, 4096)).toEqual([before, '```\n\ncode\n```']);
  });
});

describe('planTelegramReply', () => {
  it('up to four parts as messages; longer, its start with its code block closed, a note, and reply.txt', () => {
    expect(planTelegramReply('short')).toEqual({ messages: ['short'], attach: false });
    const text = ['```python', ...Array.from({ length: 2000 }, (_, i) => `print(${i})`), '```'].join('\n');
    const { messages, attach } = planTelegramReply(text);
    expect(attach).toBe(true);
    expect(messages.length).toBe(1);
    expect(messages[0]!.length).toBeLessThanOrEqual(4096);
    const parsed = parseMarkdownV2(toMarkdownV2(messages[0]!));
    expect(parsed.entities.map((e) => e.type)).toEqual(['pre']);
    expect(parsed.text.endsWith('[… the whole reply is attached as reply.txt]')).toBe(true);
  });
});
