import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CHANNEL_NAMES } from '../../src/channels/registry.js';
import { CHAOS_RIGS } from '../helpers/chaos-rigs.js';
import { BERTH_BIN, removeContainersOf } from '../helpers.js';

/**
 * Chaos, for every chat channel of the registry: messages stream in from four people while the
 * berth process that consumes the channel is killed with -9 at random points and started again.
 * Each fake service re-delivers what berth never confirmed, as the real one does after a crash
 * (signal-cli until a read receipt, Telegram until the next getUpdates offset, Slack until the
 * envelope's ack, Matrix from the last sync token berth kept, a webhook caller until its 2xx). At
 * the end every message must be answered or its sender told it failed, none may run twice, none
 * may be lost.
 */
const MESSAGES = 32;
const KILLS = 3;

it('has a chaos rig for every channel of the registry', () => {
  expect(Object.keys(CHAOS_RIGS).sort()).toEqual([...CHANNEL_NAMES].sort());
});

describe.each(Object.keys(CHAOS_RIGS))('chaos: the %s bridge', (name) => {
  it(`loses no message and runs none twice while berth is killed ${KILLS} times under load`, async () => {
    const home = fs.realpathSync(fs.mkdtempSync(join(os.tmpdir(), `berth-chaos-${name}-`)));
    const rig = await CHAOS_RIGS[name]!();
    let child: ChildProcess | undefined;
    const startBerth = () => {
      const p = spawn(process.execPath, [BERTH_BIN, '--home', home, ...rig.command], {
        stdio: ['ignore', 'ignore', 'pipe'],
        env: { PATH: process.env.PATH ?? '', BERTH_LOG_LEVEL: 'warn' },
      });
      p.stderr?.resume();
      return p;
    };
    try {
      fs.writeFileSync(
        join(home, 'berth.yaml'),
        ['bridges:', '  max_concurrent_runs: 2', ...rig.bridge, 'routes:', `  ${name}: { project: chaos }`, ...(rig.extra ?? []), ''].join(
          '\n',
        ),
      );
      const create = spawn(process.execPath, [BERTH_BIN, '--home', home, 'project', 'create', 'chaos', '--isolation'], { stdio: 'ignore' });
      await new Promise((r) => create.once('close', r));
      child = startBerth();
      await rig.ready(20_000);
      const sent: Array<{ id: string; person: number }> = [];
      let killed = 0;
      const killAt = new Set(
        Array.from({ length: KILLS }, (_, i) => Math.floor(((i + 1) * MESSAGES) / (KILLS + 1)) + Math.floor(Math.random() * 3)),
      );
      for (let i = 0; i < MESSAGES; i++) {
        const person = i % 4;
        const id = `m${i}`;
        sent.push({ id, person });
        await rig.deliver(person, `echo ${id} >> ran.log; sleep 0.2; echo ok-${id}`);
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
      const outcome = (m: { id: string; person: number }) => {
        const replies = rig.replies(m.person);
        return {
          answered: replies.filter((r) => r === `ok-${m.id}`).length,
          failed: replies.filter((r) => r.startsWith('berth:') && r.includes(`echo ${m.id} >>`)).length,
        };
      };
      for (const end = Date.now() + 180_000; Date.now() < end && !sent.every((m) => outcome(m).answered + outcome(m).failed > 0);)
        await new Promise((r) => setTimeout(r, 200));

      // Runs actually executed, from each tenant's workspace: an id twice means a message ran twice.
      const ran = new Map<string, number>();
      const wsRoot = join(home, 'projects', 'chaos', 'workspaces');
      for (const ws of fs.existsSync(wsRoot) ? fs.readdirSync(wsRoot) : []) {
        const log = join(wsRoot, ws, 'ran.log');
        if (fs.existsSync(log))
          for (const id of fs.readFileSync(log, 'utf8').split('\n').filter(Boolean)) ran.set(id, (ran.get(id) ?? 0) + 1);
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
      console.log(`bridge chaos (${name}): ${JSON.stringify(counts)}`);
      for (const m of sent.filter((x) => outcome(x).answered + outcome(x).failed === 0)) {
        console.log(`lost ${m.id}: replies to its person: ${JSON.stringify(rig.replies(m.person).slice(-4))}`);
        // Where it got to, by berth's own journals (its inbox entry's phases, its run's): for whoever reads a failure.
        for (const line of journalLinesAbout(join(home, '.berth'), `echo ${m.id} >>`)) console.log(`  ${line.slice(0, 400)}`);
      }
      expect(counts.kills).toBe(KILLS);
      expect(counts.lost).toBe(0);
      expect(counts.duplicates).toBe(0);
      expect(counts.answered + counts.failed).toBe(MESSAGES);
      // Only a run cut by a kill fails (and its sender is told): at most max_concurrent_runs per kill.
      expect(counts.failed).toBeLessThanOrEqual(KILLS * 2);
    } finally {
      child?.kill('SIGKILL');
      await rig.close();
      await removeContainersOf(home);
      fs.rmSync(home, { recursive: true, force: true });
    }
  }, 300_000);
});

/** Lines of berth's JSON-lines journals below dir that mention `needle` (at most 20). */
function journalLinesAbout(dir: string, needle: string): string[] {
  const out: string[] = [];
  const walk = (d: string) => {
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      if (out.length >= 20) return;
      const p = join(d, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.isFile() && e.name.endsWith('.jsonl'))
        for (const l of fs.readFileSync(p, 'utf8').split('\n')) if (l.includes(needle) && out.length < 20) out.push(`${e.name}: ${l}`);
    }
  };
  if (fs.existsSync(dir)) walk(dir);
  return out;
}
