import type { CoreV1Event, V1Pod } from '@kubernetes/client-node';
import { BerthError } from '../../base/errors.js';
import type { KubernetesSettings } from '../../config/kubernetes.js';
import { unlessGone, type KubeApis } from './calls.js';
import { SANDBOX_API } from './objects.js';
import { WRITABLE_CONTAINER } from './init-containers.js';
import { nodeSilence, podRefusal, podTrouble, sandboxRefusal, volumesUnwritable, waitingReason } from './start-trouble.js';

/**
 * Until a run's pod runs, reading what the cluster says on the way (kubernetes/start-trouble.ts):
 * a pod the cluster refuses fails the run in seconds with the cluster's reason (POD_REFUSED), a
 * volume the agent cannot write names its StorageClass (VOLUME_UNWRITABLE), and only a pod that
 * is merely slow waits out kubernetes.start_timeout_seconds. A string when it was removed
 * meanwhile: its Sandbox gone, or the pod once seen is.
 */

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** Events are listed at most this often while waiting (one list call each). */
const EVENTS_EVERY_MS = 1000;

export async function waitRunning(
  apis: KubeApis,
  settings: KubernetesSettings,
  name: string,
  what = "the agent's pod",
): Promise<string | undefined> {
  const { core, custom, ns } = apis;
  const end = Date.now() + settings.start_timeout_seconds * 1000;
  let seen = false;
  let reconcilerErrorSince: number | undefined;
  let silentSince: number | undefined;
  let events: CoreV1Event[] = [];
  let eventsAt = 0;
  for (let delay = 50; ; delay = Math.min(delay * 2, 500)) {
    const pod = await unlessGone(core.readNamespacedPod({ name, namespace: ns }));
    if (pod?.status?.phase === 'Running' && pod.status.containerStatuses?.every((c) => c.state?.running)) return undefined;
    if (pod?.metadata?.deletionTimestamp || (seen && !pod)) return 'it was removed';
    seen ||= pod !== undefined;
    if (!pod) {
      const sandbox = (await unlessGone(custom.getNamespacedCustomObject({ ...SANDBOX_API, namespace: ns, name }))) as
        Parameters<typeof sandboxRefusal>[0] | undefined;
      if (!sandbox) return 'it was removed';
      const judged = sandboxRefusal(sandbox, reconcilerErrorSince, Date.now());
      reconcilerErrorSince = judged.since;
      if (judged.trouble) throw refused(name, judged.trouble.message, what);
    }
    if (pod && volumesUnwritable(pod)) throw await unwritable(apis, pod);
    if (pod && Date.now() - eventsAt >= EVENTS_EVERY_MS) {
      eventsAt = Date.now();
      // Events only speed a refusal up: unreadable ones (an older Role without `list events`) leave the rest to judge.
      events = await core
        .listNamespacedEvent({ namespace: ns, fieldSelector: `involvedObject.kind=Pod,involvedObject.name=${name}` })
        .then((l) => l.items)
        .catch(() => events);
    }
    const refusal = podRefusal(pod, events);
    if (refusal) throw refused(name, refusal.message, what);
    const silence = nodeSilence(pod, silentSince, Date.now());
    silentSince = silence.since;
    if (silence.trouble) throw refused(name, silence.trouble.message, what);
    const trouble = pod && podTrouble(pod);
    if (trouble) throw new BerthError('RUN_FAILED', `${what} did not start: ${trouble}`);
    if (Date.now() > end) {
      const why = waitingReason(pod, events);
      if (why) throw refused(name, `${why.slice(0, 600)} (waited ${settings.start_timeout_seconds} s)`, what);
      throw new BerthError(
        'RUN_FAILED',
        `${what} did not run within ${settings.start_timeout_seconds} s (${pod ? `phase ${pod.status?.phase ?? 'unknown'}` : "no pod: is agent-sandbox's controller running?"})`,
        { hint: "kubectl describe sandbox/pod in berth's namespace says why (scheduling, image, volumes)" },
      );
    }
    await sleep(delay);
  }
}

const refused = (name: string, why: string, what: string) =>
  new BerthError('POD_REFUSED', `the cluster did not run ${what}: ${why}`, {
    hint: `kubectl -n <namespace> describe pod ${name}; no room: kubernetes.cpu_request and memory_request (docs/kubernetes.md), or more nodes`,
  });

/** The agent's volumes are not its to write: name each with its claim and StorageClass (the cluster's default filled in). */
async function unwritable(apis: KubeApis, pod: V1Pod): Promise<BerthError> {
  const check = pod.spec?.initContainers?.find((c) => c.name === WRITABLE_CONTAINER);
  const named: string[] = [];
  const classes = new Set<string>();
  for (const m of check?.volumeMounts ?? []) {
    const claimName = pod.spec?.volumes?.find((v) => v.name === m.name)?.persistentVolumeClaim?.claimName ?? '';
    const claim = await unlessGone(apis.core.readNamespacedPersistentVolumeClaim({ name: claimName, namespace: apis.ns })).catch(
      () => undefined,
    );
    const storageClass = claim?.spec?.storageClassName ?? '(none)';
    classes.add(storageClass);
    named.push(`${m.mountPath}: claim ${claimName}, StorageClass "${storageClass}"`);
  }
  const sc = pod.spec?.securityContext;
  return new BerthError(
    'VOLUME_UNWRITABLE',
    `the agent (uid ${sc?.runAsUser}, fsGroup ${sc?.fsGroup}) cannot write its volumes (${named.join('; ')}): StorageClass ${[...classes].map((c) => `"${c}"`).join(', ')} does not apply the pod's fsGroup`,
    { hint: 'kubernetes.storage_class: a class whose driver applies fsGroup (most CSI drivers do; hostPath does not), docs/kubernetes.md' },
  );
}
