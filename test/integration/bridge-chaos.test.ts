import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { startFakeSignalCli } from '../fakes/signal-cli.js';
import { BERTH_BIN, removeContainersOf } from '../helpers.js';

/**
 * Chaos: messages stream in from four Signal users while `berth bridge signal` is killed with
 * -9 at random points and started again. signal-cli (faked, protocol-faithful) re-delivers
 * what berth never acknowledged, as after a real crash. At the end every message must be
 * answered or its sender told it failed, no message may run twice, none may be lost.
 */
const MESSAGES = 40;
const KILLS = 4;
const uuid = (n: number) => `00000000-0000-4000-8000-0000000000${String(n).padStart(2, '0')}`;
const home = fs.realpathSync(fs.mkdtempSync(join(os.tmpdir(), 'berth-chaos-')));
let child: ChildProcess | undefined;

afterAll(async () => {
  child?.kill('SIGKILL');
  await removeContainersOf(home);
  fs.rmSync(home, { recursive: true, force: true });
});

function startBerth(): ChildProcess {
  const p = spawn(process.execPath, [BERTH_BIN, '--home', home, 'bridge', 'signal'], { stdio: ['ignore', 'ignore', 'pipe'], env: { PATH: process.env.PATH ?? '', BERTH_LOG_LEVEL: 'warn' } });
  p.stderr?.resume();
  return p;
}

it(`loses no message and runs none twice while berth is killed ${KILLS} times under load`, async () => {
  const fake = await startFakeSignalCli({ keepaliveMs: 500, receiveMode: 'on-connection', redeliverUntilReceipt: true });
  fs.writeFileSync(join(home, 'berth.yaml'), ['bridges:', '  max_concurrent_runs: 2', '  signal:', `    url: ${fake.url}`, `    account: '${fake.account}'`, '    senders: open', 'channels:', '  signal: { project: chaos }', ''].join('\n'));
  const create = spawn(process.execPath, [BERTH_BIN, '--home', home, 'project', 'create', 'chaos', '--isolation'], { stdio: 'ignore' });
  await new Promise((r) => create.once('close', r));
  try {
    child = startBerth();
    await fake.waitForClients(1, 20_000);
    const sent: Array<{ id: string; user: number }> = [];
    let killed = 0;
    const killAt = new Set(Array.from({ length: KILLS }, (_, i) => Math.floor(((i + 1) * MESSAGES) / (KILLS + 1)) + Math.floor(Math.random() * 3)));
    for (let i = 0; i < MESSAGES; i++) {
      const user = i % 4;
      const id = `m${i}`;
      sent.push({ id, user });
      fake.deliverText({ fromUuid: uuid(user), fromNumber: null, text: `echo ${id} >> ran.log; sleep 0.2; echo ok-${id}` });
      await new Promise((r) => setTimeout(r, 60 + Math.random() * 120));
      if (killAt.has(i)) {
        // At a random moment: mid-run, mid-journal, mid-reply — whatever berth is doing.
        await new Promise((r) => setTimeout(r, Math.random() * 400));
        child.kill('SIGKILL');
        await new Promise((r) => child!.once('exit', r));
        killed++;
        await new Promise((r) => setTimeout(r, 100 + Math.random() * 300));
        child = startBerth();
      }
    }
    const inboxFile = join(home, '.berth', 'bridges', 'signal.jsonl');
    const journal = () => (fs.existsSync(inboxFile) ? fs.readFileSync(inboxFile, 'utf8').split('\n').filter(Boolean).flatMap((l) => { try { return [JSON.parse(l) as { id: string; phase: string; text?: string }]; } catch { return []; } }) : []);
    const outcome = (m: { id: string; user: number }) => {
      const replies = fake.repliesTo(uuid(m.user)).map((s) => s.message);
      const answered = replies.filter((r) => r === `ok-${m.id}`).length;
      const failed = replies.filter((r) => r.startsWith('berth:') && r.includes(`echo ${m.id} >>`)).length;
      return { answered, failed };
    };
    await fake.waitFor(() => sent.every((m) => {
      const o = outcome(m);
      return o.answered + o.failed > 0;
    }), 180_000).catch(() => undefined);

    // Runs actually executed, from each tenant's workspace: an id twice means a message ran twice.
    const ran = new Map<string, number>();
    const wsRoot = join(home, 'projects', 'chaos', 'workspaces');
    for (const ws of fs.existsSync(wsRoot) ? fs.readdirSync(wsRoot) : []) {
      const log = join(wsRoot, ws, 'ran.log');
      if (fs.existsSync(log)) for (const id of fs.readFileSync(log, 'utf8').split('\n').filter(Boolean)) ran.set(id, (ran.get(id) ?? 0) + 1);
    }
    const counts = {
      received: sent.length,
      answered: sent.filter((m) => outcome(m).answered > 0).length,
      failed: sent.filter((m) => outcome(m).answered === 0 && outcome(m).failed > 0).length,
      duplicates: [...ran.values()].filter((n) => n > 1).length,
      duplicate_replies: sent.filter((m) => outcome(m).answered > 1).length,
      lost: sent.filter((m) => outcome(m).answered + outcome(m).failed === 0).length,
      kills: killed,
    };
    console.log(`bridge chaos: ${JSON.stringify(counts)}`);
    for (const m of sent.filter((x) => outcome(x).answered + outcome(x).failed === 0)) {
      // What the journal says of a lost message, to tell a slow run from a dropped one.
      const id = journal().find((e) => e.text?.includes(`echo ${m.id} >>`))?.id;
      console.log(`lost ${m.id}: journal ${JSON.stringify(journal().filter((e) => id !== undefined && e.id === id))}; replies to its user: ${JSON.stringify(fake.repliesTo(uuid(m.user)).map((r) => r.message).slice(-4))}`);
    }
    expect(counts.kills).toBe(KILLS);
    expect(counts.lost).toBe(0);
    expect(counts.duplicates).toBe(0);
    expect(counts.answered + counts.failed).toBe(MESSAGES);
    // Only a run cut by a kill fails (and its sender is told): at most max_concurrent_runs per kill.
    expect(counts.failed).toBeLessThanOrEqual(KILLS * 2);
  } finally {
    child?.kill('SIGKILL');
    await fake.close();
  }
}, 300_000);
