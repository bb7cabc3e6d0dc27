import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { hostTasksNearLimit } from '../../src/launch/docker/reports.js';
import { judgeReport, parseReport, reportBaseline, takeReport } from '../../src/launch/keepalive-report.js';
import { warmVerdict } from '../../src/launch/lifecycle.js';
import { missingMounts, mountPointsOf } from '../../src/launch/mount-check.js';

/** The keep-alive's report as berth-bridge idle prints it (pid 1 idle, pid 2 its relay). */
const IDLE = ['t 1 1 0 R 11 1 berth-bridge', 't 2 2 1 S 13 1 berth-bridge'];
const CLEAN_IPC = 'ipc 0 0 0 -1';
const report = (...lines: string[]) => parseReport(`${lines.join('\n')}\n`);
const baseline = reportBaseline(report(...IDLE, CLEAN_IPC)!);
/** A report ending with the given ipc line, its memory unknown and /workspace mounted where planned. */
const judge = (...lines: string[]) => judgeReport(baseline, report(...lines, 'mem -1 -1 -1', 'mnt /workspace')!, ['/workspace']);

describe("the keep-alive's report", () => {
  it('the idle container, as it was: clean (memory is weighed apart)', () => {
    expect(judge(...IDLE, CLEAN_IPC)).toEqual({ running: [], keepAliveHurt: [], mountsMissing: [], ipc: [] });
    expect(warmVerdict({ ...judge(...IDLE, CLEAN_IPC), memoryGrowth: 0 })).toBeUndefined();
  });

  it("a tenant's process left running is named, whatever it calls itself", () => {
    expect(judge(...IDLE, 't 9 9 0 S 120 1 sleep', CLEAN_IPC).running).toEqual(['9 sleep']);
    // An orphan re-parented to the init that names itself berth-bridge is still the tenant's.
    expect(judge(...IDLE, 't 9 9 1 S 120 1 berth-bridge', CLEAN_IPC).running).toEqual(['9 berth-bridge']);
  });

  it("the relay's per-connection children are the keep-alive's; zombies run nothing", () => {
    expect(judge(...IDLE, 't 7 7 2 S 90 1 berth-bridge', 't 8 8 1 Z 95 1 sh', CLEAN_IPC)).toEqual({
      running: [],
      keepAliveHurt: [],
      mountsMissing: [],
      ipc: [],
    });
  });

  it('a process that forks a successor and exits, outrunning every scan, is caught as churn', () => {
    expect(judge(...IDLE, 'churn 1', CLEAN_IPC).running).toEqual([
      'processes that exit as they are read (1 gone mid-read, scan after scan)',
    ]);
    expect(parseReport(`${IDLE.join('\n')}\nchurn 1\nt 9 9 1 S 1 1 late\n${CLEAN_IPC}\n`)).toBeUndefined(); // churn closes the thread list
  });

  it('a zombie leader whose other threads still run is caught, with or without a task list', () => {
    expect(judge(...IDLE, 't 3 3 1 Z 69 2 zl', CLEAN_IPC).running).toEqual(['3 zl']); // gVisor: no task list
    expect(judge(...IDLE, 't 3 3 1 Z 69 2 zl', 't 3 4 1 S 69 2 zl', CLEAN_IPC).running).toEqual(['3 zl', '3/4 zl']);
  });

  it('a keep-alive process stopped, killed, or replaced by another with its pid hurts it', () => {
    expect(judge('t 1 1 0 R 11 1 berth-bridge', 't 2 2 1 T 13 1 berth-bridge', CLEAN_IPC).keepAliveHurt).toEqual(['2 berth-bridge T']);
    expect(judge('t 1 1 0 R 11 1 berth-bridge', CLEAN_IPC).keepAliveHurt).toEqual(['2 gone']);
    // Pid 2 again, started later: not the relay berth saw, and so a process of the tenant's.
    expect(judge('t 1 1 0 R 11 1 berth-bridge', 't 2 2 1 S 500 1 berth-bridge', CLEAN_IPC).running).toEqual(['2 berth-bridge']);
  });

  it('IPC objects left are named; a table the kernel would not show is "cannot tell", never clean', () => {
    expect(judge(...IDLE, 'ipc 256 1 2 3').ipc).toEqual(['shm 256 pages', 'msg 1', 'sem 2', 'mqueue 3']);
    const unknown = judge(...IDLE, 'ipc -1 0 0 0');
    expect(unknown.ipc).toBeUndefined();
    expect(warmVerdict({ ...unknown, memoryGrowth: 0 })).toMatch(/IPC namespace cannot be read/);
  });

  it('a report ends at its end line, not at a thread named like one ("backend")', () => {
    const printed = `${IDLE.join('\n')}\nt 9 9 1 S 120 1 backend\n${CLEAN_IPC}\nend\nt 1`;
    expect(takeReport(printed.slice(0, printed.indexOf('ipc')))).toBeUndefined();
    const taken = takeReport(printed)!;
    expect(taken.rest).toBe('t 1');
    expect(judgeReport(baseline, parseReport(taken.text)!, []).running).toEqual(['9 backend']);
  });

  it("the container's memory as its cgroup counts it: usage less page cache, plus shared memory; -1 anywhere is unknown", () => {
    expect(report(...IDLE, CLEAN_IPC, 'mem 50000000 20000000 4096')?.memoryHeld).toBe(30004096);
    expect(report(...IDLE, CLEAN_IPC, 'mem 50000000 -1 4096')).not.toHaveProperty('memoryHeld');
    expect(report(...IDLE, CLEAN_IPC, 'mem -1 -1 -1')).not.toHaveProperty('memoryHeld');
    // An older keep-alive without the line: still a report, its memory unknown.
    expect(report(...IDLE, CLEAN_IPC)).not.toHaveProperty('memoryHeld');
  });

  it('a planned mount moved away (a renamed directory took it along) is not clean; a report listing no mounts cannot tell', () => {
    const moved = judgeReport(
      baseline,
      report(...IDLE, CLEAN_IPC, 'mem -1 -1 -1', 'mnt /workspace', 'mnt /workspace/.moved/settings.json')!,
      ['/workspace', '/workspace/.cfg/settings.json'],
    );
    expect(moved).toEqual({ running: [], keepAliveHurt: [], mountsMissing: ['/workspace/.cfg/settings.json'] });
    expect(warmVerdict(moved)).toBe('a protected path was moved from its mount: /workspace/.cfg/settings.json');
    // The kernel's escapes are read back: a space in a name is \040.
    expect(report(...IDLE, CLEAN_IPC, 'mem -1 -1 -1', 'mnt /workspace/my\\040notes/x')?.mounts).toEqual(['/workspace/my notes/x']);
    const blind = judgeReport(baseline, report(...IDLE, CLEAN_IPC)!, ['/workspace']);
    expect(warmVerdict({ ...blind, memoryGrowth: 0 })).toBe('its mounts cannot be read by this launcher');
    expect(
      mountPointsOf('36 25 0:31 / /workspace rw,relatime - ext4 /dev/x rw\n37 36 0:5 /f /workspace/a\\040b ro - ext4 /dev/x ro\n'),
    ).toEqual(['/workspace', '/workspace/a b']);
    expect(missingMounts(['/workspace', '/workspace/a b'], ['/workspace'])).toEqual(['/workspace/a b']);
  });

  it("anything but the keep-alive's lines is not a report", () => {
    for (const bad of [
      [...IDLE].join('\n'), // no ipc line
      `${IDLE.join('\n')}\nt 9 9 1 S 1 1 a b\n${CLEAN_IPC}`, // a name with a space
      `${IDLE.join('\n')}\n${CLEAN_IPC}\nt 9 9 1 S 1 1 late`, // a thread after the ipc line
      `${CLEAN_IPC}\n${CLEAN_IPC}`,
      `hello\n${CLEAN_IPC}`,
      `${IDLE.join('\n')}\n${CLEAN_IPC}\nmem 1 2 3\nmem 1 2 3`, // two mem lines
      `${IDLE.join('\n')}\nmem 1 2 3\n${CLEAN_IPC}`, // mem before ipc
      `${IDLE.join('\n')}\n${CLEAN_IPC}\nmem 1 2`,
      `${IDLE.join('\n')}\n${CLEAN_IPC}\nmnt /workspace`, // mounts before the mem line
      `${IDLE.join('\n')}\n${CLEAN_IPC}\nmem 1 2 3\nmnt relative`,
    ]) {
      expect(parseReport(`${bad}\n`)).toBeUndefined();
    }
  });
});

describe("a gVisor sandbox's host tasks (docker/reports.ts)", () => {
  const cgroup = (current: string, max: string) => {
    const dir = fs.mkdtempSync(join(os.tmpdir(), 'berth-pids-'));
    fs.writeFileSync(join(dir, 'pids.current'), `${current}\n`);
    fs.writeFileSync(join(dir, 'pids.max'), `${max}\n`);
    return dir;
  };

  it('past half the limit the container is not kept; below it, or with no limit, it may be; unreadable is never fine', () => {
    expect(hostTasksNearLimit(cgroup('564', '1024'))).toBe('the sandbox holds 564 of its 1024 host tasks');
    expect(hostTasksNearLimit(cgroup('321', '1024'))).toBeUndefined();
    expect(hostTasksNearLimit(cgroup('5000', 'max'))).toBeUndefined();
    expect(hostTasksNearLimit(join(os.tmpdir(), 'berth-no-such-cgroup'))).toBe('its host tasks cannot be read');
  });
});
