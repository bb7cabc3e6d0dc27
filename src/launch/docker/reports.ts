import { Writable } from 'node:stream';
import type Docker from 'dockerode';
import fs from 'node:fs';
import { posix } from 'node:path';
import { cgroupDir, settledMemoryGrowth, watchMemory } from './leftovers.js';
import type { LeftoverObserver } from '../launcher.js';
import { askedStream, feeding } from '../asked-stream.js';
import { askReport, judgeReport, reportBaseline, REPORT_BYTES, REPORT_MS, takeReport } from '../keepalive-report.js';

/**
 * A warm container seen through its keep-alive's reports (keepalive-report.ts), over berth's
 * attach to the keep-alive's stdin and stdout: for runtimes whose processes the host cannot read
 * (gVisor). Its memory is still read from the host: the sentry's memory is charged to the
 * container's cgroup (`sandboxPid` is a host process in it).
 */

export async function reportObserver(docker: Docker, container: Docker.Container, sandboxPid: number): Promise<LeftoverObserver> {
  const stream = (await container.attach({
    stream: true,
    stdin: true,
    stdout: true,
    stderr: true,
    hijack: true,
  })) as NodeJS.ReadWriteStream & { destroy(): void };
  // The keep-alive prints nothing unasked: an answer nobody asked for closes the stream.
  const asked = askedStream({
    question: () => stream.write('\n'),
    stop: () => stream.destroy(),
    take: takeReport,
    maxBytes: REPORT_BYTES,
    timeoutMs: REPORT_MS,
  });
  const close = asked.close;
  const stdout = feeding(asked);
  const ignore = new Writable({ write: (_chunk, _enc, done) => done() });
  docker.modem.demuxStream(stream, stdout, ignore);
  for (const event of ['end', 'close', 'error']) stream.on(event, close);

  // Before anything of a tenant ran: the keep-alive's own processes, and its memory idle.
  const first = await askReport(asked);
  if (!first) return { observe: async () => ({}), close };
  const baseline = reportBaseline(first);
  const memory = watchMemory(sandboxPid);
  const pidsDir = cgroupDir(sandboxPid, 'pids');
  return {
    async observe(mountTargets) {
      const report = await askReport(asked);
      if (!report) return {};
      const left = judgeReport(baseline, report, mountTargets);
      const tasks = pidsDir && hostTasksNearLimit(pidsDir);
      if (tasks && left.keepAliveHurt) return { ...left, keepAliveHurt: [...left.keepAliveHurt, tasks] };
      // Memory is weighed only once nothing else keeps the container (a reclaim costs 100-200 ms).
      return left.ipc?.length === 0 ? { ...left, memoryGrowth: await settledMemoryGrowth(memory) } : left;
    },
    close,
  };
}

/**
 * The sandbox's host tasks against the engine's pids limit: gVisor keeps a ptrace stub for each
 * process that ever ran at once, and at the limit the whole sandbox ends. Past half of it the
 * container is not kept for another message (a new one starts with ~50).
 */
export function hostTasksNearLimit(dir: string): string | undefined {
  const read = (file: string) => Number(fs.readFileSync(posix.join(dir, file), 'utf8').trim());
  try {
    const current = read('pids.current');
    const max = read('pids.max'); // "max" (no limit) reads as NaN: nothing to be near
    return current > max / 2 ? `the sandbox holds ${current} of its ${max} host tasks` : undefined;
  } catch {
    return 'its host tasks cannot be read';
  }
}
