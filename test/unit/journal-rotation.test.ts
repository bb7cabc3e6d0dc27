import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { appendJournal, openRuns, rotateIfDue } from '../../src/store/journal.js';

/**
 * The run journal stays bounded (issue 24 item 5: no growth over a day of traffic): past its size
 * it becomes a segment, readers fold segments and the current file, and a segment goes only when
 * every run in it has ended, it is not among the newest kept, and its grace has passed.
 * A day of runs at the real bounds (8,000 fsynced lines) is in test/integration/store-volume.test.ts.
 */
const dirs: string[] = [];
afterEach(() => dirs.splice(0).forEach((d) => fs.rmSync(d, { recursive: true, force: true })));
const tmp = () => {
  const d = fs.mkdtempSync(join(os.tmpdir(), 'berth-journal-'));
  dirs.push(d);
  return d;
};
const segmentsIn = (dir: string) =>
  fs
    .readdirSync(dir)
    .filter((n) => n !== 'journal.jsonl')
    .sort();
const tiny = { rotateBytes: 1, keepSegments: 1, segmentGraceMs: 1000 };
const HOUR = 3_600_000;

async function run(dir: string, id: string, end?: 'finished' | 'interrupted') {
  await appendJournal(dir, { run: id, phase: 'accepted', owner: 'o', kind: 'message', session: 's' });
  if (end === 'finished') await appendJournal(dir, { run: id, phase: 'finished', exit_code: 0 });
  if (end === 'interrupted') await appendJournal(dir, { run: id, phase: 'interrupted', reason: 'gone' });
}

describe('run journal rotation', () => {
  it('removes a segment once its runs have ended, past its grace and the newest kept; never one with an open run', async () => {
    const dir = tmp();
    const t0 = Date.now();
    await run(dir, 'a', 'finished');
    await run(dir, 'open');
    rotateIfDue(dir, tiny, t0); // segment 1: a (ended), open (accepted)
    await run(dir, 'b', 'finished');
    rotateIfDue(dir, tiny, t0 + 1); // segment 2: b (ended)
    expect(segmentsIn(dir)).toHaveLength(2);
    await run(dir, 'c', 'finished');
    rotateIfDue(dir, tiny, t0 + 2); // within the grace: nothing goes
    expect(segmentsIn(dir)).toHaveLength(3);
    await run(dir, 'd', 'finished');
    rotateIfDue(dir, tiny, t0 + HOUR); // past it: segment 2 and 3 go (ended), 1 holds the open run, 4 is the newest
    const left = segmentsIn(dir);
    expect(left).toHaveLength(2);
    expect(fs.readFileSync(join(dir, left[0]!), 'utf8')).toContain('"open"');
    expect(openRuns(dir).map((r) => r.run)).toEqual(['open']);
    await appendJournal(dir, { run: 'open', phase: 'finished', exit_code: 0 });
    await run(dir, 'e', 'finished');
    rotateIfDue(dir, tiny, t0 + 2 * HOUR); // the open run ended: its segment can go too
    expect(segmentsIn(dir)).toHaveLength(1);
    expect(openRuns(dir)).toEqual([]);
  });

  it('a writer that opened the file before it was rotated writes into the segment, which readers still read', async () => {
    const dir = tmp();
    await run(dir, 'x');
    const late = fs.openSync(join(dir, 'journal.jsonl'), fs.constants.O_WRONLY | fs.constants.O_APPEND);
    rotateIfDue(dir, tiny, Date.now());
    fs.writeSync(late, `${JSON.stringify({ run: 'x', phase: 'started', container: 'c1', at: new Date().toISOString() })}\n`);
    fs.closeSync(late);
    await run(dir, 'y');
    expect(openRuns(dir).map((r) => [r.run, r.phase, r.container])).toEqual([
      ['x', 'started', 'c1'],
      ['y', 'accepted', undefined],
    ]);
  });

  it('two rotations at once never replace a segment', async () => {
    const dir = tmp();
    await run(dir, 'p', 'finished');
    const now = Date.now();
    rotateIfDue(dir, tiny, now);
    await run(dir, 'q', 'finished');
    rotateIfDue(dir, tiny, now); // the same millisecond: another name all the same
    expect(segmentsIn(dir)).toHaveLength(2);
    expect(fs.readdirSync(dir).flatMap((n) => fs.readFileSync(join(dir, n), 'utf8').split('\n').filter(Boolean)).length).toBe(4);
  });
});
