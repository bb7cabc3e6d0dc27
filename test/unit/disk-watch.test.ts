import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { OVER_LIMIT_SLACK, watchDisk } from '../../src/runs/disk-watch.js';
import { until } from '../helpers/until.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});
const tmp = () => {
  const d = fs.mkdtempSync(join(os.tmpdir(), 'berth-disk-watch-'));
  dirs.push(d);
  return d;
};
const LIMIT = 64 * 1024;
/** Several 10 ms checks: where the behaviour under test is that nothing is stopped, a time is what it takes. */
const tick = () => new Promise((r) => setTimeout(r, 80));

/** Watch a workspace and an agent home every 10 ms; the reason it was stopped for, if any. */
function watch(workspace: string, home: string, files = 50) {
  let stopped: string | undefined;
  const w = watchDisk([workspace, home], { diskBytes: LIMIT, files }, (why) => (stopped = why), 10);
  return { stopped: () => stopped, done: () => w.stop() };
}

describe('the per-run disk check (limits.disk_mb, limits.files)', () => {
  it('a run that grows the workspace past the limit is stopped', async () => {
    const [ws, home] = [tmp(), tmp()];
    const w = watch(ws, home);
    fs.writeFileSync(join(ws, 'big'), Buffer.alloc(LIMIT + 1));
    expect(await until(w.stopped, 'the watch to stop the run')).toMatch(/^the workspace passed limits\.disk_mb/);
    w.done();
  });

  it('a workspace at the limit with more files than limits.files: the agent home gaining a few bytes while it cleans up does not stop it (the CI flake)', async () => {
    const [ws, home] = [tmp(), tmp()];
    fs.writeFileSync(join(ws, 'big'), Buffer.alloc(LIMIT));
    fs.mkdirSync(join(ws, 'd'));
    for (let i = 0; i < 80; i++) fs.writeFileSync(join(ws, 'd', `f${i}`), '');
    const w = watch(ws, home);
    fs.writeFileSync(join(home, '.history'), 'x'.repeat(381));
    fs.rmSync(join(ws, 'd'), { recursive: true });
    await tick();
    expect(w.stopped()).toBeUndefined();
    w.done();
  });

  it(`a run that starts over the limit may add up to ${OVER_LIMIT_SLACK / 1024} KiB; past that it is stopped`, async () => {
    const [ws, home] = [tmp(), tmp()];
    fs.writeFileSync(join(ws, 'big'), Buffer.alloc(LIMIT * 2));
    const w = watch(ws, home);
    fs.writeFileSync(join(home, 'small'), Buffer.alloc(1000));
    await tick();
    expect(w.stopped()).toBeUndefined();
    fs.writeFileSync(join(ws, 'more'), Buffer.alloc(OVER_LIMIT_SLACK));
    expect(await until(w.stopped, 'the watch to stop the run')).toMatch(/^the workspace passed limits\.disk_mb/);
    w.done();
  });

  it('a run that passes limits.files is stopped; one that starts past it is not stopped for what it found', async () => {
    const [ws, home] = [tmp(), tmp()];
    const w = watch(ws, home, 10);
    for (let i = 0; i < 20; i++) fs.writeFileSync(join(ws, `f${i}`), '');
    expect(await until(w.stopped, 'the watch to stop the run')).toMatch(/^the workspace passed limits\.files/);
    w.done();
    const again = watch(ws, home, 10);
    fs.rmSync(join(ws, 'f0'));
    await tick();
    expect(again.stopped()).toBeUndefined();
    again.done();
  });
});
