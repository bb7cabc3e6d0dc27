/**
 * The agent at work, seen from the web chat (issue 22's bench), against a real berth (`berth
 * serve`'s wiring: app, web chat bridge, WebSocket) and real containers:
 * 1. The first tool call: the real Claude Code CLI (agent image) asks a fake Messages API; when
 *    the fake answers with a Bash tool call, it notes the time. The WebSocket client notes when
 *    the step ("running") arrives. arrival − sent is what Claude Code's stream-json, the engine
 *    attach, the progress reader, the bridge core and the socket add. Goal: p95 ≤ 250 ms.
 * 2. The streaming path's cost on a run: the demo shell's `echo` run by admin.runMessage plain
 *    and watched (the shell traces its commands; the reader turns them into steps), interleaved,
 *    same project and session. Goal: ≤ 5 ms added at p50.
 */
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { createBerth } from '../src/main.js';
import type { ProgressUpdate } from '../src/runs/agent-progress.js';
import { listenHttp } from '../src/cli/serve.js';
import { defaultReply, startFakeAnthropic, type ReplyFn } from '../test/fakes/anthropic-api.js';
import { chatSocket, wallNow } from './chat-socket.js';
import { summary } from './stats.js';

const TOOL_RUNS = Number(process.env.BENCH_PROGRESS_TOOL_RUNS ?? 12);
const RUNS = Number(process.env.BENCH_PROGRESS_RUNS ?? 30);
const ms = (v: number) => `${v.toFixed(1)} ms`;
const KEY = `sk-ant-api03-bench-${randomUUID()}`;

// The fake notes when it sends each tool call (its events follow at once: eventDelayMs 0).
const toolSentAt: number[] = [];
const reply: ReplyFn = (ctx) => {
  const r = defaultReply(ctx);
  if (JSON.stringify(r).includes('"tool_use"')) toolSentAt.push(wallNow());
  return r;
};
const fake = await startFakeAnthropic({ apiKey: KEY, reply });
const home = fs.mkdtempSync(join(os.tmpdir(), 'berth-bench-progress-'));
fs.writeFileSync(
  join(home, 'berth.yaml'),
  ['models:', '  anthropic:', '    api: anthropic', `    url: ${fake.url}`, `    api_key: ${KEY}`, ''].join('\n'),
);
const quiet = { out: () => undefined, err: () => undefined };
const berth = createBerth({ home, logLevel: 'silent' });
berth.store.create({ name: 'cc', workspace_isolation: true, agent: 'claude', models: { upstreams: ['anthropic'] } });
berth.store.create({ name: 'sh', workspace_isolation: true });
const http = await listenHttp(berth, { host: '127.0.0.1', port: 0, token: 'bench-admin-token-0123456789' }, quiet);
try {
  const { session, ws, listen } = await chatSocket(berth, http.url, 'cc', 'bench');

  // 1. The first tool call of each message, in the page's socket.
  const firstStep: number[] = [];
  const total: number[] = [];
  console.error(`berth bench (progress): ${TOOL_RUNS} messages to the real Claude Code, each one Bash call ...`);
  for (let r = 0; r < TOOL_RUNS + 2; r++) {
    const sentBefore = toolSentAt.length;
    let stepAt: number | undefined;
    const t0 = performance.now();
    await new Promise<void>((resolve, reject) => {
      listen((m, at) => {
        if (m.type === 'step' && m.step.state === 'running') stepAt ??= at;
        else if (m.type === 'done') resolve();
        else if (m.type === 'error') reject(new Error(m.message));
      });
      ws.send(
        JSON.stringify({ type: 'run', id: randomUUID(), session_id: session.id, permission_level: 'low', input: `BASH: echo bench-${r}` }),
      );
    });
    const sent = toolSentAt[sentBefore];
    if (stepAt === undefined || sent === undefined)
      throw new Error(`message ${r}: no step seen (tool calls sent: ${toolSentAt.length - sentBefore})`);
    if (r >= 2) {
      // The first two warm the image and the conversation.
      firstStep.push(stepAt - sent);
      total.push(performance.now() - t0);
    }
  }
  ws.close();
  const sf = summary(firstStep);
  const st = summary(total);
  console.log(`\n| the first tool call of a real Claude Code run reaching the page's socket (${sf.n} runs) | p50 | p95 | max | goal |`);
  console.log('| --- | --- | --- | --- | --- |');
  console.log(
    `| step arrival − the fake model sending the tool call | ${ms(sf.p50)} | ${ms(sf.p95)} | ${ms(Math.max(...firstStep))} | p95 ≤ 250 ms: ${sf.p95 <= 250 ? 'met' : 'MISSED'} |`,
  );
  console.log(`| the whole message (for scale) | ${ms(st.p50)} | ${ms(st.p95)} | ${ms(Math.max(...total))} | |`);

  // 2. The streaming path's cost: plain and watched runs of the same message, interleaved.
  const plain: number[] = [];
  const watched: number[] = [];
  const sh = berth.admin.openSession('sh', 'bench-sh', 'web:bench');
  console.error(`berth bench (progress): ${RUNS} interleaved "echo" runs of the demo shell, plain and watched ...`);
  for (let i = 0; i < RUNS + 3; i++) {
    let t0 = performance.now();
    await berth.admin.runMessage('sh', { user: 'web:bench', message: 'echo hi', session: sh.id });
    const a = performance.now() - t0;
    const steps: ProgressUpdate[] = [];
    t0 = performance.now();
    const run = await berth.admin.runMessage('sh', {
      user: 'web:bench',
      message: 'echo hi',
      session: sh.id,
      onProgress: (u) => steps.push(u),
    });
    const b = performance.now() - t0;
    if (run.steps?.length !== 1 || steps.length !== 2)
      throw new Error(`watched run: expected one step (start and end), got ${JSON.stringify(run.steps)}`);
    if (i >= 3) (plain.push(a), watched.push(b));
  }
  const sp = summary(plain);
  const sw = summary(watched);
  console.log(`\n| "echo hi" run of the demo shell (${RUNS} each, interleaved) | p50 | p95 | p50 added | ratio p50 | goal |`);
  console.log('| --- | --- | --- | --- | --- | --- |');
  console.log(`| plain (no one watches) | ${ms(sp.p50)} | ${ms(sp.p95)} | | 1.00 | |`);
  console.log(
    `| watched: traced, read into steps | ${ms(sw.p50)} | ${ms(sw.p95)} | ${ms(sw.p50 - sp.p50)} | ${(sw.p50 / sp.p50).toFixed(2)} | ≤ 5 ms: ${sw.p50 - sp.p50 <= 5 ? 'met' : 'MISSED'} |`,
  );
} finally {
  await http.close();
  await berth.runner.reapLeftovers();
  await fake.close();
  fs.rmSync(home, { recursive: true, force: true });
}
