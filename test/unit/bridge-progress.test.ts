import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { STARTING_MESSAGE_AFTER_SECONDS, STARTING_WORDS, watchProgress } from '../../src/bridges/progress.js';
import type { ProgressUpdate } from '../../src/runs/agent-progress.js';

/**
 * Issue 42 item 8 on the channels that show no live output (Signal, Telegram, …): a message that
 * still waits for its new container after STARTING_MESSAGE_AFTER_SECONDS gets one short line
 * saying so; one whose container started (or whose agent already works) gets none.
 */
const starting: ProgressUpdate = { type: 'container', phase: 'starting' };
const started: ProgressUpdate = { type: 'container', phase: 'started' };
const step: ProgressUpdate = { type: 'step', step: { id: 'a', tool: 'sh', detail: 'ls', state: 'running', at: 0 } };

describe('watchProgress: a container starting, on a chat without live output', () => {
  beforeEach(() => void vi.useFakeTimers());
  afterEach(() => void vi.useRealTimers());

  const watch = (afterSeconds = 30) => {
    const said: string[] = [];
    const w = watchProgress({ afterSeconds, say: (t) => said.push(t) });
    return { said, on: (u: ProgressUpdate) => w.onProgress?.(u), stop: w.stop };
  };

  it('a slow start is told once, then the progress line counts from the first step as before', () => {
    const w = watch(30);
    w.on(starting);
    vi.advanceTimersByTime(STARTING_MESSAGE_AFTER_SECONDS * 1000 - 1);
    expect(w.said).toEqual([]);
    vi.advanceTimersByTime(1);
    expect(w.said).toEqual([STARTING_WORDS]);
    w.on(started);
    w.on(step);
    vi.advanceTimersByTime(29_999);
    expect(w.said).toEqual([STARTING_WORDS]);
    vi.advanceTimersByTime(1);
    expect(w.said).toEqual([STARTING_WORDS, 'berth: still working (ran 1 command; now: ls)']);
  });

  it('a start that ends in time, a first step, or the run ending says nothing; 0 turns it off with the progress line', () => {
    for (const end of [started, step, 'stop'] as const) {
      const w = watch();
      w.on(starting);
      if (end === 'stop') w.stop();
      else w.on(end);
      vi.advanceTimersByTime(STARTING_MESSAGE_AFTER_SECONDS * 1000 + 1);
      expect(w.said).toEqual([]);
      w.stop();
    }
    const off = watch(0);
    off.on(starting);
    vi.advanceTimersByTime(60_000);
    expect(off.said).toEqual([]);
  });

  it('the web chat (live) gets the container updates as they come', () => {
    const seen: ProgressUpdate[] = [];
    const w = watchProgress({ live: (u) => seen.push(u), afterSeconds: 30, say: () => undefined });
    w.onProgress?.(starting);
    w.onProgress?.(started);
    expect(seen).toEqual([starting, started]);
  });
});
