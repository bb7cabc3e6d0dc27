import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { inboxIdsToForget, openInbox, type InboxMark } from '../../src/store/inbox.js';

/**
 * The inbox stays bounded (issue 20: "inbox seen-id map bounded"): ended messages are forgotten
 * after a retention and beyond a count, from the journal (rewritten atomically) and from
 * memory together; messages not ended are never forgotten, and what is kept still deduplicates.
 * The busy day (thousands of fsynced lines) is in test/integration/inbox-volume.test.ts.
 */
const DAY = 24 * 60 * 60 * 1000;
const dirs: string[] = [];
afterEach(() => dirs.splice(0).forEach((d) => fs.rmSync(d, { recursive: true, force: true })));
const tmp = () => {
  const d = fs.mkdtempSync(join(os.tmpdir(), 'berth-inbox-'));
  dirs.push(d);
  return d;
};
const msg = (id: string) => ({ id, chat: 'c', sender: 's', tenant: 's', text: `text of ${id}` });

describe('inboxIdsToForget (the decision, as data)', () => {
  it('forgets ended messages past the retention, then the oldest ended beyond the count; never an open one', () => {
    const now = 100 * DAY;
    const marks = new Map<string, InboxMark>([
      ['old-replied', { phase: 'replied', at: now - 8 * DAY }],
      ['old-failed', { phase: 'failed', at: now - 30 * DAY }],
      ['old-open', { phase: 'received', at: now - 30 * DAY }],
      ['old-started', { phase: 'started', at: now - 30 * DAY }],
      ['new-1', { phase: 'replied', at: now - 3 }],
      ['new-2', { phase: 'replied', at: now - 2 }],
      ['new-3', { phase: 'failed', at: now - 1 }],
    ]);
    expect(inboxIdsToForget(marks, now, { days: 7, ended: 2 })).toEqual(['new-1', 'old-replied', 'old-failed']);
    expect(inboxIdsToForget(marks, now, { days: 7, ended: 100 })).toEqual(['old-replied', 'old-failed']);
    expect(inboxIdsToForget(new Map(), now, { days: 7, ended: 2 })).toEqual([]);
  });
});

describe('openInbox: bounded memory and journal', () => {
  it('past the count bound, old ended messages leave memory and the journal; open ones and recent ones stay and still deduplicate', () => {
    const dir = tmp();
    let now = 10 * DAY;
    const inbox = openInbox(dir, 'signal', { keep: { days: 7, ended: 20 }, now: () => now });
    expect(inbox.receive(msg('open-one'))).toBe(true);
    for (let i = 0; i < 100; i++) {
      now += 1000;
      expect(inbox.receive(msg(`m${i}`))).toBe(true);
      inbox.mark(`m${i}`, 'replied');
    }
    // 20 ended kept, plus at most a tenth over before the next compaction, plus the open one.
    expect(inbox.remembered()).toBeLessThanOrEqual(20 + 2 + 1);
    const ids = new Set(inbox.all().map((e) => e.id));
    expect(ids.has('open-one')).toBe(true);
    expect(ids.has('m99')).toBe(true);
    expect(ids.has('m0')).toBe(false);
    expect(ids.size).toBe(inbox.remembered());
    // What is kept is still a re-delivery; a forgotten id is new again.
    expect(inbox.receive(msg('m99'))).toBe(false);
    expect(inbox.receive(msg('open-one'))).toBe(false);
    expect(inbox.receive(msg('m0'))).toBe(true);
    // Every line of the rewritten journal parses, and no temporary file is left.
    const lines = fs.readFileSync(join(dir, 'signal.jsonl'), 'utf8').split('\n').filter(Boolean);
    expect(lines.every((l) => typeof JSON.parse(l).id === 'string')).toBe(true);
    expect(fs.readdirSync(dir).filter((n) => n.includes('tmp'))).toEqual([]);
  });

  it('at open, ended messages older than the retention are forgotten; an open message of any age is kept', () => {
    const dir = tmp();
    let now = 10 * DAY;
    const first = openInbox(dir, 'signal', { now: () => now });
    first.receive(msg('ended-long-ago'));
    first.mark('ended-long-ago', 'failed', { reason: 'x' });
    first.receive(msg('never-ended'));
    now += 8 * DAY;
    first.receive(msg('ended-lately'));
    first.mark('ended-lately', 'replied');
    const next = openInbox(dir, 'signal', { now: () => now });
    expect(
      next
        .all()
        .map((e) => e.id)
        .sort(),
    ).toEqual(['ended-lately', 'never-ended']);
    expect(next.open().map((e) => e.id)).toEqual(['never-ended']);
    expect(next.receive(msg('ended-lately'))).toBe(false);
  });

  it('another inbox object (another process) compacting under it: the first reads the new file and still deduplicates', () => {
    const dir = tmp();
    let now = 10 * DAY;
    const a = openInbox(dir, 'signal', { now: () => now });
    a.receive(msg('old'));
    a.mark('old', 'replied');
    a.receive(msg('kept'));
    now += 8 * DAY;
    openInbox(dir, 'signal', { now: () => now }); // compacts at open: "old" goes
    expect(a.receive(msg('kept'))).toBe(false);
    expect(a.receive(msg('fresh'))).toBe(true);
    expect(
      a
        .all()
        .map((e) => e.id)
        .sort(),
    ).toEqual(['fresh', 'kept']);
  });

  it('a line a crash cut short does not swallow the next one', () => {
    const dir = tmp();
    const inbox = openInbox(dir, 'signal');
    inbox.receive(msg('before'));
    fs.appendFileSync(join(dir, 'signal.jsonl'), '{"id":"cut","phase":"rec');
    expect(inbox.receive(msg('after'))).toBe(true);
    expect(inbox.all().map((e) => e.id)).toEqual(['before', 'after']);
    expect(openInbox(dir, 'signal').receive(msg('after'))).toBe(false);
  });
});
