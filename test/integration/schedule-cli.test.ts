import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { cli, docCommands, runDocLine } from '../helpers.js';

/** `berth schedule add|list|cancel`, through the built CLI on a home of its own. */
const home = fs.mkdtempSync(join(os.tmpdir(), 'berth-cli-sched-'));
afterAll(() => fs.rmSync(home, { recursive: true, force: true }));
const berth = (...args: string[]) => cli(['--home', home, ...args]);

describe('berth schedule', () => {
  it('adds, lists and cancels; each add and cancel is audited', () => {
    expect(berth('project', 'create', 'sched').code).toBe(0);
    const add = berth(
      'schedule',
      'add',
      'sched',
      '--user',
      'signal:+1',
      '--every',
      'weekday at 09:00',
      '--tz',
      'Europe/Berlin',
      '--json',
      '--',
      'summarise',
      'the',
      'inbox',
    );
    expect(add.stderr).toBe('');
    const made = JSON.parse(add.stdout) as {
      id: string;
      description: string;
      task: string;
      next: string;
      created_by: string;
      spec: unknown;
    };
    expect(made).toMatchObject({
      description: 'every weekday at 09:00 Europe/Berlin',
      task: 'summarise the inbox',
      created_by: 'operator',
      spec: { kind: 'weekly', days: [1, 2, 3, 4, 5], time: '09:00' },
    });
    const once = berth('schedule', 'add', 'sched', '--user', 'signal:+1', '--at', '+2h', '--chat', 'signal:+1', '--', 'stretch');
    expect(once.stdout).toMatch(/^schedule s[0-9a-f]{8}: once, \w{3} \d+ \w{3}( \d{4})? \d\d:\d\d UTC\n$/);
    const list = berth('schedule', 'list', 'sched');
    expect(list.stdout.trim().split('\n')).toHaveLength(2);
    expect(list.stdout).toContain(`${made.id}  sched  tenant=signal:+1  every weekday at 09:00 Europe/Berlin  next=${made.next}`);
    expect(list.stdout).toContain('chat=signal:+1');
    expect(berth('schedule', 'list', '--user', 'signal:+2').stdout).toBe('no schedules\n');
    expect(berth('schedule', 'cancel', made.id).stdout).toBe(
      `cancelled ${made.id} (every weekday at 09:00 Europe/Berlin: summarise the inbox)\n`,
    );
    expect(berth('schedule', 'list', 'sched').stdout.trim().split('\n')).toHaveLength(1);
    expect(berth('audit', '--kind', 'admin').stdout).toMatch(/schedule\.cancel {2}operator {2}.*ok/);
  });

  it('bad input is refused with a stable code, the field at fault and what to say instead', () => {
    berth('project', 'create', 'sched2');
    const both = berth('schedule', 'add', 'sched2', '--user', 'u', '--every', '2h', '--at', '+1h', '--', 'x');
    expect(both.code).toBe(2);
    expect(both.stderr).toContain('give exactly one of every or at');
    const fast = berth('schedule', 'add', 'sched2', '--user', 'u', '--every', '30s', '--', 'x');
    expect(fast.code).toBe(2);
    expect(fast.stderr).toContain(
      'every: a schedule may repeat at most every 300 seconds here (berth.yaml schedules.min_interval_seconds)',
    );
    const garbled = berth('schedule', 'add', 'sched2', '--user', 'u', '--at', 'soonish', '--', 'x');
    expect(garbled.stderr).toMatch(/^CONFIG_INVALID: "soonish" is not a time berth understands/);
    expect(berth('schedule', 'add', 'sched2', '--user', 'u', '--every', '2h', '--tz', 'Nowhere/Land', '--', 'x').stderr).toContain(
      'not a time zone',
    );
    expect(berth('schedule', 'add', 'sched2', '--user', 'u', '--every', '2h check it', '--', 'x').stderr).toContain(
      '"check it" is not part of a time',
    );
    expect(berth('schedule', 'cancel', 's00000000').code).toBe(23);
    expect(berth('schedule', 'list', 'nope').code).toBe(3);
  });
});

describe('docs/schedules.md', () => {
  it("the guide's commands run, in order, on a fresh home", () => {
    const fresh = fs.mkdtempSync(join(os.tmpdir(), 'berth-sched-guide-'));
    try {
      const ran = docCommands('docs/schedules.md', 'npx berth ').map((line) => ({ line, ...runDocLine(line, fresh) }));
      for (const r of ran) expect(r.code, `${r.line}\n${r.stderr}`).toBe(0);
      expect(ran.find((r) => r.line.startsWith('npx berth schedule list'))?.stdout).toMatch(
        /every weekday at 09:00 Europe\/Berlin .*\n.*once, .*chat=signal:\+4915550001/,
      );
    } finally {
      fs.rmSync(fresh, { recursive: true, force: true });
    }
  });
});
