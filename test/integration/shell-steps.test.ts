import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ProgressStep, ProgressUpdate } from '../../src/runs/agent-progress.js';
import { testHome, type TestHome } from '../helpers.js';

/**
 * First hour, round 4, step 1 ("Level selector") on real containers: the demo shell's steps as a
 * chat watches them. The report's message at level low showed a step labelled with control
 * characters, lost the `env` step into the reply, printed `PS4` in the agent's environment, and
 * busybox wget crashed (exit 139) where there is no network. Step 1's first message lost its
 * redirection from its label (`echo hi` for `echo hi > notes.txt`): busybox's trace never writes one.
 */
let h: TestHome;
beforeAll(() => {
  h = testHome();
  h.create({ name: 'steps', workspace_isolation: true });
});
afterAll(async () => {
  await h[Symbol.asyncDispose]();
});

/** A run watched as the web chat watches it: the steps it was shown, as they ended. */
async function watched(message: string, level: 'low' | 'medium') {
  const updates: ProgressUpdate[] = [];
  const o = await h.berth.runner.run({ project: 'steps', tenantKey: 'web:alice', message, level, onProgress: (u) => updates.push(u) });
  const last = new Map<string, ProgressStep>();
  for (const u of updates) if (u.type === 'step') last.set(u.step.id, u.step);
  return { o, steps: [...last.values()] };
}

// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f]/;

describe('the shell preset at work, as the chat sees it', () => {
  it("the report's level-low message: each command a clean step, nothing of the trace in the answer, and wget says there is no network", async () => {
    const { o, steps } = await watched('env | grep -i proxy; cat /proc/net/dev | cut -c1-12; wget -qO- -T 3 http://example.com', 'low');
    // A pipeline's two sides trace at once, and busybox writes a trace line word by word, so they
    // come interleaved: a pipeline is one step, labelled as written, never with control
    // characters or berth's prefix, and nothing of the trace goes into the answer.
    expect(steps.map((s) => s.detail)).toEqual([
      'env | grep -i proxy',
      'cat /proc/net/dev | cut -c1-12',
      'wget -qO- -T 3 http://example.com',
    ]);
    for (const s of steps) expect(s.detail).not.toMatch(CONTROL);
    for (const s of steps) expect(s.detail).not.toContain('berth-step');
    expect(steps.at(-1)).toMatchObject({ detail: 'wget -qO- -T 3 http://example.com', state: 'failed' });
    expect(o.exitCode).toBe(1); // not 139: nothing crashed
    expect(o.stderr).toBe('wget: there is no network at level low (at medium the agent reaches the hosts this project allows)\n');
    expect(
      o.stdout
        .split('\n')
        .slice(2)
        .map((l) => l.trim()),
    ).toEqual(['lo:', '']); // only the loopback interface is there
    expect(o.stdout).not.toMatch(/PROXY|berth-step/i);
  });

  it("the report's first message and the brief's pipeline: redirections kept in the labels, each pipeline one step, the answer untouched", async () => {
    const { o, steps } = await watched(
      'echo hi > notes.txt; ls; cat nope.txt 2>/dev/null | wc -l; cat notes.txt nope.txt 2>&1 >/dev/null | wc -l; echo bye >&2',
      'medium',
    );
    expect(steps.map((s) => s.detail)).toEqual([
      'echo hi > notes.txt',
      'ls',
      'cat nope.txt 2>/dev/null | wc -l',
      'cat notes.txt nope.txt 2>&1 >/dev/null | wc -l',
      'echo bye >&2',
    ]);
    for (const s of steps) expect(s.detail).not.toMatch(CONTROL);
    expect(o.stdout.split('\n').map((l) => l.trim())).toEqual(['AGENTS.md', 'notes.txt', '0', '1', '']);
    expect(o.stderr).toBe('bye\n');
    expect(o.exitCode).toBe(0);
  });

  it('the same without a watcher (an API run): the same words, exit 1', async () => {
    const o = await h.run('steps', 'web:alice', 'wget -q -O - http://example.com; echo rc=$?', 'low');
    expect(o.stdout).toBe('rc=1\n');
    expect(o.stderr).toContain('wget: there is no network at level low');
  });

  it("loopback is still reached at level low (the model gateway is there): wget to 127.0.0.1 is busybox's own, and no step of berth's shows", async () => {
    const { o, steps } = await watched('wget -q -O - http://127.0.0.1:9/x; echo rc=$?', 'low');
    expect(o.stdout).toBe('rc=1\n');
    expect(o.stderr).toContain("wget: can't connect to remote host (127.0.0.1)");
    expect(o.stderr).not.toContain('no network');
    expect(steps.map((s) => s.detail)).toEqual(['wget -q -O - http://127.0.0.1:9/x', "echo 'rc=1'"]);
  });

  it("PS4 is not in the agent's environment, watched or not, at any level", async () => {
    const { o } = await watched('env | grep -c PS4; true', 'medium');
    expect(o.stdout).toBe('0\n');
    expect((await h.run('steps', 'web:alice', 'env', 'low')).stdout).not.toContain('PS4');
  });
});
