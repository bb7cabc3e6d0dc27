import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { openInbox } from '../../src/store/inbox.js';

/**
 * The inbox under volume: a busy day of 3,000 messages, 12,000 fsynced journal lines. Not in the
 * unit tier, where it was the slowest file by far (a disk's fsync rate, not berth's logic, sets
 * its time); the decisions themselves are unit-tested in test/unit/inbox-bounds.test.ts.
 */
const DAY = 24 * 60 * 60 * 1000;
const dirs: string[] = [];
afterEach(() => dirs.splice(0).forEach((d) => fs.rmSync(d, { recursive: true, force: true })));
const tmp = () => {
  const d = fs.mkdtempSync(join(os.tmpdir(), 'berth-inbox-volume-'));
  dirs.push(d);
  return d;
};
const msg = (id: string) => ({ id, chat: 'c', sender: 's', tenant: 's', text: `text of ${id}` });

describe('openInbox under volume', () => {
  it('a busy day: the journal is rewritten once it doubles, ended messages cut to one short line; open ones keep theirs and ids still deduplicate', () => {
    const dir = tmp();
    const file = join(dir, 'signal.jsonl');
    let now = 10 * DAY;
    const inbox = openInbox(dir, 'signal', { now: () => now });
    expect(inbox.receive({ ...msg('waiting'), text: 'still to run' })).toBe(true);
    let largest = 0;
    for (let i = 0; i < 3000; i++) {
      now += 10; // a day in seconds: never the hourly rewrite
      inbox.receive({ ...msg(`m${i}`), text: `echo ${'x'.repeat(100)} ${i}` });
      inbox.mark(`m${i}`, 'started');
      inbox.mark(`m${i}`, 'answered', { reply: 'y'.repeat(100) });
      inbox.mark(`m${i}`, 'replied');
      largest = Math.max(largest, fs.statSync(file).size);
    }
    // 3,000 messages of four long lines each are about 1.6 MB; rewrites keep the file to about
    // twice the short lines' size plus the slack.
    const lines = fs.readFileSync(file, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(largest).toBeLessThan(2 * 3000 * 80 + 256 * 1024 + 2000);
    expect(lines.filter((l) => l.id === 'waiting')).toEqual([expect.objectContaining({ phase: 'received', text: 'still to run' })]);
    const short = lines.filter((l) => l.id === 'm0');
    expect(short).toEqual([{ id: 'm0', phase: 'replied', at: expect.any(String) }]);
    expect(inbox.receive(msg('m0'))).toBe(false);
    expect(inbox.receive(msg('m2999'))).toBe(false);
    expect(inbox.open().map((e) => e.id)).toEqual(['waiting']);
    expect(openInbox(dir, 'signal', { now: () => now }).receive(msg('m1500'))).toBe(false); // another process reads the rewritten file
  });

});
