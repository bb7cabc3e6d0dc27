import type { AskedStream } from './asked-stream.js';
import type { ExecLeftovers } from './launcher.js';
import { missingMounts, unescapeMountPoint } from './mount-check.js';

/**
 * The keep-alive's report (berth-bridge idle prints one for each line berth writes to its stdin):
 * the container's threads and IPC objects as its pid 1 sees them. It is how berth looks into a
 * container whose processes are not host processes (gVisor: they live in the sentry). The
 * keep-alive is berth's, started before anything of a tenant, not dumpable (nothing of the
 * tenant's can ptrace it), and its stdout goes to berth's attach alone; the thread names are the
 * tenant's, printed as [!-~] only. Parsing and judging; its one question goes through the caller's stream.
 */

export interface ReportThread {
  tgid: number;
  tid: number;
  ppid: number;
  state: string;
  /** Start time (clock ticks since boot): a pid handed out again is not taken for the old one. */
  start: string;
  /** Its process's thread count: a zombie leader with more than one has threads still running. */
  threads: number;
  comm: string;
}

export interface KeepAliveReport {
  threads: ReportThread[];
  /**
   * Threads listed but gone when read, in each of the keep-alive's scans (it scans again until
   * one is steady, a bounded number of times): something still forks and exits.
   */
  churn?: number;
  /** Pages of SysV shared memory, message queues and semaphore sets; undefined where the kernel did not say. */
  shmPages?: number;
  msgQueues?: number;
  semSets?: number;
  /** POSIX message queues; undefined where there is no /dev/mqueue (gVisor has none). */
  mqueues?: number;
  /**
   * Bytes the container holds as its own cgroup counts them (heldMemory's sum: usage less page
   * cache, plus shared memory); undefined where the keep-alive could not read them.
   */
  memoryHeld?: number;
  /** Mount points in the workspace (mount-check.ts); undefined from a keep-alive that does not list them. */
  mounts?: string[];
}

/** A report lists every thread (each ~60 bytes; the pids limit bounds them): far more means something is wrong. */
export const REPORT_BYTES = 4 << 20;
export const REPORT_MS = 5000;

/** The line that ends a report. */
const REPORT_END = 'end\n';

/**
 * The first whole report in what the keep-alive printed so far, and what follows it; undefined
 * until one is complete. Its end line follows the ipc and mem lines: "end\n" closing a thread's name
 * ("backend") is not it.
 */
export function takeReport(printed: string): { text: string; rest: string } | undefined {
  const end = printed.indexOf(`\n${REPORT_END}`);
  return end < 0 ? undefined : { text: printed.slice(0, end + 1), rest: printed.slice(end + 1 + REPORT_END.length) };
}

const THREAD = /^t (\d+) (\d+) (\d+) (\S) (\d+) (\d+) ([!-~]+)$/;
const CHURN = /^churn (\d+)$/;
const IPC = /^ipc (-?\d+) (-?\d+) (-?\d+) (-?\d+)$/;
const MEM = /^mem (-?\d+) (-?\d+) (-?\d+)$/;
const MNT = /^mnt (\/\S*)$/;

/** What a container holds: usage less the page cache the kernel can drop, plus shared memory (tmpfs, IPC), which it cannot. */
export function heldBytes(usage: number, cache: number, shmem: number): number | undefined {
  return [usage, cache, shmem].every((n) => Number.isFinite(n) && n >= 0) ? usage - cache + shmem : undefined;
}

/** One report's text (without its end line); undefined if any line is not the keep-alive's. */
export function parseReport(text: string): KeepAliveReport | undefined {
  const threads: ReportThread[] = [];
  let churn: number | undefined;
  let ipc: RegExpExecArray | null = null;
  let mem: RegExpExecArray | null = null;
  let mounts: string[] | undefined;
  for (const line of text.split('\n')) {
    if (!line) continue;
    // After the ipc line: its mem line, then its mount points; nothing else.
    if (ipc) {
      const m = mem ? MNT.exec(line) : null;
      if (m) (mounts ??= []).push(unescapeMountPoint(m[1]!));
      else if (mem || !(mem = MEM.exec(line))) return undefined;
      continue;
    }
    const t = churn === undefined ? THREAD.exec(line) : null;
    if (t) {
      threads.push({
        tgid: Number(t[1]),
        tid: Number(t[2]),
        ppid: Number(t[3]),
        state: t[4]!,
        start: t[5]!,
        threads: Number(t[6]),
        comm: t[7]!,
      });
      continue;
    }
    const c = churn === undefined ? CHURN.exec(line) : null;
    if (c) {
      churn = Number(c[1]);
      continue;
    }
    if (!(ipc = IPC.exec(line))) return undefined;
  }
  if (!ipc) return undefined;
  const count = (s: string) => (Number(s) < 0 ? undefined : Number(s));
  const memoryHeld = mem ? heldBytes(Number(mem[1]), Number(mem[2]), Number(mem[3])) : undefined;
  return {
    threads,
    ...(churn ? { churn } : {}),
    shmPages: count(ipc[1]!),
    msgQueues: count(ipc[2]!),
    semSets: count(ipc[3]!),
    mqueues: count(ipc[4]!),
    ...(memoryHeld === undefined ? {} : { memoryHeld }),
    ...(mounts ? { mounts } : {}),
  };
}

/** One report asked over the keep-alive's stream; undefined if none came in time or it was not one (the stream is then closed). */
export async function askReport(asked: AskedStream): Promise<KeepAliveReport | undefined> {
  const text = await asked.ask();
  const report = text === undefined ? undefined : parseReport(text);
  if (!report) asked.close();
  return report;
}

/** The keep-alive's own processes (pid → start), from the report taken before anything of a tenant ran. */
export function reportBaseline(report: KeepAliveReport): Map<number, string> {
  return new Map(report.threads.filter((t) => t.tid === t.tgid).map((t) => [t.tgid, t.start]));
}

/** The keep-alive is the container's pid 1 in its own pid namespace. */
const INIT = 1;

/**
 * What an exec left, judged from a report against the baseline (as the host check judges /proc):
 * threads beyond the keep-alive's (zombies aside: they run nothing and the init reaps them;
 * berth-bridge's per-connection relay children aside: their parent is a keep-alive process, never
 * the init, to which a tenant's orphan is re-parented whatever name it gives itself); keep-alive
 * processes gone or not sleeping or running (a tenant's SIGSTOP to the relay); IPC objects.
 * POSIX queues gVisor cannot list count only through the memory they hold (weighed apart).
 */
export function judgeReport(
  baseline: Map<number, string>,
  report: KeepAliveReport,
  mountTargets: readonly string[],
): Omit<ExecLeftovers, 'memoryGrowth'> {
  const leaders = new Map(report.threads.filter((t) => t.tid === t.tgid).map((t) => [t.tgid, t]));
  const kept = (pid: number) => baseline.has(pid) && leaders.get(pid)?.start === baseline.get(pid);
  const running: string[] = report.churn ? [`processes that exit as they are read (${report.churn} gone mid-read, scan after scan)`] : [];
  for (const t of report.threads) {
    // A zombie runs nothing, unless it is a leader with threads still running (gVisor then shows no task list).
    const zombie = (t.state === 'Z' || t.state === 'X') && (t.tid !== t.tgid || t.threads <= 1);
    if (zombie || kept(t.tgid)) continue;
    const leader = leaders.get(t.tgid) ?? t;
    if (leader.comm === 'berth-bridge' && leader.ppid !== INIT && kept(leader.ppid)) continue;
    running.push(`${t.tgid}${t.tid === t.tgid ? '' : `/${t.tid}`} ${t.comm}`);
  }
  if (running.length) return { running };
  const hurt = [...baseline.keys()].flatMap((pid) => {
    const leader = leaders.get(pid);
    if (!kept(pid)) return [`${pid} gone`];
    return leader && leader.state !== 'S' && leader.state !== 'R' ? [`${pid} ${leader.comm} ${leader.state}`] : [];
  });
  if (hurt.length) return { running: [], keepAliveHurt: hurt };
  if (!report.mounts) return { running: [], keepAliveHurt: [] };
  const mountsMissing = missingMounts(mountTargets, report.mounts);
  if (mountsMissing.length) return { running: [], keepAliveHurt: [], mountsMissing };
  const { shmPages, msgQueues, semSets, mqueues } = report;
  if (shmPages === undefined || msgQueues === undefined || semSets === undefined) return { running: [], keepAliveHurt: [], mountsMissing };
  const ipc = [
    ...(shmPages ? [`shm ${shmPages} page${shmPages === 1 ? '' : 's'}`] : []),
    ...(msgQueues ? [`msg ${msgQueues}`] : []),
    ...(semSets ? [`sem ${semSets}`] : []),
    ...(mqueues ? [`mqueue ${mqueues}`] : []),
  ];
  return { running: [], keepAliveHurt: [], mountsMissing, ipc };
}
