/**
 * A day of traffic in 30 minutes (issue 24 item 5): 20,000 messages from 500 people, over the
 * Signal bridge (the fake signal-cli), the web chat (WebSocket) and the HTTP API at once, into one
 * `berth serve` process with warm containers (recycled after 90 s idle) and the pre-started pool.
 * Each person waits for the answer before their next message, as people do. Every 10 s it samples
 * berth's RSS and open fds (/proc), its event-loop lag p99 (its /metrics), the inbox, journal and
 * run-log sizes and the containers of the home. At the end: lost and duplicated messages, growth
 * after the warm-up, a table and a plot (SVG, docs/bench/soak.svg, shown in the README).
 *
 * BENCH_SOAK_MINUTES, BENCH_SOAK_MESSAGES and BENCH_SOAK_PEOPLE make it shorter (the plot is
 * written only for a full run unless BENCH_SOAK_PLOT names a file).
 */
import { execFileSync, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Docker from 'dockerode';
import { installationId } from '../src/main.js';
import { startFakeSignalCli } from '../test/fakes/signal-cli.js';
import { chatSocketByLink } from './chat-socket.js';
import { percentile } from './stats.js';
import { smallMultiples } from './svg-plot.js';

const MINUTES = Number(process.env.BENCH_SOAK_MINUTES ?? 30);
const MESSAGES = Number(process.env.BENCH_SOAK_MESSAGES ?? 20_000);
const PEOPLE = Number(process.env.BENCH_SOAK_PEOPLE ?? 500);
const FULL = MINUTES === 30 && MESSAGES === 20_000 && PEOPLE === 500;
const SAMPLE_MS = 10_000;
const WARM_IDLE_S = 90;
const repo = join(dirname(fileURLToPath(import.meta.url)), '..');
const PLOT = process.env.BENCH_SOAK_PLOT ?? (FULL ? join(repo, 'docs/bench/soak.svg') : undefined);
const BIN = join(repo, 'bin/berth.js');
const docker = new Docker();

// berth serve runs the built code (dist/), as an operator runs it.
execFileSync('npm', ['run', '--silent', 'build'], { cwd: repo, stdio: 'inherit' });
const home = fs.realpathSync(fs.mkdtempSync(join(os.tmpdir(), 'berth-bench-soak-')));
const fake = await startFakeSignalCli({ receiveMode: 'on-connection' });
fs.writeFileSync(
  join(home, 'berth.yaml'),
  [
    `runs: { pool: 2, warm_idle_seconds: ${WARM_IDLE_S}, warm_max: 600, max_concurrent: 8, per_tenant: 2 }`,
    'bridges:',
    '  max_concurrent_runs: 8',
    '  signal:',
    `    url: ${fake.url}`,
    `    account: '${fake.account}'`,
    '    senders: open',
    'routes:',
    '  signal: { project: soak }',
    '',
  ].join('\n'),
);
execFileSync(process.execPath, [BIN, '--home', home, 'project', 'create', 'soak', '--isolation'], { stdio: 'ignore' });
const serve = spawn(process.execPath, [BIN, '--home', home, 'serve', '--port', '0'], {
  env: { PATH: process.env.PATH ?? '', BERTH_LOG_LEVEL: 'warn' },
  stdio: ['ignore', 'pipe', 'inherit'],
});
const url = await new Promise<string>((resolve, reject) => {
  let out = '';
  serve.stdout?.on('data', (d: Buffer) => {
    out += d.toString();
    if (out.includes('ready\n')) resolve(/serving (\S+)/.exec(out)?.[1] as string);
  });
  serve.once('exit', (code) => reject(new Error(`berth serve exited ${code} before ready: ${out}`)));
});
serve.stdout?.resume();
const token = fs.readFileSync(join(home, '.berth/admin-token'), 'utf8').trim();
const admin = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
await fake.waitForClients(1, 20_000);

// ---- people and their messages ----
type Kind = 'signal' | 'web' | 'api';
interface Sent {
  kind: Kind;
  at: number;
  answers: number;
  failed: boolean;
  ms?: number;
}
const sent = new Map<string, Sent>();
interface Person {
  kind: Kind;
  busy: boolean;
  send(id: string): void;
}
const uuid = (n: number) => `00000000-0000-4000-8000-${String(n).padStart(12, '0')}`;
const finish = (id: string, person: Person, failed = false) => {
  const m = sent.get(id);
  if (!m) return;
  if (failed) m.failed = true;
  else {
    m.answers++;
    m.ms ??= performance.now() - m.at;
  }
  person.busy = false;
};
const people: Person[] = [];
const counts = { signal: Math.round(PEOPLE * 0.4), web: Math.round(PEOPLE * 0.3) };
const signalOf = new Map<string, Person>();
for (let n = 0; n < counts.signal; n++) {
  const p: Person = {
    kind: 'signal',
    busy: false,
    send: (id) => fake.deliverText({ fromUuid: uuid(n), fromNumber: null, text: `echo ok-${id}` }),
  };
  signalOf.set(uuid(n), p);
  people.push(p);
}
console.error(
  `berth bench (soak): ${PEOPLE} people (${counts.signal} Signal, ${counts.web} web chat, ${PEOPLE - counts.signal - counts.web} API), ${MESSAGES} messages in ${MINUTES} min ...`,
);
for (let n = 0; n < counts.web; n++) {
  const res = await fetch(`${url}/api/projects/soak/chat-links`, {
    method: 'POST',
    headers: admin,
    body: JSON.stringify({ user: `soak-${n}` }),
  });
  const link = (await res.json()) as { url: string };
  const socket = await chatSocketByLink(url, link.url);
  let current: string | undefined;
  const p: Person = {
    kind: 'web',
    busy: false,
    send: (id) => {
      current = id;
      socket.ws.send(
        JSON.stringify({ type: 'run', id: randomUUID(), session_id: socket.session.id, permission_level: 'low', input: `echo ok-${id}` }),
      );
    },
  };
  socket.listen((m) => {
    if (!current) return;
    if (m.type === 'reply' && `${m.text}${(m.output ?? []).map((o) => o.text).join('')}`.includes(`ok-${current}`)) finish(current, p);
    else if (m.type === 'error') finish(current, p, true);
  });
  people.push(p);
}
for (let n = counts.signal + counts.web; n < PEOPLE; n++) {
  const p: Person = {
    kind: 'api',
    busy: false,
    send: (id) => {
      void fetch(`${url}/api/projects/soak/runs`, {
        method: 'POST',
        headers: admin,
        body: JSON.stringify({ user: `api:${n}`, message: `echo ok-${id}`, level: 'low' }),
      })
        .then(async (res) => {
          const body = (await res.json()) as { stdout?: string };
          finish(id, p, !(res.status === 200 && body.stdout?.includes(`ok-${id}`)));
        })
        .catch(() => finish(id, p, true));
    },
  };
  people.push(p);
}
// Signal replies: read from the fake as they are sent.
let seenSends = 0;
const signalTimer = setInterval(() => {
  const all = fake.sent();
  for (; seenSends < all.length; seenSends++) {
    const s = all[seenSends]!;
    const person = signalOf.get(s.recipients?.[0] ?? '');
    const id = /ok-(m\d+)/.exec(s.message ?? '')?.[1];
    if (person && id) finish(id, person, s.message.startsWith('berth:'));
  }
}, 50);

// ---- samples ----
interface Sample {
  min: number;
  rssMiB: number;
  fds: number;
  lagMs: number;
  inboxKiB: number;
  journalKiB: number;
  runLogKiB: number;
  containers: number;
  answered: number;
}
const samples: Sample[] = [];
const t0 = performance.now();
const sizeOf = (dir: string, match: RegExp) => {
  try {
    return (
      fs
        .readdirSync(dir)
        .filter((n) => match.test(n))
        .reduce((sum, n) => sum + fs.statSync(join(dir, n)).size, 0) / 1024
    );
  } catch {
    return 0;
  }
};
const sessionsDir = join(home, 'projects/soak/sessions');
async function sample(): Promise<void> {
  const status = fs.readFileSync(`/proc/${serve.pid}/status`, 'utf8');
  const metrics = await (await fetch(`${url}/metrics`, { headers: admin })).text();
  const containers = await docker.listContainers({ all: true, filters: { label: [`berth.installation=${installationId(home)}`] } });
  samples.push({
    min: (performance.now() - t0) / 60_000,
    rssMiB: Number(/VmRSS:\s+(\d+)/.exec(status)?.[1]) / 1024,
    fds: fs.readdirSync(`/proc/${serve.pid}/fd`).length,
    lagMs: Number(/^berth_nodejs_eventloop_lag_p99_seconds (\S+)/m.exec(metrics)?.[1] ?? Number.NaN) * 1000,
    inboxKiB: sizeOf(join(home, '.berth/bridges'), /\.jsonl$/),
    journalKiB: sizeOf(sessionsDir, /^journal.*\.jsonl$/),
    runLogKiB: sizeOf(sessionsDir, /^runs\.jsonl$/),
    containers: containers.length,
    answered: [...sent.values()].filter((m) => m.answers > 0).length,
  });
}
await sample();
const sampler = setInterval(() => void sample().catch((err: unknown) => console.error(`a sample failed: ${String(err)}`)), SAMPLE_MS);

// ---- traffic: message i is due at i × interval; a busy crowd defers it to the next free person ----
const interval = (MINUTES * 60_000) / MESSAGES;
let deferred = 0;
for (let i = 0; i < MESSAGES; i++) {
  const due = t0 + i * interval;
  const wait = due - performance.now();
  if (wait > 1) await new Promise((r) => setTimeout(r, wait));
  let person: Person | undefined;
  for (let tries = 0; !person; tries++) {
    const pick = people[Math.floor(Math.random() * people.length)]!;
    if (!pick.busy) person = pick;
    else if (tries > 50) {
      deferred++;
      await new Promise((r) => setTimeout(r, 20));
      tries = 0;
    }
  }
  const id = `m${i}`;
  person.busy = true;
  sent.set(id, { kind: person.kind, at: performance.now(), answers: 0, failed: false });
  person.send(id);
}
const drainEnd = Date.now() + 180_000;
while ([...sent.values()].some((m) => m.answers === 0 && !m.failed) && Date.now() < drainEnd) await new Promise((r) => setTimeout(r, 200));
await new Promise((r) => setTimeout(r, 2000)); // a late duplicate would arrive now
clearInterval(sampler);
clearInterval(signalTimer);
await sample();

// ---- results ----
const all = [...sent.values()];
const lost = all.filter((m) => m.answers === 0 && !m.failed).length;
const duplicated = all.filter((m) => m.answers > 1).length;
const failed = all.filter((m) => m.failed && m.answers === 0).length;
const warmedAt = t0 + MINUTES * 0.2 * 60_000; // every person has had a first message by then
const byKind = (k: Kind, warm = false) =>
  all.filter((m) => m.kind === k && m.ms !== undefined && (!warm || m.at >= warmedAt)).map((m) => m.ms as number);
const median = (v: number[]) => percentile(v, 50);
const after = samples.filter((s) => s.min >= MINUTES * 0.2 && s.min <= MINUTES * 0.3);
const end = samples.filter((s) => s.min >= MINUTES * 0.9);
const rssGrowth = median(end.map((s) => s.rssMiB)) / median(after.map((s) => s.rssMiB)) - 1;
const fdGrowth = median(end.map((s) => s.fds)) - median(after.map((s) => s.fds));
const lags = samples.map((s) => s.lagMs).filter((v) => Number.isFinite(v));

console.log(`\n| minute | RSS | open fds | event-loop lag p99 | inbox | run journal | run log | containers | answered |`);
console.log('| --- | --- | --- | --- | --- | --- | --- | --- | --- |');
const step = Math.max(1, Math.round(samples.length / 16));
for (const [i, s] of samples.entries()) {
  if (i % step !== 0 && i !== samples.length - 1) continue;
  console.log(
    `| ${s.min.toFixed(1)} | ${s.rssMiB.toFixed(1)} MiB | ${s.fds} | ${s.lagMs.toFixed(1)} ms | ${s.inboxKiB.toFixed(0)} KiB | ${s.journalKiB.toFixed(0)} KiB | ${s.runLogKiB.toFixed(0)} KiB | ${s.containers} | ${s.answered} |`,
  );
}
const line = (k: Kind) => {
  const v = byKind(k);
  const w = byKind(k, true);
  return `${k} ${v.length} answered, p50 ${median(v).toFixed(0)} ms, p99 ${percentile(v, 99).toFixed(0)} ms (after the warm-up: p50 ${median(w).toFixed(0)} ms, p99 ${percentile(w, 99).toFixed(0)} ms)`;
};
console.log(
  `\n${MESSAGES} messages from ${PEOPLE} people in ${MINUTES} min (${deferred} waited for a free person): ${line('signal')}; ${line('web')}; ${line('api')}`,
);
console.log(`lost ${lost}, duplicated ${duplicated}, failed (told so) ${failed}`);
console.log(
  `after the warm-up (${(MINUTES * 0.2).toFixed(0)}–${(MINUTES * 0.3).toFixed(0)} min) to the end: RSS ${(rssGrowth * 100).toFixed(1)} % (target ≤ +10 %: ${rssGrowth <= 0.1 ? 'met' : 'MISSED'}), open fds ${fdGrowth >= 0 ? '+' : ''}${fdGrowth} (target flat), event-loop lag p99 worst ${Math.max(...lags).toFixed(1)} ms, median ${median(lags).toFixed(1)} ms`,
);
if (PLOT) {
  const minutes = samples.map((s) => s.min);
  fs.mkdirSync(dirname(PLOT), { recursive: true });
  fs.writeFileSync(
    PLOT,
    smallMultiples(
      `berth soak: ${MESSAGES} messages from ${PEOPLE} people in ${MINUTES} min\nover Signal, the web chat and the HTTP API; lost ${lost}, duplicated ${duplicated}; every 10 s`,
      minutes,
      [
        { title: 'berth RSS', unit: 'MiB', values: samples.map((s) => s.rssMiB) },
        { title: 'open fds', unit: 'count', values: samples.map((s) => s.fds) },
        { title: 'event-loop lag p99', unit: 'ms', values: samples.map((s) => (Number.isFinite(s.lagMs) ? s.lagMs : 0)) },
        { title: 'containers', unit: 'count', values: samples.map((s) => s.containers) },
        { title: 'inbox + run journal', unit: 'KiB', values: samples.map((s) => s.inboxKiB + s.journalKiB) },
        { title: 'messages answered', unit: 'count', values: samples.map((s) => s.answered) },
      ],
    ),
  );
  console.log(`plot: ${PLOT}`);
}

serve.kill('SIGTERM');
await new Promise((r) => serve.once('exit', r));
for (const c of await docker.listContainers({ all: true, filters: { label: [`berth.installation=${installationId(home)}`] } })) {
  await docker
    .getContainer(c.Id)
    .remove({ force: true })
    .catch(() => undefined);
}
await fake.close();
fs.rmSync(home, { recursive: true, force: true });
process.exit(lost === 0 && duplicated === 0 ? 0 : 1);
