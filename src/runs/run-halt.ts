/**
 * What stops one run before its end, and why: berth stopping (the drain), the disk watch, or an
 * outbound socket that finds the run cannot go on (its model service cannot be reached). The
 * first reason wins; the run's record and its chat reply say it ("stopped: …"). A drain gives no
 * reason: the run is interrupted, not at fault.
 */
/** How a run's record names why berth stopped it (a warning: "stopped: <reason>"). */
export const STOPPED_WARNING = 'stopped: ';
/** How a run's record says its container ended under it by no doing of berth's ("container lost: <what was seen>"). */
export const LOST_WARNING = 'container lost: ';

export interface RunHalt {
  readonly signal: AbortSignal;
  stop(reason: string): void;
  /** Why it was stopped, if it was (by other than the drain). */
  reason(): string | undefined;
  /** Let the drain go: the run is over. */
  release(): void;
}

export function runHalt(drain: AbortSignal): RunHalt {
  const halt = new AbortController();
  let why: string | undefined;
  const onDrain = () => halt.abort();
  if (drain.aborted) halt.abort();
  else drain.addEventListener('abort', onDrain, { once: true });
  return {
    signal: halt.signal,
    stop(reason) {
      if (halt.signal.aborted) return;
      why = reason;
      halt.abort();
    },
    reason: () => why,
    release: () => drain.removeEventListener('abort', onDrain),
  };
}
