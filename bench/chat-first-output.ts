/**
 * From a chat message to the agent's first output in the chat (issue 24, item 2b):
 * - the web chat: a person's WebSocket frame `{type: "run"}` to the first step or output frame back;
 * - Signal: a message event from the fake signal-cli (its SSE stream, as the real daemon sends
 *   it) to the bridge's first `send` of the answer (Signal shows no live output: the reply is the
 *   first output a person sees), timed by the fake's clock (ms);
 * each for a new person (their first message: a pre-started container takes their workspace) and
 * for the same person again (an exec into their warm container), against a bare dockerode exec of
 * the same command in the same run. A real berth (the `berth serve` wiring, warm containers,
 * runs.pool 4) and real containers; the demo's shell preset, `echo hi`.
 */
import { randomUUID } from 'node:crypto';
import { bareExec } from './bare.js';
import { chatSocket, wallNow } from './chat-socket.js';
import { BENCH_PROJECT, startSignalBenchRig } from './signal-rig.js';
import { fmt, summary } from './stats.js';

const ROUNDS = Number(process.env.BENCH_ITERATIONS ?? 20);
const POOL = 4;

const rig = await startSignalBenchRig({ name: 'chat-first', pool: POOL });
const { signal, berth, http, idle } = rig;

const poolSize = async () => (await berth.metrics.registry.getSingleMetric('berth_pool_containers')?.get())?.values[0]?.value ?? 0;
async function refilled(): Promise<void> {
  const end = Date.now() + 60_000;
  while ((await poolSize()) < POOL) {
    if (Date.now() > end) throw new Error('the pool did not refill within 60 s');
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** One message from this person's socket: ms to its first step or output frame, then waits for its end. */
async function firstOutput(person: Awaited<ReturnType<typeof chatSocket>>): Promise<number> {
  let first: number | undefined;
  const t0 = wallNow();
  const done = new Promise<void>((resolve, reject) => {
    person.listen((m, at) => {
      if ((m.type === 'step' || m.type === 'output') && first === undefined) first = at - t0;
      else if (m.type === 'done') resolve();
      else if (m.type === 'error') reject(new Error(m.message));
    });
  });
  person.ws.send(
    JSON.stringify({ type: 'run', id: randomUUID(), session_id: person.session.id, permission_level: 'low', input: 'echo hi' }),
  );
  await done;
  if (first === undefined) throw new Error('the run ended with no step and no output');
  return first;
}

/** One Signal message from this person: ms from its event to the bridge's first send to them. */
async function signalReply(uuid: string): Promise<number> {
  const before = signal.repliesTo(uuid).length;
  const t0 = Date.now();
  signal.deliverText({ fromUuid: uuid, fromNumber: null, text: 'echo hi' });
  const reply = await signal.waitFor(() => signal.repliesTo(uuid)[before], 30_000);
  if (reply.message.trim() !== 'hi') throw new Error(`the Signal answer was ${JSON.stringify(reply.message)}`);
  return reply.at - t0;
}
const signalUuid = (n: number) => `00000000-0000-4000-8000-${String(n).padStart(12, '0')}`;

try {
  console.error(`berth bench (chat, first output): ${ROUNDS} rounds of a new person, the same person again, and a bare exec ...`);
  const seed = await chatSocket(berth, http.url, BENCH_PROJECT, 'seed');
  await firstOutput(seed); // teaches the pool the shape
  seed.ws.close();
  const t = {
    fresh: [] as number[],
    again: [] as number[],
    signalFresh: [] as number[],
    signalAgain: [] as number[],
    exec: [] as number[],
  };
  for (let i = 0; i < ROUNDS; i++) {
    await refilled();
    const person = await chatSocket(berth, http.url, BENCH_PROJECT, `person-${i}`);
    t.fresh.push(await firstOutput(person));
    t.again.push(await firstOutput(person));
    person.ws.close();
    await refilled();
    t.signalFresh.push(await signalReply(signalUuid(i)));
    t.signalAgain.push(await signalReply(signalUuid(i)));
    const t0 = performance.now();
    await bareExec(idle);
    t.exec.push(performance.now() - t0);
  }
  const exec = summary(t.exec);
  const row = (what: string, v: number[]) => {
    const s = summary(v);
    return `| ${what} | ${fmt(s.p50)} | ${fmt(s.p95)} | ${(s.p50 / exec.p50).toFixed(2)} |`;
  };
  console.log(`\n| chat: message → first output in the chat (${ROUNDS} rounds) | p50 | p95 | ÷ bare exec (p50) |`);
  console.log('| --- | --- | --- | --- |');
  console.log(row('bare dockerode exec of `true` (to its exit)', t.exec));
  console.log(row(`web chat, a new person (pool of ${POOL} warm): first step or output frame`, t.fresh));
  console.log(row('web chat, the same person again (warm container)', t.again));
  console.log(row(`Signal, a new person (pool of ${POOL} warm): the answer sent`, t.signalFresh));
  console.log(row('Signal, the same person again (warm container)', t.signalAgain));
  const verdict = (what: string, v: number[]) => {
    const r = summary(v).p50 / exec.p50;
    return `${what} ${r.toFixed(2)}× ${r <= 1.2 ? 'met' : 'MISSED'}`;
  };
  console.log(`\ntarget: a returning person ≤ 1.2× a bare exec: ${verdict('web chat', t.again)}; ${verdict('Signal', t.signalAgain)}`);
} finally {
  await rig.close();
}
