import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import { Exec, type V1Status } from '@kubernetes/client-node';
import { BerthError } from '../../base/errors.js';
import { cpuMillis, memoryBytes, type KubernetesSettings } from '../../config/kubernetes.js';
import { clusterError, unlessGone, type KubeApis } from './calls.js';
import { LABELS } from '../../plan/labels.js';
import type { CheckpointOwner, SessionVolumes } from '../volume-checkpoints.js';
import { listRuns } from './cluster-info.js';
import { COPY_CONTAINER, renderCopyPod, UNWRITABLE_EXIT, type CopyPodInput, type CopyVolume } from './checkpoint-plan.js';
import { createRun, deleteRun } from './run-objects.js';
import { waitRunning } from './wait-running.js';

/**
 * A checkpoint's copy pod on the cluster (kubernetes/checkpoint-plan.ts renders it): made, waited
 * for as a tenant pod is (the cluster's refusal in its own words, in seconds: wait-running.ts),
 * its steps run as execs bounded in time and output, and removed after, whatever happened.
 */

/** Output kept of one step (a copy's errors name files: enough to say which). */
const OUTPUT_MAX = 64 * 1024;
const WHAT = "the checkpoint's copy pod";

export interface CopyPod {
  name: string;
  /** The node it runs on (its volumes are attached there now). */
  node?: string;
  /** Run a step; its stdout. A step that ends non-zero, or runs past the time bound, fails with its stderr. */
  step(argv: string[], what: string): Promise<string>;
}

function collector() {
  let text = '';
  const stream = new Writable({
    write: (chunk: Buffer, _e, done) => {
      if (text.length < OUTPUT_MAX) text += chunk.toString('utf8').slice(0, OUTPUT_MAX - text.length);
      done();
    },
  });
  return { stream, text: () => text };
}

const exitOf = (status: V1Status | undefined): number | undefined => {
  if (status?.status === 'Success') return 0;
  const code = Number(status?.details?.causes?.find((c) => c.reason === 'ExitCode')?.message);
  return status?.reason === 'NonZeroExitCode' && !Number.isNaN(code) ? code : undefined;
};

export async function withCopyPod<T>(
  apis: KubeApis,
  settings: KubernetesSettings,
  input: Omit<CopyPodInput, 'name' | 'namespace' | 'pullPolicy' | 'requests' | 'lifetimeSeconds'> & { kind: string },
  fn: (pod: CopyPod) => Promise<T>,
): Promise<T> {
  const { core, ns } = apis;
  const timeoutMs = settings.checkpoints.timeout_seconds * 1000;
  const name = `berth-ckpt-${input.kind}-${randomBytes(5).toString('hex')}`;
  const sandbox = renderCopyPod({
    ...input,
    name,
    namespace: ns,
    pullPolicy: settings.pull_policy,
    requests: { cpuMillis: cpuMillis(settings.cpu_request), memoryBytes: memoryBytes(settings.memory_request) },
    // Its steps, and the start before them, end well inside this; then the pod ends by itself.
    lifetimeSeconds: settings.start_timeout_seconds + 4 * settings.checkpoints.timeout_seconds,
  });
  const exec = new Exec(apis.kubeConfig);
  try {
    await createRun(apis, { sandbox, claims: [] });
    const gone = await waitRunning(apis, settings, name, WHAT);
    if (gone) throw new BerthError('RUN_FAILED', `${WHAT} went before it ran: ${gone}`);
    const pod = await unlessGone(core.readNamespacedPod({ name, namespace: ns })).catch(() => undefined);
    /** A volume the agent cannot write: its claim and StorageClass named, as a tenant pod's are (wait-running.ts). */
    const unwritable = async (path: string): Promise<BerthError> => {
      const claim = input.volumes.find((v) => v.mountPath === path)?.claim ?? '';
      const found = await unlessGone(core.readNamespacedPersistentVolumeClaim({ name: claim, namespace: ns })).catch(() => undefined);
      const storageClass = found?.spec?.storageClassName ?? '(none)';
      return new BerthError(
        'VOLUME_UNWRITABLE',
        `the agent (uid ${input.user.uid}, fsGroup ${input.user.gid}) cannot write ${path} in ${WHAT} (claim ${claim}): StorageClass "${storageClass}" does not apply the pod's fsGroup`,
        {
          hint: 'kubernetes.storage_class: a class whose driver applies fsGroup (most CSI drivers do; hostPath does not), docs/kubernetes.md',
        },
      );
    };
    const step = async (argv: string[], what: string): Promise<string> => {
      const out = collector();
      const err = collector();
      let status: V1Status | undefined;
      let ws: Awaited<ReturnType<Exec['exec']>>;
      try {
        ws = await exec.exec(ns, name, COPY_CONTAINER, argv, out.stream, err.stream, null, false, (s) => void (status = s));
      } catch (e) {
        throw clusterError(`${what} in ${WHAT}`, e);
      }
      let timer: NodeJS.Timeout | undefined;
      const ended = await Promise.race([
        new Promise<boolean>((r) => ws.on('close', () => r(true))),
        new Promise<boolean>((r) => (timer = setTimeout(() => r(false), timeoutMs))),
      ]);
      clearTimeout(timer);
      if (!ended) {
        ws.close();
        throw new BerthError(
          'RUN_FAILED',
          `${what} took more than ${settings.checkpoints.timeout_seconds} s (kubernetes.checkpoints.timeout_seconds)`,
        );
      }
      const code = exitOf(status);
      if (code === UNWRITABLE_EXIT) throw await unwritable(err.text().trim());
      if (code !== 0)
        throw new BerthError(
          'RUN_FAILED',
          `${what} failed (${code === undefined ? (status?.message ?? 'no exit status') : `exit ${code}`}): ${err.text().trim().slice(0, 600) || 'it said nothing'}`,
        );
      return out.text();
    };
    return await fn({ name, ...(pod?.spec?.nodeName ? { node: pod.spec.nodeName } : {}), step });
  } finally {
    // Removed as a run's pod is: its Sandbox, the pod left to the garbage collector.
    await deleteRun(apis, name).catch(() => undefined);
  }
}

/** Nodes the session's claims were last seen attached to (by the claim's name), a bounded few. */
const NODES_KEPT = 1000;

/**
 * Copy pods of a session's checkpoints, labelled as its runs are (reaped with a dead owner's,
 * listed with the workspace's containers), and placed where its volumes are attached: on the node
 * of a pod of the workspace running now, else where this process last saw its claims, else where
 * the scheduler puts it (node-local volumes: their PVs' node affinity).
 */
export function copyPods(apis: KubeApis, settings: KubernetesSettings) {
  const { core, ns } = apis;
  const lastNode = new Map<string, string>();
  const seenOn = (claims: readonly string[], node: string | undefined) => {
    if (!node) return;
    for (const c of claims) {
      lastNode.delete(c);
      lastNode.set(c, node);
    }
    for (const old of lastNode.keys()) if (lastNode.size > NODES_KEPT) lastNode.delete(old);
  };
  async function nodeFor(v: SessionVolumes, o: CheckpointOwner, claims: readonly string[]): Promise<string | undefined> {
    const runs = await listRuns(apis, { installation: o.installation, project: v.project }).catch(() => []);
    for (const run of runs.filter((r) => r.workspace === v.workspace && r.state === 'running')) {
      const pod = await unlessGone(core.readNamespacedPod({ name: run.id, namespace: ns })).catch(() => undefined);
      if (pod?.spec?.nodeName && !pod.metadata?.deletionTimestamp) return pod.spec.nodeName;
    }
    for (const c of claims) if (lastNode.has(c)) return lastNode.get(c);
    return undefined;
  }
  return async <T>(
    kind: string,
    v: SessionVolumes,
    o: CheckpointOwner,
    volumes: CopyVolume[],
    fn: (p: CopyPod) => Promise<T>,
  ): Promise<T> => {
    const claims = volumes.flatMap((x) => (x.claim ? [x.claim] : []));
    const node = await nodeFor(v, o, claims);
    const labels = {
      [LABELS.managed]: 'true',
      [LABELS.installation]: o.installation,
      [LABELS.project]: v.project,
      [LABELS.workspace]: v.workspace,
      [LABELS.session]: v.session,
      [LABELS.reach]: 'workspace',
      [LABELS.run]: `checkpoint-${kind}`,
      ...(o.owner ? { [LABELS.owner]: o.owner } : {}),
    };
    return withCopyPod(apis, settings, { kind, image: o.image, user: o.user, labels, volumes, ...(node ? { node } : {}) }, (p) => {
      seenOn(claims, p.node);
      return fn(p);
    });
  };
}
