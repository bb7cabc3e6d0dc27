import fs from 'node:fs';
import { posix } from 'node:path';

/**
 * The host's view of a warm container's processes, for the execs berth runs in it (docker.ts
 * makes the engine calls; this file only reads /proc and the cgroup filesystem, and needs the
 * host's pid namespace to do it). Docker cannot kill an exec, so after each one berth checks that
 * nothing it started is still alive before the container takes the next message.
 */

/** The cgroup directory of `pid` for a controller (v1), or its unified cgroup (v2); undefined if unknown. */
export function cgroupDir(pid: number, controller: 'pids' | 'memory' | 'freezer'): string | undefined {
  const own = readText(`/proc/${pid}/cgroup`);
  const mounts = readText('/proc/self/mountinfo');
  if (own === undefined || mounts === undefined) return undefined;
  // "4:memory:/docker/<id>" (v1) or "0::/system.slice/docker-<id>.scope" (v2).
  const lines = own.split('\n').map((l) => l.split(':'));
  const v1 = lines.find((f) => f.length >= 3 && f[1]!.split(',').includes(controller));
  const v2 = lines.find((f) => f.length >= 3 && f[0] === '0' && f[1] === '');
  for (const line of mounts.split('\n')) {
    // "39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids"
    const [before, after] = line.split(' - ');
    const [, , , root, mountPoint] = (before ?? '').split(' ');
    const [type, , superOptions] = (after ?? '').split(' ');
    if (!root || !mountPoint) continue;
    const path = v1
      ? type === 'cgroup' && (superOptions ?? '').split(',').includes(controller) && v1.slice(2).join(':')
      : type === 'cgroup2' && v2?.slice(2).join(':');
    if (!path) continue;
    const rel = posix.relative(root, path);
    if (rel.startsWith('..')) return undefined; // outside what this mount shows (another cgroup namespace)
    return posix.join(mountPoint, rel);
  }
  return undefined;
}

/** The processes of a warm container berth has seen while nothing of a tenant ran in it. */
export interface KeepAlive {
  /** Host path of the container's cgroup.procs; undefined when it could not be found. */
  procsFile?: string;
  /**
   * Every thread of the container (v1 `tasks`, v2 `cgroup.threads`): a process whose main thread
   * exited while its other threads run shows as a zombie in cgroup.procs (or not at all), but
   * its live threads are here.
   */
  tasksFile?: string;
  /** The container's memory.stat, and what it held idle (anonymous plus shared memory: tmpfs files count, page cache does not). */
  memoryFile?: string;
  memoryBaseline?: number;
  /** Its freezer (v1 freezer.state, v2 cgroup.freeze): the task list is read while nothing in it can fork. */
  freezeFile?: string;
  /** The container's first process (host pid). */
  initPid: number;
  /**
   * The keep-alive's own processes (the init and, under berth-bridge's relay, its listener), each
   * with its start time: a pid the kernel hands out again is not mistaken for one of them.
   */
  baseline: Map<number, string>;
}

/** What an exec left behind: processes still running ("pid comm"), keep-alive processes gone (pids). */
export interface Leftovers {
  running: string[];
  gone: number[];
}

/**
 * Takes the baseline once the keep-alive has settled. A wrapper like `berth-bridge relay … --
 * COMMAND` forks its helper and then execs COMMAND, so it is settled when the init runs COMMAND.
 * If it never does, the baseline misses the helper and every later check says "not clean": the
 * safe way to be wrong.
 */
export async function watchKeepAlive(initPid: number, keepAliveArgv: string[], settleMs = 1000): Promise<KeepAlive> {
  const dir = cgroupDir(initPid, 'pids');
  const procsFile = dir && posix.join(dir, 'cgroup.procs');
  // The file is the container's only if its init is listed there, seen from this pid namespace.
  const usable = procsFile && readPids(procsFile)?.includes(initPid) ? procsFile : undefined;
  const dash = keepAliveArgv.indexOf('--');
  const final = (dash >= 0 ? keepAliveArgv.slice(dash + 1) : keepAliveArgv).join('\0');
  for (const deadline = Date.now() + settleMs; Date.now() < deadline; ) {
    if (readText(`/proc/${initPid}/cmdline`)?.replace(/\0$/, '') === final) break;
    await new Promise((r) => setTimeout(r, 2));
  }
  const baseline = new Map<number, string>();
  for (const pid of usable ? (readPids(usable) ?? []) : []) {
    const stat = readStat(pid);
    if (stat) baseline.set(pid, stat.start);
  }
  const tasks = dir && [posix.join(dir, 'tasks'), posix.join(dir, 'cgroup.threads')].find((f) => readPids(f)?.includes(initPid));
  const memDir = cgroupDir(initPid, 'memory');
  const memoryFile = memDir && posix.join(memDir, 'memory.stat');
  const memoryBaseline = memoryFile ? heldMemory(memoryFile) : undefined;
  const freezerDir = cgroupDir(initPid, 'freezer');
  const freezeFile = [freezerDir && posix.join(freezerDir, 'freezer.state'), dir && posix.join(dir, 'cgroup.freeze')].find((f): f is string => !!f && readText(f) !== undefined);
  return { procsFile: usable, tasksFile: usable ? tasks : undefined, memoryFile, memoryBaseline, freezeFile, initPid, baseline };
}

/** Anonymous plus shared memory (v1 rss + shmem, v2 anon + shmem): what an idle container would pin; undefined if unknown. */
function heldMemory(statFile: string): number | undefined {
  const text = readText(statFile);
  if (text === undefined) return undefined;
  const field = (name: string) => Number(new RegExp(`^${name} (\\d+)$`, 'm').exec(text)?.[1] ?? NaN);
  const anon = Number.isFinite(field('total_rss')) ? field('total_rss') : field('anon');
  const shmem = Number.isFinite(field('total_shmem')) ? field('total_shmem') : field('shmem');
  return Number.isFinite(anon) && Number.isFinite(shmem) ? anon + shmem : undefined;
}

/** Bytes the container holds beyond what it held idle (a tmpfs file, shared memory, a live heap); undefined if unknown. */
export function memoryGrowth(keepAlive: KeepAlive): number | undefined {
  if (!keepAlive.memoryFile || keepAlive.memoryBaseline === undefined) return undefined;
  const now = heldMemory(keepAlive.memoryFile);
  return now === undefined ? undefined : Math.max(0, now - keepAlive.memoryBaseline);
}

/**
 * Run `read` with the container frozen, so no process in it can fork between the reads (a
 * fork-and-exit loop would otherwise always be one step ahead of a snapshot). Without a freezer
 * it reads anyway; the thread list is then a snapshot.
 */
function whileFrozen<T>(freezeFile: string | undefined, read: () => T): T {
  if (!freezeFile) return read();
  const v2 = freezeFile.endsWith('cgroup.freeze');
  try {
    fs.writeFileSync(freezeFile, v2 ? '1' : 'FROZEN');
    // v1 passes through FREEZING; v2 reports in cgroup.events. A few ms at most.
    const frozenFile = v2 ? posix.join(posix.dirname(freezeFile), 'cgroup.events') : freezeFile;
    for (let i = 0; i < 200; i++) {
      const state = readText(frozenFile) ?? '';
      if (v2 ? /^frozen 1$/m.test(state) : state.trim() === 'FROZEN') break;
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1);
    }
    return read();
  } finally {
    try {
      fs.writeFileSync(freezeFile, v2 ? '0' : 'THAWED');
    } catch {
      // the container is gone
    }
  }
}

/**
 * What is alive in the container beyond the keep-alive, and which keep-alive processes are gone (a
 * tenant may kill its relay: the container then no longer works as planned). Undefined when the
 * host gives no answer (berth not root or in another pid namespace, an unknown cgroup layout): the
 * caller then takes the container as not clean. Ignored: zombies (they run nothing and the init
 * reaps them) and berth-bridge's per-connection relay children, whose parent is a baseline helper
 * (never the init: a tenant's orphan is re-parented to the init, whatever name it gives itself).
 * One exec at a time: a second one running meanwhile would count as left behind.
 */
export function leftoverProcesses(keepAlive: KeepAlive): Leftovers | undefined {
  return whileFrozen(keepAlive.freezeFile, () => readLeftovers(keepAlive));
}

function readLeftovers(keepAlive: KeepAlive): Leftovers | undefined {
  if (!keepAlive.procsFile || !keepAlive.tasksFile) return undefined;
  // Threads, not processes: a live thread of a process whose leader is a zombie still runs.
  const tids = readPids(keepAlive.tasksFile);
  if (!tids) return undefined;
  const gone = [...keepAlive.baseline].filter(([pid, start]) => readStat(pid)?.start !== start).map(([pid]) => pid);
  const kept = (pid: number) => keepAlive.baseline.has(pid) && !gone.includes(pid);
  const running: string[] = [];
  for (const tid of tids) {
    const stat = readStat(tid);
    if (!stat || stat.state === 'Z' || stat.state === 'X') continue; // gone, or a zombie
    const tgid = tgidOf(tid);
    if (tgid === undefined) continue; // gone meanwhile
    if (kept(tgid)) continue;
    const leader = readStat(tgid) ?? stat;
    const relayChild = leader.comm === 'berth-bridge' && leader.ppid !== keepAlive.initPid && kept(leader.ppid);
    if (!relayChild) running.push(`${tgid}${tid === tgid ? '' : `/${tid}`} ${stat.comm}`);
  }
  return { running, gone };
}

/** The process a thread belongs to (/proc/<tid>/status "Tgid:"). */
function tgidOf(tid: number): number | undefined {
  const m = /^Tgid:\s+(\d+)$/m.exec(readText(`/proc/${tid}/status`) ?? '');
  return m ? Number(m[1]) : undefined;
}

function readText(file: string): string | undefined {
  try {
    return fs.readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
}

function readPids(file: string): number[] | undefined {
  return readText(file)
    ?.split('\n')
    .filter(Boolean)
    .map(Number);
}

/** /proc/<pid>/stat: "pid (comm) state ppid … starttime(22nd) …"; comm may hold spaces and parentheses. */
function readStat(pid: number): { comm: string; state: string; ppid: number; start: string } | undefined {
  const text = readText(`/proc/${pid}/stat`);
  if (!text) return undefined;
  const open = text.indexOf('(');
  const close = text.lastIndexOf(')');
  const fields = text.slice(close + 2).split(' '); // fields[0] is the 3rd field
  return { comm: text.slice(open + 1, close), state: fields[0] ?? '', ppid: Number(fields[1]), start: fields[19] ?? '' };
}
