import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { isBerthError } from '../../src/base/errors.js';
import { checkpointThread } from '../../src/store/checkpoint-thread.js';
import type { CheckpointSource } from '../../src/store/checkpoints.js';
import type { Project } from '../../src/store/projects.js';

/** The checkpoint thread (store/checkpoint-thread.ts): the copy runs beside the event loop, and its errors come back whole. */
const root = fs.mkdtempSync(join(os.tmpdir(), 'berth-checkpoint-thread-'));
const thread = checkpointThread();
afterAll(async () => {
  await thread.close();
  fs.rmSync(root, { recursive: true, force: true });
});

function source(name: string, files: number, bytes: number): CheckpointSource {
  const project = { paths: { stateDir: join(root, name, 'state') }, metadata: { name }, snapshot: undefined } as unknown as Project;
  const ws = join(root, name, 'ws');
  const home = join(root, name, 'home');
  fs.mkdirSync(home, { recursive: true });
  for (let d = 0; d < 10; d++) fs.mkdirSync(join(ws, `d${d}`), { recursive: true });
  for (let i = 0; i < files; i++) fs.writeFileSync(join(ws, `d${i % 10}`, `f${i}`), Buffer.alloc(bytes, i % 251));
  return { project, tenantKey: 'web:t', session: 's', workspace: { id: 'w', dir: ws }, home };
}
const BOUNDS = { keep: 10, bytes: 1 << 30, files: 100_000 };

describe('checkpoint thread', () => {
  it('a large copy does not stall the event loop: timers keep firing through it', async () => {
    await thread.take(source('warm', 1, 10), BOUNDS); // the thread is up before the measure
    const src = source('big', 600, 96 * 1024); // ~56 MiB, a first checkpoint: everything copied
    const ticks: number[] = [];
    let done = false;
    const tick = () => {
      ticks.push(performance.now());
      if (!done) setTimeout(tick, 1);
    };
    tick();
    const t0 = performance.now();
    const kept = await thread.take(src, BOUNDS);
    const took = performance.now() - t0;
    done = true;
    const gaps = ticks.slice(1).map((t, i) => t - (ticks[i] as number));
    expect(kept.owned_bytes).toBeGreaterThan(50 * 1024 * 1024);
    // On the loop, the copy would be one gap as long as the copy; beside it, the loop turns all along.
    expect(ticks.length).toBeGreaterThan(5);
    expect(Math.max(...gaps)).toBeLessThan(took / 2);
  });

  it('errors come back as berth errors with their code; a restore goes through the same thread', async () => {
    const src = source('err', 3, 64 * 1024);
    const err = await thread.take(src, { keep: 10, bytes: 16 * 1024, files: 100 }).catch((e: unknown) => e);
    expect(isBerthError(err, 'LIMIT_REACHED')).toBe(true);
    fs.writeFileSync(join(src.workspace.dir, 'a.txt'), 'one');
    const kept = await thread.take(src, BOUNDS);
    fs.writeFileSync(join(src.workspace.dir, 'a.txt'), 'two');
    await thread.restore(src, kept.id);
    expect(fs.readFileSync(join(src.workspace.dir, 'a.txt'), 'utf8')).toBe('one');
    const gone = await thread.restore(src, kept.id).catch((e: unknown) => e);
    expect(isBerthError(gone, 'CHECKPOINT_NOT_FOUND')).toBe(true);
  });
});
