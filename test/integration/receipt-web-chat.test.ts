import fs from 'node:fs';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { boundaryWords } from '../../src/bridges/boundary.js';
import { screenshot } from '../helpers.js';
import { runCli } from '../helpers/cli-main.js';
import { repliesShown, sendInChat as send, startBrowserRig, type BrowserRig } from '../helpers/browser-rig.js';

/**
 * A run's receipt as a person reads it in the web chat (issue 46), in real headless Chromium
 * against a real berth: a message runs in a real gVisor container of a project with an allowlist
 * and a granted secret, then /boundary answers in the page with where it ran, what it saw, what it
 * could reach and that it matched the plan — as berth's own words, a fact a line, even where the
 * project's answers are Markdown. Screenshots: test-results/screens/receipt-web-chat-*.png.
 */
const TOKEN = 'receipt-web-chat-admin-token-0123';
const PROJECT = 'notes';
let rig: BrowserRig;

beforeAll(async () => {
  rig = await startBrowserRig({
    token: TOKEN,
    home: { warm: true, pool: 'off', config: 'runtimes: [runc, runsc]\n' },
    async prepare(h) {
      h.create({
        name: PROJECT,
        workspace_isolation: true,
        runtime: 'runsc',
        egress: { allow: ['github.com', 'pypi.org', '*.pythonhosted.org'] },
        // Markdown, as a coding agent's project has it: berth's own words must still read as sent (no *emphasis*).
        chat: { format: 'markdown' },
      });
      // The operator's commands, as docs/secrets.md gives them: a token berth adds for api.github.com.
      const file = join(h.home, 'gh-token');
      fs.writeFileSync(file, 'ghp_receipt-web-chat-not-a-real-token\n', { mode: 0o600 });
      for (const args of [
        ['secret', 'set', 'GITHUB_TOKEN', '--from-file', file],
        ['secret', 'grant', 'GITHUB_TOKEN', '--project', PROJECT, '--host', 'api.github.com'],
      ]) {
        const r = await runCli(['--home', h.home, ...args]);
        expect(r.code, r.stderr).toBe(0);
      }
    },
  });
}, 60_000);
afterAll(() => rig?.close());

// The page's globals as far as this file uses them (the project's TypeScript has no DOM types).
interface El {
  textContent: string | null;
  className: string;
  children: ArrayLike<El>;
  getBoundingClientRect(): { left: number };
}
declare const document: {
  documentElement: { scrollWidth: number; clientWidth: number };
  createRange(): { selectNodeContents(el: El): void; getClientRects(): ArrayLike<{ left: number; top: number }> };
};
declare function getComputedStyle(el: El): { fontFamily: string };
const sideways = (page: Page) => page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);

/** The last reply as the page shows it: its text, its element, its font, and each line's class and how many rows it took. */
const lastReply = (page: Page) =>
  page.$$eval('#log .msg.reply', (els) => {
    const reply = els.at(-1)!.firstElementChild as unknown as El;
    return {
      text: reply.textContent,
      className: reply.className,
      font: getComputedStyle(reply).fontFamily,
      lines: [...(reply.children as unknown as El[])].map((l) => ({ className: l.className, text: l.textContent })),
    };
  });

describe('/boundary in the web chat', () => {
  it("shows the person's last run's receipt as berth's own words, a fact a line, at 1280 and 390 px", async () => {
    const page = rig.watch(await (await rig.browser.newContext({ viewport: { width: 1280, height: 800 } })).newPage());
    await page.goto(rig.chatLink(PROJECT, 'alice'));
    await rig.logIn(page);
    await send(page, 'echo "a note" > notes.txt; ls');
    await repliesShown(page, 1, 60_000);
    await send(page, '/boundary');
    await repliesShown(page, 2);
    const shown = await lastReply(page);
    const record = rig.h.berth.admin.listRuns(PROJECT, { user: 'web:alice', limit: 1 }).runs[0]!;
    expect(record.receipt?.violations).toEqual([]);
    // Exactly the words berth sent: not Markdown (the * of *.pythonhosted.org is still there), not a terminal's font.
    expect(shown.text).toBe(boundaryWords(record));
    expect(shown.className).toBe('berth');
    expect(shown.font).not.toMatch(/mono/i);
    expect(shown.lines.map((l) => [l.className, l.text!.trim()])).toEqual([
      ['line', `berth: your last run, at ${record.finished_at.slice(0, 16).replace('T', ' ')} UTC (run ${record.run}):`],
      ['line item', "- ran: in gVisor, a sandbox with its own kernel (not this server's), in a new container"],
      ['line item', "- saw: only your folder, and the project's memory (read-only)"],
      ['line item', '- could reach: github.com, pypi.org, *.pythonhosted.org and api.github.com, and no other network'],
      ['line item', '- secrets: berth adds GITHUB_TOKEN to requests for the hosts meant for it; your agent never sees it'],
      ['line', '✓ Checked as it started: what berth could read matched its plan (not checked: namespaces).'],
    ]);
    expect(await sideways(page)).toBe(0);
    await screenshot(page, 'receipt-web-chat-1280');

    // A phone: the long lines wrap, each item's second row under its words (not under its dash), nothing sideways.
    await page.setViewportSize({ width: 390, height: 844 });
    await page.$eval('#log .msg.reply:last-child', (e) =>
      (e as unknown as { scrollIntoView(o: object): void }).scrollIntoView({ block: 'end' }),
    );
    expect(await sideways(page)).toBe(0);
    // Each item's dash, and the left of its words on each row they take.
    const items = await page.$$eval('#log .msg.reply:last-child pre.berth .item', (els) =>
      els.map((e) => {
        const item = e as unknown as El & { firstElementChild: El; lastChild: El };
        const range = document.createRange();
        range.selectNodeContents(item.lastChild);
        const rows = new Map<number, number>();
        for (const r of Array.from(range.getClientRects()))
          rows.set(Math.round(r.top), Math.min(rows.get(Math.round(r.top)) ?? r.left, r.left));
        return { dash: item.firstElementChild.getBoundingClientRect().left, rows: [...rows.values()] };
      }),
    );
    expect(items.filter((i) => i.rows.length > 1).length).toBeGreaterThan(1);
    for (const { dash, rows } of items) {
      expect(rows[0]).toBeGreaterThan(dash);
      expect(rows.map((left) => left - rows[0]!)).toEqual(rows.map(() => 0));
    }
    await screenshot(page, 'receipt-web-chat-390');

    // After a reload, from the conversation's history: the same words, shown the same way.
    await page.reload();
    await repliesShown(page, 2);
    expect(await lastReply(page)).toEqual(shown);
    expect(rig.pageErrors).toEqual([]);
  });
});
