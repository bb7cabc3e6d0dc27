import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { readJsonLines, visitLinesNewestFirst } from '../../src/fs/json-file.js';

/** Reading a log from its end (the run log's newest runs without reading a day of them). */
const dirs: string[] = [];
afterEach(() => dirs.splice(0).forEach((d) => fs.rmSync(d, { recursive: true, force: true })));
const file = (text: string) => {
  const d = fs.mkdtempSync(join(os.tmpdir(), 'berth-lines-'));
  dirs.push(d);
  fs.writeFileSync(join(d, 'log.jsonl'), text);
  return join(d, 'log.jsonl');
};
const all = (path: string) => {
  const seen: string[] = [];
  visitLinesNewestFirst(path, (l) => (seen.push(l), true));
  return seen;
};

describe('visitLinesNewestFirst', () => {
  it('gives every line, newest first, across 64 KiB slices and with characters split by a slice edge', () => {
    // Lines of varied length with 3- and 4-byte characters, so slice edges fall inside lines and characters.
    const lines = Array.from({ length: 3000 }, (_, i) => JSON.stringify({ i, text: `€𝄞 ${'x'.repeat(i % 97)} ${'é'.repeat(i % 13)}` }));
    const path = file(`${lines.join('\n')}\n`);
    expect(fs.statSync(path).size).toBeGreaterThan(3 * 64 * 1024);
    expect(all(path)).toEqual([...lines].reverse());
    expect(all(path)).toEqual(readJsonLines(path).reverse());
  });

  it('stops when told, a last line cut by a crash counts as a line, empty lines are skipped, a missing file gives nothing', () => {
    const path = file('{"a":1}\n\n{"b":2}\n{"c":3');
    expect(all(path)).toEqual(['{"c":3', '{"b":2}', '{"a":1}']);
    const firstTwo: string[] = [];
    visitLinesNewestFirst(path, (l) => (firstTwo.push(l), firstTwo.length < 2));
    expect(firstTwo).toEqual(['{"c":3', '{"b":2}']);
    expect(all(join(os.tmpdir(), 'no-such-berth-log.jsonl'))).toEqual([]);
    expect(all(file(''))).toEqual([]);
  });

  it('never reads through a link', () => {
    const path = file('{"a":1}\n');
    const link = `${path}.link`;
    fs.symlinkSync(path, link);
    expect(() => all(link)).toThrow(/ELOOP/);
  });
});
