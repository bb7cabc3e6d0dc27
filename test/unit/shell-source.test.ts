import { describe, expect, it } from 'vitest';
import { SHELL_TRACE_PS4 } from '../../src/plan/agent-command.js';
import { matchShellUnit, readShellSource, SHELL_UNITS_MAX } from '../../src/plan/shell-source.js';
import { tracedWords } from '../../src/plan/shell-words.js';
import { shellTraceReader } from '../../src/runs/shell-trace.js';

/**
 * Issue 42 item 6: the demo shell's step labels keep what the person wrote that busybox's trace
 * drops (redirections), and a pipeline, whose sides trace at once, word by word, is one step.
 */
describe('readShellSource: a message as written', () => {
  it('simple commands keep their redirections; a pipeline is one unit, as written', () => {
    expect(readShellSource('echo hi > notes.txt; ls -la')).toEqual([
      { kind: 'command', name: 'echo', literals: ['hi'], redirections: ['> notes.txt'] },
      { kind: 'command', name: 'ls', literals: ['-la'], redirections: [] },
    ]);
    expect(readShellSource('cat a 2>/dev/null |  wc -l')).toEqual([
      { kind: 'pipeline', names: ['cat', 'wc'], text: 'cat a 2>/dev/null | wc -l', size: 2 },
    ]);
  });

  it("a compound's redirections go to the commands inside; keywords, loop headers and case patterns are no commands", () => {
    expect(readShellSource('for i in 1 2; do echo step $i > f$i; done 2>&1')).toEqual([
      { kind: 'command', name: 'echo', literals: ['step'], redirections: ['> f$i', '2>&1'] },
    ]);
    expect(
      readShellSource('{ echo a; echo b; } >out; if [ -f x ]; then cat x >>y; fi').map(
        (u) => u.kind === 'command' && [u.name, u.redirections],
      ),
    ).toEqual([
      ['echo', ['>out']],
      ['echo', ['>out']],
      ['[', []],
      ['cat', ['>>y']],
    ]);
    expect(readShellSource('case $x in a|b) echo a > f;; *) echo z;; esac').map((u) => u.kind === 'command' && u.name)).toEqual([
      'echo',
      'echo',
    ]);
  });

  it('quotes, expansions and here-documents are read past, not into commands', () => {
    expect(readShellSource('x=$(echo "a > b; c") ; echo "$x" 1>&2 # > not this')).toEqual([
      { kind: 'command', name: undefined, literals: [], redirections: [] },
      { kind: 'command', name: 'echo', literals: [], redirections: ['1>&2'] },
    ]);
    expect(readShellSource("cat <<'EOF' > out\nrm -rf / > x\nEOF\necho 'a > b'")).toEqual([
      { kind: 'command', name: 'cat', literals: [], redirections: ["<<'EOF'", '> out'] },
      { kind: 'command', name: 'echo', literals: ['a > b'], redirections: [] },
    ]);
  });

  it('is bounded, and never throws on a message it does not follow', () => {
    expect(readShellSource('true;'.repeat(SHELL_UNITS_MAX * 3))).toHaveLength(SHELL_UNITS_MAX);
    for (const odd of ["echo 'open", 'echo "open $(', 'a | | b', '))) ;;; &&', '<<', 'echo $((1+', '`', '\\'])
      expect(() => readShellSource(odd)).not.toThrow();
  });
});

describe('matchShellUnit: which command a trace line is of', () => {
  const units = readShellSource('for i in 1 2; do echo $i > f; done; echo end; cat a | wc -l');
  it('by name and plain words, from the cursor on, then again from the start (a loop)', () => {
    expect(tracedWords("X=1 echo 'rc=1' a\\ b")).toEqual(['echo', 'rc=1', 'a b']);
    expect(matchShellUnit(units, 'echo 1', 0)).toBe(0);
    expect(matchShellUnit(units, 'echo 2', 1)).toBe(0); // not "echo end": its plain word is missing
    expect(matchShellUnit(units, 'echo end', 1)).toBe(1);
    expect(matchShellUnit(units, 'catwc a -l', 2)).toBe(2); // interleaved sides
    expect(matchShellUnit(units, 'grep x', 0)).toBeUndefined();
  });
});

describe('the shell trace read with its source', () => {
  const feed = (source: string, trace: string, exit = 0) => {
    const r = shellTraceReader(source);
    r.push('stderr', trace, 1);
    return r.finish(exit, 2);
  };
  const P = SHELL_TRACE_PS4;

  it("the report's steps: `echo hi > notes.txt` keeps its redirection, `cat a 2>/dev/null | wc -l` is one step however its sides interleave", () => {
    expect(feed('echo hi > notes.txt; ls -la', `${P}echo hi\n${P}ls -la\n`).steps.map((s) => s.detail)).toEqual([
      'echo hi > notes.txt',
      'ls -la',
    ]);
    const pipe = 'cat a 2>/dev/null | wc -l; echo ok';
    for (const trace of [
      `${P}cat a\n${P}wc -l\n`,
      `${P}${P}wc -l\ncat a\n`,
      `${P}${P}catwc a -l\n\n`,
      `${P}cat${P} awc -l\n\n`,
      `${P}wc${P}cat -l\na\n`,
    ]) {
      const summary = feed(pipe, `${trace}${P}echo ok\n`);
      expect(summary.steps.map((s) => s.detail)).toEqual(['cat a 2>/dev/null | wc -l', 'echo ok']);
      expect(summary.stderr).toBe('');
    }
  });

  it("a pipeline's side traced after the next command (a loaded machine): the next command is still its own step", () => {
    const source = 'cat a 2>/dev/null | wc -l; cat b 2>&1 >/dev/null | wc -l; echo bye >&2';
    const summary = feed(source, `${P}cat a\n${P}wc -l\n${P}wc -l\n${P}echo bye\n${P}cat b\n`);
    expect(summary.steps.map((s) => s.detail)).toEqual(['cat a 2>/dev/null | wc -l', 'cat b 2>&1 >/dev/null | wc -l', 'echo bye >&2']);
  });

  it('a loop traces its commands again: each time with its redirections; an unmatched trace keeps its words', () => {
    const summary = feed('for i in 1 2; do echo $i >> log; done; $cmd x', `${P}echo 1\n${P}echo 2\n${P}ls x\n`);
    expect(summary.steps.map((s) => s.detail)).toEqual(['echo 1 >> log', 'echo 2 >> log', 'ls x']);
  });

  it('a command of only a redirection is a step too; stderr that is not the trace stays', () => {
    const summary = feed(': ; > empty', `${P}:\n${P}\nsh: can't create empty: Read-only file system\n`, 1);
    expect(summary.steps.map((s) => [s.detail, s.state])).toEqual([
      [':', 'ended'],
      ['> empty', 'failed'],
    ]);
    expect(summary.stderr).toBe("sh: can't create empty: Read-only file system\n");
  });
});

describe('bounds of the trace read with its source', () => {
  it('many units and a loop of many trace lines: past the steps a run keeps, no label is searched for (a ratio to reading without a source)', () => {
    // 512 units named "x" whose plain words the loop's trace never has: each line would scan them all.
    const source = `${Array.from({ length: 600 }, (_, i) => `x a${i} > f${i}`).join('; ')}; while :; do x; done`;
    const lines = `${SHELL_TRACE_PS4}x b c\n`.repeat(100_000);
    const time = (r: ReturnType<typeof shellTraceReader>) => {
      const t0 = performance.now();
      r.push('stderr', lines, 1);
      const ms = performance.now() - t0;
      const summary = r.finish(0, 2);
      expect(summary.steps.length + summary.moreSteps).toBe(100_000);
      return ms;
    };
    const plainMs = time(shellTraceReader());
    expect(time(shellTraceReader(source))).toBeLessThan(plainMs * 3);
  });
});
