import { RUN_STEPS_MAX } from '../store/run-log.js';

/**
 * What every progress reader shares (runs/agent-progress.ts, runs/shell-trace.ts): a step and
 * an update, the bounds, the steps of a run by id, and a stream cut into lines.
 */

/** Ended: the step finished and its outcome is not known (a shell command that another followed). */
export type StepState = 'running' | 'ok' | 'failed' | 'ended';

export interface ProgressStep {
  /** Unique within the run. */
  id: string;
  /** The tool, as the agent names it ("Bash", "Edit", "command", "sh"). */
  tool: string;
  /** What it works on: the command, the file, the pattern (at most DETAIL_MAX characters). */
  detail: string;
  state: StepState;
  /** A short result (at most RESULT_MAX characters, its end kept), once it ended. */
  result?: string;
  /** Milliseconds from the run's start. */
  at: number;
  /** How long it took, once it ended. */
  ms?: number;
}

/**
 * A step, the agent's words, or its container: `starting` when the message waits for a new one
 * (none warm for its session: a cold start, a pool claim, a new pod), `started` once it runs.
 */
export type ProgressUpdate =
  { type: 'step'; step: ProgressStep } | { type: 'note'; text: string } | { type: 'container'; phase: 'starting' | 'started' };

export interface ProgressSummary {
  /** The run's stdout as people read it: the agent's answer, else what it printed that was not an event (a CLI's plain error); absent: stdout as it came. */
  stdout?: string;
  /** stderr without the trace's lines (shell-trace); absent: stderr as it came. */
  stderr?: string;
  steps: ProgressStep[];
  /** Steps past RUN_STEPS_MAX: counted, not kept. */
  moreSteps: number;
  /** The steps the end of the run ended (a watcher saw them running). */
  ended: ProgressUpdate[];
}

export interface ProgressReader {
  push(stream: 'stdout' | 'stderr', chunk: string, atMs: number): ProgressUpdate[];
  /** The agent said its turn is over (its answer is in): what it still does is its own, not the task's. */
  answered(): boolean;
  finish(exitCode: number, atMs: number): ProgressSummary;
}

export const DETAIL_MAX = 160;
export const RESULT_MAX = 400;
export const NOTE_MAX = 2000;
/** A line longer than this is not read as an event (its bytes still count against the output cap). */
export const LINE_MAX = 1024 * 1024;

export const oneLine = (s: string, max: number) => {
  const flat = s.replace(/\s+/g, ' ').trim();
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat;
};
/** Control characters (a trace prefix, a terminal escape) never reach a label. */
export const printable = (s: string) => s.replace(/[\u0000-\u0008\u000e-\u001f\u007f-\u009f]/g, '');
const tail = (s: string, max: number) => {
  const t = s.trim();
  return t.length > max ? `…${t.slice(t.length - max + 1)}` : t;
};

/** Steps by id (a Map: an id is the agent's text, never an object key), bounded. */
export class Steps {
  private readonly byId = new Map<string, ProgressStep>();
  private readonly order: ProgressStep[] = [];
  more = 0;

  start(id: string, tool: string, detail: string, at: number): ProgressUpdate[] {
    if (this.byId.has(id)) return [];
    if (this.order.length >= RUN_STEPS_MAX) {
      this.more++;
      return [];
    }
    const step: ProgressStep = {
      id,
      tool: oneLine(printable(tool), 40) || 'tool',
      detail: oneLine(printable(detail), DETAIL_MAX),
      state: 'running',
      at,
    };
    this.byId.set(id, step);
    this.order.push(step);
    return [{ type: 'step', step: { ...step } }];
  }

  end(id: string, state: Exclude<StepState, 'running'>, result: string | undefined, at: number): ProgressUpdate[] {
    const step = this.byId.get(id);
    if (!step || step.state !== 'running') return [];
    step.state = state;
    if (result !== undefined && result.trim() !== '') step.result = tail(result, RESULT_MAX);
    step.ms = Math.max(0, at - step.at);
    return [{ type: 'step', step: { ...step } }];
  }

  running(): ProgressStep[] {
    return this.order.filter((s) => s.state === 'running');
  }

  all(): ProgressStep[] {
    return this.order.map((s) => ({ ...s }));
  }
}

/** Splits a stream into lines; a line past LINE_MAX is skipped whole. */
export class Lines {
  private buf = '';
  private skipping = false;

  push(chunk: string): string[] {
    const out: string[] = [];
    let text = chunk;
    for (;;) {
      const nl = text.indexOf('\n');
      if (nl < 0) break;
      const line = this.buf + text.slice(0, nl);
      text = text.slice(nl + 1);
      this.buf = '';
      if (!this.skipping) out.push(line);
      this.skipping = false;
    }
    if (!this.skipping) {
      this.buf += text;
      if (this.buf.length > LINE_MAX) {
        this.buf = '';
        this.skipping = true;
      }
    }
    return out;
  }

  rest(): string {
    const r = this.skipping ? '' : this.buf;
    this.buf = '';
    return r;
  }
}
