/**
 * The web chat's costs, against a real berth (the `berth serve` wiring: app, web chat bridge,
 * WebSocket) and real containers:
 * 1. Streaming: the agent prints a line every 200 ms, each stamped with the kernel's wall clock
 *    (busybox adjtimex: µs; a container shares the host's clock). A WebSocket client records
 *    when each line arrives: arrival − stamp is what berth (engine attach → runner → bridge core
 *    → socket) adds to a printed line. Also the spacing: arrival interval − stamped interval.
 * 2. The bridge core's cost on a run: the same `echo` run by admin.runMessage directly and
 *    through the web chat (level check, durable inbox: fsynced journal lines, lane, transcript
 *    writes, reply), interleaved, same project, same session.
 */
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { createBerth } from '../src/main.js';
import { listenHttp } from '../src/cli/serve.js';
import { chatSocket } from './chat-socket.js';
import { summary } from './stats.js';

const LINES = Number(process.env.BENCH_WEB_LINES ?? 40);
const STREAM_RUNS = Number(process.env.BENCH_WEB_STREAM_RUNS ?? 3);
const RUNS = Number(process.env.BENCH_WEB_RUNS ?? 30);
const SPACING_MS = 200;
const ms = (v: number) => `${v.toFixed(2)} ms`;

const home = fs.mkdtempSync(join(os.tmpdir(), 'berth-bench-web-'));
const quiet = { out: () => undefined, err: () => undefined };
const berth = createBerth({ home, logLevel: 'silent' });
berth.store.create({ name: 'bench', workspace_isolation: true });
const http = await listenHttp(berth, { host: '127.0.0.1', port: 0, token: 'bench-admin-token-0123456789' }, quiet);
try {
  const chat = http.bridges.web!;
  const { session, ws, listen } = await chatSocket(berth, http.url, 'bench', 'bench');

  // 1. Streaming over the real socket.
  const stamp = 'adjtimex | awk -v i=$i \'/tv_sec/{s=$2} /tv_usec/{u=$2} END{printf "line %d %d%06d\\n", i, s, u}\'';
  const script = `i=0; while [ $i -lt ${LINES} ]; do ${stamp}; sleep ${SPACING_MS / 1000}; i=$((i+1)); done`;
  const latency: number[] = [];
  const spacing: number[] = [];
  console.error(`berth bench (web chat): ${STREAM_RUNS} runs printing ${LINES} stamped lines ${SPACING_MS} ms apart ...`);
  for (let r = 0; r < STREAM_RUNS; r++) {
    const lines: Array<{ stampedUs: number; at: number }> = [];
    let partial = '';
    const done = new Promise<void>((resolve, reject) => {
      listen((m, at) => {
        if (m.type === 'output' && m.stream === 'stdout') {
          partial += m.chunk;
          let nl: number;
          while ((nl = partial.indexOf('\n')) >= 0) {
            const match = /^line \d+ (\d+)$/.exec(partial.slice(0, nl));
            partial = partial.slice(nl + 1);
            if (match) lines.push({ stampedUs: Number(match[1]), at });
          }
        } else if (m.type === 'done') resolve();
        else if (m.type === 'error') reject(new Error(m.message));
      });
    });
    ws.send(JSON.stringify({ type: 'run', id: randomUUID(), session_id: session.id, permission_level: 'medium', input: script }));
    await done;
    if (lines.length !== LINES) throw new Error(`expected ${LINES} lines, got ${lines.length}`);
    for (const [i, l] of lines.entries()) {
      latency.push(l.at - l.stampedUs / 1000);
      const prev = lines[i - 1];
      if (prev) spacing.push(l.at - prev.at - (l.stampedUs - prev.stampedUs) / 1000);
    }
  }
  ws.close();
  const sl = summary(latency);
  const ss = summary(spacing.map(Math.abs));
  console.log(`\n| a printed line reaching the WebSocket client (${sl.n} lines, ${SPACING_MS} ms apart) | p50 | p95 | max | goal |`);
  console.log('| --- | --- | --- | --- | --- |');
  console.log(
    `| arrival − the line's own timestamp | ${ms(sl.p50)} | ${ms(sl.p95)} | ${ms(Math.max(...latency))} | p95 ≤ 100 ms: ${sl.p95 <= 100 ? 'met' : 'MISSED'} |`,
  );
  console.log(
    `| \\|arrival interval − printed interval\\| | ${ms(ss.p50)} | ${ms(ss.p95)} | ${ms(Math.max(...spacing.map(Math.abs)))} | |`,
  );

  // 2. The bridge core's cost on a run, interleaved with direct runs of the same message.
  const me = { project: 'bench', user: 'bench' };
  const direct: number[] = [];
  const viaCore: number[] = [];
  let replied: (() => void) | undefined;
  const detach = chat.attach(me, { push: (m) => void (m.type === 'reply' && replied?.()) });
  console.error(`berth bench (web chat): ${RUNS} interleaved "echo" runs, direct and through the bridge core ...`);
  for (let i = 0; i < RUNS + 3; i++) {
    let t0 = performance.now();
    const run = await berth.admin.runMessage('bench', { user: 'web:bench', message: 'echo hi', session: session.id, level: 'medium' });
    if (run.exit_code !== 0) throw new Error(`direct run failed: ${run.stderr}`);
    const a = performance.now() - t0;
    const reply = new Promise<void>((resolve) => (replied = resolve));
    t0 = performance.now();
    await chat.run(me, { type: 'run', id: randomUUID(), session_id: session.id, permission_level: 'medium', input: 'echo hi' });
    await reply;
    const b = performance.now() - t0;
    if (i >= 3) (direct.push(a), viaCore.push(b)); // the first few warm the engine and the image
  }
  detach();
  const sd = summary(direct);
  const sv = summary(viaCore);
  console.log(`\n| "echo hi" run (${RUNS} each, interleaved) | p50 | p95 | p50 added by the bridge core | goal |`);
  console.log('| --- | --- | --- | --- | --- |');
  console.log(`| admin.runMessage, direct | ${ms(sd.p50)} | ${ms(sd.p95)} | | |`);
  console.log(
    `| through the web chat's bridge core (inbox journal, lane, transcript) | ${ms(sv.p50)} | ${ms(sv.p95)} | ${ms(sv.p50 - sd.p50)} | ≤ 10 ms: ${sv.p50 - sd.p50 <= 10 ? 'met' : 'MISSED'} |`,
  );
} finally {
  await http.close();
  await berth.runner.reapLeftovers();
  fs.rmSync(home, { recursive: true, force: true });
}
