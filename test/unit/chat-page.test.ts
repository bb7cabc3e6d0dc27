import { describe, expect, it } from 'vitest';
import { parseMarkdownV2 } from '../fakes/telegram.js';
import { chatPageHtml, entitiesHtml } from '../helpers/chat-page.js';

/** The chat drawing the receipt screenshots use: entities as Telegram parsed them, and nothing else, become markup. */
describe('entitiesHtml', () => {
  it('escapes every character a message could use to make markup', () => {
    expect(entitiesHtml(`<img src=x onerror="alert(1)"> & 'q'`)).toBe('&lt;img src=x onerror=&quot;alert(1)&quot;&gt; &amp; &#39;q&#39;');
  });

  it('draws what MarkdownV2 parsed: bold, italic nested in it, code, pre with its language, a link', () => {
    const { text, entities } = parseMarkdownV2('*bold _both_* `a<b` [site](https://example.com/?a=1&b=2)\n```sh\nls -l\n```');
    expect(entitiesHtml(text, entities)).toBe(
      '<b>bold <i>both</i></b> <code>a&lt;b</code> <a href="https://example.com/?a=1&amp;b=2">site</a>\n<pre data-language="sh"><code>ls -l\n</code></pre>',
    );
  });

  it('offsets count UTF-16 code units, as the Bot API does (an emoji is two)', () => {
    const { text, entities } = parseMarkdownV2('🙂 *x*');
    expect(entities).toEqual([{ type: 'bold', offset: 3, length: 1 }]);
    expect(entitiesHtml(text, entities)).toBe('🙂 <b>x</b>');
  });

  it('a link it would not open is its text; commands and mentions are marked; an unknown entity is its text', () => {
    expect(
      entitiesHtml('see /help @bob me', [
        { type: 'text_link', offset: 0, length: 3, url: 'javascript:alert(1)' },
        { type: 'bot_command', offset: 4, length: 5 },
        { type: 'mention', offset: 10, length: 4 },
        { type: 'some_new_kind', offset: 15, length: 2 },
      ]),
    ).toBe('see <span class="bot_command">/help</span> <span class="mention">@bob</span> me');
  });

  it('entities that cross (never sent, but a fake may err) or run past the text still make well-formed HTML', () => {
    expect(
      entitiesHtml('abcdef', [
        { type: 'bold', offset: 0, length: 4 },
        { type: 'italic', offset: 2, length: 4 },
        { type: 'code', offset: 5, length: 9 },
      ]),
    ).toBe('<b>ab<i>cd</i></b><i>ef</i>');
  });
});

describe('chatPageHtml', () => {
  it("puts the bot's bubbles on the left and the person's on the right, with the time, and escapes the title", () => {
    const html = chatPageHtml({
      title: '<bot>',
      bubbles: [
        { side: 'me', text: '/boundary', entities: [{ type: 'bot_command', offset: 0, length: 9 }], date: 1_700_000_000 },
        { side: 'them', text: 'berth: your last run' },
      ],
    });
    expect(html).toContain('<title>&lt;bot&gt;</title>');
    expect(html).toContain(
      '<div class="bubble me"><span class="text"><span class="bot_command">/boundary</span></span><time>22:13</time></div>',
    );
    expect(html).toContain('<div class="bubble them"><span class="text">berth: your last run</span></div>');
  });
});
