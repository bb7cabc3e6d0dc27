import type { Observed } from '../plan/receipt.js';

/** Readings kept for warm containers' later messages (launcher-wide; the oldest gives way). */
const OBSERVED_KEPT = 1024;

/**
 * A container is observed once, at its first run or exec: later messages into the same warm
 * container carry that reading (under gVisor a reading is an exec of its own). Bounded; a
 * removed container's reading goes with it (`forget`).
 */
export function createObserver(read: (containerId: string) => Promise<Observed>) {
  const observed = new Map<string, Promise<Observed>>();
  return {
    observe(containerId: string): Promise<Observed> {
      let reading = observed.get(containerId);
      if (!reading) {
        reading = read(containerId);
        reading.catch(() => observed.delete(containerId));
        observed.set(containerId, reading);
        if (observed.size > OBSERVED_KEPT) observed.delete(observed.keys().next().value!);
      }
      return reading;
    },
    forget: (containerId: string) => void observed.delete(containerId),
  };
}
