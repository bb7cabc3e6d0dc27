import { describe, expect, it } from 'vitest';
import { SHELL_TRACE_PS4 } from '../../src/plan/agent-command.js';
import { progressTap } from '../../src/runs/progress-tap.js';

/**
 * The demo shell's output as a chat shows it live: stdout as it comes, stderr too (issue 42
 * item 2: the web chat shows stderr in order) but never the shell's trace lines, whatever the
 * chunks' boundaries.
 */
describe('progressTap for the shell (shell-trace)', () => {
  it("passes the program's stderr on in order with stdout, without the trace, and keeps the steps", () => {
    const seen: Array<[string, string]> = [];
    const steps: string[] = [];
    const tap = progressTap(
      { progress: 'shell-trace' },
      {
        onOutput: (stream, chunk) => seen.push([stream, chunk.toString()]),
        onProgress: (u) => void (u.type === 'step' && steps.push(`${u.step.state} ${u.step.detail}`)),
      },
    );
    const out = (stream: 'stdout' | 'stderr', text: string) => tap.onOutput?.(stream, Buffer.from(text));
    out('stderr', `${SHELL_TRACE_PS4}cat notes.txt\n`);
    out('stdout', 'alice was here\n');
    out('stderr', `${SHELL_TRACE_PS4}cat nope.txt\ncat: can't open 'no`);
    out('stderr', `pe.txt': No such file or directory\n${SHELL_TRACE_PS4}echo ok\n`);
    out('stdout', 'ok\n');
    out('stderr', 'last words without a newline');
    const result = tap.finish({ stdout: '', stderr: '', exitCode: 0 });
    expect(seen).toEqual([
      ['stdout', 'alice was here\n'],
      ['stderr', "cat: can't open 'nope.txt': No such file or directory\n"],
      ['stdout', 'ok\n'],
      ['stderr', 'last words without a newline'],
    ]);
    expect(result.stderr).toBe("cat: can't open 'nope.txt': No such file or directory\nlast words without a newline");
    expect(steps).toContain('running cat nope.txt');
  });

  it('a trace line that interrupts a partial line leaves that part', () => {
    const seen: string[] = [];
    const tap = progressTap({ progress: 'shell-trace' }, { onOutput: (_, chunk) => seen.push(chunk.toString()) });
    tap.onOutput?.('stderr', Buffer.from(`half a line${SHELL_TRACE_PS4}echo next\nwhole\n`));
    expect(seen).toEqual(['half a linewhole\n']);
    expect(tap.finish({ stdout: '', stderr: '', exitCode: 0 }).stderr).toBe('half a linewhole\n');
  });

  it("a pipeline's sides traced at once never leak into what is shown live, and the message's source names the step", () => {
    const seen: string[] = [];
    const steps: string[] = [];
    const tap = progressTap(
      { progress: 'shell-trace', exec: ['sh', '-c', 'script', 'sh', 'env | grep -i proxy; cat nope'] },
      { onOutput: (_, chunk) => seen.push(chunk.toString()), onProgress: (u) => void (u.type === 'step' && steps.push(u.step.detail)) },
    );
    tap.onOutput?.(
      'stderr',
      Buffer.from(`${SHELL_TRACE_PS4}${SHELL_TRACE_PS4}grep -i proxy\nenv\n${SHELL_TRACE_PS4}cat nope\ncat: can't open 'nope'\n`),
    );
    tap.finish({ stdout: '', stderr: '', exitCode: 1 });
    expect(seen.join('')).toBe("cat: can't open 'nope'\n");
    expect([...new Set(steps)]).toEqual(['env | grep -i proxy', 'cat nope']);
  });
});
