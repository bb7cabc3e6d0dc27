import { spawn } from 'node:child_process';
import fs from 'node:fs';
import { posix } from 'node:path';
import { procStat } from '../../fs/process-identity.js';
import type { ExecLeftovers, LeftoverObserver } from '../launcher.js';
import { askedStream } from '../asked-stream.js';
import { heldBytes } from '../keepalive-report.js';
import { missingMounts, mountPointsOf, wrongSources, type PlannedBind } from '../mount-check.js';
import { WARM_MEMORY_SLACK } from '../lifecycle.js';

/**
 * The host's view of a warm container's processes, for the execs berth runs in it (docker.ts
 * makes the engine calls; this file only reads /proc, the cgroup filesystem and the container's
 * IPC namespace, and needs the host's pid namespace and root to do it). Docker cannot kill an
 * exec, so after each one berth checks that nothing it started is still alive, or left behind
 * in kernel memory, before the container takes the next message.
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
  /** The container's memory cgroup, and what it held idle (heldMemory). */
  memoryDir?: string;
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

/**
 * What an exec left behind: processes still running ("pid comm"), keep-alive processes gone
 * (pids), and the keep-alive's processes still there (its own and its relay's per-connection children).
 */
export interface Leftovers {
  running: string[];
  gone: number[];
  kept: number[];
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
  for (const deadline = Date.now() + settleMs; Date.now() < deadline;) {
    if (readText(`/proc/${initPid}/cmdline`)?.replace(/\0$/, '') === final) break;
    await new Promise((r) => setTimeout(r, 2));
  }
  const baseline = new Map<number, string>();
  for (const pid of usable ? (readPids(usable) ?? []) : []) {
    const stat = procStat(pid);
    if (stat) baseline.set(pid, stat.start);
  }
  const tasks = dir && [posix.join(dir, 'tasks'), posix.join(dir, 'cgroup.threads')].find((f) => readPids(f)?.includes(initPid));
  const { memoryDir, memoryBaseline } = watchMemory(initPid);
  const freezerDir = cgroupDir(initPid, 'freezer');
  const freezeFile = [freezerDir && posix.join(freezerDir, 'freezer.state'), dir && posix.join(dir, 'cgroup.freeze')].find(
    (f): f is string => !!f && readText(f) !== undefined,
  );
  return { procsFile: usable, tasksFile: usable ? tasks : undefined, memoryDir, memoryBaseline, freezeFile, initPid, baseline };
}

/**
 * What the container's cgroup is charged for, less page cache: anonymous memory, tmpfs and shared
 * memory, and kernel memory (message queues, semaphores, sockets, dentries). v1: usage_in_bytes −
 * (total_cache − total_shmem); v2: memory.current − (file − shmem). Both kernels count tmpfs and
 * SysV shared memory in the cache figure, but it cannot be dropped: it stays held. Undefined if unknown.
 */
function heldMemory(dir: string): number | undefined {
  const stat = readText(posix.join(dir, 'memory.stat'));
  const usage = Number(readText(posix.join(dir, 'memory.usage_in_bytes')) ?? readText(posix.join(dir, 'memory.current')) ?? NaN);
  if (stat === undefined || !Number.isFinite(usage)) return undefined;
  const field = (v1: string, v2: string) => Number(new RegExp(`^(?:${v1}|${v2}) (\\d+)$`, 'm').exec(stat)?.[1] ?? NaN);
  return heldBytes(usage, field('total_cache', 'file'), field('total_shmem', 'shmem'));
}

/** A container's memory cgroup (found through one of its host processes) and what it holds now, taken as its idle self. */
export type MemoryWatch = Pick<KeepAlive, 'memoryDir' | 'memoryBaseline'>;

export function watchMemory(pid: number): MemoryWatch {
  const memoryDir = cgroupDir(pid, 'memory');
  return { memoryDir, memoryBaseline: memoryDir ? heldMemory(memoryDir) : undefined };
}

/** Bytes the container holds beyond what it held idle (a tmpfs file, shared memory, kernel memory, a live heap); undefined if unknown. */
export function memoryGrowth(keepAlive: MemoryWatch): number | undefined {
  if (!keepAlive.memoryDir || keepAlive.memoryBaseline === undefined) return undefined;
  const now = heldMemory(keepAlive.memoryDir);
  return now === undefined ? undefined : Math.max(0, now - keepAlive.memoryBaseline);
}

/**
 * memoryGrowth once the kernel has taken back what it can. Kernel memory includes the dentries
 * and inodes of every file a message touched (20,000 new files: ~26 MiB), which the kernel drops
 * under pressure; so past the slack berth asks the cgroup to reclaim (v1 memory.force_empty, v2
 * memory.reclaim: page cache and those caches go, anonymous, tmpfs and IPC memory stay) and
 * judges again. Only then: it costs ~100-200 ms, off the event loop.
 */
export async function settledMemoryGrowth(keepAlive: MemoryWatch): Promise<number | undefined> {
  const growth = memoryGrowth(keepAlive);
  if (growth === undefined || growth <= WARM_MEMORY_SLACK || !keepAlive.memoryDir) return growth;
  const v1 = posix.join(keepAlive.memoryDir, 'memory.force_empty');
  const v2 = posix.join(keepAlive.memoryDir, 'memory.reclaim');
  await fs.promises.writeFile(fs.existsSync(v1) ? v1 : v2, fs.existsSync(v1) ? '0' : String(growth)).catch(() => undefined); // v2: EAGAIN when less could go
  return memoryGrowth(keepAlive);
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
  const gone = [...keepAlive.baseline].filter(([pid, start]) => procStat(pid)?.start !== start).map(([pid]) => pid);
  const kept = (pid: number) => keepAlive.baseline.has(pid) && !gone.includes(pid);
  const running: string[] = [];
  const relayChildren = new Set<number>();
  for (const tid of tids) {
    const stat = procStat(tid);
    if (!stat || stat.state === 'Z' || stat.state === 'X') continue; // gone, or a zombie
    const tgid = tgidOf(tid);
    if (tgid === undefined) continue; // gone meanwhile
    if (kept(tgid)) continue;
    const leader = procStat(tgid) ?? stat;
    const relayChild = leader.comm === 'berth-bridge' && leader.ppid !== keepAlive.initPid && kept(leader.ppid);
    if (relayChild) relayChildren.add(tgid);
    else running.push(`${tgid}${tid === tgid ? '' : `/${tid}`} ${stat.comm}`);
  }
  return { running, gone, kept: [...keepAlive.baseline.keys()].filter(kept).concat([...relayChildren]) };
}

/**
 * SIGKILL, SIGSTOP, SIGTSTP, SIGTTIN, SIGTTOU as bits of a /proc signal mask: sent by a process
 * that exited just before the check, they may still be pending (the keep-alive's own blocked
 * SIGCHLD, SIGTERM and SIGINT are not in it).
 */
const STOP_OR_KILL = [9, 19, 20, 21, 22].reduce((mask, sig) => mask | (1n << BigInt(sig - 1)), 0n);

/**
 * The keep-alive's processes that are not sleeping or running ("pid comm state"): stopped (a
 * tenant's SIGSTOP to the relay: alive, same start time, relaying nothing), traced, a zombie, or
 * with a stop or kill signal on its way. Read once nothing of the tenant's runs that could change
 * it, after the thaw: frozen, every task shows D, and a task just thawed may still show D until
 * it runs again (seen: 1 in ~250 messages), so a D is read again for up to 50 ms.
 */
async function stalledKeepAlive(pids: number[]): Promise<string[]> {
  const stalled: string[] = [];
  for (const pid of pids) {
    let stat = procStat(pid);
    for (let i = 0; stat?.state === 'D' && i < 50; i++) {
      await new Promise((r) => setTimeout(r, 1));
      stat = procStat(pid);
    }
    if (!stat) {
      stalled.push(`${pid} gone`);
      continue;
    }
    const status = readText(`/proc/${pid}/status`) ?? '';
    const pending = ['SigPnd', 'ShdPnd'].map((f) => BigInt(`0x${new RegExp(`^${f}:\\s+([0-9a-f]+)$`, 'm').exec(status)?.[1] ?? '0'}`));
    const stopping = pending.some((mask) => (mask & STOP_OR_KILL) !== 0n);
    if ((stat.state !== 'S' && stat.state !== 'R') || stopping)
      stalled.push(`${pid} ${stat.comm} ${stat.state}${stopping ? ' (stop or kill pending)' : ''}`);
  }
  return stalled;
}

/**
 * The IPC reader's print of /proc/sysvipc/{msg,shm,sem}: "msg 3", "shm 1", "sem 2" for each kind
 * present; undefined unless all three tables were there.
 */
function countSysvIpc(text: string): string[] | undefined {
  const counts = new Map<string, number>();
  let kind: string | undefined;
  for (const line of text.split('\n')) {
    const header = /^\s*key\s+(msq|shm|sem)id\b/.exec(line);
    if (header) counts.set((kind = header[1] === 'msq' ? 'msg' : header[1]!), 0);
    else if (kind && line.trim()) counts.set(kind, (counts.get(kind) ?? 0) + 1);
  }
  if (counts.size !== 3) return undefined;
  return [...counts].filter(([, n]) => n > 0).map(([k, n]) => `${k} ${n}`);
}

/**
 * Reads the IPC objects in the container's namespace: SysV message queues, shared memory segments
 * and semaphore sets, and POSIX message queues ("msg 3", "mqueue 1", ...). They outlive the
 * message that made them, in memory no process owns. /proc/sysvipc lists the reader's own
 * namespace (not the one of the /proc it is read through), so a host shell joins the container's
 * IPC namespace alone (nsenter; no other namespace, nothing of the container's filesystem runs)
 * and prints the three tables each time it is told to. One shell serves a warm container for its
 * whole life: a read is a line written and the tables read back (~1 ms, shell builtins only),
 * where a shell started per message cost ~5 ms of a 2-core host's CPU beside the exec. POSIX
 * queues are files of the container's /dev/mqueue. read() gives undefined if it cannot tell (no
 * nsenter, not root, the container's init gone meanwhile, a read past its bounds: the shell is
 * then ended); close() ends it (it holds the namespace, and so its objects, while it lives).
 */
export interface IpcReader {
  read(): Promise<string[] | undefined>;
  close(): void;
}

/** Per line read: the three tables, then an end mark; shell builtins only (no exec per read). */
const IPC_TABLES =
  'while read go; do for f in msg shm sem; do while IFS= read -r l; do printf "%s\\n" "$l"; done < /proc/sysvipc/$f; done; printf "\\036\\n"; done';
const IPC_END = '\x1e\n';
/** The sysctls bound each table to 16 objects: far more than this means something is wrong. */
const IPC_OUTPUT_BYTES = 1 << 20;
const IPC_READ_MS = 5000;

export function openIpcReader(keepAlive: KeepAlive): IpcReader {
  const { initPid } = keepAlive;
  const start = keepAlive.baseline.get(initPid);
  if (start === undefined || procStat(initPid)?.start !== start) return { read: async () => undefined, close: () => undefined };
  const child = spawn('nsenter', [`--ipc=/proc/${initPid}/ns/ipc`, '--', 'sh', '-c', IPC_TABLES], { stdio: ['pipe', 'pipe', 'ignore'] });
  const asked = askedStream({
    question: () => child.stdin.write('go\n'),
    stop: () => void (child.exitCode === null && child.signalCode === null && child.kill('SIGKILL')),
    take: (printed) => {
      const end = printed.indexOf(IPC_END);
      return end < 0 ? undefined : { text: printed.slice(0, end), rest: printed.slice(end + IPC_END.length) };
    },
    maxBytes: IPC_OUTPUT_BYTES,
    timeoutMs: IPC_READ_MS,
  });
  child.stdout.setEncoding('utf8');
  child.stdout.on('data', (chunk: string) => asked.feed(chunk));
  child.on('error', asked.close);
  child.on('close', asked.close);
  child.stdin.on('error', () => undefined);
  return {
    async read() {
      const sysv = await asked.ask();
      if (sysv === undefined) return undefined;
      let mqueues: string[];
      try {
        mqueues = fs.readdirSync(`/proc/${initPid}/root/dev/mqueue`);
      } catch {
        return undefined;
      }
      const counts = countSysvIpc(sysv);
      // The same init throughout: its pid was not handed to another process's namespace meanwhile.
      if (!counts || procStat(initPid)?.start !== start) return undefined;
      return [...counts, ...(mqueues.length ? [`mqueue ${mqueues.length}`] : [])];
    },
    close: asked.close,
  };
}

/** The IPC objects in the container's namespace now (see IpcReader). */
export async function leftoverIpc(keepAlive: KeepAlive): Promise<string[] | undefined> {
  const reader = openIpcReader(keepAlive);
  try {
    return await reader.read();
  } finally {
    reader.close();
  }
}

/**
 * What an exec left in a warm container, as this host sees it (lifecycle.warmVerdict judges):
 * processes, the keep-alive's health, IPC objects and memory. A part that cannot be read stays
 * undefined. One exec at a time (a second one running meanwhile would count as left behind).
 * `ipcReader`: one opened with the container (the caller closes it); without it, one is started now.
 */
export async function observeLeftovers(
  keepAlive: KeepAlive,
  mountTargets: readonly string[],
  ipcReader?: IpcReader,
  binds: readonly PlannedBind[] = [],
): Promise<ExecLeftovers> {
  const left = leftoverProcesses(keepAlive);
  if (!left) return {};
  if (left.running.length) return { running: left.running };
  const hurt = [...left.gone.map((pid) => `${pid} gone`), ...(await stalledKeepAlive(left.kept))];
  if (hurt.length) return { running: [], keepAliveHurt: hurt };
  // The container's mount table as its pid 1 sees it (paths in the container's root).
  const table = readText(`/proc/${keepAlive.initPid}/mountinfo`);
  if (table === undefined) return { running: [], keepAliveHurt: [] };
  const mountsMissing = [...missingMounts(mountTargets, mountPointsOf(table)), ...(sourcesNotPlanned(table, binds) ?? [])];
  if (mountsMissing.length) return { running: [], keepAliveHurt: [], mountsMissing };
  const ipc = await (ipcReader ? ipcReader.read() : leftoverIpc(keepAlive));
  // Memory is weighed only once nothing else keeps the container (a reclaim costs 100-200 ms).
  const memoryGrowth = ipc?.length === 0 ? await settledMemoryGrowth(keepAlive) : undefined;
  return { running: [], keepAliveHurt: [], mountsMissing, ipc, memoryGrowth };
}

/**
 * How the Docker launcher looks into one warm container after each exec: from the host (this
 * file, for runtimes whose processes are host processes) or through the keep-alive's reports
 * (docker/reports.ts, gVisor). `close` when the container goes.
 */
/** The host's view: /proc and the cgroup for processes, the container's IPC namespace, its memory cgroup. */
export async function hostObserver(initPid: number, keepAliveArgv: string[]): Promise<LeftoverObserver> {
  const keepAlive = await watchKeepAlive(initPid, keepAliveArgv);
  const ipcReader = openIpcReader(keepAlive);
  return { observe: (mountTargets, binds) => observeLeftovers(keepAlive, mountTargets, ipcReader, binds), close: () => ipcReader.close() };
}

/**
 * The plan's bind targets in a container that show something other than their planned source
 * (mount-check.ts wrongSources), from the container's mount table as its first process sees it
 * (`procDir`: /proc/<pid>, or a held /proc directory); undefined when it cannot be read (the
 * process is gone).
 */
export function mountsNotPlanned(procDir: string, binds: readonly PlannedBind[]): string[] | undefined {
  const table = readText(`${procDir}/mountinfo`);
  return table === undefined ? undefined : (sourcesNotPlanned(table, binds) ?? []);
}

function sourcesNotPlanned(table: string, binds: readonly PlannedBind[]): string[] | undefined {
  const host = binds.length ? readText('/proc/self/mountinfo') : undefined;
  return host === undefined ? undefined : wrongSources(binds, table, host, deviceOf);
}

/** A host path's device as mountinfo writes it ("major:minor", glibc's dev_t split); undefined if it cannot be read. */
function deviceOf(path: string): string | undefined {
  try {
    const dev = fs.lstatSync(path, { bigint: true }).dev;
    const major = ((dev >> 8n) & 0xfffn) | ((dev >> 32n) & ~0xfffn);
    const minor = (dev & 0xffn) | ((dev >> 12n) & ~0xffn);
    return `${major}:${minor}`;
  } catch {
    return undefined;
  }
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
  return readText(file)?.split('\n').filter(Boolean).map(Number);
}
