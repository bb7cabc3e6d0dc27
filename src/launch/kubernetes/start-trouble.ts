import type { CoreV1Event, V1Pod } from '@kubernetes/client-node';
import type { ErrorCode } from '../../base/errors.js';
import { WRITABLE_CONTAINER } from './init-containers.js';

/**
 * Why a pod that is not running will not run, read from what the cluster says about it: the
 * kubelet's container states and the pod's phase, its PodScheduled condition, the Warning Events
 * of the scheduler and the kubelet, and the Sandbox's Ready condition (its controller could not
 * make the pod). Pure: kubernetes/wait-running.ts reads, this judges. Reasons and message shapes
 * are Kubernetes' own (scheduler `FailedScheduling`, kubelet `FailedMount`,
 * `FailedCreatePodSandBox`, attach-detach `FailedAttachVolume`, admission `OutOfcpu`).
 */

export interface Trouble {
  code: Extract<ErrorCode, 'RUN_FAILED' | 'POD_REFUSED'>;
  message: string;
}

/** The volume names berth gives a pod (`m<i>`) with the path they are mounted at, so a message says "/tmp", not "m3". */
function withMountPaths(pod: V1Pod, text: string): string {
  const paths = new Map((pod.spec?.containers[0]?.volumeMounts ?? []).map((m) => [m.name, m.mountPath]));
  return text.replace(/volume "?(m\d+)"?/g, (all, name: string) => (paths.has(name) ? `${all} (${paths.get(name)})` : all));
}

/** Why a pod that is not running will not run (a status the kubelet reported), or undefined while it may still. */
export function podTrouble(pod: V1Pod): string | undefined {
  // A container's own words first: they say more than the pod's phase.
  const statuses = [
    ...(pod.status?.initContainerStatuses ?? []).map((cs) => ({ cs, init: true })),
    ...(pod.status?.containerStatuses ?? []).map((cs) => ({ cs, init: false })),
  ];
  for (const { cs, init } of statuses) {
    const waiting = cs.state?.waiting;
    if (waiting && /ErrImage|ImagePull|InvalidImageName|CreateContainerConfigError|CreateContainerError/.test(waiting.reason ?? ''))
      return `${waiting.reason}: ${waiting.message ?? ''}`.trim();
    const ended = cs.state?.terminated;
    // An init container is done when it ends 0 (the workspace's prepare step).
    if (ended && !(init && ended.exitCode === 0))
      return `${init ? `its ${cs.name} step` : 'its container'} ended (${ended.reason ?? 'exit'} ${ended.exitCode}${ended.message ? `: ${ended.message.trim().slice(0, 300)}` : ''})`;
  }
  const phase = pod.status?.phase;
  if (phase === 'Failed' || phase === 'Succeeded')
    return withMountPaths(
      pod,
      `its pod ended (${phase}${pod.status?.reason ? `: ${pod.status.reason}` : ''}${pod.status?.message ? `, ${pod.status.message}` : ''})`,
    );
  return undefined;
}

/** Whether the pod's volume check (objects.ts WRITABLE_CONTAINER) found a volume the agent cannot write. */
export const volumesUnwritable = (pod: V1Pod): boolean =>
  (pod.status?.initContainerStatuses ?? []).some((cs) => cs.name === WRITABLE_CONTAINER && (cs.state?.terminated?.exitCode ?? 0) !== 0);

/** A scheduler's verdict that no node has room (capacity), as opposed to one that passes (a volume still binding, a node not yet ready). */
const NO_ROOM = /Insufficient [a-z.\/-]+|Too many pods/;
/** Warnings that mean the pod will not start as it is: the kubelet retries them, but berth's runs do not wait on a retry. */
const REFUSING_EVENTS = new Set(['FailedCreatePodSandBox', 'FailedMount', 'FailedAttachVolume', 'FailedScheduling']);
/** Admission refusals by the kubelet (the pod Failed at once): the node, not the run, is at fault. */
const REFUSED_PHASE = /^(OutOf[a-z]+|SysctlForbidden|UnexpectedAdmissionError|NodeAffinity|Evicted)$/;

/** The cluster's refusal of a pod from its Warning Events, its PodScheduled condition or its kubelet's admission, or undefined. */
export function podRefusal(pod: V1Pod | undefined, events: readonly CoreV1Event[]): Trouble | undefined {
  if (pod?.status?.phase === 'Failed' && REFUSED_PHASE.test(pod.status.reason ?? ''))
    return { code: 'POD_REFUSED', message: podTrouble(pod) ?? `its pod failed (${pod.status.reason})` };
  const scheduled = pod?.status?.conditions?.find((c) => c.type === 'PodScheduled');
  if (scheduled?.status === 'False' && scheduled.reason === 'Unschedulable' && NO_ROOM.test(scheduled.message ?? ''))
    return { code: 'POD_REFUSED', message: `no node has room for it (Unschedulable: ${scheduled.message})` };
  const warnings = newestWarnings(events)
    .filter((e) => REFUSING_EVENTS.has(e.reason ?? ''))
    .filter((e) => (pod?.metadata?.uid && e.involvedObject.uid ? e.involvedObject.uid === pod.metadata.uid : true));
  for (const e of warnings) {
    // A scheduler's other words (an unbound claim, a node not ready yet) pass on their own.
    if (e.reason === 'FailedScheduling' && !NO_ROOM.test(e.message ?? '')) continue;
    if (e.reason === 'FailedMount' && !mountKeepsFailing(e)) continue;
    const from = e.source?.component ?? e.reportingComponent ?? 'the cluster';
    return {
      code: 'POD_REFUSED',
      message: `${e.reason} (${from}): ${pod ? withMountPaths(pod, e.message ?? '') : (e.message ?? '')}`.trim(),
    };
  }
  return undefined;
}

/**
 * A mount failure the kubelet keeps retrying into (its backoff starts at half a second and doubles):
 * 4 times, or for 10 s. A first one often passes: the real kubelet's "failed to sync configmap
 * cache: timed out waiting for the condition" mounted on its next try (a real node, 2026-11-28).
 */
const mountKeepsFailing = (e: CoreV1Event) =>
  (e.count ?? 1) >= 4 ||
  (e.firstTimestamp !== undefined && e.lastTimestamp !== undefined && eventTime(e) - new Date(e.firstTimestamp).getTime() >= 10_000);

/** How long a pod may stand bound to a node whose kubelet has not taken it up (a live kubelet sets startTime within a second or two). */
export const NODE_SILENT_MS = 30_000;

/**
 * A pod bound to a node whose kubelet never answered for it (no startTime) for `graceMs` since
 * berth first saw it so: the node is down or cut off, and a pod placed there before the scheduler
 * took the node for gone (its grace period) would otherwise wait out the whole start timeout.
 * `since` is berth's own clock, so a cluster's clock skew does not count.
 */
export function nodeSilence(
  pod: V1Pod | undefined,
  since: number | undefined,
  now: number,
  graceMs = NODE_SILENT_MS,
): { trouble?: Trouble; since?: number } {
  const node = pod?.spec?.nodeName;
  if (!node || pod.status?.startTime || pod.status?.phase !== 'Pending') return {};
  const first = since ?? now;
  if (now - first < graceMs) return { since: first };
  return {
    since: first,
    trouble: {
      code: 'POD_REFUSED',
      message: `placed on node ${node}, whose kubelet has not taken it up in ${Math.round((now - first) / 1000)} s (is the node down?)`,
    },
  };
}

/**
 * Why a pod is still waiting, in the scheduler's or kubelet's words: its PodScheduled condition
 * when False (an unbound claim, a node not ready, a volume held on another node), else its newest
 * Warning. What a start timeout says, so the person learns why, not only that it took too long.
 */
export function waitingReason(pod: V1Pod | undefined, events: readonly CoreV1Event[]): string | undefined {
  const scheduled = pod?.status?.conditions?.find((c) => c.type === 'PodScheduled');
  if (scheduled?.status === 'False' && scheduled.message) return `${scheduled.reason ?? 'not scheduled'}: ${scheduled.message}`;
  const newest = newestWarnings(events)[0];
  if (newest?.message) return `${newest.reason ?? 'Warning'}: ${newest.message}`;
  // Placed before the scheduler knew its node was gone (a node is taken for down only after its grace period).
  const node = pod?.spec?.nodeName;
  return node && pod.status?.phase === 'Pending'
    ? `placed on node ${node}, whose kubelet has not started it (is the node down?)`
    : undefined;
}

const eventTime = (e: CoreV1Event) => new Date(e.lastTimestamp ?? e.eventTime ?? e.firstTimestamp ?? 0).getTime();
const newestWarnings = (events: readonly CoreV1Event[]) =>
  events.filter((e) => e.type === 'Warning').sort((a, b) => eventTime(b) - eventTime(a));

interface SandboxCondition {
  type: string;
  status: string;
  reason?: string;
  message?: string;
}

/**
 * The controller's failure to make the Sandbox's pod (Ready False, ReconcilerError: a pod
 * admission refused, a quota exceeded), once it has stood `settleMs` (a conflict it retries
 * clears sooner); `since` is when berth first saw it.
 */
export function sandboxRefusal(
  sandbox: { status?: { conditions?: SandboxCondition[] } } | undefined,
  since: number | undefined,
  now: number,
  settleMs = 2000,
): { trouble?: Trouble; since?: number } {
  const ready = sandbox?.status?.conditions?.find((c) => c.type === 'Ready');
  if (ready?.status !== 'False' || ready.reason !== 'ReconcilerError') return {};
  const first = since ?? now;
  if (now - first < settleMs) return { since: first };
  return {
    since: first,
    trouble: { code: 'POD_REFUSED', message: `agent-sandbox's controller could not make it (${ready.message ?? ready.reason})` },
  };
}
