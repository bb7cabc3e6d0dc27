/**
 * Files through a chat (issue 40, Bench), on the Signal bridge and the fake signal-cli (its SSE
 * events, getAttachment and sends as the real daemon's), a real berth serve, warm containers and
 * the shell preset, the same person each round (their warm container):
 * - in: from the message's event to the agent seeing its file — the script's first act, a marker
 *   file in its workspace, seen on the host by inotify — for a text message, a 1 MiB and a 20 MiB
 *   attachment (their bytes fetched by getAttachment, written to inbox/, the words put before the
 *   message); what a file adds is its p50 over the text message's;
 * - out: from the agent's last act (a marker after it wrote a 1 MiB file to outbox/) to signal-cli
 *   taking the file's send, against the same for the text answer alone;
 * against a bare dockerode exec of `true` measured in the same run.
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import { join } from 'node:path';
import { bareExec } from './bare.js';
import { BENCH_PROJECT, startSignalBenchRig } from './signal-rig.js';
import { fmt, summary } from './stats.js';

const ROUNDS = Number(process.env.BENCH_ITERATIONS ?? 20);
const MiB = 1024 * 1024;
const PERSON = '00000000-0000-4000-8000-0000000be7c4';

const rig = await startSignalBenchRig({ name: 'files', project: { files: { max_file_mb: 32, max_message_mb: 32 } } });
const { home, signal, idle } = rig;

const now = () => performance.timeOrigin + performance.now();

/** Send a message (with a file of `bytes`, or none) whose script makes marker `name` first, then runs `then`; resolves at its answer. */
async function message(text: string, bytes: number | undefined): Promise<void> {
  const before = signal.repliesTo(PERSON).length;
  const attachments = bytes
    ? [signal.addAttachment(randomBytes(bytes), { contentType: 'application/octet-stream', filename: 'data.bin' })]
    : [];
  signal.deliverText({ fromUuid: PERSON, fromNumber: null, text, attachments });
  await signal.waitFor(
    () => signal.repliesTo(PERSON).length > before && signal.repliesTo(PERSON).some((r, i) => i >= before && r.message.includes('ok')),
    60_000,
  );
}

/** The person's workspace (known after their first message). */
function workspaceDir(): string {
  const root = join(home, 'projects', BENCH_PROJECT, 'workspaces');
  const [ws] = fs.readdirSync(root);
  if (!ws) throw new Error('no workspace yet');
  return join(root, ws);
}

/** When marker `name` appears in the workspace (inotify on the host), as wall-clock ms. */
function markerSeen(dir: string, name: string): Promise<number> {
  return new Promise((resolve) => {
    const w = fs.watch(dir, (_event, file) => {
      if (file === name) {
        const at = now();
        w.close();
        resolve(at);
      }
    });
  });
}

/** In: event → the agent's first act, for a message carrying `bytes` (none: text). */
async function arrival(dir: string, n: number, bytes: number | undefined): Promise<number> {
  const marker = `seen-${n}`;
  const seen = markerSeen(dir, marker);
  const t0 = now();
  const done = message(`: > ${marker}; ${bytes ? 'test -s inbox/data*.bin && ' : ''}echo ok; rm -f ${marker} inbox/data*.bin`, bytes);
  const at = await seen;
  await done;
  return at - t0;
}

/** Out: the agent's last act → signal-cli taking the send (the file's, or the text answer's). */
async function departure(dir: string, n: number, withFile: boolean): Promise<number> {
  const marker = `wrote-${n}`;
  const seen = markerSeen(dir, marker);
  const before = signal.repliesTo(PERSON).length;
  const write = withFile ? `mkdir -p outbox && head -c ${MiB} /dev/urandom > outbox/out-${n}.bin; ` : '';
  signal.deliverText({ fromUuid: PERSON, fromNumber: null, text: `${write}echo ok; : > ${marker}` });
  const at = await seen;
  const sent = await signal.waitFor(
    () => signal.repliesTo(PERSON).find((r, i) => i >= before && (withFile ? r.files.length > 0 : r.message.includes('ok'))),
    60_000,
  );
  fs.rmSync(join(dir, marker), { force: true });
  return sent.at - at;
}

try {
  console.error(`berth bench (files): ${ROUNDS} rounds of a text message, 1 MiB and 20 MiB in, a file out, and a bare exec ...`);
  await message('echo ok', undefined); // the person's container and workspace
  const dir = workspaceDir();
  const t = {
    text: [] as number[],
    in1: [] as number[],
    in20: [] as number[],
    outText: [] as number[],
    out1: [] as number[],
    exec: [] as number[],
  };
  for (let i = 0; i < ROUNDS; i++) {
    t.text.push(await arrival(dir, i * 3, undefined));
    t.in1.push(await arrival(dir, i * 3 + 1, MiB));
    t.in20.push(await arrival(dir, i * 3 + 2, 20 * MiB));
    t.outText.push(await departure(dir, i * 2, false));
    t.out1.push(await departure(dir, i * 2 + 1, true));
    const t0 = performance.now();
    await bareExec(idle);
    t.exec.push(performance.now() - t0);
  }
  const exec = summary(t.exec);
  const text = summary(t.text);
  const row = (what: string, v: number[], base?: number[]) => {
    const s = summary(v);
    const added = base ? `+${fmt(s.p50 - summary(base).p50)}` : '';
    return `| ${what} | ${fmt(s.p50)} | ${fmt(s.p95)} | ${(s.p50 / exec.p50).toFixed(2)} | ${added} |`;
  };
  console.log(`\n| files through Signal (${ROUNDS} rounds, the same person) | p50 | p95 | ÷ bare exec (p50) | added over text (p50) |`);
  console.log('| --- | --- | --- | --- | --- |');
  console.log(row('bare dockerode exec of `true` (to its exit)', t.exec));
  console.log(row('in: a text message → the agent runs', t.text));
  console.log(row('in: a 1 MiB attachment → the agent runs, the file in inbox/', t.in1, t.text));
  console.log(row('in: a 20 MiB attachment → the agent runs, the file in inbox/', t.in20, t.text));
  console.log(row("out: the agent's last act → the text answer's send", t.outText));
  console.log(row("out: the same with a 1 MiB file in outbox/ → the file's send", t.out1, t.outText));
  const added = summary(t.in1).p50 - text.p50;
  console.log(`\ntarget: ≤ 50 ms added for 1 MiB over a plain text message: +${fmt(added)} ${added <= 50 ? 'met' : 'MISSED'}`);
} finally {
  await rig.close();
}
