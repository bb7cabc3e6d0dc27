import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { boundaryWords } from '../../src/bridges/boundary.js';
import type { RunningBridges } from '../../src/bridges/start.js';
import { startFakeTelegram, type FakeTelegram } from '../fakes/telegram.js';
import { launchChromium, screenshot, testHome, type TestHome } from '../helpers.js';
import { startTestBridges, stopBridgeRig } from '../helpers/bridge-rig.js';
import { chatPageHtml, telegramBubbles } from '../helpers/chat-page.js';

/**
 * A run's receipt as a person reads it in Telegram (issue 46): a message runs in a real container,
 * then /boundary; berth's answer is taken as the fake Bot API parsed it (its text and entities, from
 * MarkdownV2) and drawn as a Telegram chat in real headless Chromium (test/helpers/chat-page.ts).
 * Screenshots: test-results/screens/receipt-telegram-*.png.
 */
const ALICE = 7_000_301;
let fake: FakeTelegram;
let h: TestHome;
let bridges: RunningBridges;
let browser: Browser;

beforeAll(async () => {
  fake = await startFakeTelegram({ longPollCapMs: 500 });
  h = testHome({
    warm: true,
    pool: 'off',
    config: [
      'bridges:',
      '  telegram:',
      `    token: '${fake.token}'`,
      `    api_url: ${fake.url}`,
      `    allow: ['${ALICE}']`,
      'routes:',
      '  telegram: { project: tg }',
      '',
    ].join('\n'),
  });
  h.create({ name: 'tg', workspace_isolation: true, runtime: 'runc', egress: { allow: ['github.com', '*.npmjs.org'] } });
  bridges = startTestBridges(h);
  browser = await launchChromium();
  await fake.waitFor(() => fake.longPolling(), 10_000);
}, 60_000);
afterAll(async () => {
  await browser?.close();
  await stopBridgeRig({ bridges, h, fake });
});

const say = (text: string) => fake.deliverText({ chat: { id: ALICE, type: 'private' }, from: { id: ALICE, first_name: 'Alice' }, text });
/** The bot's messages in Alice's chat, berth's "queued" notices left out. */
const answers = () => fake.messages(ALICE).filter((m) => m.from?.id === fake.bot.id && !m.text?.startsWith('berth: queued'));

// The page's globals as far as this file uses them (the project's TypeScript has no DOM types).
declare const document: { documentElement: { scrollWidth: number; clientWidth: number } };
const sideways = (page: Page) => page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);

describe('/boundary in Telegram', () => {
  it("answers with the last run's receipt as plain words Telegram shows as sent, drawn as the chat at 390 and 1280 px", async () => {
    // The agent's answer has code in it (a `span`): MarkdownV2 keeps it code, so the drawing shows an entity.
    say("echo 'a note' > notes.txt && echo 'saved in `notes.txt`'");
    await fake.waitFor(() => answers().length >= 1, 60_000);
    say('/boundary');
    const [first, receipt] = await fake.waitFor(() => answers().length >= 2 && answers(), 30_000);

    // As Telegram took it: MarkdownV2, every word plain (no * or _ turned into markup), and exactly berth's words.
    const record = h.berth.admin.listRuns('tg', { user: `telegram:${ALICE}`, limit: 1 }).runs[0]!;
    expect(record.receipt?.violations).toEqual([]);
    const sent = fake.sent.filter((s) => s.chatId === ALICE && s.ok).map((s) => s.parseMode);
    expect(sent.every((mode) => mode === 'MarkdownV2')).toBe(true);
    expect(receipt!.text).toBe(boundaryWords(record));
    expect(receipt!.entities).toBeUndefined();
    expect(receipt!.text!.split('\n').slice(1)).toEqual([
      "- ran: in a container on this server's kernel (runc), in a new container",
      "- saw: only your folder, and the project's memory (read-only)",
      '- could reach: github.com and *.npmjs.org, and no other network',
      '✓ Checked as it started: what berth could read matched its plan.',
    ]);
    expect(first!.text).toBe('saved in notes.txt');
    expect(first!.entities).toEqual([{ type: 'code', offset: 9, length: 9 }]);

    const page = await (await browser.newContext({ viewport: { width: 390, height: 844 } })).newPage();
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(String(e)));
    await page.setContent(chatPageHtml({ title: 'berth', about: 'bot', bubbles: telegramBubbles(fake.messages(ALICE), fake.bot.id) }));
    // Drawn from the entities: the person's /boundary a command, the agent's code as code, the receipt as its words.
    const drawn = await page.$$eval('.bubble', (els) =>
      els.map((e) => ({
        side: e.className.replace('bubble ', ''),
        text: e.querySelector('.text')!.textContent,
        code: [...e.querySelectorAll('code, .bot_command')].map((c) => [c.tagName.toLowerCase() + '.' + c.className, c.textContent]),
      })),
    );
    expect(drawn).toEqual([
      { side: 'me', text: "echo 'a note' > notes.txt && echo 'saved in `notes.txt`'", code: [] },
      { side: 'them', text: 'saved in notes.txt', code: [['code.', 'notes.txt']] },
      { side: 'me', text: '/boundary', code: [['span.bot_command', '/boundary']] },
      { side: 'them', text: receipt!.text, code: [] },
    ]);
    expect(await sideways(page)).toBe(0);
    await screenshot(page, 'receipt-telegram-390');
    await page.setViewportSize({ width: 1280, height: 800 });
    await screenshot(page, 'receipt-telegram-1280');
    expect(errors).toEqual([]);
  });
});
