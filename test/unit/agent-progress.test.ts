import fs from 'node:fs';
import { describe, expect, it } from 'vitest';
import { NO_NETWORK_WORDS, SHELL_TRACE_PS4 } from '../../src/plan/agent-command.js';
import { createProgressReader, LINE_MAX, progressSentence, type ProgressUpdate } from '../../src/runs/agent-progress.js';
import { progressTap } from '../../src/runs/progress-tap.js';
import { RUN_STEPS_MAX as STEPS_MAX } from '../../src/store/run-log.js';

const fixture = (name: string) => fs.readFileSync(new URL(`../fixtures/agent-streams/${name}`, import.meta.url), 'utf8');

/** Feed text in chunks of `size` (events split across chunks, as a pipe delivers them). */
function feed(format: Parameters<typeof createProgressReader>[0], parts: Array<['stdout' | 'stderr', string]>, size = 7, exitCode = 0) {
  const reader = createProgressReader(format);
  const updates: ProgressUpdate[] = [];
  let t = 0;
  for (const [stream, text] of parts)
    for (let i = 0; i < text.length; i += size) updates.push(...reader.push(stream, text.slice(i, i + size), (t += 10)));
  return { updates, summary: reader.finish(exitCode, (t += 10)) };
}

describe('Claude Code stream-json (captured from claude 2.1.330 against the fake Messages API)', () => {
  it('a tool call starts, ends failed with its output, then the answer; nothing of the JSON reaches the answer', () => {
    const { updates, summary } = feed('claude-stream-json', [['stdout', fixture('claude-2.1.330-bash.jsonl')]]);
    const steps = updates.filter((u) => u.type === 'step').map((u) => (u.type === 'step' ? u.step : undefined));
    expect(steps.map((s) => [s?.tool, s?.detail, s?.state])).toEqual([
      ['Bash', 'echo hi; ls /nonexistent', 'running'],
      ['Bash', 'echo hi; ls /nonexistent', 'failed'],
    ]);
    expect(steps[1]?.result).toContain("ls: cannot access '/nonexistent'");
    expect(steps[1]?.ms).toBeGreaterThanOrEqual(0);
    expect(updates.filter((u) => u.type === 'note')).toEqual([{ type: 'note', text: 'done' }]);
    expect(summary).toMatchObject({ stdout: 'done\n', moreSteps: 0 });
    expect(summary).not.toHaveProperty('stderr');
    expect(summary.steps).toHaveLength(1);
  });

  it('plain text from a CLI that failed before streaming is kept as such (no answer)', () => {
    const { summary } = feed(
      'claude-stream-json',
      [
        ['stdout', 'Invalid API key · Please run /login\n'],
        ['stderr', 'boom\n'],
      ],
      5,
      1,
    );
    expect(summary).toEqual({ stdout: 'Invalid API key · Please run /login\n', steps: [], moreSteps: 0, ended: [] });
  });

  it('forged events: proto keys, non-string fields, unknown types and a step that never ends', () => {
    const lines = [
      '{"type":"assistant","message":{"content":[{"type":"tool_use","id":"__proto__","name":{"x":1},"input":{"command":["rm"]}}]}}',
      '{"type":"assistant","message":{"content":[{"type":"tool_use","id":"constructor","name":"Bash","input":{"command":"sleep 9"}}]}}',
      '{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"toString","content":"x"}]}}',
      '[1,2]',
      '"str"',
      '{"type":"result","result":42}',
    ];
    const { summary } = feed('claude-stream-json', [['stdout', `${lines.join('\n')}\n`]], 13, 0);
    expect(summary.steps.map((s) => [s.id, s.tool, s.state])).toEqual([
      ['__proto__', 'tool', 'ended'],
      ['constructor', 'Bash', 'ended'],
    ]);
    expect(summary.stdout).toBe('[1,2]\n"str"\n'); // not events: shown as printed
    expect(({} as Record<string, unknown>).x).toBeUndefined();
  });
});

describe('Codex exec --json', () => {
  it('captured from codex 0.169.0: its last message is the answer; the code-mode error item is not a step', () => {
    const { updates, summary } = feed('codex-json', [['stdout', fixture('codex-0.169.0-reply.jsonl')]]);
    expect(updates).toEqual([{ type: 'note', text: 'fake reply 1' }]);
    expect(summary).toMatchObject({ stdout: 'fake reply 1\n', steps: [] });
  });

  it('captured from codex 0.169.0 running a command through its code-mode host: a command step, failed with its output, then the answer', () => {
    const { updates, summary } = feed('codex-json', [['stdout', fixture('codex-0.169.0-exec.jsonl')]], 17);
    const steps = updates.flatMap((u) => (u.type === 'step' ? [u.step] : []));
    expect(steps.map((s) => [s.tool, s.detail, s.state])).toEqual([
      ['command', "/bin/bash -c 'echo made-by-codex > made.txt; echo hi; ls /nonexistent'", 'running'],
      ['command', "/bin/bash -c 'echo made-by-codex > made.txt; echo hi; ls /nonexistent'", 'failed'],
    ]);
    expect(steps[1]?.result).toBe("hi\nls: cannot access '/nonexistent': No such file or directory");
    expect(summary.stdout).toMatch(/^ran: Script completed\n[\s\S]*No such file or directory\n$/);
  });

  it('a command and a file change (the documented item shapes) become steps with their outcome', () => {
    const events = [
      {
        type: 'item.started',
        item: {
          id: 'item_1',
          type: 'command_execution',
          command: 'bash -lc "npm test"',
          aggregated_output: '',
          exit_code: null,
          status: 'in_progress',
        },
      },
      {
        type: 'item.completed',
        item: {
          id: 'item_1',
          type: 'command_execution',
          command: 'bash -lc "npm test"',
          aggregated_output: '1 failing\n',
          exit_code: 1,
          status: 'failed',
        },
      },
      {
        type: 'item.completed',
        item: { id: 'item_2', type: 'file_change', changes: [{ path: 'src/app.py', kind: 'update' }], status: 'completed' },
      },
      { type: 'turn.failed', error: { message: 'stream disconnected' } },
    ];
    const { summary } = feed('codex-json', [['stdout', events.map((e) => JSON.stringify(e)).join('\n')]], 11);
    expect(summary.steps.map((s) => [s.tool, s.detail, s.state, s.result])).toEqual([
      ['command', 'bash -lc "npm test"', 'failed', '1 failing'],
      ['edit', 'update src/app.py', 'ok', undefined],
    ]);
    expect(summary.stdout).toBe('error: stream disconnected\n');
  });
});

describe('droid exec --output-format stream-json (written from the format of public captures: droid is not on npm, so not in the image)', () => {
  it('tool calls and results linked by id (parallel calls too), an Execute exit code read from its trailer, the completion as the answer', () => {
    const { updates, summary } = feed('droid-stream-json', [['stdout', fixture('droid-stream-json.jsonl')]]);
    const steps = updates.flatMap((u) => (u.type === 'step' ? [[u.step.tool, u.step.detail, u.step.state]] : []));
    expect(steps).toEqual([
      ['Execute', 'echo hi; ls /nonexistent', 'running'],
      ['Execute', 'echo hi; ls /nonexistent', 'failed'],
      ['ApplyPatch', '/workspace/app.py', 'running'],
      ['Read', '/workspace/missing.txt', 'running'],
      ['ApplyPatch', '/workspace/app.py', 'ok'],
      ['Read', '/workspace/missing.txt', 'failed'],
    ]);
    expect(summary.steps.map((s) => s.result)).toEqual([
      expect.stringContaining('[Process exited with code 2]'),
      expect.stringContaining('"success":true'),
      'Error: file not found',
    ]);
    expect(updates.filter((u) => u.type === 'note')).toEqual([{ type: 'note', text: 'Fixed the typo in app.py.' }]);
    expect(summary.stdout).toBe('Fixed the typo in app.py.\n');
    expect(progressSentence(summary.steps)).toBe('ran 1 command, made 1 edit, read 1 file');
  });

  it('an older droid ends without a completion (its last words are the answer); an error line is the answer when there is none', () => {
    const noCompletion = fixture('droid-stream-json.jsonl')
      .split('\n')
      .filter((l) => !l.includes('"completion"'))
      .join('\n');
    expect(feed('droid-stream-json', [['stdout', noCompletion]]).summary.stdout).toBe('Fixed the typo in app.py.\n');
    const error = '{"type":"error","source":"cli","message":"Exec ended early: insufficient permission to proceed.","timestamp":1}\n';
    expect(feed('droid-stream-json', [['stdout', error]], 7, 1).summary.stdout).toBe(
      'error: Exec ended early: insufficient permission to proceed.\n',
    );
  });
});

describe('the shell trace (sh -x with berth PS4)', () => {
  it("each command is a step; the last takes the run's status; trace lines leave stderr, the rest stays", () => {
    const stderr = `${SHELL_TRACE_PS4}echo 'alice was here'\n${SHELL_TRACE_PS4}ls nope\nls: nope: No such file or directory\npartial${SHELL_TRACE_PS4}false\n`;
    const { updates, summary } = feed(
      'shell-trace',
      [
        ['stdout', 'alice was here\n'],
        ['stderr', stderr],
      ],
      3,
      1,
    );
    expect(summary.steps.map((s) => [s.detail, s.state])).toEqual([
      ["echo 'alice was here'", 'ended'],
      ['ls nope', 'ended'],
      ['false', 'failed'],
    ]);
    expect(summary.stderr).toBe('ls: nope: No such file or directory\npartial');
    expect(updates.filter((u) => u.type === 'step' && u.step.state === 'running')).toHaveLength(3);
    // The run's end ends the last step: a watcher is told.
    expect(summary.ended).toEqual([{ type: 'step', step: expect.objectContaining({ detail: 'false', state: 'failed' }) }]);
  });

  it("a pipeline whose two sides trace at once (the report's `env | grep -i proxy`): two clean steps, no control characters, nothing leaks into stderr", () => {
    // As busybox sh wrote it at level low: both prefixes first, then each command on its own line.
    const stderr = `${SHELL_TRACE_PS4}${SHELL_TRACE_PS4}grep -i proxy\nenv\n${SHELL_TRACE_PS4}wget -qO- -T 3 http://example.com\nwget: ${NO_NETWORK_WORDS}\n`;
    const { summary } = feed('shell-trace', [['stderr', stderr]], 5, 1);
    expect(summary.steps.map((s) => [s.detail, s.state])).toEqual([
      ['grep -i proxy', 'ended'],
      ['env', 'ended'],
      ['wget -qO- -T 3 http://example.com', 'failed'],
    ]);
    expect(summary.stderr).toBe(`wget: ${NO_NETWORK_WORDS}\n`);
  });

  it("berth's no-network wget body (its refusal, or its call of the real wget for loopback) is no step; a control character never reaches a label", () => {
    const stderr = `${SHELL_TRACE_PS4}wget http://x\n${SHELL_TRACE_PS4}sh -c 'echo "wget: ${NO_NETWORK_WORDS}" >&2; exit 1'\n${SHELL_TRACE_PS4}wget http://127.0.0.1:41400/v1\n${SHELL_TRACE_PS4}BERTH_LOOPBACK=1 wget http://127.0.0.1:41400/v1\n${SHELL_TRACE_PS4}printf '\x1b[31mred\x07'\n`;
    const { summary } = feed('shell-trace', [['stderr', stderr]], 9, 0);
    expect(summary.steps.map((s) => s.detail)).toEqual(['wget http://x', 'wget http://127.0.0.1:41400/v1', "printf '[31mred'"]);
  });
});

describe('bounds', () => {
  it(`at most ${STEPS_MAX} steps are kept; the rest are counted`, () => {
    const trace = Array.from({ length: STEPS_MAX + 5 }, (_, i) => `${SHELL_TRACE_PS4}echo ${i}`).join('\n');
    const { summary } = feed('shell-trace', [['stderr', trace]], 4096);
    expect(summary.steps).toHaveLength(STEPS_MAX);
    expect(summary.moreSteps).toBe(5);
  });

  it('a line past LINE_MAX is skipped whole, and the next line is read', () => {
    const huge = `{"type":"result","result":"${'x'.repeat(LINE_MAX + 10)}"}`;
    const { summary } = feed('claude-stream-json', [['stdout', `${huge}\n{"type":"result","result":"ok"}\n`]], 64 * 1024);
    expect(summary.stdout).toBe('ok\n');
  });

  it('details and results are cut to a line, results keep their end', () => {
    const long = 'y'.repeat(5000);
    const lines = [
      JSON.stringify({
        type: 'assistant',
        message: { content: [{ type: 'tool_use', id: 't', name: 'Bash', input: { command: `echo ${long}\nsecond line` } }] },
      }),
      JSON.stringify({
        type: 'user',
        message: { content: [{ type: 'tool_result', tool_use_id: 't', content: [{ type: 'text', text: `${long}END` }] }] },
      }),
    ];
    const { summary } = feed('claude-stream-json', [['stdout', lines.join('\n')]], 999);
    const [step] = summary.steps;
    expect(step?.detail.length).toBe(160);
    expect(step?.detail).not.toContain('\n');
    expect(step?.result?.endsWith('END')).toBe(true);
    expect(step?.result?.length).toBe(400);
  });
});

describe('progressSentence', () => {
  it('counts the kinds of work and names what runs now', () => {
    const step = (tool: string, detail: string, state: 'running' | 'ok') => ({ id: detail, tool, detail, state, at: 0 });
    expect(
      progressSentence([
        step('Bash', 'ls', 'ok'),
        step('Bash', 'npm i', 'ok'),
        step('Edit', 'app.py', 'ok'),
        step('Bash', 'npm test', 'running'),
      ]),
    ).toBe('ran 3 commands, made 1 edit; now: npm test');
    expect(progressSentence([], 0)).toBe('working');
    expect(progressSentence([step('Read', 'a', 'ok')], 4)).toBe('read 1 file, 4 more steps');
  });
});

describe("the agent's turn is over (its answer is in): what it does after is its own", () => {
  it('Codex turn.completed, Claude Code result, droid completion; the shell trace never says so', () => {
    const codex = createProgressReader('codex-json');
    codex.push('stdout', '{"type":"item.completed","item":{"id":"i0","type":"agent_message","text":"hi"}}\n', 1);
    expect(codex.answered()).toBe(false);
    codex.push('stdout', '{"type":"turn.completed","usage":{"input_tokens":1}}\n', 2);
    expect(codex.answered()).toBe(true);
    const claude = createProgressReader('claude-stream-json');
    claude.push('stdout', '{"type":"result","result":"done"}\n', 1);
    expect(claude.answered()).toBe(true);
    const droid = createProgressReader('droid-stream-json');
    droid.push('stdout', '{"type":"completion","finalText":"ok"}\n', 1);
    expect(droid.answered()).toBe(true);
    const sh = createProgressReader('shell-trace');
    sh.push('stderr', `${SHELL_TRACE_PS4}echo hi\n`, 1);
    expect(sh.answered()).toBe(false);
  });
});

describe('progressTap: the runner hears once that the agent answered (its sockets then stop asking anyone)', () => {
  it('onAnswered fires at turn.completed, once, and never for the shell trace', () => {
    let answered = 0;
    const tap = progressTap({ progress: 'codex-json' }, { onAnswered: () => answered++ });
    tap.onOutput?.('stdout', Buffer.from('{"type":"item.completed","item":{"id":"i0","type":"agent_message","text":"hi"}}\n'));
    expect(answered).toBe(0);
    tap.onOutput?.('stdout', Buffer.from('{"type":"turn.comp'));
    tap.onOutput?.('stdout', Buffer.from('leted"}\n{"type":"turn.completed"}\n'));
    expect(answered).toBe(1);
    expect(tap.finish({ stdout: '', stderr: '', exitCode: 0 }).stdout).toBe('hi\n');
    const sh = progressTap({ progress: 'shell-trace' }, { onAnswered: () => answered++ });
    sh.onOutput?.('stderr', Buffer.from(`${SHELL_TRACE_PS4}echo hi\n`));
    expect(answered).toBe(1);
  });
});
