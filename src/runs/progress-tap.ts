import type { OutputListener } from '../launch/launcher.js';
import { shellMessageOf } from '../plan/agent-command.js';
import type { RunPlan } from '../plan/run-plan.js';
import { createProgressReader, type ProgressStep, type ProgressUpdate } from './agent-progress.js';
import { shellTraceReader } from './shell-trace.js';

export type ProgressListener = (update: ProgressUpdate) => void;

type Output = { stdout: string; stderr: string };

/**
 * Between the launcher and a message's listeners: the agent's output, read as it streams when
 * the plan has a progress format (steps and notes go to `onProgress`; only plain output, never
 * an event stream, to `onOutput`), and the result rewritten once it ended (stdout: the agent's
 * answer; stderr without the shell's trace; the steps beside them). A listener's failure never
 * touches the run.
 */
export function progressTap(
  plan: Pick<RunPlan, 'progress'> & Partial<Pick<RunPlan, 'exec'>>,
  listeners: { onOutput?: OutputListener; onProgress?: ProgressListener; onAnswered?: () => void },
  /** The message waits for a new container (none warm for its session): a chat can say so until it runs. */
  coldStart = false,
) {
  const { onOutput, onProgress, onAnswered } = listeners;
  const format = plan.progress;
  const tell = (update: ProgressUpdate) => {
    try {
      onProgress?.(update);
    } catch {
      // the run goes on
    }
  };
  let starting = coldStart;
  if (starting) tell({ type: 'container', phase: 'starting' });
  /** The launcher's onStarted (the container started, or the exec into a warm one), telling the chat first. */
  const started =
    <T>(next: (containerId: string) => T) =>
    (containerId: string): T => {
      if (starting) tell({ type: 'container', phase: 'started' });
      starting = false;
      return next(containerId);
    };
  if (!format)
    return {
      onOutput,
      started,
      finish: (r: Output): Output & { steps?: ProgressStep[]; moreSteps?: number } => ({ stdout: r.stdout, stderr: r.stderr }),
    };
  // The shell's steps are labelled from its message as written too (runs/shell-trace.ts).
  const shell = format === 'shell-trace' ? shellTraceReader(plan.exec && shellMessageOf(plan.exec)) : undefined;
  const reader = shell ?? createProgressReader(format);
  const decoders = { stdout: new TextDecoder(), stderr: new TextDecoder() };
  const t0 = performance.now();
  let answered = false;
  return {
    started,
    onOutput(stream: 'stdout' | 'stderr', chunk: Buffer) {
      const text = decoders[stream].decode(chunk, { stream: true });
      for (const update of reader.push(stream, text, performance.now() - t0)) tell(update);
      if (!answered && reader.answered()) {
        answered = true;
        try {
          onAnswered?.();
        } catch {
          // the run goes on
        }
      }
      // The shell's output is the agent's own words, its stderr without the trace (an event stream is not for people).
      if (!shell) return;
      if (stream === 'stdout') onOutput?.(stream, chunk);
      else if (onOutput) sendText(onOutput, shell.takeStderr());
    },
    /** The run's output as people read it, and its steps. */
    finish(r: Output & { exitCode: number }): Output & { steps?: ProgressStep[]; moreSteps?: number } {
      for (const stream of ['stdout', 'stderr'] as const) {
        const rest = decoders[stream].decode();
        if (rest) reader.push(stream, rest, performance.now() - t0);
      }
      const summary = reader.finish(r.exitCode, performance.now() - t0);
      if (shell && onOutput) sendText(onOutput, shell.takeStderr());
      for (const update of summary.ended) tell(update);
      return { stdout: summary.stdout ?? r.stdout, stderr: summary.stderr ?? r.stderr, steps: summary.steps, moreSteps: summary.moreSteps };
    },
  };
}

const sendText = (onOutput: OutputListener, text: string) => {
  if (text) onOutput('stderr', Buffer.from(text));
};
