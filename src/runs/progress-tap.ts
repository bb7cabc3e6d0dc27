import type { OutputListener } from '../launch/launcher.js';
import { SHELL_TRACE_PS4 } from '../plan/agent-command.js';
import type { RunPlan } from '../plan/run-plan.js';
import { createProgressReader, type ProgressStep, type ProgressUpdate } from './agent-progress.js';

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
  plan: Pick<RunPlan, 'progress'>,
  listeners: { onOutput?: OutputListener; onProgress?: ProgressListener; onAnswered?: () => void },
) {
  const { onOutput, onProgress, onAnswered } = listeners;
  const format = plan.progress;
  if (!format)
    return {
      onOutput,
      finish: (r: Output): Output & { steps?: ProgressStep[]; moreSteps?: number } => ({ stdout: r.stdout, stderr: r.stderr }),
    };
  const reader = createProgressReader(format);
  const decoders = { stdout: new TextDecoder(), stderr: new TextDecoder() };
  const t0 = performance.now();
  const untraced = untracedStderr();
  let answered = false;
  const tell = (update: ProgressUpdate) => {
    try {
      onProgress?.(update);
    } catch {
      // the run goes on
    }
  };
  return {
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
      if (format !== 'shell-trace') return;
      if (stream === 'stdout') onOutput?.(stream, chunk);
      else if (onOutput) sendText(onOutput, untraced.push(text));
    },
    /** The run's output as people read it, and its steps. */
    finish(r: Output & { exitCode: number }): Output & { steps?: ProgressStep[]; moreSteps?: number } {
      for (const stream of ['stdout', 'stderr'] as const) {
        const rest = decoders[stream].decode();
        if (rest) reader.push(stream, rest, performance.now() - t0);
        if (rest && stream === 'stderr' && format === 'shell-trace' && onOutput) sendText(onOutput, untraced.push(rest));
      }
      if (format === 'shell-trace' && onOutput) sendText(onOutput, untraced.end());
      const summary = reader.finish(r.exitCode, performance.now() - t0);
      for (const update of summary.ended) tell(update);
      return { stdout: summary.stdout ?? r.stdout, stderr: summary.stderr ?? r.stderr, steps: summary.steps, moreSteps: summary.moreSteps };
    },
  };
}

const sendText = (onOutput: OutputListener, text: string) => {
  if (text) onOutput('stderr', Buffer.from(text));
};

/** The shell's stderr as it streams, whole lines at a time, without its trace lines (as shellTraceReader keeps stderr). */
export function untracedStderr() {
  let rest = '';
  // A trace line that interrupted a partial line leaves that part (as the reader does).
  const plain = (line: string) => {
    const i = line.indexOf(SHELL_TRACE_PS4);
    return i < 0 ? line : line.slice(0, i);
  };
  return {
    push(text: string): string {
      const lines = (rest + text).split('\n');
      rest = lines.pop() ?? '';
      return lines.map((l) => plain(`${l}\n`)).join('');
    },
    end(): string {
      const last = plain(rest);
      rest = '';
      return last;
    },
  };
}
