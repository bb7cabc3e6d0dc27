import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createUnauthenticatedSummary, UNAUTHENTICATED_SUMMARY } from '../../src/admin/unauthenticated-summary.js';
import { pino } from 'pino';
import { until } from '../helpers/until.js';
import { createAuditTrail } from '../../src/admin/audit-trail.js';
import { createGroupCommit } from '../../src/fs/group-commit.js';
import {
  advanceHead,
  advanceHeadAsync,
  appendAudit,
  appendAuditGrouped,
  readAudit,
  verifyAudit,
  type AuditEvent,
} from '../../src/store/audit.js';

const dirs: string[] = [];
const tmp = () => {
  const d = fs.mkdtempSync(join(os.tmpdir(), 'berth-audit-'));
  dirs.push(d);
  return join(d, 'audit.jsonl');
};
afterEach(() => {
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});
const event = (i: number) => ({
  kind: 'admin' as const,
  action: 'project.update',
  actor: 'admin',
  project: `p${i % 2}`,
  target: `t${i}`,
  outcome: 'ok' as const,
});

describe('audit log: a hash chain', () => {
  it('verifies a whole log, and filters newest first', () => {
    const file = tmp();
    for (let i = 0; i < 6; i++) appendAudit(file, event(i));
    expect(verifyAudit(file)).toEqual({ ok: true, lines: 6, files: 1 });
    expect(readAudit(file, { project: 'p1', limit: 10 }).map((e) => e.target)).toEqual(['t5', 't3', 't1']);
    expect(readAudit(file, { limit: 2 }).map((e) => e.seq)).toEqual([6, 5]);
  });

  it.each([
    ['an edited line', (lines: string[]) => (lines[2] = (lines[2] as string).replace('"t2"', '"t9"')), 3, /edited/],
    ['a removed line', (lines: string[]) => lines.splice(3, 1), 4, /removed, inserted or reordered/],
    ['two lines swapped', (lines: string[]) => ([lines[1], lines[2]] = [lines[2] as string, lines[1] as string]), 2, /does not follow/],
    ['a line cut in half', (lines: string[]) => (lines[4] = (lines[4] as string).slice(0, 40)), 5, /not an audit entry/],
    [
      'a field added to a line (outside its hash)',
      (lines: string[]) => (lines[3] = (lines[3] as string).replace('{', '{"note":"all fine",')),
      4,
      /not an audit entry/,
    ],
  ])('names the line where %s breaks the chain', (_what, tamper, line, reason) => {
    const file = tmp();
    for (let i = 0; i < 6; i++) appendAudit(file, event(i));
    const lines = fs.readFileSync(file, 'utf8').trimEnd().split('\n');
    tamper(lines);
    fs.writeFileSync(file, `${lines.join('\n')}\n`);
    const v = verifyAudit(file);
    expect(v.ok).toBe(false);
    expect(v.broken).toMatchObject({ file: 'audit.jsonl', line });
    expect(v.broken?.reason).toMatch(reason);
  });

  it('several processes appending at once keep one chain', async () => {
    const file = tmp();
    // Rotating every ~2 KiB on the way: rotation happens under the same lock as the append.
    const script = `import { appendAudit } from ${JSON.stringify(join(process.cwd(), 'src/store/audit.ts'))}; for (let i = 0; i < 15; i++) appendAudit(process.argv[1], { kind: 'admin', action: 'x', actor: 'p' + process.pid, outcome: 'ok' }, { rotateBytes: 2048, keep: 100 });`;
    await Promise.all(
      Array.from(
        { length: 3 },
        () =>
          new Promise<void>((resolve, reject) => {
            const p = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script, file], { stdio: 'inherit' });
            p.once('exit', (code) => (code === 0 ? resolve() : reject(new Error(`exit ${code}`))));
          }),
      ),
    );
    expect(verifyAudit(file)).toMatchObject({ ok: true, lines: 45 });
    expect(verifyAudit(file).files).toBeGreaterThan(1);
  }, 30_000);

  it('refuses an event that does not fit its schema, writing nothing', () => {
    const file = tmp();
    expect(() => appendAudit(file, { ...event(1), outcome: 'maybe' as never })).toThrow();
    expect(fs.existsSync(file)).toBe(false);
  });
});

const names = (file: string) =>
  fs
    .readdirSync(join(file, '..'))
    .filter((n) => !n.endsWith('.lock'))
    .sort();
const linesOf = (path: string) => fs.readFileSync(path, 'utf8').trimEnd().split('\n');

describe('audit log: rotation keeps one chain across files', () => {
  const small = { rotateBytes: 600, keep: 3 };

  it('rotates at the size bound, keeps the newest files, and still verifies from the first kept line', () => {
    const file = tmp();
    for (let i = 0; i < 30; i++) appendAudit(file, event(i), small);
    expect(names(file)).toEqual(['audit.jsonl', 'audit.jsonl.7', 'audit.jsonl.8', 'audit.jsonl.9', 'audit.jsonl.head']);
    for (const n of ['audit.jsonl.7', 'audit.jsonl.8', 'audit.jsonl.9'])
      expect(fs.statSync(join(file, '..', n)).size).toBeGreaterThanOrEqual(600);
    // The first line of the oldest kept file chains to the last line of a deleted one: the head names that point.
    const head = JSON.parse(fs.readFileSync(`${file}.head`, 'utf8'));
    const firstKept = JSON.parse(linesOf(join(file, '..', 'audit.jsonl.7'))[0] as string);
    expect(head).toMatchObject({ seq: 30, base: { seq: firstKept.seq - 1, hash: firstKept.prev } });
    const v = verifyAudit(file);
    expect(v).toEqual({ ok: true, lines: 30 - head.base.seq, files: 4 });
    expect(readAudit(file, { limit: 1000 }).map((e) => e.seq)).toEqual(Array.from({ length: v.lines }, (_, i) => 30 - i));
    // Each new file's first line follows the last line of the file before it.
    const last10 = JSON.parse(linesOf(join(file, '..', 'audit.jsonl.7')).at(-1) as string);
    expect(JSON.parse(linesOf(join(file, '..', 'audit.jsonl.8'))[0] as string).prev).toBe(last10.hash);
  });

  it('an edit in an older file, or a kept file deleted, is found', () => {
    const file = tmp();
    for (let i = 0; i < 30; i++) appendAudit(file, event(i), small);
    const older = join(file, '..', 'audit.jsonl.8');
    const original = fs.readFileSync(older, 'utf8');
    const lines = linesOf(older);
    lines[1] = (lines[1] as string).replace('"outcome":"ok"', '"outcome":"refused"');
    fs.writeFileSync(older, `${lines.join('\n')}\n`);
    expect(verifyAudit(file)).toMatchObject({
      ok: false,
      broken: { file: 'audit.jsonl.8', line: 2, reason: expect.stringMatching(/edited/) },
    });
    fs.writeFileSync(older, original);
    expect(verifyAudit(file).ok).toBe(true);
    fs.rmSync(join(file, '..', 'audit.jsonl.7'));
    expect(verifyAudit(file)).toMatchObject({
      ok: false,
      broken: { file: 'audit.jsonl.8', line: 1, reason: expect.stringMatching(/does not follow/) },
    });
  });
});

describe('audit log: the head kept beside the log shows lines cut off its end (L5)', () => {
  it('a cut tail fails verify and says how many lines; the next line keeps the gap visible', () => {
    const file = tmp();
    for (let i = 0; i < 8; i++) appendAudit(file, event(i));
    const lines = linesOf(file);
    fs.writeFileSync(file, `${lines.slice(0, 5).join('\n')}\n`);
    expect(verifyAudit(file)).toMatchObject({
      ok: false,
      lines: 5,
      broken: {
        file: 'audit.jsonl',
        line: 0,
        reason: 'the log ends at #5 but berth last wrote #8 (recorded in audit.jsonl.head): 3 line(s) were cut from the end',
      },
    });
    const next = appendAudit(file, event(9));
    expect(next).toMatchObject({ seq: 9, prev: JSON.parse(lines[7] as string).hash });
    expect(verifyAudit(file)).toMatchObject({ ok: false, broken: { line: 6, reason: expect.stringMatching(/does not follow/) } });
  });

  it('the whole end replaced by a shorter valid chain, or a whole rotated-away tail, is found', () => {
    const file = tmp();
    for (let i = 0; i < 4; i++) appendAudit(file, event(i));
    const lines = linesOf(file);
    // The same seq as the head, but another line: an older copy of the log put back with one line forged after it.
    fs.writeFileSync(file, `${lines.slice(0, 3).join('\n')}\n`);
    fs.copyFileSync(`${file}.head`, `${file}.head.saved`);
    fs.rmSync(`${file}.head`);
    appendAudit(file, { ...event(7), target: 'forged' });
    fs.renameSync(`${file}.head.saved`, `${file}.head`);
    expect(verifyAudit(file)).toMatchObject({
      ok: false,
      broken: { line: 4, reason: expect.stringMatching(/not the line #4 berth wrote last/) },
    });
  });

  it('a log with lines but no head fails (deleting the head is no way around it); a berth stopped between a line and its head passes', () => {
    const file = tmp();
    for (let i = 0; i < 3; i++) appendAudit(file, event(i));
    const head = fs.readFileSync(`${file}.head`, 'utf8');
    for (let i = 3; i < 5; i++) appendAudit(file, event(i));
    fs.writeFileSync(`${file}.head`, head); // the head two lines behind: as after kill -9 between a line and its head
    expect(verifyAudit(file)).toEqual({ ok: true, lines: 5, files: 1 });
    fs.rmSync(`${file}.head`);
    expect(verifyAudit(file)).toMatchObject({
      ok: false,
      broken: { file: 'audit.jsonl.head', reason: expect.stringMatching(/no head record/) },
    });
    appendAudit(file, event(5)); // an upgraded berth writes its first head with the next event
    expect(verifyAudit(file)).toEqual({ ok: true, lines: 6, files: 1 });
  });
});

describe("audit log: a run's receipt line with its sync shared (group commit)", () => {
  /** A group commit whose fdatasync finishes only when the test says so. */
  const heldSyncs = () => {
    const held: Array<() => void> = [];
    const commit = createGroupCommit((fd, done) => held.push(() => fs.fdatasync(fd, done)));
    return { commit, release: () => held.splice(0).forEach((go) => go()) };
  };
  const head = (file: string) => JSON.parse(fs.readFileSync(`${file}.head`, 'utf8'));

  it('is in the chain once written; the head names it only once it is on disk, and never moves back', async () => {
    const file = tmp();
    for (let i = 0; i < 2; i++) appendAudit(file, event(i));
    const { commit, release } = heldSyncs();
    const { entry, synced } = appendAuditGrouped(file, { ...event(2), kind: 'run_receipt', digest: `sha256:${'a'.repeat(64)}` }, commit);
    expect(entry).toMatchObject({ seq: 3, prev: JSON.parse(linesOf(file)[1] as string).hash });
    expect(linesOf(file)).toHaveLength(3);
    expect(head(file).seq).toBe(2); // not synced: no head names it
    expect(verifyAudit(file)).toEqual({ ok: true, lines: 3, files: 1 });
    // Another writer meanwhile (an admin action, the CLI) chains after it and writes its own head.
    expect(appendAudit(file, event(3))).toMatchObject({ seq: 4, prev: entry.hash });
    let done = false;
    void synced.then(() => (done = true));
    await new Promise((r) => setTimeout(r, 20));
    expect(done).toBe(false);
    release();
    await synced;
    advanceHead(file, { seq: entry.seq, hash: entry.hash });
    expect(head(file).seq).toBe(4);
    expect(verifyAudit(file)).toEqual({ ok: true, lines: 4, files: 1 });
  });

  it("moves a lagging head up to the synced line and keeps the rotation's base", async () => {
    const file = tmp();
    const small = { rotateBytes: 600, keep: 2 };
    for (let i = 0; i < 20; i++) appendAudit(file, event(i), small);
    const before = head(file);
    expect(before.base).toBeDefined();
    const commit = createGroupCommit();
    const { entry, synced } = appendAuditGrouped(file, event(20), commit, small);
    await synced;
    advanceHead(file, { seq: entry.seq, hash: entry.hash });
    expect(head(file)).toEqual({ seq: 21, hash: entry.hash, base: before.base });
    expect(verifyAudit(file).ok).toBe(true);
  });

  it('off the event loop: made whole aside, renamed in only if still ahead; never back, no file left over', async () => {
    const file = tmp();
    for (let i = 0; i < 3; i++) appendAudit(file, event(i));
    const third = head(file);
    const { entry, synced } = appendAuditGrouped(file, event(3), createGroupCommit());
    await synced;
    await advanceHeadAsync(file, { seq: entry.seq, hash: entry.hash });
    expect(head(file)).toEqual({ seq: 4, hash: entry.hash });
    await advanceHeadAsync(file, third); // an older point
    expect(head(file).seq).toBe(4);
    expect(names(file)).toEqual(['audit.jsonl', 'audit.jsonl.head']);
    expect(verifyAudit(file)).toEqual({ ok: true, lines: 4, files: 1 });
  });

  it('the first line of a log is headed at once: a log with lines never lacks its head', async () => {
    const file = tmp();
    const { entry, synced } = appendAuditGrouped(file, event(0), createGroupCommit());
    expect(head(file)).toEqual({ seq: 1, hash: entry.hash });
    await synced;
    expect(verifyAudit(file)).toEqual({ ok: true, lines: 1, files: 1 });
  });

  it("the trail's commit settles once the line is on disk, the head follows, and later lines chain on", async () => {
    const file = tmp();
    const trail = createAuditTrail(file, pino({ level: 'silent' }));
    trail.record(event(0));
    await Promise.all([1, 2, 3].map((i) => trail.commit({ ...event(i), kind: 'run_receipt', digest: `sha256:${'b'.repeat(64)}` })));
    expect(linesOf(file)).toHaveLength(4);
    await until(() => head(file).seq === 4); // off the event loop, after the group's sync
    expect(head(file)).toMatchObject({ seq: 4, hash: JSON.parse(linesOf(file)[3] as string).hash });
    await trail.commit(event(4));
    await trail.flush(); // shutdown: the head written now
    expect(head(file).seq).toBe(5);
    trail.record(event(5));
    expect(trail.verify()).toEqual({ ok: true, lines: 6, files: 1 });
    expect(trail.list({ kind: 'run_receipt', limit: 10 }).map((e) => e.seq)).toEqual([4, 3, 2]);
  });
});

describe('unauthenticated requests: a count per surface and minute, not a line each (M6)', () => {
  const harness = () => {
    let t = Date.parse('2026-11-24T10:00:00Z');
    const written: AuditEvent[] = [];
    const summary = createUnauthenticatedSummary({ write: (e) => written.push(e), now: () => t });
    return { summary, written, advance: (ms: number) => (t += ms) };
  };

  it('300 refusals in a minute are one line with the count and at most five printable, bounded samples', () => {
    const { summary, written, advance } = harness();
    for (let i = 0; i < 300; i++) {
      summary.note('api', i === 0 ? `GET /api/${'Z'.repeat(300)}` : `GET /api/projects/${i % 7}\u001b[2J\n`);
      advance(100);
    }
    expect(written).toEqual([]);
    summary.flush();
    expect(written).toHaveLength(1);
    const [line] = written as [AuditEvent];
    expect(line).toMatchObject({
      kind: 'auth_failure',
      action: 'unauthenticated api',
      actor: 'anonymous',
      outcome: 'refused',
      code: 'UNAUTHORIZED',
      count: 300,
      first_at: '2026-11-24T10:00:00.000Z',
    });
    expect(line.samples).toHaveLength(UNAUTHENTICATED_SUMMARY.samples);
    for (const s of line.samples ?? []) {
      expect(s.length).toBeLessThanOrEqual(UNAUTHENTICATED_SUMMARY.sampleChars);
      expect(s).not.toMatch(/[\u0000-\u001f]/);
    }
  });

  it('one line per surface per window; a new window starts with the first refusal after the last one ended', () => {
    const { summary, written, advance } = harness();
    summary.note('api', 'GET /api/a');
    summary.note('metrics', 'GET /metrics');
    summary.note('api', 'GET /api/b');
    advance(60_000);
    summary.note('api', 'GET /api/c');
    expect(written.map((e) => [e.action, e.count, e.samples])).toEqual([
      ['unauthenticated api', 2, ['GET /api/a', 'GET /api/b']],
      ['unauthenticated metrics', 1, ['GET /metrics']],
    ]);
    summary.flush();
    expect(written.at(-1)).toMatchObject({ action: 'unauthenticated api', count: 1, first_at: '2026-11-24T10:01:00.000Z' });
    summary.flush();
    expect(written).toHaveLength(3); // nothing counted, nothing written
  });

  it('surfaces are bounded: a name that is no short slug, or one past the bound, is counted as "other"', () => {
    const { summary, written } = harness();
    for (let i = 0; i < 40; i++) summary.note(`s${i}`, '/x');
    summary.note('Bearer secret', '/x');
    summary.flush();
    expect(written).toHaveLength(UNAUTHENTICATED_SUMMARY.surfaces);
    expect(written.at(-1)).toMatchObject({ action: 'unauthenticated other', count: 40 - (UNAUTHENTICATED_SUMMARY.surfaces - 1) + 1 });
    expect(JSON.stringify(written)).not.toContain('secret');
  });
});
