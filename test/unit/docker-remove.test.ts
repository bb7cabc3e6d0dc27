import type Docker from 'dockerode';
import { describe, expect, it } from 'vitest';
import { createDockerLauncher, REMOVE_CONCURRENCY } from '../../src/launch/docker/launcher.js';

/**
 * The Docker launcher asks the engine for at most REMOVE_CONCURRENCY removals at once: a drain
 * that asked for 1,000 at once wedged Docker 20.10 (docs/benchmarks.md, Speed and scale). An engine stand-in
 * that counts removals in flight.
 */
describe('docker launcher removals', () => {
  it(`removes 200 containers ${REMOVE_CONCURRENCY} at a time, every one of them, a failed one included`, async () => {
    let inFlight = 0;
    let most = 0;
    const removed: string[] = [];
    const engine = {
      getContainer: (id: string) => ({
        async remove() {
          inFlight++;
          most = Math.max(most, inFlight);
          await new Promise((r) => setTimeout(r, 2));
          inFlight--;
          if (id === 'c13') throw new Error('no such container');
          removed.push(id);
        },
      }),
    } as unknown as Docker;
    const launcher = createDockerLauncher(engine);
    const ids = Array.from({ length: 200 }, (_, i) => `c${i}`);
    expect(await launcher.removeContainers(ids)).toBe(200);
    expect(most).toBe(REMOVE_CONCURRENCY);
    expect(removed.sort()).toEqual(ids.filter((id) => id !== 'c13').sort());
    expect(inFlight).toBe(0);
    // The slots all came back: another round runs at the same width.
    most = 0;
    await launcher.removeContainers(ids.slice(0, 20));
    expect(most).toBe(REMOVE_CONCURRENCY);
  });
});
