import { describe, expect, it } from 'vitest';
import { slackMessage } from '../../src/channels/slack.js';

/** What a person wrote in Slack reaches the agent with every link's address, not just its label. */
const textOf = (text: string) =>
  slackMessage({ type: 'event_callback', event: { type: 'message', channel_type: 'im', channel: 'D0X1', user: 'U0X1', ts: '1.2', text } })
    ?.text;

describe('Slack links', () => {
  it('a link with a label keeps its URL: "label (url)"', () => {
    expect(textOf('echo see <https://example.org/pr/1|this PR>')).toBe('echo see this PR (https://example.org/pr/1)');
  });

  it('a link whose label is its own address (Slack links bare URLs, domains and mail addresses so) is said once', () => {
    expect(textOf('<https://example.org/a|https://example.org/a> and <http://example.org|example.org> and <mailto:a@b.org|a@b.org>')).toBe(
      'https://example.org/a and example.org and a@b.org',
    );
    expect(textOf('<https://example.org/x>')).toBe('https://example.org/x');
  });

  it('mentions and channels stay names; entities are decoded after the links are read', () => {
    expect(textOf('<@U0BOB1|bob> in <#C0CHAN1|general>: a &lt;b&gt; &amp; <https://e.org/?a=1&amp;b=2|q>')).toBe(
      '@U0BOB1 in general: a <b> & q (https://e.org/?a=1&b=2)',
    );
  });
});
