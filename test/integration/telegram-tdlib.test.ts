import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import { planTelegramReply, TELEGRAM_TEXT_LIMIT, toMarkdownV2 } from '../../src/channels/telegram-text.js';
import { parseMarkdownV2 } from '../fakes/telegram.js';
import { loadTdlib, type TdEntity, type Tdlib } from '../helpers/tdlib.js';

/**
 * What berth sends Telegram, parsed by Telegram's own parser: TDLib 1.8.65 (prebuilt-tdlib from
 * npm, fetched by scripts/ensure-tdlib.sh), whose parseTextEntities is what the official Bot API
 * server runs on `parse_mode: "MarkdownV2"`. For every reply, the messages berth's plan and
 * toMarkdownV2 make must each be taken by TDLib, hold at most 4,096 characters after parsing and
 * show something (the server refuses an empty message), and give the message again when TDLib's
 * entities are put back as the agent's markers (`code`, ```lang blocks: any other entity is markup
 * the agent did not write). Read together they must be the agent's text, with only the documented
 * differences: a code block cut between parts is closed and opened again ("```" without its
 * language), and what Telegram would not show at a cut (the line break there, white space) may go.
 */
const ATTACHED = '\n[… the whole reply is attached as reply.txt]';
let td: Tdlib;
beforeAll(() => {
  td = loadTdlib();
});

const RESERVED = Array.from('_*[]()~`>#+-=|{}.!\\');
const EMOJI = ['😀', '👍🏽', '👨‍👩‍👧‍👦', '🏳️‍🌈', '🇩🇪', '🧑🏿‍💻', '❤️', 'é', '𝕏', '𠀀', '\u200d', '👩‍❤️‍💋‍👨'];
const SPECIAL = ['\r', '\t', '\u0000', '\u0001', '\u202e', '\u2028', '\ufeff', '<&>', '"', "'", ' ', '  '];
const MARKDOWN = [
  '**bold**',
  '_it_',
  '__u__',
  '[a](http://evil.example)',
  '||spoiler||',
  '~s~',
  '> quote',
  '# h',
  '- item',
  '1. x',
  '![i](u)',
  '\\_',
  '\\',
];
const LANGS = ['', 'js', 'python', 'c++', 'sh', 'x_y-1', 'not a lang'];

const word = fc.string({ unit: 'grapheme-ascii', maxLength: 12 });
const codeBody = fc
  .array(fc.oneof(word, fc.constantFrom(...RESERVED, ...EMOJI, '\n', '`', '``')), { maxLength: 12 })
  .map((a) => a.join(''));
const fence = fc
  .tuple(fc.constantFrom(...LANGS), codeBody, fc.constantFrom('\n```', '```', '', '\n````', '\n```\n'))
  .map(([lang, body, end]) => `\`\`\`${lang}\n${body}${end}`);
/** A line longer than a message, with a cluster placed near the 4,088 and 4,096 cuts. */
const longLine = fc
  .tuple(
    fc.constantFrom('a', '.', '\\', ' ', '`', '😀', '👨‍👩‍👧‍👦', 'é'),
    fc.integer({ min: 4_070, max: 20_000 }),
    fc.constantFrom(...EMOJI),
    fc.boolean(),
  )
  .map(([unit, length, at, inCode]) => {
    // Whole units only: the agent's text is decoded UTF-8, never half a surrogate pair.
    const units = Math.ceil(length / unit.length);
    const before = Math.min(units, Math.floor((4_080 + (length % 20)) / unit.length));
    const text = `${unit.repeat(before)}${at}${unit.repeat(units - before)}`;
    return inCode ? `\`\`\`\n${text}\n\`\`\`` : text;
  });
const fragment = fc.oneof(
  { arbitrary: word, weight: 6 },
  { arbitrary: fc.constantFrom(...RESERVED), weight: 4 },
  { arbitrary: fc.constantFrom(...EMOJI), weight: 3 },
  { arbitrary: fc.constantFrom(...SPECIAL), weight: 2 },
  { arbitrary: fc.constantFrom(...MARKDOWN), weight: 2 },
  { arbitrary: fc.constantFrom('\n', '\n\n', '\r\n', '\n```\n'), weight: 3 },
  { arbitrary: word.map((w) => `\`${w}\``), weight: 2 },
  { arbitrary: fence, weight: 2 },
);
/** Most replies short, one in eight carrying a line longer than a message. */
const reply = fc.oneof(
  { arbitrary: fc.array(fragment, { minLength: 1, maxLength: 40 }).map((a) => a.join('')), weight: 7 },
  {
    arbitrary: fc
      .tuple(fc.array(fragment, { maxLength: 10 }), longLine, fc.array(fragment, { maxLength: 10 }))
      .map(([a, l, b]) => `${a.join('')}${l}${b.join('')}`),
    weight: 1,
  },
);

/** The agent's markers put back around TDLib's code entities; any other entity is markup the agent did not write. */
function asWritten(text: string, entities: TdEntity[]): string {
  let out = '';
  let at = 0;
  for (const e of [...entities].sort((a, b) => a.offset - b.offset)) {
    const inner = text.slice(e.offset, e.offset + e.length);
    out += text.slice(at, e.offset);
    if (e.type._ === 'textEntityTypeCode') out += `\`${inner}\``;
    else if (e.type._ === 'textEntityTypePre') out += `\`\`\`\n${inner}\`\`\``;
    else if (e.type._ === 'textEntityTypePreCode') out += `\`\`\`${e.type.language}\n${inner}\`\`\``;
    else throw new Error(`TDLib made a ${e.type._} the agent did not write, at ${e.offset}`);
    at = e.offset + e.length;
  }
  return out + text.slice(at);
}

const BLANK = /[\s\p{Cc}]/u;
/**
 * True when the parts, less the fences berth closed and opened again at a cut, are the reply (or,
 * `whole` false, its start): at a cut only what Telegram would not show may be missing (the line
 * break there, a part of nothing but white space), as Telegram trims every message's ends.
 */
function readsAs(original: string, parts: string[], whole = true): boolean {
  /** The first character from `at` that Telegram shows. */
  const shownFrom = (s: string, at: number) => {
    while (at < s.length && BLANK.test(s[at]!)) at++;
    return at;
  };
  const seen = new Set<string>();
  const from = (i: number, pos: number, reopened: boolean): boolean => {
    const key = `${i},${pos},${reopened}`;
    if (seen.has(key)) return false;
    seen.add(key);
    const shown = shownFrom(original, pos);
    if (i === parts.length) return !whole || shown === original.length;
    let part = parts[i]!;
    if (reopened) {
      if (!part.startsWith('```\n')) return false;
      part = part.slice(4);
    }
    // A part sent shows something: its first shown character is the reply's next one.
    const start = shown - shownFrom(part, 0);
    if (start < pos) return false;
    const tries: Array<[string, boolean]> = [[part, false]];
    if (part.endsWith('\n```')) tries.push([part.slice(0, -4), true]);
    return tries.some(([body, closed]) => original.startsWith(body, start) && from(i + 1, start + body.length, closed));
  };
  return from(0, 0, false);
}

/** A reply through berth's plan (split, start and reply.txt) and toMarkdownV2, then TDLib's parser; the first thing wrong, or undefined. */
function wrongWith(text: string): string | undefined {
  const { messages, attach } = planTelegramReply(text);
  if (!/[^\s\p{Cc}]/u.test(text)) return messages.length === 1 && messages[0] === '(empty)' ? undefined : 'a blank reply is not "(empty)"';
  if (attach && messages.length !== 1) return `${messages.length} messages besides reply.txt`;
  const parts = attach ? [messages[0]!.slice(0, -ATTACHED.length)] : messages;
  if (attach && !messages[0]!.endsWith(ATTACHED)) return 'the start of a long reply does not say reply.txt follows';
  for (const [n, message] of messages.entries()) {
    const parsed = td.parseMarkdownV2(toMarkdownV2(message));
    if (!parsed.ok) return `message ${n}: TDLib refused it: ${parsed.code} ${parsed.message}`;
    if (parsed.text.length > TELEGRAM_TEXT_LIMIT) return `message ${n}: ${parsed.text.length} characters after parsing`;
    if (!/[^\s\p{Cc}]/u.test(parsed.text)) return `message ${n} shows nothing (Telegram refuses an empty message)`;
    const shown = asWritten(parsed.text, parsed.entities);
    if (shown !== message) return `message ${n} shows as ${JSON.stringify(shown.slice(0, 300))}`;
  }
  return readsAs(text, parts, !attach) ? undefined : `the parts are not the reply: ${JSON.stringify(parts.map((p) => p.slice(0, 200)))}`;
}

describe("berth's MarkdownV2 and splitting, parsed by TDLib's own parser", () => {
  it('TDLib is the real one, and the check can fail: it refuses a lone surrogate, an unescaped reserved character and extra markup', () => {
    expect(td.version).toBe('1.8.65');
    expect(td.parseMarkdownV2('a\ud83d b')).toMatchObject({ ok: false, message: 'Text must be encoded in UTF-8' });
    expect(td.parseMarkdownV2('a.b')).toMatchObject({ ok: false, message: expect.stringMatching(/^Can't parse entities/) });
    const bold = td.parseMarkdownV2('*b*');
    expect(bold.ok && (() => asWritten(bold.text, bold.entities))).toThrow(/textEntityTypeBold/);
    expect(readsAs('a\nb', ['a', 'c'])).toBe(false);
    expect(readsAs('a\nb', ['a', 'b'])).toBe(true);
    expect(readsAs('```\na\nb\n```', ['```\na\n```', '```\nb\n```'])).toBe(true);
  });

  it('the edge cases of the report (channels-real-4 §3) and of the cuts', () => {
    const cases = [
      RESERVED.join(''),
      '[x](http://evil.example) and ![i](javascript:alert(1))',
      'inline `code with \\ and \\` inside` end',
      '```\nno language\n```',
      '```python\nprint("hi")  # *not bold*\n```',
      '```js\nunterminated fence',
      '````\nfour backticks\n````',
      '```\ncode with ``` inside and `ticks`\n```',
      'rtl \u202eoverride\u202c and zero\u200bwidth',
      '😀 👍🏽 👨‍👩‍👧‍👦 🏳️‍🌈 🇩🇪 𝕏 𠀀',
      '||spoiler|| ~strike~ __under__ *bold* _it_',
      '> quoted\n>> deeper\n**>expandable',
      '\\ trailing backslash \\',
      '`',
      '```',
      'a ` b',
      'x ``` y',
      '`\n`',
      '```\n```',
      '\r\n\t\u0000 control',
      `${'a'.repeat(4_087)}😀${'b'.repeat(100)}`, // T1: a lone surrogate at the 4,088 cut lost the whole reply
      `${'a'.repeat(4_086)}👨‍👩‍👧‍👦${'b'.repeat(100)}`,
      `${'a'.repeat(4_090)}🇩🇪🇩🇪${'b'.repeat(10)}`,
      '.'.repeat(5_000), // twice as long escaped: 8,176 sent, 4,088 shown
      '\\'.repeat(9_000),
      '`'.repeat(4_100),
      '😀'.repeat(3_000),
      ['```', ...Array.from({ length: 300 }, (_, i) => `code line ${i} with * and _`), '```'].join('\n'),
      ['```sh', ...Array.from({ length: 250 }, (_, i) => `echo ${i}`), '```', 'after the block.'].join('\n'),
      Array.from({ length: 30 }, (_, i) => `line ${i}: ${'x'.repeat(300)}`).join('\n'),
      `\`\`\`\n${'y'.repeat(10_000)}\n\`\`\``,
      // What TDLib showed wrong before: an empty or blank code block is no entity (a reply of only
      // that was an empty message), a \r opening a block was taken as the line break, a blank reply.
      'before\n```js\n```\nafter',
      '```\n   \n```',
      '` `',
      '```\n\rcarriage return first\n```',
      '\r\n ',
      '',
      `${' '.repeat(5_000)}\nthe only words`,
      // Longer than four messages: the start (its code block closed) and reply.txt.
      ['```python', ...Array.from({ length: 900 }, (_, i) => `print(${i})  # *${i}*`), '```'].join('\n'),
      Array.from({ length: 600 }, (_, i) => `${i}. step \`${i}\` done!`).join('\n'),
    ];
    for (const text of cases) expect(wrongWith(text), JSON.stringify(text.slice(0, 80))).toBeUndefined();
  });

  it('20,000 random replies: TDLib refuses none, no part is over 4,096, and the parts read as the reply', () => {
    const started = performance.now();
    let long = 0;
    let attached = 0;
    fc.assert(
      fc.property(reply, (text) => {
        if (text.length > TELEGRAM_TEXT_LIMIT) long++;
        if (planTelegramReply(text).attach) attached++;
        const wrong = wrongWith(text);
        if (wrong) throw new Error(wrong);
      }),
      { numRuns: 20_000, seed: 40 },
    );
    console.log(
      `tdlib fuzz: 20000 replies (${long} longer than a message, ${attached} with reply.txt) in ${Math.round(performance.now() - started)} ms`,
    );
    expect(long).toBeGreaterThan(1_000);
    expect(attached).toBeGreaterThan(100);
  });

  it("the fake Bot API's MarkdownV2 parser (the unit tier's and the bridge tests') is TDLib's: same text, entities and refusals", () => {
    const TYPES: Record<string, string> = {
      textEntityTypeBold: 'bold',
      textEntityTypeItalic: 'italic',
      textEntityTypeUnderline: 'underline',
      textEntityTypeStrikethrough: 'strikethrough',
      textEntityTypeSpoiler: 'spoiler',
      textEntityTypeCode: 'code',
      textEntityTypePre: 'pre',
      textEntityTypePreCode: 'pre',
      textEntityTypeBlockQuote: 'blockquote',
      textEntityTypeExpandableBlockQuote: 'expandable_blockquote',
      textEntityTypeTextUrl: 'text_link',
      textEntityTypeCustomEmoji: 'custom_emoji',
      textEntityTypeMentionName: 'text_mention',
    };
    // Entities on the same span may come in either order: compared sorted.
    const canonical = (text: string, entities: Array<[number, number, string, unknown]>) =>
      JSON.stringify({ text, entities: entities.map((e) => JSON.stringify(e)).sort() });
    const tdlib = (t: string) => {
      const r = td.parseMarkdownV2(t);
      if (!r.ok) return r.message;
      const arg = (e: TdEntity) => {
        const x = e.type as Record<string, unknown>;
        return x.language ?? x.url ?? x.custom_emoji_id ?? x.user_id ?? null;
      };
      return canonical(
        r.text,
        r.entities.map((e) => [e.offset, e.length, TYPES[e.type._] ?? e.type._, arg(e)]),
      );
    };
    const fake = (t: string) => {
      try {
        const r = parseMarkdownV2(t);
        return canonical(
          r.text,
          r.entities.map((e) => [e.offset, e.length, e.type, e.language ?? e.url ?? e.custom_emoji_id ?? e.user?.id ?? null]),
        );
      } catch (err) {
        return `Can't parse entities: ${(err as Error).message}`;
      }
    };
    const token = fc.constantFrom(
      ...Array.from('_*[]()~`>#+-=|{}.!\\ab \n\r\t😀é'),
      '```',
      '```js\n',
      '||',
      '__',
      '\\\\',
      '\\`',
      '**>',
      '\u0000',
      '[a](http://x.example)',
      '[u](tg://user?id=123)',
      '![👍](tg://emoji?id=5368324170671202286)',
    );
    let refused = 0;
    fc.assert(
      fc.property(
        fc.array(token, { maxLength: 30 }).map((a) => a.join('')),
        (text) => {
          const want = tdlib(text);
          if (!want.startsWith('{')) refused++;
          expect(fake(text), JSON.stringify(text)).toBe(want);
        },
      ),
      { numRuns: 10_000, seed: 7 },
    );
    expect(refused).toBeGreaterThan(1_000);
  });
});
