import { progressSentence, type ProgressStep, type ProgressUpdate } from '../runs/agent-progress.js';
import { RUN_STEPS_MAX } from '../store/run-log.js';

/**
 * The agent at work, as a chat sees it while a run goes on: its steps live where the transport
 * shows them (web chat), else one short message for a long run; and typing meanwhile.
 */

/** A chat's typing indicator fades (Signal's after 15 s): refresh it while the agent works. */
export function startTyping(typing: (on: boolean) => Promise<void>, everyMs = 10_000): { stop(): void } {
  const tick = () => void typing(true).catch(() => undefined);
  tick();
  const timer = setInterval(tick, everyMs);
  timer.unref();
  return {
    stop() {
      clearInterval(timer);
      void typing(false).catch(() => undefined);
    },
  };
}

/** A new container still starting after this long: the chat is told, once (a cold start takes about 1 s; on a busy host, or a new pod, longer). */
export const STARTING_MESSAGE_AFTER_SECONDS = 5;
export const STARTING_WORDS = 'berth: starting your container…';

/**
 * `live`: the transport shows every update (web chat: steps, and "starting your container…"
 * while a new one starts). Else (Signal) short messages, `say`: `STARTING_WORDS` once if a new
 * container is still starting after STARTING_MESSAGE_AFTER_SECONDS, and one progress line once the
 * agent has worked `afterSeconds` since its first step, never more: typing says the rest (an agent
 * whose output has no steps gets typing alone). 0 seconds: no message.
 */
export function watchProgress(opts: { live?: (u: ProgressUpdate) => void; afterSeconds: number; say: (text: string) => void }): {
  onProgress?: (u: ProgressUpdate) => void;
  stop: () => void;
} {
  if (opts.live) return { onProgress: opts.live, stop: () => undefined };
  if (opts.afterSeconds <= 0) return { stop: () => undefined };
  const steps = new Map<string, ProgressStep>();
  // Counted from the agent's first step (its container is up and it works), not from a queue
  // or a container start: what the message then says is the work so far.
  let timer: NodeJS.Timeout | undefined;
  let starting: NodeJS.Timeout | undefined;
  let stopped = false;
  return {
    onProgress(u) {
      if (u.type === 'container') {
        clearTimeout(starting);
        if (u.phase !== 'starting' || stopped) return;
        starting = setTimeout(() => opts.say(STARTING_WORDS), STARTING_MESSAGE_AFTER_SECONDS * 1000);
        starting.unref();
        return;
      }
      clearTimeout(starting); // the agent works: its container is up
      if (u.type === 'step' && (steps.has(u.step.id) || steps.size < RUN_STEPS_MAX)) steps.set(u.step.id, u.step);
      if (timer || stopped) return;
      timer = setTimeout(() => opts.say(`berth: still working (${progressSentence([...steps.values()])})`), opts.afterSeconds * 1000);
      timer.unref();
    },
    stop: () => {
      stopped = true;
      clearTimeout(timer);
      clearTimeout(starting);
    },
  };
}
