import { isShellWrapperTrace, SHELL_TRACE_PS4 } from '../plan/agent-command.js';
import { matchShellUnit, readShellSource, type ShellUnit } from '../plan/shell-source.js';
import { Lines, Steps, type ProgressReader, type ProgressUpdate } from './progress-steps.js';

/**
 * The shell preset's trace (`sh -x` with SHELL_TRACE_PS4), read as steps: each traced command
 * starts a step (the one before it ended, its outcome unknown); the last step takes the run's exit
 * status. Trace lines are taken out of stderr; the rest of stderr is kept, whole lines as they
 * come (`takeStderr`) and in all at the end.
 *
 * With the message's source (`source`), a step reads as the person wrote it where the trace
 * cannot say: a command's redirections follow its traced words ("echo hi > notes.txt"), and a
 * pipeline is one step labelled as written ("cat a 2>/dev/null | wc -l"), since busybox writes
 * a trace word by word and the sides of a pipeline trace at once, interleaved.
 */
export function shellTraceReader(source?: string): ProgressReader & { takeStderr(): string } {
  const units: ShellUnit[] = source === undefined ? [] : readShellSource(source);
  const steps = new Steps();
  const lines = new Lines();
  let stderr = '';
  let taken = 0;
  let n = 0;
  let current: string | undefined;
  let cursor = 0;
  // Trace records started (a prefix seen) whose line has not ended yet: the next lines are theirs.
  let open = 0;
  // Trace records still to come of the pipeline the current step is: part of it, no step.
  let absorb = 0;
  // The current step is a pipeline of the source (its sides' words may still come on later lines).
  let inPipeline = false;

  const start = (label: string, at: number): ProgressUpdate[] => {
    const updates = current ? steps.end(current, 'ended', undefined, at) : [];
    current = `s${++n}`;
    return [...updates, ...steps.start(current, 'sh', label, at)];
  };
  /** One traced command's words: a step, unless it is part of the pipeline being traced. */
  const record = (command: string, at: number): ProgressUpdate[] => {
    // berth's own no-network wget (agent-command.ts) is not a step of the person's.
    if (isShellWrapperTrace(command)) return [];
    // A record that is the next command is not absorbed: under load it can come before a side's.
    if (absorb > 0 && (cursor >= units.length || matchShellUnit(units, command, cursor) !== cursor)) {
      absorb--;
      return [];
    }
    // Past the steps a run keeps, no label is kept: nothing to match (a loop's thousands of lines cost no search).
    const found = units.length && steps.more === 0 ? matchShellUnit(units, command, cursor) : undefined;
    if (found === undefined) {
      if (command.trim() === '') return [];
      inPipeline = false;
      return start(command, at);
    }
    const unit = units[found]!;
    // A pipeline behind the cursor: a side of one already shown, traced late, never a step of its own.
    if (unit.kind === 'pipeline' && found < cursor) return [];
    cursor = found + 1;
    inPipeline = unit.kind === 'pipeline';
    if (unit.kind === 'pipeline') {
      absorb = unit.size - 1;
      return start(unit.text, at);
    }
    return start([command.trim(), ...unit.redirections].filter(Boolean).join(' '), at);
  };
  const read = (line: string, at: number): ProgressUpdate[] => {
    const i = line.indexOf(SHELL_TRACE_PS4);
    if (i < 0) {
      // A line of a record whose prefix came on an earlier line (its sides interleaved).
      if (open > 0) {
        open--;
        // The rest of an interleaved pipeline's words: part of its step, unless it is the next command.
        if (inPipeline && (cursor >= units.length || matchShellUnit(units, line, cursor) !== cursor)) return [];
        return line.trim() === '' && absorb === 0 ? [] : record(line, at);
      }
      stderr += `${line}\n`;
      return [];
    }
    if (i > 0) stderr += line.slice(0, i); // a partial line the trace interrupted
    const commands = line.slice(i + SHELL_TRACE_PS4.length).split(SHELL_TRACE_PS4);
    // This line's end ends one record; the others' words (an empty part) come on the next lines.
    open += commands.length - 1;
    const updates: ProgressUpdate[] = [];
    for (const command of commands) if (command !== '' || commands.length === 1) updates.push(...record(command, at));
    return updates;
  };
  return {
    push(stream, chunk, at) {
      if (stream === 'stdout') return [];
      return lines.push(chunk).flatMap((line) => read(line, at));
    },
    answered: () => false,
    takeStderr() {
      const text = stderr.slice(taken);
      taken = stderr.length;
      return text;
    },
    finish(exitCode, at) {
      const rest = lines.rest();
      const ended = rest.includes(SHELL_TRACE_PS4) ? read(rest, at) : [];
      if (!rest.includes(SHELL_TRACE_PS4)) stderr += rest;
      if (current) ended.push(...steps.end(current, exitCode === 0 ? 'ok' : 'failed', undefined, at));
      return { stderr, steps: steps.all(), moreSteps: steps.more, ended };
    },
  };
}
