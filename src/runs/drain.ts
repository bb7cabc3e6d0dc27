import type { RunnerDeps } from './runner-deps.js';

/** A run past admission; a drain that runs out of time interrupts it. */
export interface Flight {
  interrupted: boolean;
  abort: AbortController;
}

/**
 * Stop: admit nothing more (SHUTTING_DOWN), let runs in flight finish for up to `deadlineMs`,
 * then stop this process's containers; those runs are journaled as interrupted. The warm
 * containers are removed either way.
 */
export async function drainRuns(
  deps: Pick<RunnerDeps, 'admission' | 'prestarted' | 'warm'>,
  runs: { inFlight: ReadonlySet<Flight>; removeMine: () => Promise<unknown> },
  deadlineMs: number,
): Promise<{ interrupted: number }> {
  deps.admission?.drain();
  let timer: NodeJS.Timeout | undefined;
  const idle = deps.admission ? deps.admission.idle() : Promise.resolve();
  const finished = await Promise.race([
    idle.then(() => true),
    new Promise<boolean>((r) => (timer = setTimeout(() => r(false), deadlineMs))),
  ]);
  clearTimeout(timer);
  if (finished) {
    await deps.prestarted?.close();
    await deps.warm?.close(); // the warm containers go with berth
    return { interrupted: 0 };
  }
  const interrupted = runs.inFlight.size;
  for (const flight of runs.inFlight) {
    flight.interrupted = true;
    flight.abort.abort(); // stops its container, or keeps one from being made
  }
  await deps.prestarted?.close();
  await runs.removeMine();
  await idle;
  await deps.warm?.close();
  return { interrupted };
}
