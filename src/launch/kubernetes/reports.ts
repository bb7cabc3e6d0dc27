import { PassThrough } from 'node:stream';
import { Attach, type KubeConfig } from '@kubernetes/client-node';
import { askedStream, feeding } from '../asked-stream.js';
import { askReport, judgeReport, reportBaseline, REPORT_BYTES, REPORT_MS, takeReport } from '../keepalive-report.js';
import type { LeftoverObserver } from '../launcher.js';

/**
 * A warm pod seen through its keep-alive's reports (keepalive-report.ts), asked for on the
 * keep-alive's stdin through `pods/attach`: berth cannot read a node's /proc or cgroups, so
 * everything, its memory too, comes from the keep-alive (berth-bridge idle, pid 1 of the pod's
 * container, not dumpable). The pod's container has `stdin: true`; nothing in it holds that pipe.
 */

/** Nothing can be told: every exec counts as not clean (lifecycle.warmVerdict). */
const BLIND: LeftoverObserver = { observe: async () => ({}), close: () => undefined };

export async function podObserver(kubeConfig: KubeConfig, namespace: string, pod: string, container: string): Promise<LeftoverObserver> {
  const stdin = new PassThrough();
  let socket: { close(): void } | undefined;
  // The keep-alive prints nothing unasked: an answer nobody asked for closes the stream.
  const asked = askedStream({
    question: () => stdin.write('\n'),
    stop: () => socket?.close(),
    take: takeReport,
    maxBytes: REPORT_BYTES,
    timeoutMs: REPORT_MS,
  });
  const stdout = feeding(asked);
  try {
    const ws = await new Attach(kubeConfig).attach(namespace, pod, container, stdout, null, stdin, false);
    socket = ws;
    ws.on('close', asked.close);
    ws.on('error', asked.close);
  } catch {
    asked.close();
    return BLIND;
  }
  // Before anything of a tenant ran: the keep-alive's own processes, and its memory idle.
  const first = await askReport(asked);
  if (!first) return BLIND;
  const baseline = reportBaseline(first);
  return {
    async observe(mountTargets) {
      const report = await askReport(asked);
      if (!report) return {};
      const left = judgeReport(baseline, report, mountTargets);
      if (left.ipc?.length !== 0) return left;
      // No reclaim from here (the cgroup is the node's): page cache is left out of the figure, but
      // the kernel's caches of the files a message touched count until the kernel drops them.
      const grown =
        report.memoryHeld !== undefined && first.memoryHeld !== undefined ? Math.max(0, report.memoryHeld - first.memoryHeld) : undefined;
      return grown === undefined ? left : { ...left, memoryGrowth: grown };
    },
    close: asked.close,
  };
}
