import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { appendAudit, readAudit, verifyAudit } from '../../src/store/audit.js';

const dirs: string[] = [];
const tmp = () => {
  const d = fs.mkdtempSync(join(os.tmpdir(), 'berth-audit-'));
  dirs.push(d);
  return join(d, 'audit.jsonl');
};
afterEach(() => {
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});
const event = (i: number) => ({ kind: 'admin' as const, action: 'project.update', actor: 'admin', project: `p${i % 2}`, target: `t${i}`, outcome: 'ok' as const });

describe('audit log: a hash chain', () => {
  it('verifies a whole log, and filters newest first', () => {
    const file = tmp();
    for (let i = 0; i < 6; i++) appendAudit(file, event(i));
    expect(verifyAudit(file)).toEqual({ ok: true, lines: 6 });
    expect(readAudit(file, { project: 'p1', limit: 10 }).map((e) => e.target)).toEqual(['t5', 't3', 't1']);
    expect(readAudit(file, { limit: 2 }).map((e) => e.seq)).toEqual([6, 5]);
  });

  it.each([
    ['an edited line', (lines: string[]) => (lines[2] = (lines[2] as string).replace('"t2"', '"t9"')), 3, /edited/],
    ['a removed line', (lines: string[]) => lines.splice(3, 1), 4, /removed, inserted or reordered/],
    ['two lines swapped', (lines: string[]) => ([lines[1], lines[2]] = [lines[2] as string, lines[1] as string]), 2, /does not follow/],
    ['a line cut in half', (lines: string[]) => (lines[4] = (lines[4] as string).slice(0, 40)), 5, /not an audit entry/],
  ])('names the line where %s breaks the chain', (_what, tamper, line, reason) => {
    const file = tmp();
    for (let i = 0; i < 6; i++) appendAudit(file, event(i));
    const lines = fs.readFileSync(file, 'utf8').trimEnd().split('\n');
    tamper(lines);
    fs.writeFileSync(file, `${lines.join('\n')}\n`);
    const v = verifyAudit(file);
    expect(v.ok).toBe(false);
    expect(v.broken?.line).toBe(line);
    expect(v.broken?.reason).toMatch(reason);
  });

  it('several processes appending at once keep one chain', async () => {
    const file = tmp();
    const script = `import { appendAudit } from ${JSON.stringify(join(process.cwd(), 'src/store/audit.ts'))}; for (let i = 0; i < 15; i++) appendAudit(process.argv[1], { kind: 'admin', action: 'x', actor: 'p' + process.pid, outcome: 'ok' });`;
    await Promise.all(
      Array.from({ length: 3 }, () => new Promise<void>((resolve, reject) => {
        const p = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script, file], { stdio: 'inherit' });
        p.once('exit', (code) => (code === 0 ? resolve() : reject(new Error(`exit ${code}`))));
      })),
    );
    expect(verifyAudit(file)).toEqual({ ok: true, lines: 45 });
  }, 30_000);

  it('refuses an event that does not fit its schema, writing nothing', () => {
    const file = tmp();
    expect(() => appendAudit(file, { ...event(1), outcome: 'maybe' as never })).toThrow();
    expect(fs.existsSync(file)).toBe(false);
  });
});
